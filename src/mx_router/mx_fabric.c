/* The fabric transport's entry points: the implementation by API. */
#include "mx_fabric_impl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static const char *const api_names[] = { [MX_FABRIC_UCX] = "ucx", [MX_FABRIC_OFI] = "ofi" };

icbc_status_t mx_fabric_api_parse(const char *name, mx_fabric_api_t *out)
{
    for (size_t i = 0; i < sizeof(api_names) / sizeof(api_names[0]); i++)
        if (name != NULL && strcmp(name, api_names[i]) == 0) {
            *out = (mx_fabric_api_t) i;
            return ICBC_OK;
        }
    return ICBC_ERR_INVALID;
}

const char *mx_fabric_api_name(mx_fabric_api_t api)
{
    return (unsigned) api < sizeof(api_names) / sizeof(api_names[0]) ? api_names[api] : "?";
}

static const mx_fabric_ops_t *ops_of(mx_fabric_api_t api)
{
    switch (api) {
    case MX_FABRIC_UCX: return &mx_fabric_ucx_ops;
#ifdef ICBC_HAVE_OFI
    case MX_FABRIC_OFI: return &mx_fabric_ofi_ops;
#endif
    default: return NULL;
    }
}

int mx_fabric_api_available(mx_fabric_api_t api)
{
    return ops_of(api) != NULL;
}

void mx_fabric_ep_set_peer(mx_fabric_ep_t *ep, const void *sa, size_t len)
{
    memset(&ep->peer_sa, 0, sizeof(ep->peer_sa));
    if (len >= sizeof(struct sockaddr_in) && len <= sizeof(ep->peer_sa))
        memcpy(&ep->peer_sa, sa, len);
    if (ep->peer_sa.ss_family != AF_INET && ep->peer_sa.ss_family != AF_INET6) {
        ep->peer_sa.ss_family = 0;
        snprintf(ep->peer, sizeof(ep->peer), "(address of %zu bytes)", len);
        return;
    }
    bt_sock_addr_text((const struct sockaddr *) &ep->peer_sa, ep->peer, sizeof(ep->peer));
}

icbc_status_t mx_fabric_create(const mx_fabric_params_t *params, const mx_fabric_cbs_t *cbs,
                               void *arg, mx_fabric_t **out, char *err, size_t errlen)
{
    const mx_fabric_ops_t *ops = ops_of(params->api);
    mx_fabric_t *f = NULL;
    icbc_status_t st;

    if (ops == NULL)
        return icbc_err(ICBC_ERR_UNSUPPORTED, err, errlen,
                        "fabric API '%s' is not part of this build",
                        mx_fabric_api_name(params->api));
    st = ops->create(params, &f, err, errlen);
    if (st != ICBC_OK)
        return st;
    f->ops = ops;
    f->api = params->api;
    f->cbs = *cbs;
    f->arg = arg;
    *out = f;
    return ICBC_OK;
}

void mx_fabric_destroy(mx_fabric_t *f)
{
    if (f != NULL)
        f->ops->destroy(f);
}

mx_fabric_api_t mx_fabric_api(const mx_fabric_t *f)
{
    return f->api;
}

int mx_fabric_peer_death_seen(const mx_fabric_t *f)
{
    return f->api == MX_FABRIC_UCX;
}

void mx_fabric_set_am_handler(mx_fabric_t *f, unsigned id, mx_fabric_am_cb_t cb, void *arg)
{
    if (id < MX_FABRIC_AM_IDS) {
        f->handlers[id].cb = cb;
        f->handlers[id].arg = arg;
    }
}

const char *mx_fabric_describe(const mx_fabric_t *f)
{
    return f->describe;
}

int mx_fabric_efd(mx_fabric_t *f)
{
    return f->ops->efd(f);
}

unsigned mx_fabric_progress(mx_fabric_t *f)
{
    return f->ops->progress(f);
}

icbc_status_t mx_fabric_arm(mx_fabric_t *f)
{
    return f->ops->arm(f);
}

icbc_status_t mx_fabric_address(mx_fabric_t *f, void *buf, size_t *len)
{
    return f->ops->address(f, buf, len);
}

size_t mx_fabric_address_max(const mx_fabric_t *f)
{
    return f->ops->address_max(f);
}

icbc_status_t mx_fabric_connect(mx_fabric_t *f, const struct sockaddr *sa, socklen_t salen,
                                void *ep_arg, mx_fabric_ep_t **out)
{
    icbc_status_t st = f->ops->connect(f, sa, salen, out);

    if (st == ICBC_OK)
        (*out)->arg = ep_arg;
    return st;
}

icbc_status_t mx_fabric_connect_address(mx_fabric_t *f, const void *address, size_t len,
                                        void *ep_arg, mx_fabric_ep_t **out)
{
    icbc_status_t st = f->ops->connect_address(f, address, len, out);

    if (st == ICBC_OK)
        (*out)->arg = ep_arg;
    return st;
}

void mx_fabric_ep_close(mx_fabric_ep_t *ep, int flush)
{
    ep->fabric->ops->ep_close(ep, flush);
}

void mx_fabric_ep_set_arg(mx_fabric_ep_t *ep, void *arg)
{
    ep->arg = arg;
}

void mx_fabric_ep_set_failed_cb(mx_fabric_ep_t *ep, mx_fabric_ep_failed_cb_t cb)
{
    ep->on_failed = cb;
}

void *mx_fabric_ep_arg(const mx_fabric_ep_t *ep)
{
    return ep->arg;
}

const char *mx_fabric_ep_peer(const mx_fabric_ep_t *ep)
{
    return ep->peer;
}

const struct sockaddr *mx_fabric_ep_peer_sockaddr(const mx_fabric_ep_t *ep)
{
    return (const struct sockaddr *) &ep->peer_sa;
}

icbc_status_t mx_fabric_am_send(mx_fabric_ep_t *ep, unsigned id, const void *hdr, size_t hdr_len,
                                const void *payload, size_t len, unsigned flags,
                                mx_fabric_done_cb_t on_done, void *arg)
{
    mx_fabric_t *f = ep->fabric;
    unsigned how;

    if (id >= MX_FABRIC_AM_IDS || hdr_len > f->ops->max_hdr(f))
        return ICBC_ERR_INVALID;
    if (flags & MX_FABRIC_SEND_IMMEDIATE) {
        if (len > 0)
            return ICBC_ERR_INVALID;
        how = MX_FABRIC_SEND_EAGER | MX_FABRIC_SEND_IMMEDIATE;
    } else if (flags & MX_FABRIC_SEND_RNDV) {
        how = MX_FABRIC_SEND_RNDV;
    } else if (flags & MX_FABRIC_SEND_EAGER) {
        how = MX_FABRIC_SEND_EAGER;
    } else {
        how = len > f->rndv_thresh ? MX_FABRIC_SEND_RNDV : MX_FABRIC_SEND_EAGER;
    }
    return f->ops->am_send(ep, id, hdr, hdr_len, payload, len, how, on_done, arg);
}

icbc_status_t mx_fabric_am_recv(mx_fabric_t *f, void *desc, void *buf, size_t len,
                                mx_fabric_done_cb_t on_done, void *arg)
{
    return f->ops->am_recv(f, desc, buf, len, on_done, arg);
}

void mx_fabric_release(mx_fabric_t *f, void *data)
{
    f->ops->release(f, data);
}

int mx_fabric_sends_done(mx_fabric_t *f)
{
    return f->ops->sends_done(f);
}

size_t mx_fabric_max_hdr(const mx_fabric_t *f)
{
    return f->ops->max_hdr(f);
}
