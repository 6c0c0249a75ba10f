/* The compute process's half of the routed transport; see mx_client.h. */
#include "mx_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "icbc_bytes.h"
#include "icbc_log.h"
#include "icbc_clock.h"
#include "icbc_queue.h"

typedef enum {
    RT_CONNECTING,  /* ep created, waiting for CHALLENGE */
    RT_CHALLENGED,  /* nonce received, REGISTER to be sent */
    RT_REGISTERING, /* REGISTER sent, waiting for REGISTER_ACK */
    RT_READY,
    RT_REFUSED, /* REGISTER_ACK without OK */
    RT_LOST,    /* endpoint error */
} router_state_t;

typedef struct mx_creq mx_creq_t;

typedef struct {
    mx_client_t *client;
    int index;
    mx_fabric_ep_t *ep;
    int rndv_out;         /* rendezvous sends posted, not complete */
    size_t eager_window;  /* from REGISTER_ACK; 0: the router gives no credit */
    size_t eager_out;     /* eager bytes posted and not credited by the router */
    icbc_queue_t waiting; /* mx_creq_t not posted yet, in order */
    int flushing;
    router_state_t state;
    char why[96];    /* why the endpoint failed */
    double heard_ms; /* last message of any kind from the router */
    int registered_once;
    int was_ready;      /* registered at some point: worth reconnecting */
    int reconnecting;   /* a new endpoint is registering (from mx_client_watch) */
    double retry_ms;    /* next reconnection attempt */
    double deadline_ms; /* of the one under way */
    unsigned char nonce[ICBC_ROUTE_NONCE_SIZE];
    const icbc_rf_router_t *rf;
    uint64_t pace;                      /* bits/s told with PACE (again after a new registration) */
    char cpus[ICBC_ROUTE_CPUS_MAX + 1]; /* where the router runs (REGISTER_ACK); "" unknown */
} router_t;

/* One send in flight: owns the AM header until the fabric is done with it. */
struct mx_creq {
    mx_client_t *client;
    mx_client_cb_t cb;
    void *arg;
    icbc_queue_elem_t qe; /* in the free list, or in the router's waiting sends */
    router_t *rt;         /* a message send's router, NULL otherwise */
    int rndv;             /* counted in rt->rndv_out */
    const void *payload;  /* while waiting for the window */
    size_t len, hdr_len;
    uint8_t *hdr; /* inline_hdr or heap */
    uint8_t inline_hdr[ICBC_ROUTE_HDR_SIZE + MX_INLINE_HDR];
};

struct mx_client {
    mx_client_params_t p;
    size_t max_am_header;
    router_t *routers;
    icbc_queue_t free_reqs;
    size_t reqs_out;   /* sends and pulls in flight */
    double watched_ms; /* last mx_client_watch that looked */
    int nreconnecting;
    unsigned char key[ICBC_RF_KEY_MAX]; /* p.key points here: registering again needs it */
};

static mx_creq_t *req_get(mx_client_t *c)
{
    mx_creq_t *r = ICBC_QUEUE_OBJ(icbc_queue_pop(&c->free_reqs), mx_creq_t, qe);

    if (r == NULL) {
        r = malloc(sizeof(*r));
        if (r == NULL)
            return NULL;
    }
    r->client = c;
    r->hdr = r->inline_hdr;
    r->rt = NULL;
    r->rndv = 0;
    c->reqs_out++;
    return r;
}

static void req_put(mx_creq_t *r)
{
    mx_client_t *c = r->client;

    if (r->hdr != r->inline_hdr)
        free(r->hdr);
    icbc_queue_push(&c->free_reqs, &r->qe);
    c->reqs_out--;
}

static void req_done(mx_creq_t *r, icbc_status_t st)
{
    mx_client_cb_t cb = r->cb;
    void *arg = r->arg;

    req_put(r);
    if (cb)
        cb(arg, st);
}

static void flush_waiting(router_t *rt);

/* A message send is complete: its window place goes to the next waiting. */
static void send_done(mx_creq_t *r, icbc_status_t st)
{
    router_t *rt = r->rt;

    if (r->rndv)
        rt->rndv_out--;
    req_done(r, st);
    if (rt && !icbc_queue_empty(&rt->waiting))
        flush_waiting(rt);
}

static void send_cb(void *arg, icbc_status_t st)
{
    send_done(arg, st);
}

static void pull_cb(void *arg, icbc_status_t st)
{
    req_done(arg, st);
}

/* Posts one route message on R's endpoint; the request owns REQ->hdr. */
static icbc_status_t post(router_t *rt, mx_creq_t *req, size_t hdr_len, const void *payload,
                          size_t len)
{
    mx_client_t *c = rt->client;
    icbc_status_t st = mx_fabric_am_send(
        rt->ep, MX_AM_ROUTE, req->hdr, hdr_len, payload, len,
        len > c->p.rndv_thresh ? MX_FABRIC_SEND_RNDV : MX_FABRIC_SEND_EAGER, send_cb, req);

    if (st != ICBC_OK) {
        req_put(req);
        return ICBC_ERR_PEER_FAILED;
    }
    return ICBC_OK;
}

static int is_rndv(const mx_client_t *c, size_t len)
{
    return len > c->p.rndv_thresh;
}

/* Whether REQ may be posted to RT now. An eager send fits its window if
 * it fits whole, or if less than a quarter of the window is out: the
 * router credits once a quarter came free, so a waiting send always gets
 * going, and the router holds at most a window plus one message. */
static int window_open(const router_t *rt, const mx_creq_t *req)
{
    const mx_client_t *c = rt->client;

    if (is_rndv(c, req->len))
        return rt->rndv_out < c->p.rndv_window;
    return rt->eager_window == 0 || rt->eager_out < rt->eager_window / 4 ||
           rt->eager_out + req->hdr_len + req->len <= rt->eager_window;
}

/* Posts a message send, counting it in the router's windows. */
static icbc_status_t post_msg(router_t *rt, mx_creq_t *req)
{
    int rndv = is_rndv(rt->client, req->len);
    size_t cost = rndv ? 0 : req->hdr_len + req->len;
    icbc_status_t st;

    req->rt = rt;
    req->rndv = rndv;
    if (rndv)
        rt->rndv_out++;
    rt->eager_out += cost;
    st = post(rt, req, req->hdr_len, req->payload, req->len);
    if (st != ICBC_OK) { /* REQ is gone, and the router saw nothing */
        if (rndv)
            rt->rndv_out--;
        rt->eager_out -= cost;
    }
    return st;
}

static mx_creq_t *pop_waiting(router_t *rt)
{
    return ICBC_QUEUE_OBJ(icbc_queue_pop(&rt->waiting), mx_creq_t, qe);
}

/* Every send still waiting for RT completes with an error. */
static void fail_waiting(router_t *rt)
{
    mx_creq_t *req;

    while ((req = pop_waiting(rt)) != NULL)
        req_done(req, ICBC_ERR_PEER_FAILED);
}

/* Posts waiting sends in order while the window lets them. A send that
 * fails to post completes with the error; once the router is lost, every
 * waiting send does. */
static void flush_waiting(router_t *rt)
{
    if (rt->state != RT_READY) {
        fail_waiting(rt);
        return;
    }
    if (rt->flushing)
        return;
    rt->flushing = 1;
    while (!icbc_queue_empty(&rt->waiting)) {
        if (!window_open(rt, ICBC_CONTAINER(rt->waiting.head, mx_creq_t, qe)))
            break;
        mx_creq_t *req = pop_waiting(rt);
        mx_client_cb_t cb = req->cb;
        void *arg = req->arg;
        if (post_msg(rt, req) != ICBC_OK && cb)
            cb(arg, ICBC_ERR_PEER_FAILED);
    }
    rt->flushing = 0;
}

/* A control message (REGISTER, DEREGISTER) to RT with INNER as inner header. */
static icbc_status_t send_control(router_t *rt, uint8_t type, const void *inner, size_t inner_len)
{
    mx_client_t *c = rt->client;
    mx_creq_t *req = req_get(c);
    icbc_route_hdr_t h = {
        .type = type,
        .src_cluster = c->p.cluster,
        .dst_cluster = c->p.cluster,
        .src_rank = c->p.rank,
        .job = c->p.job,
        .inner_len = (uint32_t) inner_len,
    };

    if (req == NULL)
        return ICBC_ERR_NO_MEMORY;
    req->cb = NULL;
    icbc_route_hdr_pack(&h, req->hdr);
    if (inner_len)
        memcpy(req->hdr + ICBC_ROUTE_HDR_SIZE, inner, inner_len);
    return post(rt, req, ICBC_ROUTE_HDR_SIZE + inner_len, NULL, 0);
}

/* The router a message came from: its current endpoint's, or none. */
static router_t *router_of_ep(mx_fabric_ep_t *ep)
{
    router_t *rt = ep ? mx_fabric_ep_arg(ep) : NULL;

    return rt && rt->ep == ep ? rt : NULL;
}

/* RT is gone: sends to it fail from now on, and the owner hears of it
 * once, if RT was registered. */
static void router_lost(router_t *rt, const char *why)
{
    mx_client_t *c = rt->client;
    router_state_t was = rt->state;

    if (was == RT_LOST)
        return;
    rt->state = RT_LOST;
    snprintf(rt->why, sizeof(rt->why), "%s", why);
    rt->retry_ms = 0;
    if (was == RT_READY) {
        icbc_warn("router %s (fabric %s) lost: %s", rt->rf->host, rt->rf->fabric.text, why);
        if (c->p.on_router_lost)
            c->p.on_router_lost(rt->index, ICBC_ERR_PEER_FAILED, c->p.arg);
    }
    fail_waiting(rt);
}

static void ep_failed_cb(mx_fabric_ep_t *ep, icbc_status_t status, const char *why, void *arg)
{
    router_t *rt = arg;

    (void) status;
    if (ep != rt->ep)
        return; /* an endpoint replaced by a reconnection */
    router_lost(rt, why);
}

/* A new endpoint to RT; the router answers with CHALLENGE. */
static void connect_router(router_t *rt)
{
    mx_client_t *c = rt->client;
    icbc_status_t st;

    rt->state = RT_CONNECTING;
    st = mx_fabric_connect(c->p.fabric, (const struct sockaddr *) &rt->rf->fabric.sa,
                           rt->rf->fabric.salen, rt, &rt->ep);
    if (st != ICBC_OK) {
        rt->ep = NULL;
        rt->state = RT_LOST;
        snprintf(rt->why, sizeof(rt->why), "%s", icbc_status_str(st));
        return;
    }
    mx_fabric_ep_set_failed_cb(rt->ep, ep_failed_cb);
}

/* RT sent its CHALLENGE: REGISTER with the proof. */
static void answer_challenge(router_t *rt)
{
    mx_client_t *c = rt->client;
    unsigned char mac[ICBC_ROUTE_MAC_SIZE];

    if (icbc_route_register_mac(c->p.key, c->p.keylen, rt->nonce, c->p.job, c->p.rank, mac) !=
            ICBC_OK ||
        send_control(rt, ICBC_ROUTE_REGISTER, mac, sizeof(mac)) != ICBC_OK) {
        rt->state = RT_LOST;
        snprintf(rt->why, sizeof(rt->why), "REGISTER could not be sent");
    } else {
        rt->state = RT_REGISTERING;
        rt->registered_once = 1;
    }
}

/* Drops RT's failed endpoint (the fabric completes what it held with errors). */
static void drop_endpoint(router_t *rt)
{
    if (rt->ep == NULL)
        return;
    mx_fabric_ep_close(rt->ep, 0);
    rt->ep = NULL;
}

/* Lost routers: a new endpoint and registration every reconnect_ms; one
 * under way is answered here and ends registered, refused or timed out. */
static void reconnect(mx_client_t *c, double t)
{
    for (size_t i = 0; i < c->p.nrouters; i++) {
        router_t *rt = &c->routers[i];
        if (rt->reconnecting) {
            if (rt->state == RT_CHALLENGED)
                answer_challenge(rt);
            if (rt->state == RT_READY) {
                rt->reconnecting = 0;
                c->nreconnecting--;
                rt->eager_out = 0; /* a new registration: a new window */
                rt->heard_ms = t;
                if (rt->pace > 0) { /* the new registration has not heard it */
                    uint64_t pace = rt->pace;
                    rt->pace = 0;
                    mx_client_pace(c, (int) i, pace);
                }
                icbc_info("router %s (fabric %s) registered again", rt->rf->host,
                          rt->rf->fabric.text);
                if (c->p.on_router_back)
                    c->p.on_router_back(rt->index, c->p.arg);
            } else if (rt->state >= RT_REFUSED || t > rt->deadline_ms) {
                rt->reconnecting = 0;
                c->nreconnecting--;
                rt->state = RT_LOST;
                rt->retry_ms = t + c->p.reconnect_ms;
            }
        } else if (rt->state == RT_LOST && rt->was_ready && c->p.reconnect_ms > 0 &&
                   t >= rt->retry_ms) {
            if (rt->retry_ms == 0) {
                rt->retry_ms = t + c->p.reconnect_ms; /* the first try waits one interval */
                continue;
            }
            drop_endpoint(rt);
            connect_router(rt);
            if (rt->state == RT_LOST) {
                rt->retry_ms = t + c->p.reconnect_ms;
                continue;
            }
            rt->reconnecting = 1;
            rt->deadline_ms = t + c->p.timeout_ms;
            c->nreconnecting++;
        }
    }
}

void mx_client_watch(mx_client_t *c)
{
    double t = icbc_clock_coarse_ms();
    char why[96];

    if (c->nreconnecting > 0)
        reconnect(c, t);
    if (t - c->watched_ms < 100)
        return;
    if (c->p.reconnect_ms > 0)
        reconnect(c, t);
    if (c->p.silence_ms <= 0) {
        c->watched_ms = t;
        return;
    }
    if (t - c->watched_ms > 1000) {
        /* not polled for a while: messages may wait unread in the fabric */
        for (size_t i = 0; i < c->p.nrouters; i++)
            if (c->routers[i].heard_ms < t)
                c->routers[i].heard_ms = t;
    }
    c->watched_ms = t;
    for (size_t i = 0; i < c->p.nrouters; i++) {
        router_t *rt = &c->routers[i];
        if (rt->state != RT_READY || t - rt->heard_ms <= c->p.silence_ms)
            continue;
        snprintf(why, sizeof(why), "silent for %.0f s (a live router speaks every %.0f s)",
                 (t - rt->heard_ms) / 1e3, MX_ROUTER_KEEPALIVE_MS / 1e3);
        router_lost(rt, why);
    }
}

static int am_recv_cb(mx_fabric_t *f, const mx_fabric_am_t *am, void *arg)
{
    mx_client_t *c = arg;
    const void *header = am->hdr;
    size_t header_length = am->hdr_len, length = am->len;
    const int drop = 0;
    router_t *rt = router_of_ep(am->ep);
    icbc_route_hdr_t h;

    (void) f;
    if (rt == NULL || icbc_route_hdr_parse(header, header_length, &h) != ICBC_OK ||
        h.inner_len != header_length - ICBC_ROUTE_HDR_SIZE || h.payload_len != length) {
        icbc_debug("router message dropped: unknown sender or malformed header");
        return drop;
    }
    rt->heard_ms = icbc_clock_coarse_ms();
    switch (h.type) {
    case ICBC_ROUTE_CHALLENGE:
        if (rt->state == RT_CONNECTING && h.inner_len == ICBC_ROUTE_NONCE_SIZE) {
            memcpy(rt->nonce, (const uint8_t *) header + ICBC_ROUTE_HDR_SIZE,
                   ICBC_ROUTE_NONCE_SIZE);
            rt->state = RT_CHALLENGED; /* answered from the create loop */
        }
        return drop;
    case ICBC_ROUTE_REGISTER_ACK:
        if (rt->state == RT_REGISTERING) {
            rt->state = (h.flags & ICBC_ROUTE_F_OK) ? RT_READY : RT_REFUSED;
            uint64_t window;
            if (rt->state == RT_READY &&
                icbc_route_ack_parse((const uint8_t *) header + ICBC_ROUTE_HDR_SIZE, h.inner_len,
                                     &window, rt->cpus) == ICBC_OK)
                rt->eager_window = window;
        }
        return drop;
    case ICBC_ROUTE_CREDIT:
        if (rt->state == RT_READY && h.job == c->p.job && h.dst_rank == c->p.rank &&
            h.inner_len == ICBC_ROUTE_COUNT_SIZE && length == 0) {
            uint64_t n = icbc_get64((const uint8_t *) header + ICBC_ROUTE_HDR_SIZE);
            rt->eager_out -= n < rt->eager_out ? n : rt->eager_out;
            if (!icbc_queue_empty(&rt->waiting))
                flush_waiting(rt);
        }
        return drop;
    case ICBC_ROUTE_CLUSTER_STATE:
        if (rt->state == RT_READY && h.job == c->p.job && h.dst_rank == c->p.rank &&
            h.inner_len == 0 && length == 0 && c->p.on_cluster_state)
            c->p.on_cluster_state(rt->index, h.src_cluster, (h.flags & ICBC_ROUTE_F_OK) != 0,
                                  c->p.arg);
        return drop;
    case ICBC_ROUTE_MSG:
    case ICBC_ROUTE_UNREACHABLE: {
        mx_client_msg_t m = {
            .route = h,
            .inner = (const uint8_t *) header + ICBC_ROUTE_HDR_SIZE,
            .inner_len = h.inner_len,
            .data = am->data,
            .len = length,
            .rndv = am->rndv,
            .router = rt->index,
        };
        if (rt->state != RT_READY || c->p.on_msg == NULL)
            return drop;
        return c->p.on_msg(&m, c->p.arg);
    }
    default: return drop;
    }
}

static void idle_pause(void)
{
    struct timespec ts = { 0, 50 * 1000 };
    nanosleep(&ts, NULL);
}

/* Why RT did not register, for the error message. */
static void explain(const router_t *rt, int timeout_ms, char *err, size_t errlen)
{
    const char *host = rt->rf->host, *addr = rt->rf->fabric.text;

    switch (rt->state) {
    case RT_REFUSED:
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router %s (fabric %s) refused the registration (wrong key?)", host, addr);
        break;
    case RT_LOST:
        if (rt->registered_once)
            icbc_err(ICBC_ERR_INVALID, err, errlen,
                     "router %s (fabric %s) closed the connection after REGISTER: "
                     "refused (%s)",
                     host, addr, rt->why);
        else
            icbc_err(ICBC_ERR_INVALID, err, errlen, "router %s (fabric %s) unreachable: %s", host,
                     addr, rt->why);
        break;
    default:
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "router %s (fabric %s): no %s within %d ms (timeout)", host, addr,
                 rt->state == RT_CONNECTING ? "CHALLENGE" : "REGISTER_ACK", timeout_ms);
        break;
    }
}

icbc_status_t mx_client_create(const mx_client_params_t *params, mx_client_t **out, char *err,
                               size_t errlen)
{
    mx_client_t *c;
    icbc_status_t ret = ICBC_OK;
    double deadline;
    size_t ready = 0;

    if (params->fabric == NULL || params->nrouters == 0 || params->key == NULL ||
        params->keylen == 0) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "mx_client: a fabric, at least one router and the key are required");
        return ICBC_ERR_INVALID;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return ICBC_ERR_NO_MEMORY;
    if (params->keylen > sizeof(c->key)) {
        free(c);
        icbc_err(ICBC_ERR_INVALID, err, errlen, "mx_client: the key is longer than %d bytes",
                 ICBC_RF_KEY_MAX);
        return ICBC_ERR_INVALID;
    }
    c->p = *params;
    memcpy(c->key, params->key, params->keylen);
    c->p.key = c->key;
    if (c->p.timeout_ms <= 0)
        c->p.timeout_ms = 10000;
    if (c->p.rndv_thresh == 0)
        c->p.rndv_thresh = MX_RNDV_THRESH_DEFAULT;
    if (c->p.rndv_window <= 0)
        c->p.rndv_window = MX_RNDV_WINDOW_DEFAULT;
    /* Where the fabric does not see a router die, its silence must show
     * it soon: a live router speaks every MX_ROUTER_KEEPALIVE_MS. */
    if (c->p.silence_ms > MX_ROUTER_SILENCE_MS && !mx_fabric_peer_death_seen(params->fabric))
        c->p.silence_ms = MX_ROUTER_SILENCE_MS;
    c->routers = calloc(params->nrouters, sizeof(router_t));
    if (c->routers == NULL) {
        free(c);
        return ICBC_ERR_NO_MEMORY;
    }
    c->max_am_header = mx_fabric_max_hdr(params->fabric);
    mx_fabric_set_am_handler(params->fabric, MX_AM_ROUTE, am_recv_cb, c);

    for (size_t i = 0; i < params->nrouters; i++) {
        router_t *rt = &c->routers[i];
        rt->client = c;
        rt->index = (int) i;
        rt->rf = &params->routers[i];
        connect_router(rt);
    }

    /* Drive the fabric until every router answered or the deadline passed. */
    deadline = icbc_clock_coarse_ms() + c->p.timeout_ms;
    for (;;) {
        int pending = 0;

        for (size_t i = 0; i < params->nrouters; i++) {
            router_t *rt = &c->routers[i];
            if (rt->state == RT_CHALLENGED)
                answer_challenge(rt);
            if (rt->state < RT_READY)
                pending++;
        }
        if (pending == 0 || icbc_clock_coarse_ms() > deadline)
            break;
        if (mx_fabric_progress(params->fabric) == 0)
            idle_pause();
    }
    for (size_t i = 0; i < params->nrouters; i++)
        ready += c->routers[i].state == RT_READY;
    for (size_t i = 0; i < params->nrouters; i++) {
        router_t *rt = &c->routers[i];
        if (rt->state != RT_READY && c->p.reconnect_ms > 0 && ready > 0 &&
            rt->state != RT_REFUSED && !rt->registered_once) {
            /* down or silent now: taken when it answers, as a lost one is */
            explain(rt, c->p.timeout_ms, err, errlen);
            icbc_warn("%s; starting with the other routers, trying it every %d ms", err,
                      c->p.reconnect_ms);
            if (rt->state != RT_LOST)
                drop_endpoint(rt);
            rt->state = RT_LOST;
            rt->retry_ms = 0;
            rt->was_ready = 1;
            continue;
        }
        if (rt->state != RT_READY) {
            explain(&c->routers[i], c->p.timeout_ms, err, errlen);
            ret = c->routers[i].state == RT_REFUSED ? ICBC_ERR_AUTH
                  : c->routers[i].state == RT_LOST && !c->routers[i].registered_once
                      ? ICBC_ERR_UNREACHABLE
                  : c->routers[i].state == RT_LOST ? ICBC_ERR_AUTH
                                                   : ICBC_ERR_TIMEOUT;
            break;
        }
    }
    if (ret != ICBC_OK) {
        mx_client_destroy(c);
        return ret;
    }
    for (size_t i = 0; i < params->nrouters; i++)
        c->routers[i].was_ready = 1;
    if (errlen > 0)
        err[0] = '\0';
    *out = c;
    return ICBC_OK;
}

void mx_client_destroy(mx_client_t *c)
{
    mx_fabric_t *f;
    double deadline;

    if (c == NULL)
        return;
    f = c->p.fabric;
    for (size_t i = 0; i < c->p.nrouters; i++) {
        if (icbc_queue_empty(&c->routers[i].waiting))
            continue;
        icbc_warn("mx_client: sends to router %s not posted at shutdown fail",
                  c->routers[i].rf->host);
        fail_waiting(&c->routers[i]);
    }
    for (size_t i = 0; i < c->p.nrouters; i++)
        if (c->routers[i].state == RT_READY)
            send_control(&c->routers[i], ICBC_ROUTE_DEREGISTER, NULL, 0);
    /* DEREGISTER and what is still in flight go out first (bounded wait);
     * then live routers' endpoints close after their queued sends, failed
     * ones at once. */
    deadline = icbc_clock_coarse_ms() + 2000;
    while (c->reqs_out > 0 && icbc_clock_coarse_ms() <= deadline)
        if (mx_fabric_progress(f) == 0)
            idle_pause();
    for (size_t i = 0; i < c->p.nrouters; i++) {
        router_t *rt = &c->routers[i];
        if (rt->ep == NULL)
            continue;
        mx_fabric_ep_close(rt->ep, rt->state == RT_READY);
        rt->ep = NULL;
    }
    for (int i = 0; i < 100; i++)
        mx_fabric_progress(f);
    mx_fabric_set_am_handler(f, MX_AM_ROUTE, NULL, NULL);
    /* Requests still out belong to fabric callbacks that can no longer run
     * into this client only if they completed; leak them otherwise. */
    if (c->reqs_out == 0) {
        icbc_queue_elem_t *r;
        while ((r = icbc_queue_pop(&c->free_reqs)) != NULL)
            free(ICBC_CONTAINER(r, mx_creq_t, qe));
        free(c->routers);
        free(c);
    } else {
        icbc_warn("mx_client: %zu operations still in flight at shutdown", c->reqs_out);
    }
}

icbc_status_t mx_client_send(mx_client_t *c, int router, uint16_t dst_cluster, uint32_t dst_rank,
                             uint16_t flags, const void *inner, size_t inner_len,
                             const void *payload, size_t len, mx_client_cb_t cb, void *arg)
{
    router_t *rt;
    mx_creq_t *req;
    icbc_route_hdr_t h = {
        .type = ICBC_ROUTE_MSG,
        .flags = flags & ICBC_ROUTE_F_ORDERED,
        .src_cluster = c->p.cluster,
        .dst_cluster = dst_cluster,
        .src_rank = c->p.rank,
        .dst_rank = dst_rank,
        .job = c->p.job,
        .inner_len = (uint32_t) inner_len,
        .payload_len = len,
    };

    if (router < 0 || (size_t) router >= c->p.nrouters)
        return ICBC_ERR_INVALID;
    rt = &c->routers[router];
    if (inner_len > mx_client_max_inner(c) || len > ICBC_ROUTE_PAYLOAD_MAX)
        return ICBC_ERR_INVALID;
    if (rt->state != RT_READY)
        return ICBC_ERR_PEER_FAILED;
    req = req_get(c);
    if (req == NULL)
        return ICBC_ERR_NO_MEMORY;
    if (inner_len > MX_INLINE_HDR) {
        req->hdr = malloc(ICBC_ROUTE_HDR_SIZE + inner_len);
        if (req->hdr == NULL) {
            req->hdr = req->inline_hdr;
            req_put(req);
            return ICBC_ERR_NO_MEMORY;
        }
    }
    req->cb = cb;
    req->arg = arg;
    req->payload = payload;
    req->len = len;
    req->hdr_len = ICBC_ROUTE_HDR_SIZE + inner_len;
    icbc_route_hdr_pack(&h, req->hdr);
    if (inner_len)
        memcpy(req->hdr + ICBC_ROUTE_HDR_SIZE, inner, inner_len);
    if (!icbc_queue_empty(&rt->waiting) || !window_open(rt, req)) {
        /* behind a window, and behind whatever already waits: in order */
        icbc_queue_push(&rt->waiting, &req->qe);
        return ICBC_OK;
    }
    return post_msg(rt, req);
}

int mx_client_would_wait(const mx_client_t *c, int router, size_t len)
{
    const router_t *rt;
    mx_creq_t probe = { .len = len, .hdr_len = ICBC_ROUTE_HDR_SIZE };

    if (router < 0 || (size_t) router >= c->p.nrouters)
        return 0;
    rt = &c->routers[router];
    return !icbc_queue_empty(&rt->waiting) || !window_open(rt, &probe);
}

icbc_status_t mx_client_recv_data(mx_client_t *c, void *desc, void *buf, size_t len,
                                  mx_client_cb_t cb, void *arg)
{
    mx_creq_t *req = req_get(c);

    if (req == NULL)
        return ICBC_ERR_NO_MEMORY;
    req->cb = cb;
    req->arg = arg;
    if (mx_fabric_am_recv(c->p.fabric, desc, buf, len, pull_cb, req) != ICBC_OK) {
        req_put(req);
        return ICBC_ERR_PEER_FAILED;
    }
    return ICBC_OK;
}

void mx_client_data_release(mx_client_t *c, void *data)
{
    mx_fabric_release(c->p.fabric, data);
}

size_t mx_client_max_inner(const mx_client_t *c)
{
    size_t lim = ICBC_ROUTE_INNER_MAX;

    if (c->max_am_header > ICBC_ROUTE_HDR_SIZE && c->max_am_header - ICBC_ROUTE_HDR_SIZE < lim)
        lim = c->max_am_header - ICBC_ROUTE_HDR_SIZE;
    return lim;
}

size_t mx_client_num_routers(const mx_client_t *c)
{
    return c->p.nrouters;
}

int mx_client_router_alive(const mx_client_t *c, int router)
{
    return router >= 0 && (size_t) router < c->p.nrouters && c->routers[router].state == RT_READY;
}

const char *mx_client_router_cpus(const mx_client_t *c, int router)
{
    return router >= 0 && (size_t) router < c->p.nrouters ? c->routers[router].cpus : "";
}

void mx_client_dump(const mx_client_t *c, FILE *f)
{
    static const char *const states[] = { "connecting", "challenged", "registering",
                                          "ready",      "refused",    "lost" };

    fprintf(f, "  mx_client: %zu request(s) in flight\n", c->reqs_out);
    for (size_t i = 0; i < c->p.nrouters; i++) {
        const router_t *rt = &c->routers[i];
        size_t waiting = 0;
        icbc_queue_for_each (q, &rt->waiting)
            waiting++;
        fprintf(f,
                "  router %zu (%s): %s, rendezvous %d/%d in flight, eager %zu/%zu bytes "
                "not credited, %zu send(s) waiting for the window\n",
                i, rt->rf ? rt->rf->fabric.text : "?",
                (size_t) rt->state < sizeof(states) / sizeof(states[0]) ? states[rt->state] : "?",
                rt->rndv_out, c->p.rndv_window, rt->eager_out, rt->eager_window, waiting);
    }
}

icbc_status_t mx_client_pace(mx_client_t *c, int router, uint64_t bits_per_s)
{
    router_t *rt;
    uint8_t inner[ICBC_ROUTE_COUNT_SIZE];

    if (router < 0 || (size_t) router >= c->p.nrouters)
        return ICBC_ERR_INVALID;
    rt = &c->routers[router];
    if (rt->pace == bits_per_s && rt->state == RT_READY)
        return ICBC_OK;
    rt->pace = bits_per_s;
    if (rt->state != RT_READY)
        return ICBC_OK; /* told once it registers again */
    icbc_put64(inner, bits_per_s);
    return send_control(rt, ICBC_ROUTE_PACE, inner, sizeof(inner));
}
