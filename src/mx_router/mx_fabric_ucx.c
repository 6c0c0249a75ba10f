/* The fabric transport over UCX: UCP active messages with rendezvous,
 * sockaddr listener and endpoints in peer error handling mode. */
#include "mx_fabric_impl.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "icbc_clock.h"
#include "icbc_hmap.h"
#include "icbc_list.h"
#include "icbc_log.h"
#include "mx_ucx.h"

typedef struct ucx_fabric ucx_fabric_t;

/* The request area UCX reserves for us (ucp_params.request_size). UCX may
 * complete a returned request inside the posting call: the callback then
 * finds no fabric, records the status, and the posting function finishes
 * the operation. */
typedef struct {
    ucx_fabric_t *fabric;
    mx_fabric_done_cb_t on_done;
    int done; /* completed while being posted */
    int send; /* counted in fabric->sends_running */
    ucs_status_t status;
} ucx_req_t;

typedef enum { EP_OPEN, EP_FAILED, EP_CLOSING } ucx_ep_state_t;

typedef struct ucx_ep {
    mx_fabric_ep_t base;
    ucp_ep_h ep;
    ucx_ep_state_t state;
    int flush;                 /* close after queued sends, not by force */
    icbc_list_t link;          /* in fabric->eps */
    struct ucx_ep *close_next; /* in fabric->to_close */
} ucx_ep_t;

typedef struct {
    ucx_fabric_t *fabric;
    unsigned id;
} ucx_am_id_t;

struct ucx_fabric {
    mx_fabric_t base;
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int efd;
    ucp_err_handling_mode_t err_mode;
    size_t max_hdr;
    ucx_am_id_t ids[MX_FABRIC_AM_IDS];
    icbc_hmap_t by_ep;    /* ucp_ep_h -> endpoint not closing */
    icbc_list_t eps;      /* every endpoint not yet freed */
    ucx_ep_t *to_close;   /* endpoints to close from the loop */
    size_t closing;       /* close operations in flight */
    size_t sends_running; /* send requests UCX has not completed */
};

static void req_init(void *request)
{
    memset(request, 0, sizeof(ucx_req_t));
}

static icbc_status_t from_ucs(ucs_status_t st)
{
    return st == UCS_OK ? ICBC_OK : ICBC_ERR_PEER_FAILED;
}

/* A send or receive just posted: done at once (NULL), failed, or running. */
static icbc_status_t req_posted(ucx_fabric_t *f, void *req, mx_fabric_done_cb_t on_done, void *arg)
{
    ucx_req_t *r;

    if (req == NULL) {
        if (on_done)
            on_done(arg, ICBC_OK);
        return ICBC_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        icbc_debug("fabric: %s", ucs_status_string(UCS_PTR_STATUS(req)));
        return ICBC_ERR_PEER_FAILED;
    }
    r = req;
    if (!r->done) {
        r->fabric = f;
        r->on_done = on_done;
        return ICBC_OK;
    }
    ucs_status_t status = r->status;
    r->done = 0;
    ucp_request_free(req);
    if (on_done)
        on_done(arg, from_ucs(status));
    return ICBC_OK;
}

static void req_completed(void *request, ucs_status_t status, void *user_data)
{
    ucx_req_t *r = request;
    mx_fabric_done_cb_t on_done = r->on_done;

    if (r->fabric == NULL) {
        r->done = 1;
        r->status = status;
        return;
    }
    if (r->send)
        r->fabric->sends_running--;
    r->fabric = NULL;
    r->on_done = NULL;
    r->send = 0;
    ucp_request_free(request);
    if (on_done)
        on_done(user_data, from_ucs(status));
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    req_completed(request, status, user_data);
}

static void recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void) length;
    req_completed(request, status, user_data);
}

static void ep_unlink(ucx_ep_t *e)
{
    icbc_list_del(&e->link);
    free(e);
}

static void ep_closed_cb(void *request, ucs_status_t status, void *user_data)
{
    ucx_ep_t *e = user_data;
    ucx_fabric_t *f = (ucx_fabric_t *) e->base.fabric;

    (void) status;
    f->closing--;
    ep_unlink(e);
    ucp_request_free(request);
}

/* UCX does not allow closing an endpoint inside its own callbacks: closes
 * are queued and run from progress. */
static void close_pending(ucx_fabric_t *f)
{
    while (f->to_close) {
        ucx_ep_t *e = f->to_close;
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                            (e->flush ? 0 : UCP_OP_ATTR_FIELD_FLAGS),
            .flags = UCP_EP_CLOSE_FLAG_FORCE,
            .cb.send = ep_closed_cb,
            .user_data = e,
        };
        void *req;

        f->to_close = e->close_next;
        req = ucp_ep_close_nbx(e->ep, &param);
        if (req == NULL || UCS_PTR_IS_ERR(req))
            ep_unlink(e);
        else
            f->closing++;
    }
}

static void ep_schedule_close(ucx_ep_t *e, int flush)
{
    ucx_fabric_t *f = (ucx_fabric_t *) e->base.fabric;

    if (e->state == EP_CLOSING)
        return;
    e->state = EP_CLOSING;
    e->flush = flush;
    icbc_hmap_del(&f->by_ep, (uintptr_t) e->ep, 0);
    e->close_next = f->to_close;
    f->to_close = e;
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_ep_t *e = arg;

    (void) ep;
    if (e->state != EP_OPEN)
        return;
    e->state = EP_FAILED;
    icbc_debug("fabric peer %s: endpoint error: %s", e->base.peer, ucs_status_string(status));
    mx_fabric_ep_failed(&e->base, ICBC_ERR_PEER_FAILED, ucs_status_string(status));
}

static ucx_ep_t *ep_new(ucx_fabric_t *f)
{
    ucx_ep_t *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return NULL;
    e->base.fabric = &f->base;
    snprintf(e->base.peer, sizeof(e->base.peer), "(unknown)");
    icbc_list_push(&f->eps, &e->link);
    return e;
}

/* Endpoint E's ucp endpoint was created: known by it from now on. */
static icbc_status_t ep_created(ucx_fabric_t *f, ucx_ep_t *e, ucs_status_t st, const char *what)
{
    if (st != UCS_OK) {
        icbc_warn("fabric: cannot %s %s: %s", what, e->base.peer, ucs_status_string(st));
        ep_unlink(e);
        return ICBC_ERR_UNREACHABLE;
    }
    e->state = EP_OPEN;
    if (icbc_hmap_put(&f->by_ep, (uintptr_t) e->ep, 0, e) != ICBC_OK) {
        ep_schedule_close(e, 0);
        return ICBC_ERR_NO_MEMORY;
    }
    return ICBC_OK;
}

static void conn_request_cb(ucp_conn_request_h req, void *arg)
{
    ucx_fabric_t *f = arg;
    ucp_conn_request_attr_t attr = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR };
    ucx_ep_t *e = ep_new(f);

    if (e == NULL) {
        ucp_listener_reject(f->listener, req);
        return;
    }
    if (ucp_conn_request_query(req, &attr) == UCS_OK)
        mx_fabric_ep_set_peer(&e->base, (const struct sockaddr *) &attr.client_address,
                              attr.client_address.ss_family == AF_INET6
                                  ? sizeof(struct sockaddr_in6)
                                  : sizeof(struct sockaddr_in));
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = ep_error_cb, .arg = e },
    };
    if (ep_created(f, e, ucp_ep_create(f->worker, &ep_params, &e->ep), "accept") != ICBC_OK)
        return;
    if (f->base.cbs.on_accept)
        f->base.cbs.on_accept(&f->base, &e->base, f->base.arg);
}

static ucs_status_t am_recv_cb(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param)
{
    ucx_am_id_t *id = arg;
    ucx_fabric_t *f = id->fabric;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    int persistent = rndv || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    ucx_ep_t *e = NULL;

    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        e = icbc_hmap_get(&f->by_ep, (uintptr_t) param->reply_ep, 0);
    mx_fabric_am_t am = {
        .id = id->id,
        .hdr = header,
        .hdr_len = header_length,
        .data = data,
        .len = length,
        .rndv = rndv,
        .ep = e && e->state == EP_OPEN ? &e->base : NULL,
    };
    if (mx_fabric_deliver(&f->base, &am) && persistent)
        return UCS_INPROGRESS;
    return UCS_OK;
}

#define UCX_CLOSE_WAIT_S 5.0

static void ucx_destroy(mx_fabric_t *base)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;

    if (f->listener)
        ucp_listener_destroy(f->listener);
    f->listener = NULL;
    for (icbc_list_t *l = f->eps.next; l != &f->eps; l = l->next)
        ep_schedule_close(ICBC_CONTAINER(l, ucx_ep_t, link), 0);
    for (ucx_ep_t *e = f->to_close; e != NULL; e = e->close_next)
        e->flush = 0; /* nothing waits for queued sends any more */
    if (f->worker) {
        close_pending(f);
        /* Forced closes complete within a few progress calls; the wait is
         * bounded in time, not in calls: a close still pending when the
         * worker is destroyed fails UCX's assertion on unreleased requests,
         * and under a sanitizer on a loaded host 100,000 calls were not
         * always enough. */
        double end = icbc_clock_now() + UCX_CLOSE_WAIT_S;
        while (f->closing > 0 && icbc_clock_now() < end)
            ucp_worker_progress(f->worker);
    }
    while (!icbc_list_empty(&f->eps))
        ep_unlink(ICBC_CONTAINER(f->eps.next, ucx_ep_t, link));
    if (f->worker)
        ucp_worker_destroy(f->worker);
    if (f->context)
        ucp_cleanup(f->context);
    icbc_hmap_free(&f->by_ep);
    free(f);
}

static icbc_status_t ucx_create(const mx_fabric_params_t *params, mx_fabric_t **out, char *err,
                                size_t errlen)
{
    ucx_fabric_t *f = calloc(1, sizeof(*f));
    ucp_config_t *config = NULL;
    ucs_status_t st;
    char addr[64] = "any";
    const char *what = "configuration";

    if (f == NULL)
        return icbc_err(ICBC_ERR_NO_MEMORY, err, errlen, "fabric: out of memory");
    icbc_list_init(&f->eps);
    icbc_hmap_init(&f->by_ep);
    f->efd = -1;
    f->err_mode = params->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    f->base.rndv_thresh = params->rndv_thresh ? params->rndv_thresh : MX_FABRIC_RNDV_THRESH_DEFAULT;
    if (params->addr)
        bt_sock_addr_text(params->addr, addr, sizeof(addr));

    /* A listener restarted must get its fixed address back while old
     * connections sit in TIME_WAIT; read from the environment only. */
    if (params->listen)
        setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    mx_ucx_env_defaults();
    if (params->peers_may_fail)
        mx_ucx_env_peers_may_fail();
    st = ucp_config_read(NULL, NULL, &config);
    if (st == UCS_OK && params->ucx_tls)
        st = ucp_config_modify(config, "TLS", params->ucx_tls);
    if (st == UCS_OK && params->ucx_devices)
        st = ucp_config_modify(config, "NET_DEVICES", params->ucx_devices);
    if (st != UCS_OK)
        goto fail;

    what = "context";
    ucp_params_t uparams = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                      UCP_PARAM_FIELD_REQUEST_INIT |
                      (params->estimated_eps ? UCP_PARAM_FIELD_ESTIMATED_NUM_EPS : 0),
        .features = UCP_FEATURE_AM | (params->wakeup ? UCP_FEATURE_WAKEUP : 0),
        .request_size = sizeof(ucx_req_t),
        .request_init = req_init,
        .estimated_num_eps = params->estimated_eps,
    };
    st = ucp_init(&uparams, config, &f->context);
    ucp_config_release(config);
    config = NULL;
    if (st != UCS_OK)
        goto fail;

    what = "worker";
    ucp_worker_params_t wparams = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = params->serialized ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE,
    };
    st = ucp_worker_create(f->context, &wparams, &f->worker);
    if (st != UCS_OK)
        goto fail;
    ucp_worker_attr_t wattr = { .field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER };
    st = ucp_worker_query(f->worker, &wattr);
    if (st != UCS_OK)
        goto fail;
    f->max_hdr = wattr.max_am_header;

    what = "active-message handlers";
    for (unsigned i = 0; i < MX_FABRIC_AM_IDS; i++) {
        f->ids[i] = (ucx_am_id_t){ f, i };
        ucp_am_handler_param_t hparams = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            .id = i,
            .cb = am_recv_cb,
            .arg = &f->ids[i],
            .flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
        };
        st = ucp_worker_set_am_recv_handler(f->worker, &hparams);
        if (st != UCS_OK)
            goto fail;
    }

    if (params->wakeup) {
        what = "event descriptor";
        st = ucp_worker_get_efd(f->worker, &f->efd);
        if (st != UCS_OK)
            goto fail;
    }

    if (params->listen) {
        what = "listener";
        ucp_listener_params_t lparams = {
            .field_mask =
                UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
            .sockaddr = { .addr = params->addr, .addrlen = params->addrlen },
            .conn_handler = { .cb = conn_request_cb, .arg = f },
        };
        st = ucp_listener_create(f->worker, &lparams, &f->listener);
        if (st != UCS_OK)
            goto fail;
    }
    snprintf(f->base.describe, sizeof(f->base.describe), "ucx %s%s", params->listen ? "on " : "",
             params->listen ? addr : "worker");
    *out = &f->base;
    return ICBC_OK;

fail:
    if (config)
        ucp_config_release(config);
    ucx_destroy(&f->base);
    return icbc_err(
        params->listen && strcmp(what, "listener") == 0 ? ICBC_ERR_IO : ICBC_ERR_UNREACHABLE, err,
        errlen, "fabric: UCX %s for %s failed: %s", what, addr, ucs_status_string(st));
}

static int ucx_efd(mx_fabric_t *base)
{
    return ((ucx_fabric_t *) base)->efd;
}

static unsigned ucx_progress(mx_fabric_t *base)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;
    unsigned n = 0, k;

    do {
        k = ucp_worker_progress(f->worker);
        n += k;
        if (f->to_close) {
            close_pending(f);
            k++;
        }
    } while (k > 0);
    return n;
}

static icbc_status_t ucx_arm(mx_fabric_t *base)
{
    ucs_status_t st = ucp_worker_arm(((ucx_fabric_t *) base)->worker);

    if (st == UCS_OK)
        return ICBC_OK;
    if (st == UCS_ERR_BUSY)
        return ICBC_ERR_BUSY;
    icbc_error("fabric: ucp_worker_arm: %s", ucs_status_string(st));
    return ICBC_ERR_IO;
}

static icbc_status_t ucx_address(mx_fabric_t *base, void *buf, size_t *len)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;
    ucp_address_t *a;
    size_t n;

    if (ucp_worker_get_address(f->worker, &a, &n) != UCS_OK)
        return ICBC_ERR_IO;
    if (n > *len) {
        ucp_worker_release_address(f->worker, a);
        return ICBC_ERR_TRUNCATED;
    }
    memcpy(buf, a, n);
    *len = n;
    ucp_worker_release_address(f->worker, a);
    return ICBC_OK;
}

static size_t ucx_address_max(const mx_fabric_t *base)
{
    (void) base;
    return 4096;
}

static icbc_status_t ucx_connect(mx_fabric_t *base, const struct sockaddr *sa, socklen_t salen,
                                 mx_fabric_ep_t **out)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;
    ucx_ep_t *e = ep_new(f);
    icbc_status_t st;

    if (e == NULL)
        return ICBC_ERR_NO_MEMORY;
    mx_fabric_ep_set_peer(&e->base, sa, salen);
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = { .addr = sa, .addrlen = salen },
        .err_mode = UCP_ERR_HANDLING_MODE_PEER, /* a listener's peers may go */
        .err_handler = { .cb = ep_error_cb, .arg = e },
    };
    st = ep_created(f, e, ucp_ep_create(f->worker, &ep_params, &e->ep), "connect to");
    if (st == ICBC_OK)
        *out = &e->base;
    return st;
}

static icbc_status_t ucx_connect_address(mx_fabric_t *base, const void *address, size_t len,
                                         mx_fabric_ep_t **out)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;
    ucx_ep_t *e = ep_new(f);
    icbc_status_t st;

    (void) len;
    if (e == NULL)
        return ICBC_ERR_NO_MEMORY;
    snprintf(e->base.peer, sizeof(e->base.peer), "(worker address)");
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = address,
        .err_mode = f->err_mode,
        .err_handler = { .cb = ep_error_cb, .arg = e },
    };
    st = ep_created(f, e, ucp_ep_create(f->worker, &ep_params, &e->ep), "connect to");
    if (st == ICBC_OK)
        *out = &e->base;
    return st;
}

static void ucx_ep_close(mx_fabric_ep_t *base, int flush)
{
    ep_schedule_close((ucx_ep_t *) base, flush);
}

static icbc_status_t ucx_am_send(mx_fabric_ep_t *base, unsigned id, const void *hdr, size_t hdr_len,
                                 const void *payload, size_t len, unsigned flags,
                                 mx_fabric_done_cb_t on_done, void *arg)
{
    ucx_ep_t *e = (ucx_ep_t *) base;
    ucx_fabric_t *f = (ucx_fabric_t *) base->fabric;
    icbc_status_t st;
    void *req;

    if (e->state != EP_OPEN)
        return ICBC_ERR_PEER_FAILED;
    if (flags & MX_FABRIC_SEND_IMMEDIATE) {
        ucp_request_param_t imm = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
            .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY,
        };
        req = ucp_am_send_nbx(e->ep, id, hdr, hdr_len, NULL, 0, &imm);
        if (req == NULL)
            return ICBC_OK;
        return UCS_PTR_STATUS(req) == UCS_ERR_NO_RESOURCE ? ICBC_ERR_BUSY : ICBC_ERR_PEER_FAILED;
    }
    req = mx_ucx_am_send(
        e->ep, id, hdr, hdr_len, payload, len,
        UCP_AM_SEND_FLAG_REPLY |
            ((flags & MX_FABRIC_SEND_RNDV) ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER),
        send_cb, arg);
    int running = UCS_PTR_IS_PTR(req) && !((ucx_req_t *) req)->done;
    st = req_posted(f, req, on_done, arg);
    if (running) { /* its completion comes from progress */
        ((ucx_req_t *) req)->send = 1;
        f->sends_running++;
    }
    return st;
}

static int ucx_sends_done(mx_fabric_t *base)
{
    return ((ucx_fabric_t *) base)->sends_running == 0;
}

static icbc_status_t ucx_am_recv(mx_fabric_t *base, void *desc, void *buf, size_t len,
                                 mx_fabric_done_cb_t on_done, void *arg)
{
    ucx_fabric_t *f = (ucx_fabric_t *) base;

    return req_posted(f, mx_ucx_am_recv(f->worker, desc, buf, len, recv_cb, arg), on_done, arg);
}

static void ucx_release(mx_fabric_t *base, void *data)
{
    ucp_am_data_release(((ucx_fabric_t *) base)->worker, data);
}

static size_t ucx_max_hdr(const mx_fabric_t *base)
{
    return ((const ucx_fabric_t *) base)->max_hdr;
}

const mx_fabric_ops_t mx_fabric_ucx_ops = {
    .create = ucx_create,
    .destroy = ucx_destroy,
    .efd = ucx_efd,
    .progress = ucx_progress,
    .arm = ucx_arm,
    .address = ucx_address,
    .address_max = ucx_address_max,
    .connect = ucx_connect,
    .connect_address = ucx_connect_address,
    .ep_close = ucx_ep_close,
    .am_send = ucx_am_send,
    .am_recv = ucx_am_recv,
    .release = ucx_release,
    .max_hdr = ucx_max_hdr,
    .sends_done = ucx_sends_done,
};
