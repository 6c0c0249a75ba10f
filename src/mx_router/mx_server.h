/*
 * mx_server: the router's half of the routed transport. A fabric of its own
 * (mx_fabric.h: UCX or libfabric) listening on the router's fabric address,
 * and one endpoint per connected compute process (a "peer"); a dead
 * process is reported.
 *
 * Event loop integration: mx_server_efd() is a descriptor to wait on; the
 * owner calls mx_server_progress() until it returns 0, then mx_server_arm();
 * ICBC_ERR_BUSY from arm means "progress again", ICBC_OK that it may block.
 *
 * Receive: every route message (AM id MX_AM_ROUTE) arrives through
 * cbs.on_recv. The owner may keep eager data (return 1) and later give it back with
 * mx_server_data_release. Rendezvous data is a descriptor: keep it (return 1)
 * and later pull it with mx_server_recv_data or drop it with
 * mx_server_data_release.
 *
 * Not thread-safe: the server belongs to the thread running its loop.
 */
#ifndef MX_SERVER_H
#define MX_SERVER_H

#include <stddef.h>
#include <sys/socket.h>

#include "icbc_status.h"
#include "mx_fabric.h"
#include "mx_router.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_server mx_server_t;
typedef struct mx_peer mx_peer_t; /* one connected compute process */

typedef struct mx_recv {
    const void *hdr; /* AM header: route header + inner header; valid during the call */
    size_t hdr_len;
    void *data; /* eager payload, or the rendezvous descriptor if rndv */
    size_t len; /* payload length */
    int rndv;
} mx_recv_t;

typedef struct mx_server_cbs {
    /* A process connected (not yet registered). */
    void (*on_connect)(mx_peer_t *p, void *arg);
    /* A route message from P. Return 1 to keep R->data (see above), 0 when
     * done with it. A message from an unknown endpoint is dropped here. */
    int (*on_recv)(mx_peer_t *p, const mx_recv_t *r, void *arg);
    /* The endpoint of P failed (process gone). P stays valid until the call
     * returns; the server closes and frees it afterwards. */
    void (*on_lost)(mx_peer_t *p, icbc_status_t status, void *arg);
} mx_server_cbs_t;

/* Completion of mx_server_send and mx_server_recv_data. */
typedef void (*mx_server_done_cb_t)(void *arg, icbc_status_t status);

typedef struct mx_server_opts {
    mx_fabric_api_t api;         /* UCX or libfabric */
    const char *ofi_provider;    /* libfabric provider without FI_PROVIDER; NULL: tcp;ofi_rxm */
    const struct sockaddr *addr; /* fabric address to listen on */
    socklen_t addrlen;
    const char *tls;     /* UCX_TLS when the environment sets none; NULL: "tcp" */
    const char *devices; /* UCX_NET_DEVICES; NULL: UCX's choice */
    size_t rndv_thresh;  /* payloads above this are sent with rendezvous; 0: default */
} mx_server_opts_t;

icbc_status_t mx_server_create(const mx_server_opts_t *opts, const mx_server_cbs_t *cbs, void *arg,
                               mx_server_t **out);
/* Closes every endpoint (no callbacks) and frees everything. */
void mx_server_destroy(mx_server_t *s);

/* The fabric: API, provider or transports, address (for logs). */
const char *mx_server_describe(const mx_server_t *s);

int mx_server_efd(const mx_server_t *s);
/* Drives the fabric until it has nothing more to do; returns the events handled. */
unsigned mx_server_progress(mx_server_t *s);
icbc_status_t mx_server_arm(mx_server_t *s);

/* Sends one route message to P. HDR (route + inner header) and PAYLOAD must
 * stay valid until ON_SENT(ARG) runs, which may happen before this
 * returns. On an error return ON_SENT is not called. */
icbc_status_t mx_server_send(mx_peer_t *p, const void *hdr, size_t hdr_len, const void *payload,
                             size_t len, mx_server_done_cb_t on_sent, void *arg);
/* Pulls a rendezvous payload into BUF (LEN bytes); ON_PULLED(ARG) follows,
 * possibly before this returns. The descriptor is consumed either way. */
icbc_status_t mx_server_recv_data(mx_server_t *s, void *desc, void *buf, size_t len,
                                  mx_server_done_cb_t on_pulled, void *arg);
/* Gives back kept eager data or drops a rendezvous descriptor. */
void mx_server_data_release(mx_server_t *s, void *data);

/* Closes P's endpoint after its queued sends (FLUSH) or at once; no
 * on_lost follows; P must not be used after the call. */
void mx_server_close(mx_peer_t *p, int flush);

void mx_peer_set_arg(mx_peer_t *p, void *arg);
void *mx_peer_arg(const mx_peer_t *p);
const char *mx_peer_addr_text(const mx_peer_t *p); /* "10.11.0.5:53122" */

/* P proved itself (registered): the connections of its host are trusted
 * while it is open. Until then they are bounded by mx_server_guard. */
void mx_server_trust_peer(mx_peer_t *p);

/* Shuts down the connections to the server's fabric ports from hosts without a
 * trusted process that are older than TIMEOUT_MS, and the oldest beyond
 * MAX_UNTRUSTED (mx_guard.h); returns how many. Call it periodically. */
size_t mx_server_guard(mx_server_t *s, double timeout_ms, size_t max_untrusted);

/* Endpoints currently open (connected and not yet closed). */
size_t mx_server_num_peers(const mx_server_t *s);

#ifdef __cplusplus
}
#endif

#endif /* MX_SERVER_H */
