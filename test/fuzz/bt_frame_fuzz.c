/*
 * Fuzzes bt_frame_parse (bt_lib.h). The input is 4 bytes max_hdr and 8 bytes
 * max_payload (big endian), then the 24 received frame header bytes; the
 * parser is given a copy of exactly 24 bytes so a read past them is caught.
 * Checks:
 *   - it accepts exactly the frames bt_lib.h describes (an independent check
 *     of magic, version, type, reserved bytes and the lengths of each type);
 *   - what recv.c and auth.c rely on: a header never above BT_HDR_MAX, an
 *     AUTH id never above BT_ID_MAX;
 *   - a refused frame comes with a non-empty reason, also into a short
 *     buffer (terminated, in bounds), with the same status;
 *   - an accepted frame packs back to the same 24 bytes and parses again to
 *     the same fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bt_lib.h"
#include "fuzz_check.h"

#define PARAMS_SIZE 12

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t) get32(p) << 32 | get32(p + 4);
}

/* What bt_lib.h says a valid frame header is. */
static int expect_valid(const uint8_t *p, uint32_t max_hdr, uint64_t max_payload)
{
    uint32_t hlen = get32(p + 8);
    uint64_t plen = get64(p + 16);

    if (memcmp(p, "ICBT", 4) != 0 || p[4] != BT_FRAME_VERSION || p[6] != 0 || p[7] != 0 ||
        get32(p + 12) != 0)
        return 0;
    switch (p[5]) {
    case BT_FRAME_HELLO:
    case BT_FRAME_AUTH_OK: return hlen == 32 && plen == 0;
    case BT_FRAME_AUTH: return hlen == 64 && plen <= 256;
    case BT_FRAME_CLOSE: return hlen == 0 && plen == 0;
    case BT_FRAME_DATA: return hlen <= max_hdr && hlen <= BT_HDR_MAX && plen <= max_payload;
    default: return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bt_frame_t f, f2;
    uint32_t max_hdr;
    uint64_t max_payload;
    uint8_t *buf, packed[BT_FRAME_HDR_SIZE];
    char why[256], *small;
    size_t smalllen;
    icbc_status_t st, st2;

    if (size < PARAMS_SIZE + BT_FRAME_HDR_SIZE)
        return 0;
    max_hdr = get32(data);
    max_payload = get64(data + 4);
    buf = malloc(BT_FRAME_HDR_SIZE);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data + PARAMS_SIZE, BT_FRAME_HDR_SIZE);

    memset(&f, 0, sizeof(f));
    why[0] = '\0';
    st = bt_frame_parse(buf, max_hdr, max_payload, &f, why, sizeof(why));
    FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_INVALID);
    FUZZ_CHECK((st == ICBC_OK) == expect_valid(buf, max_hdr, max_payload));

    smalllen = 1 + data[size - 1] % 16;
    small = malloc(smalllen);
    FUZZ_CHECK(small != NULL);
    memset(small, 'x', smalllen);
    st2 = bt_frame_parse(buf, max_hdr, max_payload, &f2, small, smalllen);
    FUZZ_CHECK(st2 == st);
    if (st != ICBC_OK) {
        FUZZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL && why[0] != '\0');
        FUZZ_CHECK(memchr(small, '\0', smalllen) != NULL);
        FUZZ_CHECK(strncmp(small, why, smalllen - 1) == 0);
        goto out;
    }

    FUZZ_CHECK(f.type >= BT_FRAME_HELLO && f.type <= BT_FRAME_CLOSE);
    FUZZ_CHECK(f.hdr_len <= BT_HDR_MAX);
    if (f.type == BT_FRAME_DATA)
        FUZZ_CHECK(f.hdr_len <= max_hdr && f.payload_len <= max_payload);
    else
        FUZZ_CHECK(f.hdr_len <= BT_NONCE_SIZE + BT_MAC_SIZE);
    if (f.type == BT_FRAME_AUTH)
        FUZZ_CHECK(f.hdr_len == BT_NONCE_SIZE + BT_MAC_SIZE && f.payload_len <= BT_ID_MAX);

    /* Round trip. */
    bt_frame_pack(&f, packed);
    FUZZ_CHECK(memcmp(packed, buf, BT_FRAME_HDR_SIZE) == 0);
    memset(&f2, 0xa5, sizeof(f2));
    FUZZ_CHECK(bt_frame_parse(packed, max_hdr, max_payload, &f2, NULL, 0) == ICBC_OK);
    FUZZ_CHECK(f2.type == f.type && f2.hdr_len == f.hdr_len && f2.payload_len == f.payload_len);

out:
    free(small);
    free(buf);
    return 0;
}
