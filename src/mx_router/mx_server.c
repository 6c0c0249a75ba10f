/* The router's half of the routed transport on the fabric; see mx_server.h. */
#include "mx_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_clock.h"
#include "icbc_list.h"
#include "icbc_log.h"
#include "mx_fabric.h"
#include "mx_guard.h"

typedef enum { PEER_OPEN, PEER_CLOSED } peer_state_t;

struct mx_peer {
    mx_server_t *server;
    mx_fabric_ep_t *ep;
    peer_state_t state;
    void *arg;        /* the owner's, see mx_peer_set_arg */
    icbc_list_t link; /* in server->peers */
    int trusted;      /* counted in the guard's trust of its host */
};

struct mx_server {
    mx_fabric_t *fabric;
    mx_server_cbs_t cbs;
    void *arg;
    icbc_list_t peers; /* every open peer (mx_peer_t.link) */
    size_t npeers;
    mx_guard_t *guard; /* bound on connections of hosts without a registered process */
};

static void peer_untrust(mx_peer_t *p)
{
    if (!p->trusted)
        return;
    p->trusted = 0;
    if (p->server->guard)
        mx_guard_trust(p->server->guard, mx_fabric_ep_peer_sockaddr(p->ep), -1, icbc_clock_ms());
}

/* Closes P's endpoint (after its queued sends if FLUSH) and frees P. */
static void peer_close(mx_peer_t *p, int flush)
{
    mx_server_t *s = p->server;

    if (p->state != PEER_OPEN)
        return;
    peer_untrust(p);
    p->state = PEER_CLOSED;
    icbc_list_del(&p->link);
    s->npeers--;
    mx_fabric_ep_set_arg(p->ep, NULL);
    mx_fabric_ep_close(p->ep, flush);
    free(p);
}

static void on_accept(mx_fabric_t *f, mx_fabric_ep_t *ep, void *arg)
{
    mx_server_t *s = arg;
    mx_peer_t *p = calloc(1, sizeof(*p));

    (void) f;
    if (p == NULL) {
        icbc_error("fabric: out of memory accepting %s", mx_fabric_ep_peer(ep));
        mx_fabric_ep_close(ep, 0);
        return;
    }
    p->server = s;
    p->ep = ep;
    p->state = PEER_OPEN;
    mx_fabric_ep_set_arg(ep, p);
    icbc_list_push(&s->peers, &p->link);
    s->npeers++;
    if (s->cbs.on_connect)
        s->cbs.on_connect(p, s->arg);
}

static void on_ep_failed(mx_fabric_ep_t *ep, icbc_status_t status, const char *why, void *arg)
{
    mx_server_t *s = arg;
    mx_peer_t *p = mx_fabric_ep_arg(ep);

    if (p == NULL || p->state != PEER_OPEN)
        return;
    icbc_debug("fabric peer %s: endpoint error: %s", mx_fabric_ep_peer(ep), why);
    if (s->cbs.on_lost)
        s->cbs.on_lost(p, status, s->arg);
    peer_close(p, 0);
}

static int on_am(mx_fabric_t *f, const mx_fabric_am_t *am, void *arg)
{
    mx_server_t *s = arg;
    mx_peer_t *p = am->ep ? mx_fabric_ep_arg(am->ep) : NULL;
    mx_recv_t r = { am->hdr, am->hdr_len, am->data, am->len, am->rndv };

    (void) f;
    if (p == NULL || p->state != PEER_OPEN) {
        icbc_debug("fabric: dropped a message from an unknown endpoint");
        return 0;
    }
    return s->cbs.on_recv(p, &r, s->arg);
}

static const mx_fabric_cbs_t fabric_cbs = { on_accept, on_ep_failed };

icbc_status_t mx_server_create(const mx_server_opts_t *opts, const mx_server_cbs_t *cbs, void *arg,
                               mx_server_t **out)
{
    mx_server_t *s = calloc(1, sizeof(*s));
    char err[256];
    icbc_status_t st;

    if (s == NULL)
        return ICBC_ERR_NO_MEMORY;
    icbc_list_init(&s->peers);
    s->cbs = *cbs;
    s->arg = arg;
    if (mx_guard_begin(&s->guard) != ICBC_OK) {
        free(s);
        return ICBC_ERR_NO_MEMORY;
    }
    mx_fabric_params_t params = {
        .api = opts->api,
        .addr = opts->addr,
        .addrlen = opts->addrlen,
        .listen = 1,
        .rndv_thresh = opts->rndv_thresh,
        .peers_may_fail = 1,
        .peer_errors = 1,
        .wakeup = 1,
        /* The router talks to processes on other nodes only: a network transport. */
        .ucx_tls = getenv("UCX_TLS") ? NULL
                   : opts->tls       ? opts->tls
                                     : "tcp",
        .ucx_devices = opts->devices,
        .ofi_provider = opts->ofi_provider,
    };
    st = mx_fabric_create(&params, &fabric_cbs, s, &s->fabric, err, sizeof(err));
    if (st != ICBC_OK) {
        icbc_error("%s", err);
        mx_server_destroy(s);
        return st;
    }
    mx_fabric_set_am_handler(s->fabric, MX_AM_ROUTE, on_am, s);
    /* The listener and the transport's own port(s). */
    if (mx_guard_end(s->guard) == 0)
        icbc_warn("fabric: found none of the fabric's listening sockets; connections of hosts "
                  "without a registered process are not bounded");
    *out = s;
    return ICBC_OK;
}

void mx_server_destroy(mx_server_t *s)
{
    if (s == NULL)
        return;
    while (!icbc_list_empty(&s->peers))
        peer_close(ICBC_CONTAINER(s->peers.next, mx_peer_t, link), 0);
    mx_fabric_destroy(s->fabric);
    mx_guard_free(s->guard);
    free(s);
}

const char *mx_server_describe(const mx_server_t *s)
{
    return mx_fabric_describe(s->fabric);
}

int mx_server_efd(const mx_server_t *s)
{
    return mx_fabric_efd(s->fabric);
}

unsigned mx_server_progress(mx_server_t *s)
{
    unsigned n = 0, k;

    while ((k = mx_fabric_progress(s->fabric)) > 0)
        n += k;
    return n;
}

icbc_status_t mx_server_arm(mx_server_t *s)
{
    return mx_fabric_arm(s->fabric);
}

icbc_status_t mx_server_send(mx_peer_t *p, const void *hdr, size_t hdr_len, const void *payload,
                             size_t len, mx_server_done_cb_t on_sent, void *arg)
{
    if (p->state != PEER_OPEN)
        return ICBC_ERR_PEER_FAILED;
    return mx_fabric_am_send(p->ep, MX_AM_ROUTE, hdr, hdr_len, payload, len, 0, on_sent, arg);
}

icbc_status_t mx_server_recv_data(mx_server_t *s, void *desc, void *buf, size_t len,
                                  mx_server_done_cb_t on_pulled, void *arg)
{
    return mx_fabric_am_recv(s->fabric, desc, buf, len, on_pulled, arg);
}

void mx_server_data_release(mx_server_t *s, void *data)
{
    mx_fabric_release(s->fabric, data);
}

void mx_server_close(mx_peer_t *p, int flush)
{
    peer_close(p, flush);
}

void mx_peer_set_arg(mx_peer_t *p, void *arg)
{
    p->arg = arg;
}

void *mx_peer_arg(const mx_peer_t *p)
{
    return p->arg;
}

const char *mx_peer_addr_text(const mx_peer_t *p)
{
    return mx_fabric_ep_peer(p->ep);
}

size_t mx_server_num_peers(const mx_server_t *s)
{
    return s->npeers;
}

void mx_server_trust_peer(mx_peer_t *p)
{
    const struct sockaddr *sa = mx_fabric_ep_peer_sockaddr(p->ep);

    if (p->trusted || p->state != PEER_OPEN || sa->sa_family == 0 || !p->server->guard)
        return;
    p->trusted = 1;
    mx_guard_trust(p->server->guard, sa, +1, icbc_clock_ms());
}

size_t mx_server_guard(mx_server_t *s, double timeout_ms, size_t max_untrusted)
{
    return s->guard ? mx_guard_scan(s->guard, icbc_clock_ms(), timeout_ms, max_untrusted) : 0;
}
