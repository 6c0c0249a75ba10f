/*
 * Fuzzes icbc_route_hdr_parse (icbc_route.h) with the input as the bytes a
 * router or process received. Checks:
 *   - it accepts exactly the headers icbc_route.h describes (an independent
 *     check of version, type, flags, reserved word and the two length caps);
 *   - an accepted header packs back to the same 40 bytes and parses again to
 *     the same fields;
 *   - a length below 40 bytes is refused, whatever the bytes;
 *   - for a REGISTER whose inner header is the rest of the input (the
 *     callers' envelope check), icbc_route_mac_equal on the proof agrees
 *     with memcmp against the proof computed for its job and rank.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "icbc_route.h"
#include "fuzz_check.h"

static int known_type(uint8_t t)
{
    return t == ICBC_ROUTE_MSG || (t >= ICBC_ROUTE_CHALLENGE && t <= ICBC_ROUTE_PACE);
}

/* What icbc_route.h says a valid header is. */
static int expect_valid(const uint8_t *p, size_t len)
{
    return len >= ICBC_ROUTE_HDR_SIZE && p[0] == ICBC_ROUTE_VERSION && known_type(p[1]) &&
           (icbc_get16(p + 2) & ~(ICBC_ROUTE_F_ORDERED | ICBC_ROUTE_F_OK)) == 0 &&
           icbc_get32(p + 24) <= ICBC_ROUTE_INNER_MAX && icbc_get32(p + 28) == 0 &&
           icbc_get64(p + 32) <= ICBC_ROUTE_PAYLOAD_MAX;
}

static int same_hdr(const icbc_route_hdr_t *a, const icbc_route_hdr_t *b)
{
    return a->type == b->type && a->flags == b->flags && a->src_cluster == b->src_cluster &&
           a->dst_cluster == b->dst_cluster && a->src_rank == b->src_rank &&
           a->dst_rank == b->dst_rank && a->job == b->job && a->inner_len == b->inner_len &&
           a->payload_len == b->payload_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    icbc_route_hdr_t h, h2;
    uint8_t packed[ICBC_ROUTE_HDR_SIZE];
    icbc_status_t st;

    memset(&h, 0, sizeof(h));
    st = icbc_route_hdr_parse(data, size, &h);
    FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_INVALID);
    FUZZ_CHECK((st == ICBC_OK) == expect_valid(data, size));
    if (size > 0) {
        size_t cut = (size < ICBC_ROUTE_HDR_SIZE ? size : ICBC_ROUTE_HDR_SIZE) - 1;
        FUZZ_CHECK(icbc_route_hdr_parse(data, cut, &h2) == ICBC_ERR_INVALID);
    }
    if (st != ICBC_OK)
        return 0;

    FUZZ_CHECK(known_type(h.type));
    FUZZ_CHECK(h.inner_len <= ICBC_ROUTE_INNER_MAX);
    FUZZ_CHECK(h.payload_len <= ICBC_ROUTE_PAYLOAD_MAX);

    /* Round trip: the header is canonical, so packing gives the input back. */
    icbc_route_hdr_pack(&h, packed);
    FUZZ_CHECK(memcmp(packed, data, ICBC_ROUTE_HDR_SIZE) == 0);
    memset(&h2, 0xa5, sizeof(h2));
    FUZZ_CHECK(icbc_route_hdr_parse(packed, sizeof(packed), &h2) == ICBC_OK);
    FUZZ_CHECK(same_hdr(&h, &h2));

    /* The callers (router/fabric.c, router/trunk.c, mx_client.c) take the
     * rest of the buffer as the inner header when inner_len matches it, and
     * read the inner header by type: the REGISTER proof is compared with
     * icbc_route_mac_equal, which must agree with memcmp. */
    if (h.inner_len == size - ICBC_ROUTE_HDR_SIZE && h.type == ICBC_ROUTE_REGISTER &&
        h.inner_len == ICBC_ROUTE_MAC_SIZE) {
        static const unsigned char key[] = "fuzz-key";
        unsigned char nonce[ICBC_ROUTE_NONCE_SIZE], mac[ICBC_ROUTE_MAC_SIZE];
        const uint8_t *inner = data + ICBC_ROUTE_HDR_SIZE;

        memset(nonce, 0x5a, sizeof(nonce));
        FUZZ_CHECK(icbc_route_register_mac(key, sizeof(key) - 1, nonce, h.job, h.src_rank, mac) ==
                   ICBC_OK);
        FUZZ_CHECK(icbc_route_mac_equal(mac, inner, ICBC_ROUTE_MAC_SIZE) ==
                   (memcmp(mac, inner, ICBC_ROUTE_MAC_SIZE) == 0));
        FUZZ_CHECK(icbc_route_mac_equal(inner, inner, ICBC_ROUTE_MAC_SIZE));
    }
    /* REGISTER_ACK's inner header: the window, and a CPU list that is one
     * or nothing; what parses packs again to the same bytes. */
    if (h.inner_len == size - ICBC_ROUTE_HDR_SIZE && h.type == ICBC_ROUTE_REGISTER_ACK) {
        const uint8_t *inner = data + ICBC_ROUTE_HDR_SIZE;
        uint8_t again[ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX];
        char cpus[ICBC_ROUTE_CPUS_MAX + 1];
        uint64_t window;

        if (icbc_route_ack_parse(inner, h.inner_len, &window, cpus) == ICBC_OK) {
            size_t n = strlen(cpus);
            FUZZ_CHECK(h.inner_len >= ICBC_ROUTE_COUNT_SIZE);
            FUZZ_CHECK(n <= ICBC_ROUTE_CPUS_MAX && strspn(cpus, "0123456789,-") == n);
            FUZZ_CHECK(icbc_route_ack_pack(window, cpus, again) == ICBC_ROUTE_COUNT_SIZE + n);
            FUZZ_CHECK(memcmp(again, inner, ICBC_ROUTE_COUNT_SIZE) == 0);
            FUZZ_CHECK(n == 0 || (n == h.inner_len - ICBC_ROUTE_COUNT_SIZE &&
                                  memcmp(again, inner, h.inner_len) == 0));
        } else {
            FUZZ_CHECK(h.inner_len < ICBC_ROUTE_COUNT_SIZE);
        }
    }
    return 0;
}
