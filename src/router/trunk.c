/*
 * Trunks: the TCP connections between this router and the routers of the
 * other clusters, carried by bt_lib (framing, key authentication, pacing).
 *
 * Pairs: router i of cluster C and router j of cluster D form a trunk when
 * j == i mod R_D or i == j mod R_C (the union of both directions' choice).
 * The cluster with the lower index connects; the other accepts. A trunk is
 * --streams connections; each carries the id
 *     "icbc-router <cluster name> <router index> <stream> <streams>"
 * so the acceptor knows which trunk and stream it is. A trunk is up when all
 * its streams are authenticated; losing one stream takes the whole trunk
 * down (what was in flight is answered with UNREACHABLE) and the connecting
 * side tries again with exponential backoff (100 ms .. 5 s).
 *
 * Reachability: when the last trunk to a cluster fails (a stream closed
 * without CLOSE: the other router died or the WAN broke), the registered
 * processes are told at once with CLUSTER_STATE (with failover they move
 * their traffic to other routers; without, they fail the peers there if no
 * router reaches them for 5 s), and told again when a trunk comes back.
 * Messages already here wait for a trunk up to --trunk-wait. An orderly close
 * (the other router stopping) is not announced: messages sent there are
 * still answered with UNREACHABLE.
 *
 * Stream choice: ICBC_ROUTE_F_ORDERED frames go on stream
 * hash(job, src, dst) % N, so a pair's ordered messages stay in order;
 * others on the stream with the fewest bytes waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"
#include "icbc_pace.h"
#include "router_int.h"

#define BACKOFF_MIN_MS 100.0
#define BACKOFF_MAX_MS 5000.0

static rt_conn_tag_t dead_tag = CONN_DEAD;

static int in_callback(icbc_router_t *r, bt_conn_t *c)
{
    for (int i = 0; i < r->cb_depth; i++)
        if (r->cb_stack[i] == c)
            return 1;
    return 0;
}

/* Brackets every bt_lib callback, so a connection is never destroyed from
 * inside one of its own callbacks. */
#define CB_ENTER(r, c)                                                                             \
    do {                                                                                           \
        if ((r)->cb_depth < 16)                                                                    \
            (r)->cb_stack[(r)->cb_depth] = (c);                                                    \
        (r)->cb_depth++;                                                                           \
    } while (0)
#define CB_LEAVE(r) ((r)->cb_depth--)

static void defer_destroy(icbc_router_t *r, bt_conn_t *c)
{
    if (r->ndead == r->capdead) {
        size_t ncap = r->capdead ? r->capdead * 2 : 16;
        bt_conn_t **n = realloc(r->dead, ncap * sizeof(*n));
        if (n == NULL) {
            icbc_error("router %s: out of memory; connection %s leaked", r->name,
                       bt_conn_peer_text(c));
            return;
        }
        r->dead = n;
        r->capdead = ncap;
    }
    r->dead[r->ndead++] = c;
}

void rt_destroy_dead(icbc_router_t *r)
{
    while (r->ndead > 0)
        bt_conn_destroy(r->dead[--r->ndead]);
}

/* Closes C now, or from the loop if one of its callbacks is running. */
static void conn_drop(icbc_router_t *r, bt_conn_t *c)
{
    bt_conn_set_arg(c, &dead_tag);
    if (in_callback(r, c))
        defer_destroy(r, c);
    else
        bt_conn_destroy(c);
}

static const char *trunk_name(const rt_trunk_t *t, char *buf, size_t len)
{
    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(t->r->rf, (size_t) t->cluster);
    snprintf(buf, len, "%s/%d (%s, %s)", cl->name, t->peer, t->peer_rf->host, t->peer_rf->wan.text);
    return buf;
}

static void stream_reset(rt_stream_t *s)
{
    icbc_router_t *r = s->t->r;
    bt_conn_t *c = s->conn;

    s->conn = NULL;
    s->ready = 0;
    s->busy = 0;
    if (c)
        conn_drop(r, c);
    icbc_list_del(&s->q.pump_link);
    rt_queue_fail(&s->q);
    icbc_list_del(&s->wait.link);
    if (s->reserved)
        rt_mem_release(r, s->reserved, 1);
    s->reserved = 0;
    if (s->rx)
        rt_msg_free(s->rx);
    s->rx = NULL;
}

static int cluster_has_trunk_up(icbc_router_t *r, int cluster)
{
    for (int i = 0; i < r->ntrunks; i++)
        if (r->trunks[i].cluster == cluster && r->trunks[i].up)
            return 1;
    return 0;
}

/* FAILED: lost without an orderly close. */
static void trunk_down(rt_trunk_t *t, const char *why, int failed)
{
    icbc_router_t *r = t->r;
    double now = icbc_clock_ms();
    char name[160];
    int was_up = t->up;

    if (t->up) {
        if (r->stopping)
            icbc_info("router %s: trunk to %s closed", r->name, trunk_name(t, name, sizeof(name)));
        else
            icbc_warn("router %s: trunk to %s down: %s", r->name, trunk_name(t, name, sizeof(name)),
                      why);
        r->st.trunks_up--;
        t->downs++;
    } else if (t->initiator) {
        t->failures++;
        if (t->failures == 1 || t->failures % 20 == 0)
            icbc_info("router %s: trunk to %s not up yet (%s); retrying", r->name,
                      trunk_name(t, name, sizeof(name)), why);
    }
    t->up = 0;
    for (int i = 0; i < t->nstreams; i++)
        stream_reset(&t->streams[i]);
    if (was_up && failed && !r->stopping && r->reach[t->cluster].lost_at == 0 &&
        !cluster_has_trunk_up(r, t->cluster))
        r->reach[t->cluster].lost_at = now;
    if (t->initiator) {
        t->retry_at = now + t->backoff_ms;
        t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
    }
}

static void trunk_check_up(rt_trunk_t *t)
{
    icbc_router_t *r = t->r;
    char name[160];

    if (t->up)
        return;
    for (int i = 0; i < t->nstreams; i++)
        if (!t->streams[i].ready)
            return;
    t->up = 1;
    t->was_up = 1;
    t->failures = 0;
    t->backoff_ms = BACKOFF_MIN_MS;
    r->st.trunks_up++;
    icbc_info("router %s: trunk to %s up, %d streams", r->name, trunk_name(t, name, sizeof(name)),
              t->nstreams);
    r->reach[t->cluster].lost_at = 0;
    if (r->reach[t->cluster].announced) {
        r->reach[t->cluster].announced = 0;
        r->st.clusters_unreachable--;
        icbc_info("router %s: cluster %s reachable again; registered processes told", r->name,
                  icbc_routerfile_cluster(r->rf, (size_t) t->cluster)->name);
        rt_fabric_cluster_state(r, t->cluster, 1);
    }
    /* Messages that waited for a trunk to this cluster go now, in order. */
    rt_queue_t *w = &r->trunk_wait[t->cluster];
    while (!icbc_list_empty(&w->msgs)) {
        rt_msg_t *m = ICBC_CONTAINER(w->msgs.next, rt_msg_t, qlink);
        rt_queue_t *q;

        icbc_list_del(&m->qlink);
        w->bytes -= m->len;
        m->q = NULL;
        q = rt_route(r, &m->rh);
        if (q == NULL || q == w) {
            rt_msg_fail(m, "trunk down");
            continue;
        }
        rt_enqueue(q, m);
        rt_pump_later(r, q);
    }
}

static icbc_status_t trunk_alloc_streams(rt_trunk_t *t, int n)
{
    icbc_router_t *r = t->r;
    const icbc_rf_cluster_t *own = icbc_routerfile_cluster(r->rf, (size_t) r->cluster);

    if (t->nstreams != n) {
        rt_stream_t *ns = calloc((size_t) n, sizeof(*ns));
        if (ns == NULL)
            return ICBC_ERR_NO_MEMORY;
        free(t->streams);
        t->streams = ns;
        t->nstreams = n;
        for (int i = 0; i < n; i++) {
            rt_stream_t *s = &t->streams[i];
            s->tag = CONN_STREAM;
            s->t = t;
            s->index = i;
            rt_queue_init(&s->q, Q_STREAM, s);
            icbc_list_init(&s->wait.link);
            snprintf(s->id, sizeof(s->id), "icbc-router %s %d %d %d", own->name, r->index, i, n);
        }
    }
    return ICBC_OK;
}

/* Bytes/s per stream of T: the sum of the processes' PACE rates (wire
 * rates, as the kernel counts them), else --pacing (0: not paced). Each stream gets the whole sum, not a share: a
 * pair's ordered messages keep to one stream, and the processes already
 * hold what they send to the sum on average; the streams' pacing takes
 * away the bursts at the NIC's rate that overflow the WAN's buffer. */
static uint64_t stream_pacing(const rt_trunk_t *t)
{
    const icbc_router_t *r = t->r;

    if (r->pace_sum > 0)
        return icbc_pace_socket_rate(r->pace_sum);
    return r->cfg.pacing_rate;
}

/* A stream of T is up: the pacing in force now. */
static void stream_paced(rt_trunk_t *t, rt_stream_t *s)
{
    if (t->r->pace_sum > 0)
        bt_conn_set_pacing(s->conn, stream_pacing(t));
}

void rt_trunk_pacing(icbc_router_t *r)
{
    icbc_info("router %s: trunk streams paced at %.1f Mbit/s each%s", r->name,
              (r->pace_sum ? r->pace_sum : r->cfg.pacing_rate * 8) / 1e6,
              r->pace_sum          ? " (the sum of its processes' PACE rates)"
              : r->cfg.pacing_rate ? " (--pacing per stream)"
                                   : " (not paced: no process asks)");
    for (int i = 0; i < r->ntrunks; i++) {
        rt_trunk_t *t = &r->trunks[i];
        for (int s = 0; s < t->nstreams; s++)
            if (t->streams[s].conn != NULL)
                bt_conn_set_pacing(t->streams[s].conn, stream_pacing(t));
    }
}

static void fill_opts(icbc_router_t *r, bt_opts_t *o, const char *id)
{
    bt_opts_init(o);
    o->key = r->key;
    o->keylen = r->keylen;
    o->id = id;
    o->sndbuf = r->cfg.sndbuf;
    o->rcvbuf = r->cfg.rcvbuf;
    o->nodelay = 1;
    o->pacing_rate = r->cfg.pacing_rate;
    o->max_queued = r->cfg.stream_queue;
    o->notsent_lowat = r->cfg.notsent_lowat > 0 ? r->cfg.notsent_lowat : 0;
    o->max_hdr = ICBC_ROUTE_HDR_SIZE + ICBC_ROUTE_INNER_MAX;
    o->max_payload = ICBC_ROUTE_PAYLOAD_MAX;
}

static const bt_conn_cbs_t stream_cbs;

static void trunk_connect(rt_trunk_t *t)
{
    icbc_router_t *r = t->r;

    if (trunk_alloc_streams(t, r->cfg.streams) != ICBC_OK) {
        trunk_down(t, "out of memory", 0);
        return;
    }
    for (int i = 0; i < t->nstreams; i++) {
        rt_stream_t *s = &t->streams[i];
        bt_opts_t o;
        icbc_status_t st;

        fill_opts(r, &o, s->id);
        st = bt_connect(r->poller, (const struct sockaddr *) &t->peer_rf->wan.sa,
                        t->peer_rf->wan.salen, &o, &stream_cbs, s, &s->conn);
        if (st != ICBC_OK) {
            s->conn = NULL;
            trunk_down(t, icbc_status_str(st), 0);
            return;
        }
    }
}

/* ---- receive ------------------------------------------------------------ */

static void stream_mem_go(rt_waiter_t *w)
{
    rt_stream_t *s = ICBC_CONTAINER(w, rt_stream_t, wait);

    s->reserved = w->need;
    if (s->conn)
        bt_conn_resume(s->conn);
}

static bt_recv_action_t stream_header(rt_stream_t *s, const void *hdr, size_t hdr_len,
                                      uint64_t plen, void **dest)
{
    rt_trunk_t *t = s->t;
    icbc_router_t *r = t->r;
    icbc_route_hdr_t rh;
    rt_msg_t *m;
    char name[160];

    if (icbc_route_hdr_parse(hdr, hdr_len, &rh) != ICBC_OK ||
        rh.inner_len != hdr_len - ICBC_ROUTE_HDR_SIZE || rh.payload_len != plen ||
        (rh.type != ICBC_ROUTE_MSG && rh.type != ICBC_ROUTE_UNREACHABLE) ||
        rh.dst_cluster != r->cluster) {
        icbc_warn("router %s: bad frame from trunk %s dropped", r->name,
                  trunk_name(t, name, sizeof(name)));
        return BT_RECV_DISCARD;
    }
    if (rt_lookup(r, rh.job, rh.dst_rank) == NULL) {
        rt_unreachable(r, &rh, "not registered");
        return BT_RECV_DISCARD;
    }
    if (plen > 0 && s->reserved < plen) {
        if (s->reserved)
            rt_mem_release(r, s->reserved, 1);
        s->reserved = 0;
        if (!rt_mem_try(r, plen)) {
            s->wait.need = plen;
            s->wait.go = stream_mem_go;
            rt_mem_wait(r, &s->wait);
            return BT_RECV_WAIT;
        }
        s->reserved = plen;
    }
    m = rt_msg_new(r, hdr, hdr_len, &rh, FROM_TRUNK);
    if (m == NULL)
        goto no_memory;
    m->len = plen;
    if (plen > 0) {
        m->payload = malloc(plen);
        if (m->payload == NULL) {
            rt_msg_free(m);
            goto no_memory;
        }
        m->kind = PAY_POOL;
        m->charged = plen;
        s->reserved -= plen;
    }
    if (s->reserved)
        rt_mem_release(r, s->reserved, 1);
    s->reserved = 0;
    s->rx = m;
    *dest = m->payload;
    return BT_RECV_INTO;

no_memory:
    rt_unreachable(r, &rh, "out of memory");
    return BT_RECV_DISCARD;
}

static void stream_payload(rt_stream_t *s)
{
    icbc_router_t *r = s->t->r;
    rt_msg_t *m = s->rx;
    rt_queue_t *q;

    s->rx = NULL;
    if (m == NULL)
        return; /* a discarded frame */
    s->t->msgs_in++;
    s->t->bytes_in += m->len;
    q = rt_route(r, &m->rh);
    if (q == NULL) {
        rt_unreachable(r, &m->rh, "not registered");
        rt_msg_free(m);
        return;
    }
    rt_enqueue(q, m);
    rt_pump(q);
}

/* ---- accepting ------------------------------------------------------------ */

static void refuse_conn(icbc_router_t *r, bt_conn_t *c, const char *why)
{
    icbc_warn("router %s: refused trunk connection from %s (id '%s'): %s", r->name,
              bt_conn_peer_text(c), bt_conn_peer_id(c), why);
    r->st.refused_trunk++;
    conn_drop(r, c);
}

/* An accepted connection authenticated: find its trunk and stream by id. */
static void adopt(icbc_router_t *r, bt_conn_t *c)
{
    char cname[64];
    int idx, k, n, d;
    rt_trunk_t *t = NULL;
    rt_stream_t *s;

    if (sscanf(bt_conn_peer_id(c), "icbc-router %63s %d %d %d", cname, &idx, &k, &n) != 4 ||
        n < 1 || n > ICBC_ROUTER_STREAMS_MAX || k < 0 || k >= n) {
        refuse_conn(r, c, "not a router's trunk id");
        return;
    }
    d = icbc_routerfile_find_cluster(r->rf, cname);
    for (int i = 0; d >= 0 && i < r->ntrunks; i++)
        if (r->trunks[i].cluster == d && r->trunks[i].peer == idx && !r->trunks[i].initiator)
            t = &r->trunks[i];
    if (t == NULL) {
        refuse_conn(r, c, "no trunk with that router in this router file");
        return;
    }
    if (t->nstreams != n || t->up || (t->streams && t->streams[k].conn)) {
        /* The other side started over: what we had is stale. Every old
         * connection goes before the stream array may be replaced. */
        if (t->streams)
            trunk_down(t, "peer reconnected", 1);
        if (trunk_alloc_streams(t, n) != ICBC_OK) {
            refuse_conn(r, c, "out of memory");
            return;
        }
    }
    s = &t->streams[k];
    s->conn = c;
    s->ready = 1;
    bt_conn_set_arg(c, s);
    stream_paced(t, s);
    trunk_check_up(t);
}

static void accept_cb(bt_listener_t *l, bt_conn_t *c, void *arg)
{
    icbc_router_t *r = arg;

    bt_conn_set_arg(c, &r->conn_tag);
}

/* ---- callbacks ------------------------------------------------------------ */

static icbc_router_t *router_of(void *arg)
{
    rt_conn_tag_t *tag = arg;

    if (*tag == CONN_ROUTER)
        return ICBC_CONTAINER(tag, icbc_router_t, conn_tag);
    if (*tag == CONN_STREAM)
        return ((rt_stream_t *) arg)->t->r;
    return NULL;
}

static void cb_ready(bt_conn_t *c, void *arg)
{
    icbc_router_t *r = router_of(arg);

    if (r == NULL)
        return;
    CB_ENTER(r, c);
    if (*(rt_conn_tag_t *) arg == CONN_ROUTER) {
        adopt(r, c);
    } else {
        rt_stream_t *s = arg;
        s->ready = 1;
        stream_paced(s->t, s);
        trunk_check_up(s->t);
    }
    CB_LEAVE(r);
}

static bt_recv_action_t cb_header(bt_conn_t *c, const void *hdr, size_t hdr_len,
                                  uint64_t payload_len, void **dest, void *arg)
{
    icbc_router_t *r = router_of(arg);
    bt_recv_action_t a;

    if (r == NULL || *(rt_conn_tag_t *) arg != CONN_STREAM || !((rt_stream_t *) arg)->ready)
        return BT_RECV_DISCARD;
    CB_ENTER(r, c);
    a = stream_header(arg, hdr, hdr_len, payload_len, dest);
    CB_LEAVE(r);
    return a;
}

static void cb_payload(bt_conn_t *c, void *arg)
{
    icbc_router_t *r = router_of(arg);

    if (r == NULL || *(rt_conn_tag_t *) arg != CONN_STREAM)
        return;
    CB_ENTER(r, c);
    stream_payload(arg);
    CB_LEAVE(r);
}

static void cb_writable(bt_conn_t *c, void *arg)
{
    icbc_router_t *r = router_of(arg);
    rt_stream_t *s = arg;

    if (r == NULL || *(rt_conn_tag_t *) arg != CONN_STREAM)
        return;
    CB_ENTER(r, c);
    s->busy = 0;
    rt_pump(&s->q);
    if (!s->busy)
        rt_mem_kick(r); /* pulls for this stream may go on */
    CB_LEAVE(r);
}

static void cb_close(bt_conn_t *c, icbc_status_t status, const char *msg, void *arg)
{
    icbc_router_t *r = router_of(arg);

    if (r == NULL)
        return; /* already dropped; its destroy is on its way */
    CB_ENTER(r, c);
    if (status == ICBC_ERR_AUTH && *(rt_conn_tag_t *) arg == CONN_ROUTER) {
        /* bt_lib has logged the refusal with the address; count it. */
        icbc_debug("router %s: refused trunk connection %s: %s", r->name, bt_conn_peer_text(c),
                   msg ? msg : "authentication failed");
        r->st.refused_trunk++;
    }
    if (*(rt_conn_tag_t *) arg == CONN_STREAM) {
        rt_stream_t *s = arg;
        trunk_down(s->t, msg ? msg : icbc_status_str(status), status != ICBC_OK);
    } else {
        conn_drop(r, c);
    }
    CB_LEAVE(r);
}

static void stream_sent(bt_conn_t *c, icbc_status_t status, void *arg)
{
    rt_on_sent(arg, status);
}

/* a stream's connection, opened here or accepted */
static const bt_conn_cbs_t stream_cbs = {
    .on_ready = cb_ready,
    .on_header = cb_header,
    .on_payload = cb_payload,
    .on_writable = cb_writable,
    .on_close = cb_close,
};

icbc_status_t rt_stream_send(rt_stream_t *s, rt_msg_t *m)
{
    struct iovec iov = { m->payload, m->len };

    if (s->conn == NULL || !s->ready)
        return ICBC_ERR_PEER_FAILED;
    return bt_conn_send(s->conn, m->hdr, m->hdr_len, m->len ? &iov : NULL, m->len ? 1 : 0,
                        stream_sent, m);
}

/* ---- choice of trunk and stream ------------------------------------------- */

static uint64_t pair_hash(const icbc_route_hdr_t *rh)
{
    uint64_t h = rh->job * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t) rh->src_rank << 32 | rh->dst_rank) + 0x632be59bd9b4e019ull + (h << 6);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

rt_stream_t *rt_trunk_pick(icbc_router_t *r, const icbc_route_hdr_t *rh)
{
    rt_trunk_t *cand[ICBC_RF_MAX_ROUTERS];
    int n = 0;
    uint64_t h = pair_hash(rh);
    rt_trunk_t *t = NULL;

    for (int i = 0; i < r->ntrunks && n < ICBC_RF_MAX_ROUTERS; i++)
        if (r->trunks[i].cluster == rh->dst_cluster)
            cand[n++] = &r->trunks[i];
    for (int i = 0; i < n && t == NULL; i++)
        if (cand[(h + (uint64_t) i) % (uint64_t) n]->up)
            t = cand[(h + (uint64_t) i) % (uint64_t) n];
    if (t == NULL)
        return NULL;
    if (rh->flags & ICBC_ROUTE_F_ORDERED)
        return &t->streams[(h >> 16) % (uint64_t) t->nstreams];

    rt_stream_t *best = &t->streams[0];
    uint64_t best_bytes = UINT64_MAX;
    for (int i = 0; i < t->nstreams; i++) {
        rt_stream_t *s = &t->streams[i];
        uint64_t b = s->q.bytes + bt_conn_queued(s->conn);
        if (b < best_bytes) {
            best = s;
            best_bytes = b;
        }
    }
    return best;
}

/* ---- life cycle ---------------------------------------------------------- */

icbc_status_t rt_trunks_create(icbc_router_t *r, char *err, size_t errlen)
{
    size_t nclusters = icbc_routerfile_num_clusters(r->rf);
    const icbc_rf_cluster_t *own = icbc_routerfile_cluster(r->rf, (size_t) r->cluster);
    size_t rc = own->nrouters;
    bt_opts_t o;
    icbc_status_t st;
    double now = icbc_clock_ms();

    r->trunks = calloc(nclusters * ICBC_RF_MAX_ROUTERS, sizeof(rt_trunk_t));
    r->trunk_wait = calloc(nclusters, sizeof(rt_queue_t));
    r->reach = calloc(nclusters, sizeof(rt_reach_t));
    if (r->trunks == NULL || r->trunk_wait == NULL || r->reach == NULL)
        return ICBC_ERR_NO_MEMORY;
    for (size_t d = 0; d < nclusters; d++)
        rt_queue_init(&r->trunk_wait[d], Q_WAIT, NULL);
    for (size_t d = 0; d < nclusters; d++) {
        const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(r->rf, d);
        if ((int) d == r->cluster)
            continue;
        for (size_t j = 0; j < cl->nrouters; j++) {
            if (j != (size_t) r->index % cl->nrouters && (size_t) r->index != j % rc)
                continue;
            rt_trunk_t *t = &r->trunks[r->ntrunks++];
            t->r = r;
            t->cluster = (int) d;
            t->peer = (int) j;
            t->peer_rf = &cl->routers[j];
            t->initiator = r->cluster < (int) d;
            t->backoff_ms = BACKOFF_MIN_MS;
            t->retry_at = now;
        }
    }
    r->st.trunks = (uint64_t) r->ntrunks;

    fill_opts(r, &o, r->name);
    st = bt_listen(r->poller, (const struct sockaddr *) &r->self->wan.sa, r->self->wan.salen, &o,
                   &stream_cbs, accept_cb, r, &r->listener);
    if (st != ICBC_OK) {
        snprintf(err, errlen, "router %s: cannot listen on WAN address %s: %s", r->name,
                 r->self->wan.text, icbc_status_str(st));
        return st;
    }
    return ICBC_OK;
}

void rt_trunk_timers(icbc_router_t *r, double now, double *next)
{
    size_t nclusters = icbc_routerfile_num_clusters(r->rf);

    /* Waits for a trunk end after trunk_wait_ms (FIFO: arrival order). */
    for (size_t d = 0; r->trunk_wait && d < nclusters; d++) {
        rt_queue_t *w = &r->trunk_wait[d];
        while (!icbc_list_empty(&w->msgs)) {
            rt_msg_t *m = ICBC_CONTAINER(w->msgs.next, rt_msg_t, qlink);
            double due = m->arrived + r->cfg.trunk_wait_ms;
            if (due > now) {
                if (due < *next)
                    *next = due;
                break;
            }
            rt_msg_fail(m, "trunk down");
        }
    }
    /* A cluster lost for longer than the trunk wait is announced. */
    for (size_t d = 0; r->reach && d < nclusters; d++) {
        rt_reach_t *c = &r->reach[d];
        double due = c->lost_at;
        if (c->lost_at == 0 || c->announced)
            continue;
        if (due > now) {
            if (due < *next)
                *next = due;
            continue;
        }
        c->announced = 1;
        r->st.clusters_unreachable++;
        icbc_warn("router %s: no trunk to cluster %s; registered processes told it is unreachable",
                  r->name, icbc_routerfile_cluster(r->rf, d)->name);
        rt_fabric_cluster_state(r, (int) d, 0);
    }
    for (int i = 0; i < r->ntrunks; i++) {
        rt_trunk_t *t = &r->trunks[i];
        int connecting = 0;

        if (!t->initiator || t->up)
            continue;
        for (int k = 0; k < t->nstreams; k++)
            if (t->streams[k].conn)
                connecting = 1;
        if (connecting)
            continue;
        if (t->retry_at <= now)
            trunk_connect(t);
        else if (t->retry_at < *next)
            *next = t->retry_at;
    }
}

void rt_trunks_shutdown(icbc_router_t *r)
{
    double deadline = icbc_clock_ms() + 1000;
    int open;

    for (int i = 0; i < r->ntrunks; i++)
        for (int k = 0; k < r->trunks[i].nstreams; k++)
            if (r->trunks[i].streams[k].conn)
                bt_conn_shutdown(r->trunks[i].streams[k].conn);
    do {
        open = 0;
        for (int i = 0; i < r->ntrunks; i++)
            for (int k = 0; k < r->trunks[i].nstreams; k++)
                if (r->trunks[i].streams[k].conn)
                    open++;
        if (open == 0)
            break;
        mx_server_progress(r->fabric);
        rt_pump_deferred(r);
        if (bt_poller_wait(r->poller, 20) < 0)
            break;
        rt_destroy_dead(r);
    } while (icbc_clock_ms() < deadline);
}

void rt_trunks_destroy(icbc_router_t *r)
{
    for (int i = 0; r->trunks && i < r->ntrunks; i++) {
        rt_trunk_t *t = &r->trunks[i];
        for (int k = 0; k < t->nstreams; k++)
            stream_reset(&t->streams[k]);
        free(t->streams);
    }
    rt_destroy_dead(r);
    for (size_t d = 0; r->trunk_wait && d < icbc_routerfile_num_clusters(r->rf); d++)
        rt_queue_fail(&r->trunk_wait[d]);
    free(r->trunk_wait);
    r->trunk_wait = NULL;
    free(r->reach);
    r->reach = NULL;
    free(r->trunks);
    r->trunks = NULL;
    if (r->listener)
        bt_listener_destroy(r->listener);
    r->listener = NULL;
}
