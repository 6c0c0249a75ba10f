/*
 * mx_fabric: the fabric transport under the routed and direct paths, one
 * interface with two implementations: UCX (UCP active messages) and
 * libfabric (FI_EP_RDM: messages for headers and eager data, rendezvous
 * payloads by FI_RMA read where the provider has it, by a tagged message
 * to a posted receive otherwise).
 *
 * What the layers above use, and nothing more: a fabric (one context and
 * worker) bound to the cluster's fabric address; endpoints made by
 * connecting to a listening fabric's socket address, to a worker address
 * from a business card, or accepted by a listener; active messages (an id,
 * a header, a payload) sent eagerly or by rendezvous; a rendezvous payload
 * pulled into a buffer the receiver chose; a file descriptor for event
 * loops. Protocols live above this interface; it knows none of them.
 *
 * Received messages: the handler of their id (mx_fabric_set_am_handler)
 * gets eager data or, if am->rndv, a descriptor; a message of an id
 * without a handler is dropped.
 * Return 0 when done (eager data is gone after the call, an unkept
 * descriptor is dropped and the sender's send completes), or 1 to keep
 * am->data: give eager data back with mx_fabric_release, pull a descriptor
 * with mx_fabric_am_recv (or drop it with mx_fabric_release) after on_am
 * returned.
 *
 * Completions (on_done of a send or a pull) may run before the posting
 * call returns; an error return means no completion follows.
 *
 * Not thread-safe: a fabric belongs to the thread that progresses it.
 */
#ifndef MX_FABRIC_H
#define MX_FABRIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MX_FABRIC_UCX = 0,
    MX_FABRIC_OFI = 1,
} mx_fabric_api_t;

/* "ucx" or "ofi"; ICBC_ERR_INVALID for anything else. */
icbc_status_t mx_fabric_api_parse(const char *name, mx_fabric_api_t *out);
const char *mx_fabric_api_name(mx_fabric_api_t api);
/* Whether this build has API (libfabric may be left out). */
int mx_fabric_api_available(mx_fabric_api_t api);

typedef struct mx_fabric mx_fabric_t;
typedef struct mx_fabric_ep mx_fabric_ep_t;

/* Highest active-message id plus one. */
#define MX_FABRIC_AM_IDS 8

/* Send flags: how the payload travels. Neither: rendezvous above the
 * fabric's threshold (params.rndv_thresh), eager below. IMMEDIATE (eager,
 * no payload): done when the call returns, HDR need not outlive it, no
 * completion callback; ICBC_ERR_BUSY when the transport would have to
 * queue it. */
#define MX_FABRIC_SEND_EAGER 0x1u
#define MX_FABRIC_SEND_RNDV 0x2u
#define MX_FABRIC_SEND_IMMEDIATE 0x4u

typedef struct mx_fabric_am {
    unsigned id;
    const void *hdr; /* valid during on_am */
    size_t hdr_len;
    void *data; /* eager payload, or the rendezvous descriptor if rndv */
    size_t len; /* payload length */
    int rndv;
    mx_fabric_ep_t *ep; /* the sender's endpoint here; NULL if it has none */
} mx_fabric_am_t;

typedef void (*mx_fabric_done_cb_t)(void *arg, icbc_status_t status);

/* An active message arrived; see above for the return value. */
typedef int (*mx_fabric_am_cb_t)(mx_fabric_t *f, const mx_fabric_am_t *am, void *arg);

/* EP failed (peer gone or closed): sends on it fail from now on; its owner
 * still closes it. WHY says what the transport saw. ARG: the callback's. */
typedef void (*mx_fabric_ep_failed_cb_t)(mx_fabric_ep_t *ep, icbc_status_t status, const char *why,
                                         void *arg);

typedef struct mx_fabric_cbs {
    /* The listener accepted EP (its arg is NULL until mx_fabric_ep_set_arg). */
    void (*on_accept)(mx_fabric_t *f, mx_fabric_ep_t *ep, void *arg);
    /* An endpoint without a failure callback of its own failed. */
    mx_fabric_ep_failed_cb_t on_ep_failed;
} mx_fabric_cbs_t;

typedef struct mx_fabric_params {
    mx_fabric_api_t api;
    /* The fabric address: a listener listens there (LISTEN), other fabrics
     * bind their endpoint to its interface (port 0). NULL: any. */
    const struct sockaddr *addr;
    socklen_t addrlen;
    int listen;
    size_t rndv_thresh; /* payloads above it go by rendezvous; 0: 8192 */
    /* Peers may die while this fabric runs (routers, processes talking to
     * routers): the transport's settings for failing peers. */
    int peers_may_fail;
    /* Endpoints to worker addresses report a failed peer (else a dead peer
     * may go unnoticed, which UCX repays with faster sends); those of a
     * listener and to one always do. */
    int peer_errors;
    /* The owner waits on mx_fabric_efd. */
    int wakeup;
    /* Several threads call in, one at a time. */
    int serialized;
    size_t estimated_eps; /* endpoints expected; 0: unknown */
    /* UCX: UCX_TLS when the environment sets none (NULL: UCX's choice),
     * UCX_NET_DEVICES (NULL: UCX's choice). */
    const char *ucx_tls;
    const char *ucx_devices;
    /* libfabric: the provider when FI_PROVIDER is not set; NULL: "tcp;ofi_rxm". */
    const char *ofi_provider;
    /* libfabric without ADDR: bind to the (first IPv4) address of this
     * network interface; NULL: the provider's choice. */
    const char *ofi_iface;
} mx_fabric_params_t;

icbc_status_t mx_fabric_create(const mx_fabric_params_t *params, const mx_fabric_cbs_t *cbs,
                               void *arg, mx_fabric_t **out, char *err, size_t errlen);
/* Closes every endpoint (no callbacks) and frees everything. */
void mx_fabric_destroy(mx_fabric_t *f);

mx_fabric_api_t mx_fabric_api(const mx_fabric_t *f);
/* 1 when an endpoint fails soon after its peer's process dies (UCX's peer
 * error handling); 0 when nothing but silence shows it: libfabric rxm
 * connects again to whatever listens at the peer's address (a restarted
 * router), which drops the messages of an endpoint it never made. */
int mx_fabric_peer_death_seen(const mx_fabric_t *f);

/* Messages of ID (< MX_FABRIC_AM_IDS) go to CB(f, am, ARG); NULL: dropped. */
void mx_fabric_set_am_handler(mx_fabric_t *f, unsigned id, mx_fabric_am_cb_t cb, void *arg);
/* One line for logs and dumps: API, provider or transports, address. */
const char *mx_fabric_describe(const mx_fabric_t *f);

/* Event loops: wait for EFD to be readable, call mx_fabric_progress until
 * it returns 0, then mx_fabric_arm; ICBC_ERR_BUSY from arm means
 * "progress again", ICBC_OK that the loop may block. */
int mx_fabric_efd(mx_fabric_t *f);
unsigned mx_fabric_progress(mx_fabric_t *f);
icbc_status_t mx_fabric_arm(mx_fabric_t *f);
/* 1 when every message sent on F has been handed to the network: none
 * waits for the fabric or for its completion. An eager send may complete
 * for its owner before that (its data was copied); a process that stops
 * progressing (to leave) must first progress until this holds, or what it
 * sent last may never leave. */
int mx_fabric_sends_done(mx_fabric_t *f);

/* This fabric's worker address (for business cards): *LEN in, bytes out. */
icbc_status_t mx_fabric_address(mx_fabric_t *f, void *buf, size_t *len);
/* Largest worker address of this API. */
size_t mx_fabric_address_max(const mx_fabric_t *f);

/* Connects to a listening fabric at SA, or to a worker ADDRESS. The
 * endpoint is usable at once (sends wait inside until it is up). */
icbc_status_t mx_fabric_connect(mx_fabric_t *f, const struct sockaddr *sa, socklen_t salen,
                                void *ep_arg, mx_fabric_ep_t **out);
icbc_status_t mx_fabric_connect_address(mx_fabric_t *f, const void *address, size_t len,
                                        void *ep_arg, mx_fabric_ep_t **out);
/* Closes EP after its queued sends (FLUSH) or at once; no callback about
 * it follows; EP must not be used after the call. */
void mx_fabric_ep_close(mx_fabric_ep_t *ep, int flush);

void mx_fabric_ep_set_arg(mx_fabric_ep_t *ep, void *arg);
/* EP's failure goes to CB (with EP's arg) instead of cbs.on_ep_failed. */
void mx_fabric_ep_set_failed_cb(mx_fabric_ep_t *ep, mx_fabric_ep_failed_cb_t cb);
void *mx_fabric_ep_arg(const mx_fabric_ep_t *ep);
/* The peer's address as "a.b.c.d:port" (its connection or endpoint name),
 * and as a socket address (family 0 when the transport did not tell). */
const char *mx_fabric_ep_peer(const mx_fabric_ep_t *ep);
const struct sockaddr *mx_fabric_ep_peer_sockaddr(const mx_fabric_ep_t *ep);

/* Active message ID (< MX_FABRIC_AM_IDS) on EP: HDR and PAYLOAD stay valid
 * until ON_DONE(ARG). */
icbc_status_t mx_fabric_am_send(mx_fabric_ep_t *ep, unsigned id, const void *hdr, size_t hdr_len,
                                const void *payload, size_t len, unsigned flags,
                                mx_fabric_done_cb_t on_done, void *arg);
/* Pulls the rendezvous payload DESC names (LEN bytes) into BUF. The
 * descriptor is consumed either way. */
icbc_status_t mx_fabric_am_recv(mx_fabric_t *f, void *desc, void *buf, size_t len,
                                mx_fabric_done_cb_t on_done, void *arg);
/* Gives back kept eager data or drops a kept descriptor. */
void mx_fabric_release(mx_fabric_t *f, void *data);

/* Largest header of an active message. */
size_t mx_fabric_max_hdr(const mx_fabric_t *f);

#ifdef __cplusplus
}
#endif

#endif /* MX_FABRIC_H */
