/*
 * What every implementation of mx_fabric.h provides: the common head of
 * its fabric and endpoint structures and its operations table.
 */
#ifndef MX_FABRIC_IMPL_H
#define MX_FABRIC_IMPL_H

#include <sys/socket.h>

#include "bt_lib.h"
#include "mx_fabric.h"

#define MX_FABRIC_RNDV_THRESH_DEFAULT 8192

typedef struct mx_fabric_ops {
    icbc_status_t (*create)(const mx_fabric_params_t *params, mx_fabric_t **out, char *err,
                            size_t errlen);
    void (*destroy)(mx_fabric_t *f);
    int (*efd)(mx_fabric_t *f);
    unsigned (*progress)(mx_fabric_t *f);
    icbc_status_t (*arm)(mx_fabric_t *f);
    icbc_status_t (*address)(mx_fabric_t *f, void *buf, size_t *len);
    size_t (*address_max)(const mx_fabric_t *f);
    icbc_status_t (*connect)(mx_fabric_t *f, const struct sockaddr *sa, socklen_t salen,
                             mx_fabric_ep_t **out);
    icbc_status_t (*connect_address)(mx_fabric_t *f, const void *address, size_t len,
                                     mx_fabric_ep_t **out);
    void (*ep_close)(mx_fabric_ep_t *ep, int flush);
    /* FLAGS: exactly one of MX_FABRIC_SEND_EAGER and _RNDV, maybe _IMMEDIATE. */
    icbc_status_t (*am_send)(mx_fabric_ep_t *ep, unsigned id, const void *hdr, size_t hdr_len,
                             const void *payload, size_t len, unsigned flags,
                             mx_fabric_done_cb_t on_done, void *arg);
    icbc_status_t (*am_recv)(mx_fabric_t *f, void *desc, void *buf, size_t len,
                             mx_fabric_done_cb_t on_done, void *arg);
    void (*release)(mx_fabric_t *f, void *data);
    size_t (*max_hdr)(const mx_fabric_t *f);
    int (*sends_done)(mx_fabric_t *f);
} mx_fabric_ops_t;

/* The first member of each implementation's fabric. */
struct mx_fabric {
    const mx_fabric_ops_t *ops;
    mx_fabric_api_t api;
    mx_fabric_cbs_t cbs;
    void *arg;
    size_t rndv_thresh; /* set by create */
    struct {
        mx_fabric_am_cb_t cb;
        void *arg;
    } handlers[MX_FABRIC_AM_IDS];
    char describe[160];
};

/* The first member of each implementation's endpoint. */
struct mx_fabric_ep {
    mx_fabric_t *fabric;
    void *arg;
    mx_fabric_ep_failed_cb_t on_failed; /* NULL: the fabric's cbs.on_ep_failed */
    char peer[64];
    struct sockaddr_storage peer_sa; /* family 0: unknown */
};

/* An implementation hands a received message to its handler: 1 when the
 * handler keeps am->data. */
static inline int mx_fabric_deliver(mx_fabric_t *f, const mx_fabric_am_t *am)
{
    if (am->id >= MX_FABRIC_AM_IDS || f->handlers[am->id].cb == NULL)
        return 0;
    return f->handlers[am->id].cb(f, am, f->handlers[am->id].arg);
}

/* An implementation tells the owner that EP failed. */
static inline void mx_fabric_ep_failed(mx_fabric_ep_t *ep, icbc_status_t st, const char *why)
{
    mx_fabric_t *f = ep->fabric;

    if (ep->on_failed)
        ep->on_failed(ep, st, why, ep->arg);
    else if (f->cbs.on_ep_failed)
        f->cbs.on_ep_failed(ep, st, why, f->arg);
}

extern const mx_fabric_ops_t mx_fabric_ucx_ops;
#ifdef ICBC_HAVE_OFI
extern const mx_fabric_ops_t mx_fabric_ofi_ops;
#endif

/* EP's peer is at SA (LEN bytes): its text and socket address. */
void mx_fabric_ep_set_peer(mx_fabric_ep_t *ep, const void *sa, size_t len);

#endif /* MX_FABRIC_IMPL_H */
