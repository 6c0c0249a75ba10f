/* The router's half of the fabric transport; see mx_server.h. */
#include "mx_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "icbc_log.h"
#include "mx_guard.h"
#include "mx_ucx.h"
#include "icbc_hmap.h"
#include "icbc_clock.h"
#include "icbc_list.h"

/* The request area UCX reserves for us (ucp_params.request_size): which
 * server an operation belongs to, set right after it was posted. UCX may
 * complete a returned request inside the posting call (a rendezvous receive
 * from an endpoint that failed meanwhile): the callback then finds no server,
 * records the status, and the posting function finishes the operation. */
typedef struct {
    struct mx_server *server;
    int done; /* completed while being posted */
    ucs_status_t status;
} mx_req_t;

static void req_init(void *request)
{
    memset(request, 0, sizeof(mx_req_t));
}

/* A returned request: either completed while posting (finish it now, return
 * its status) or still running (tag it; UCS_INPROGRESS). */
static ucs_status_t req_posted(mx_server_t *s, void *request)
{
    mx_req_t *r = request;
    ucs_status_t status;

    if (!r->done) {
        r->server = s;
        return UCS_INPROGRESS;
    }
    status = r->status;
    r->done = 0;
    ucp_request_free(request);
    return status;
}

/* The callback side: NULL when the request completed while being posted. */
static mx_server_t *req_completed(void *request, ucs_status_t status)
{
    mx_req_t *r = request;
    mx_server_t *s = r->server;

    if (s == NULL) {
        r->done = 1;
        r->status = status;
        return NULL;
    }
    r->server = NULL;
    ucp_request_free(request);
    return s;
}

typedef enum { PEER_OPEN, PEER_CLOSING, PEER_CLOSED } peer_state_t;

struct mx_peer {
    mx_server_t *server;
    ucp_ep_h ep;
    peer_state_t state;
    int flush;                  /* close after queued sends (refusal), not by force */
    void *arg;                  /* the owner's, see mx_peer_set_arg */
    icbc_list_t link;           /* in server->peers */
    mx_peer_t *close_next;      /* in server->to_close */
    int trusted;                /* counted in the guard's trust of its host */
    struct sockaddr_storage sa; /* the process's address (family 0: unknown) */
    char addr[64];
};

struct mx_server {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int efd;
    size_t rndv_thresh;
    mx_server_cbs_t cbs;
    void *arg;
    icbc_hmap_t by_ep;   /* ucp_ep_h -> open peer */
    icbc_list_t peers;   /* every peer not yet freed (mx_peer_t.link) */
    mx_peer_t *to_close; /* peers whose ep is to be closed from the loop */
    size_t closing;      /* close operations in flight */
    mx_guard_t *guard;   /* bound on connections of hosts without a registered process */
};

static void peer_untrust(mx_peer_t *p)
{
    if (!p->trusted)
        return;
    p->trusted = 0;
    if (p->server->guard)
        mx_guard_trust(p->server->guard, (const struct sockaddr *) &p->sa, -1, icbc_clock_ms());
}

static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(buf, len, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        snprintf(buf, len, "[%s]:%u", host, port);
    } else {
        snprintf(buf, len, "(family %d)", sa->sa_family);
    }
}

static void peer_unlink(mx_peer_t *p)
{
    mx_server_t *s = p->server;

    (void) s;
    peer_untrust(p);
    icbc_list_del(&p->link);
    free(p);
}

/* Queue P's endpoint for closing from the loop: UCX does not allow closing
 * an endpoint from inside its own callbacks. */
static void peer_schedule_close(mx_peer_t *p, int flush)
{
    mx_server_t *s = p->server;

    if (p->state != PEER_OPEN)
        return;
    peer_untrust(p);
    p->state = PEER_CLOSING;
    p->flush = flush;
    icbc_hmap_del(&s->by_ep, (uintptr_t) p->ep, 0);
    p->close_next = s->to_close;
    s->to_close = p;
}

static void ep_closed_cb(void *request, ucs_status_t status, void *user_data)
{
    mx_peer_t *p = user_data;

    p->server->closing--;
    p->state = PEER_CLOSED;
    peer_unlink(p);
    ucp_request_free(request);
}

static void close_pending(mx_server_t *s)
{
    while (s->to_close) {
        mx_peer_t *p = s->to_close;
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                            (p->flush ? 0 : UCP_OP_ATTR_FIELD_FLAGS),
            .flags = UCP_EP_CLOSE_FLAG_FORCE,
            .cb.send = ep_closed_cb,
            .user_data = p,
        };
        void *req;

        s->to_close = p->close_next;
        req = ucp_ep_close_nbx(p->ep, &param);
        if (req == NULL || UCS_PTR_IS_ERR(req)) {
            p->state = PEER_CLOSED;
            peer_unlink(p);
        } else {
            s->closing++;
        }
    }
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    mx_peer_t *p = arg;
    mx_server_t *s = p->server;

    if (p->state != PEER_OPEN)
        return;
    icbc_debug("fabric peer %s: endpoint error: %s", p->addr, ucs_status_string(status));
    if (s->cbs.on_lost)
        s->cbs.on_lost(p, ICBC_ERR_PEER_FAILED, s->arg);
    peer_schedule_close(p, 0);
}

static void conn_request_cb(ucp_conn_request_h req, void *arg)
{
    mx_server_t *s = arg;
    ucp_conn_request_attr_t attr = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR };
    mx_peer_t *p = calloc(1, sizeof(*p));
    ucs_status_t st;

    if (p == NULL) {
        ucp_listener_reject(s->listener, req);
        return;
    }
    icbc_list_init(&p->link);
    p->server = s;
    if (ucp_conn_request_query(req, &attr) == UCS_OK) {
        p->sa = attr.client_address;
        format_addr((const struct sockaddr *) &attr.client_address, p->addr, sizeof(p->addr));
    } else
        snprintf(p->addr, sizeof(p->addr), "(unknown)");

    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = ep_error_cb, .arg = p },
    };
    st = ucp_ep_create(s->worker, &ep_params, &p->ep);
    if (st != UCS_OK) {
        icbc_warn("fabric: cannot accept %s: %s", p->addr, ucs_status_string(st));
        free(p);
        return;
    }
    if (icbc_hmap_put(&s->by_ep, (uintptr_t) p->ep, 0, p) != ICBC_OK) {
        icbc_error("fabric: out of memory accepting %s", p->addr);
        p->state = PEER_OPEN;
        icbc_list_push(&s->peers, &p->link);
        peer_schedule_close(p, 0);
        return;
    }
    p->state = PEER_OPEN;
    icbc_list_push(&s->peers, &p->link);
    if (s->cbs.on_connect)
        s->cbs.on_connect(p, s->arg);
}

static ucs_status_t am_recv_cb(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param)
{
    mx_server_t *s = arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    int persistent = rndv || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    mx_peer_t *p = NULL;
    mx_recv_t r = { header, header_length, data, length, rndv };

    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        p = icbc_hmap_get(&s->by_ep, (uintptr_t) param->reply_ep, 0);
    if (p == NULL || p->state != PEER_OPEN) {
        icbc_debug("fabric: dropped a message from an unknown endpoint");
        return rndv ? UCS_ERR_CANCELED : UCS_OK;
    }
    if (s->cbs.on_recv(p, &r, s->arg) && persistent)
        return UCS_INPROGRESS;
    return UCS_OK;
}

icbc_status_t mx_server_create(const mx_server_opts_t *opts, const mx_server_cbs_t *cbs, void *arg,
                               mx_server_t **out)
{
    mx_server_t *s = calloc(1, sizeof(*s));
    ucp_config_t *config = NULL;
    ucs_status_t st;
    char addr[64];

    if (s == NULL)
        return ICBC_ERR_NO_MEMORY;
    icbc_list_init(&s->peers);
    s->cbs = *cbs;
    s->arg = arg;
    s->efd = -1;
    s->rndv_thresh = opts->rndv_thresh ? opts->rndv_thresh : MX_RNDV_THRESH_DEFAULT;
    icbc_hmap_init(&s->by_ep);
    format_addr(opts->addr, addr, sizeof(addr));
    if (mx_guard_begin(&s->guard) != ICBC_OK) {
        free(s);
        return ICBC_ERR_NO_MEMORY;
    }

    /* A router restarted (or an embedded one started by the next job) must
     * get its fixed address back while old connections sit in TIME_WAIT;
     * this is a transport setting, read from the environment only. */
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    mx_ucx_env_defaults();
    mx_ucx_env_peers_may_fail();
    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        goto ucx_fail;
    /* The router talks to processes on other nodes only: a network transport. */
    if (getenv("UCX_TLS") == NULL) {
        st = ucp_config_modify(config, "TLS", opts->tls ? opts->tls : "tcp");
        if (st != UCS_OK)
            goto ucx_fail;
    }
    if (opts->devices) {
        st = ucp_config_modify(config, "NET_DEVICES", opts->devices);
        if (st != UCS_OK)
            goto ucx_fail;
    }
    ucp_params_t params = {
        .field_mask =
            UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT,
        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
        .request_size = sizeof(mx_req_t),
        .request_init = req_init,
    };
    st = ucp_init(&params, config, &s->context);
    ucp_config_release(config);
    config = NULL;
    if (st != UCS_OK)
        goto ucx_fail;

    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    st = ucp_worker_create(s->context, &wparams, &s->worker);
    if (st != UCS_OK)
        goto ucx_fail;

    ucp_am_handler_param_t hparams = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = ICBC_UCX_AM_ROUTE,
        .cb = am_recv_cb,
        .arg = s,
        .flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
    };
    st = ucp_worker_set_am_recv_handler(s->worker, &hparams);
    if (st != UCS_OK)
        goto ucx_fail;

    st = ucp_worker_get_efd(s->worker, &s->efd);
    if (st != UCS_OK)
        goto ucx_fail;

    ucp_listener_params_t lparams = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = { .addr = opts->addr, .addrlen = opts->addrlen },
        .conn_handler = { .cb = conn_request_cb, .arg = s },
    };
    st = ucp_listener_create(s->worker, &lparams, &s->listener);
    if (st != UCS_OK) {
        icbc_error("fabric: cannot listen on %s: %s", addr, ucs_status_string(st));
        mx_server_destroy(s);
        return ICBC_ERR_IO;
    }
    /* The listener and the TCP transport's own port(s) of the worker. */
    if (mx_guard_end(s->guard) == 0)
        icbc_warn("fabric: found none of UCX's listening sockets; connections of hosts without "
                  "a registered process are not bounded");
    *out = s;
    return ICBC_OK;

ucx_fail:
    icbc_error("fabric: UCX setup for %s failed: %s", addr, ucs_status_string(st));
    if (config)
        ucp_config_release(config);
    mx_server_destroy(s);
    return ICBC_ERR_UNREACHABLE;
}

void mx_server_destroy(mx_server_t *s)
{
    if (s == NULL)
        return;
    if (s->listener)
        ucp_listener_destroy(s->listener);
    s->listener = NULL;
    for (icbc_list_t *e = s->peers.next; e != &s->peers; e = e->next)
        peer_schedule_close(ICBC_CONTAINER(e, mx_peer_t, link), 0);
    close_pending(s);
    /* Forced closes complete within a few progress calls; bound the wait. */
    for (int i = 0; s->closing > 0 && i < 100000; i++)
        ucp_worker_progress(s->worker);
    while (!icbc_list_empty(&s->peers))
        peer_unlink(ICBC_CONTAINER(s->peers.next, mx_peer_t, link));
    if (s->worker)
        ucp_worker_destroy(s->worker);
    if (s->context)
        ucp_cleanup(s->context);
    icbc_hmap_free(&s->by_ep);
    mx_guard_free(s->guard);
    free(s);
}

int mx_server_efd(const mx_server_t *s)
{
    return s->efd;
}

unsigned mx_server_progress(mx_server_t *s)
{
    unsigned n = 0, k;

    do {
        k = ucp_worker_progress(s->worker);
        n += k;
        if (s->to_close) {
            close_pending(s);
            k++;
        }
    } while (k > 0);
    return n;
}

icbc_status_t mx_server_arm(mx_server_t *s)
{
    ucs_status_t st = ucp_worker_arm(s->worker);

    if (st == UCS_OK)
        return ICBC_OK;
    if (st == UCS_ERR_BUSY)
        return ICBC_ERR_BUSY;
    icbc_error("fabric: ucp_worker_arm: %s", ucs_status_string(st));
    return ICBC_ERR_IO;
}

static icbc_status_t from_ucs(ucs_status_t st)
{
    return st == UCS_OK ? ICBC_OK : ICBC_ERR_PEER_FAILED;
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    mx_server_t *s = req_completed(request, status);

    if (s != NULL)
        s->cbs.on_sent(user_data, from_ucs(status));
}

static void pull_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    mx_server_t *s = req_completed(request, status);

    if (s != NULL)
        s->cbs.on_pulled(user_data, from_ucs(status));
}

icbc_status_t mx_server_send(mx_peer_t *p, const void *hdr, size_t hdr_len, const void *payload,
                             size_t len, void *send_arg)
{
    mx_server_t *s = p->server;
    void *req;

    if (p->state != PEER_OPEN)
        return ICBC_ERR_PEER_FAILED;
    req = mx_ucx_am_send(p->ep, ICBC_UCX_AM_ROUTE, hdr, hdr_len, payload, len,
                         UCP_AM_SEND_FLAG_REPLY | (len > s->rndv_thresh ? UCP_AM_SEND_FLAG_RNDV
                                                                        : UCP_AM_SEND_FLAG_EAGER),
                         send_cb, send_arg);
    if (req == NULL) {
        s->cbs.on_sent(send_arg, ICBC_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        icbc_debug("fabric peer %s: send failed: %s", p->addr,
                   ucs_status_string(UCS_PTR_STATUS(req)));
        return ICBC_ERR_PEER_FAILED;
    } else {
        ucs_status_t st = req_posted(s, req);
        if (st != UCS_INPROGRESS)
            s->cbs.on_sent(send_arg, from_ucs(st));
    }
    return ICBC_OK;
}

icbc_status_t mx_server_recv_data(mx_server_t *s, void *desc, void *buf, size_t len, void *recv_arg)
{
    void *req = mx_ucx_am_recv(s->worker, desc, buf, len, pull_cb, recv_arg);

    if (req == NULL) {
        s->cbs.on_pulled(recv_arg, ICBC_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        icbc_debug("fabric: rendezvous receive failed: %s", ucs_status_string(UCS_PTR_STATUS(req)));
        return ICBC_ERR_PEER_FAILED;
    } else {
        ucs_status_t st = req_posted(s, req);
        if (st != UCS_INPROGRESS)
            s->cbs.on_pulled(recv_arg, from_ucs(st));
    }
    return ICBC_OK;
}

void mx_server_data_release(mx_server_t *s, void *data)
{
    ucp_am_data_release(s->worker, data);
}

void mx_server_close(mx_peer_t *p, int flush)
{
    peer_schedule_close(p, flush);
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
    return p->addr;
}

size_t mx_server_num_peers(const mx_server_t *s)
{
    return s->by_ep.count;
}

void mx_server_trust_peer(mx_peer_t *p)
{
    if (p->trusted || p->state != PEER_OPEN || p->sa.ss_family == 0 || !p->server->guard)
        return;
    p->trusted = 1;
    mx_guard_trust(p->server->guard, (const struct sockaddr *) &p->sa, +1, icbc_clock_ms());
}

size_t mx_server_guard(mx_server_t *s, double timeout_ms, size_t max_untrusted)
{
    return s->guard ? mx_guard_scan(s->guard, icbc_clock_ms(), timeout_ms, max_untrusted) : 0;
}
