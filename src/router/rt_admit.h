/*
 * What a router does with a message a process sent it on the fabric, before
 * anything of it is used: parsed, its lengths checked against what arrived,
 * held to the connection's registration state, and a REGISTER's proof
 * checked. A pure function of the bytes and the state (no UCX, inline here
 * so that the router's users need no other source file), tested through
 * the router and fuzzed alone (test/fuzz/router_admit_fuzz.c).
 */
#ifndef ICBC_RT_ADMIT_H
#define ICBC_RT_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_route.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RT_ADMIT_DROP,          /* malformed, from a registered process: dropped */
    RT_ADMIT_REFUSE,        /* refuse the connection without an answer */
    RT_ADMIT_REFUSE_ANSWER, /* refuse it, answering REGISTER_ACK without OK */
    RT_ADMIT_IGNORE,        /* a connection being refused already: nothing more */
    RT_ADMIT_REGISTER,      /* a REGISTER with the right proof */
    RT_ADMIT_FORWARD,       /* a MSG of a registered process */
    RT_ADMIT_DEREGISTER,    /* a registered process leaves */
    RT_ADMIT_PACE,          /* a registered process's rate (inner: 8 bytes) */
    RT_ADMIT_UNEXPECTED,    /* another type from a registered process: dropped */
} rt_admit_t;

typedef struct rt_admit_ctx {
    int registered;        /* the connection's process has registered */
    int awaiting_register; /* not registered, and within its deadline */
    uint16_t cluster;      /* this router's cluster */
    const unsigned char *key;
    size_t keylen;
    const unsigned char *nonce; /* ICBC_ROUTE_NONCE_SIZE bytes this connection was given */
} rt_admit_ctx_t;

static inline rt_admit_t rt_admit_register_(const rt_admit_ctx_t *ctx, const icbc_route_hdr_t *rh,
                                            const uint8_t *inner, const char **why)
{
    unsigned char mac[ICBC_ROUTE_MAC_SIZE];

    if (rh->inner_len != ICBC_ROUTE_MAC_SIZE || rh->payload_len != 0) {
        *why = "malformed REGISTER";
        return RT_ADMIT_REFUSE_ANSWER;
    }
    if (rh->src_cluster != ctx->cluster) {
        *why = "REGISTER names another cluster";
        return RT_ADMIT_REFUSE_ANSWER;
    }
    if (icbc_route_register_mac(ctx->key, ctx->keylen, ctx->nonce, rh->job, rh->src_rank, mac) !=
            ICBC_OK ||
        !icbc_route_mac_equal(mac, inner, ICBC_ROUTE_MAC_SIZE)) {
        *why = "wrong REGISTER proof (different key?)";
        return RT_ADMIT_REFUSE_ANSWER;
    }
    return RT_ADMIT_REGISTER;
}

/* HDR (HDR_LEN bytes: route header and inner header) and a payload of
 * PAYLOAD_LEN bytes arrived. *RH is the parsed header for every verdict
 * but DROP, REFUSE and IGNORE; *WHY says why for DROP, REFUSE,
 * REFUSE_ANSWER and UNEXPECTED. */
static inline rt_admit_t rt_fabric_admit(const rt_admit_ctx_t *ctx, const void *hdr, size_t hdr_len,
                                         size_t payload_len, icbc_route_hdr_t *rh, const char **why)
{
    *why = NULL;
    if (icbc_route_hdr_parse(hdr, hdr_len, rh) != ICBC_OK ||
        rh->inner_len != hdr_len - ICBC_ROUTE_HDR_SIZE || rh->payload_len != payload_len) {
        if (ctx->registered) {
            *why = "malformed message";
            return RT_ADMIT_DROP;
        }
        *why = "malformed message before REGISTER";
        return RT_ADMIT_REFUSE;
    }
    if (!ctx->registered) {
        if (!ctx->awaiting_register)
            return RT_ADMIT_IGNORE;
        if (rh->type == ICBC_ROUTE_REGISTER)
            return rt_admit_register_(ctx, rh, (const uint8_t *) hdr + ICBC_ROUTE_HDR_SIZE, why);
        *why = "message before REGISTER";
        return RT_ADMIT_REFUSE_ANSWER;
    }
    switch (rh->type) {
    case ICBC_ROUTE_MSG: return RT_ADMIT_FORWARD;
    case ICBC_ROUTE_DEREGISTER: return RT_ADMIT_DEREGISTER;
    case ICBC_ROUTE_PACE:
        if (rh->inner_len != ICBC_ROUTE_COUNT_SIZE || payload_len != 0) {
            *why = "malformed PACE";
            return RT_ADMIT_DROP;
        }
        return RT_ADMIT_PACE;
    default: *why = "unexpected message type"; return RT_ADMIT_UNEXPECTED;
    }
}

#ifdef __cplusplus
}
#endif

#endif /* ICBC_RT_ADMIT_H */
