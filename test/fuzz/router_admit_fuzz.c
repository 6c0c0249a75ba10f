/*
 * Fuzzes rt_fabric_admit (src/router/rt_admit.h): what a router does with a
 * message a process sent it on the fabric. The input is the connection's
 * state (1 byte: bit 0 registered, bit 1 awaiting REGISTER, bit 2 "prove
 * it": the REGISTER proof is computed for the header's job and rank and
 * written over the inner header, so that valid registrations are reached),
 * the router's cluster (2 bytes), the payload length (4 bytes), then the
 * header bytes as received.
 * Checks:
 *   - MSG is forwarded and DEREGISTER taken only from a registered process,
 *     REGISTER only from one awaiting it, with a 32-byte proof, no payload,
 *     this cluster, and the proof HMAC(key, nonce | job | rank);
 *   - anything parsed has the lengths that arrived;
 *   - an unregistered connection is never dropped quietly: it is refused
 *     (or ignored, once refused), with a reason.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "icbc_bytes.h"
#include "rt_admit.h"

static const unsigned char key[] = "router key of the fuzzer";
static const unsigned char nonce[ICBC_ROUTE_NONCE_SIZE] = "nonce given to this connection.";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 7)
        return 0;
    uint8_t state = data[0];
    uint16_t cluster = icbc_get16(data + 1);
    size_t payload_len = icbc_get32(data + 3);
    size_t hdr_len = size - 7;
    uint8_t *hdr = malloc(hdr_len ? hdr_len : 1); /* exactly its bytes, for ASan */
    memcpy(hdr, data + 7, hdr_len);

    icbc_route_hdr_t peek;
    if ((state & 4) && icbc_route_hdr_parse(hdr, hdr_len, &peek) == ICBC_OK &&
        hdr_len >= ICBC_ROUTE_HDR_SIZE + ICBC_ROUTE_MAC_SIZE)
        icbc_route_register_mac(key, sizeof(key) - 1, nonce, peek.job, peek.src_rank,
                                hdr + ICBC_ROUTE_HDR_SIZE);

    rt_admit_ctx_t ctx = {
        .registered = state & 1,
        .awaiting_register = !(state & 1) && (state & 2),
        .cluster = cluster,
        .key = key,
        .keylen = sizeof(key) - 1,
        .nonce = nonce,
    };
    icbc_route_hdr_t rh;
    const char *why = "unset";
    rt_admit_t v = rt_fabric_admit(&ctx, hdr, hdr_len, payload_len, &rh, &why);
    int parsed = v == RT_ADMIT_REFUSE_ANSWER || v >= RT_ADMIT_REGISTER;

    if (parsed) {
        FUZZ_CHECK(hdr_len >= ICBC_ROUTE_HDR_SIZE);
        FUZZ_CHECK(rh.inner_len == hdr_len - ICBC_ROUTE_HDR_SIZE);
        FUZZ_CHECK(rh.payload_len == payload_len);
    }
    switch (v) {
    case RT_ADMIT_FORWARD: FUZZ_CHECK(ctx.registered && rh.type == ICBC_ROUTE_MSG); break;
    case RT_ADMIT_DEREGISTER: FUZZ_CHECK(ctx.registered && rh.type == ICBC_ROUTE_DEREGISTER); break;
    case RT_ADMIT_PACE:
        FUZZ_CHECK(ctx.registered && rh.type == ICBC_ROUTE_PACE &&
                   rh.inner_len == ICBC_ROUTE_COUNT_SIZE && rh.payload_len == 0);
        break;
    case RT_ADMIT_UNEXPECTED: FUZZ_CHECK(ctx.registered && why != NULL); break;
    case RT_ADMIT_DROP: FUZZ_CHECK(ctx.registered && why != NULL); break;
    case RT_ADMIT_REGISTER: {
        unsigned char mac[ICBC_ROUTE_MAC_SIZE];
        FUZZ_CHECK(!ctx.registered && ctx.awaiting_register);
        FUZZ_CHECK(rh.type == ICBC_ROUTE_REGISTER && rh.inner_len == ICBC_ROUTE_MAC_SIZE &&
                   rh.payload_len == 0 && rh.src_cluster == cluster);
        FUZZ_CHECK(icbc_route_register_mac(key, sizeof(key) - 1, nonce, rh.job, rh.src_rank, mac) ==
                   ICBC_OK);
        FUZZ_CHECK(memcmp(mac, hdr + ICBC_ROUTE_HDR_SIZE, sizeof(mac)) == 0);
        break;
    }
    case RT_ADMIT_REFUSE:
    case RT_ADMIT_REFUSE_ANSWER:
        FUZZ_CHECK(!ctx.registered && why != NULL && why[0] != '\0');
        break;
    case RT_ADMIT_IGNORE: FUZZ_CHECK(!ctx.registered && !ctx.awaiting_register); break;
    default: FUZZ_CHECK(!"a verdict rt_admit.h does not have");
    }
    free(hdr);
    return 0;
}
