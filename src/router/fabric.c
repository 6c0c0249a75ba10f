/*
 * Fabric side of the router: compute processes connect over UCX, are
 * challenged, register with a proof of the key, and send route messages.
 *
 *   connect   -> CHALLENGE (32-byte random nonce)
 *   REGISTER  <- HMAC(key, nonce, job, rank); checked, then REGISTER_ACK
 *                (F_OK) and (job, rank) -> process in the registry
 *   anything else first, a wrong proof, or nothing within register_ms:
 *                REGISTER_ACK without F_OK where possible, close, "refused"
 *   MSG       <- forwarded (forward.c) after checking its source is the
 *                registered (job, rank) of this endpoint
 *   DEREGISTER <- forget (job, rank); endpoint error: forget, fail its queue
 *   CLUSTER_STATE -> to every registered process when another cluster is
 *                lost or back (trunk.c), and after REGISTER_ACK for each
 *                cluster lost at the time
 *   CREDIT    -> eager window bytes back to the process, once a quarter of
 *                its window was handed on: UCX delivers eager data whether
 *                or not the router has room, so each process keeps what it
 *                sent and was not credited within the window REGISTER_ACK
 *                gave it, which bounds what it makes the router hold;
 *                and to every registered process at least every
 *                MX_ROUTER_KEEPALIVE_MS (with what is due, maybe 0): a
 *                process that hears nothing from its router for much longer
 *                knows it is gone or hung, even with no connection error
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "icbc_bytes.h"
#include "icbc_log.h"
#include "router_int.h"
#include "rt_admit.h"

rt_peer_t *rt_lookup(icbc_router_t *r, uint64_t job, uint32_t rank)
{
    return icbc_hmap_get(&r->registry, job, rank);
}

static void send_control(rt_peer_t *p, uint8_t type, uint16_t flags, const void *inner,
                         size_t inner_len)
{
    icbc_router_t *r = p->r;
    /* the longest inner header it sends: REGISTER_ACK's with a CPU list */
    uint8_t hdr[ICBC_ROUTE_HDR_SIZE + ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX];
    icbc_route_hdr_t h = {
        .type = type,
        .flags = flags,
        .src_cluster = (uint16_t) r->cluster,
        .dst_cluster = (uint16_t) r->cluster,
        .dst_rank = p->rank,
        .job = p->job,
        .inner_len = (uint32_t) inner_len,
    };
    rt_msg_t *m;

    icbc_route_hdr_pack(&h, hdr);
    if (inner_len)
        memcpy(hdr + ICBC_ROUTE_HDR_SIZE, inner, inner_len);
    m = rt_msg_new(r, hdr, ICBC_ROUTE_HDR_SIZE + inner_len, &h, FROM_ROUTER);
    if (m == NULL)
        return;
    m->state = MSG_SENDING;
    if (mx_server_send(p->mp, m->hdr, m->hdr_len, NULL, 0, rt_on_sent, m) != ICBC_OK)
        rt_msg_free(m);
}

/* P sends through us at RATE bits/s from now on: the trunks are paced at
 * the sum of the registered processes' rates (trunk.c). */
static void set_pace(rt_peer_t *p, uint64_t rate)
{
    icbc_router_t *r = p->r;

    if (rate == p->pace)
        return;
    r->pace_sum = r->pace_sum - p->pace + rate;
    p->pace = rate;
    rt_trunk_pacing(r);
}

static void unregister(rt_peer_t *p)
{
    icbc_router_t *r = p->r;

    if (p->registered && rt_lookup(r, p->job, p->rank) == p)
        icbc_hmap_del(&r->registry, p->job, p->rank);
    p->registered = 0;
    r->st.registered = r->registry.count;
    set_pace(p, 0);
}

/* Forgets P: out of every list, its undelivered messages answered. */
static void peer_free(rt_peer_t *p)
{
    unregister(p);
    icbc_list_del(&p->unreg_link);
    icbc_list_del(&p->all_link);
    icbc_list_del(&p->out.pump_link);
    icbc_list_del(&p->credit_link);
    rt_queue_fail(&p->out);
    free(p);
}

static void refuse(rt_peer_t *p, int answer, const char *why)
{
    icbc_router_t *r = p->r;

    icbc_warn("router %s: refused fabric connection from %s: %s", r->name, mx_peer_addr_text(p->mp),
              why);
    r->st.refused_fabric++;
    if (answer)
        send_control(p, ICBC_ROUTE_REGISTER_ACK, 0, NULL, 0);
    mx_server_close(p->mp, 1);
    peer_free(p);
}

static void on_connect(mx_peer_t *mp, void *arg)
{
    icbc_router_t *r = arg;
    rt_peer_t *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        mx_server_close(mp, 0);
        return;
    }
    p->r = r;
    p->mp = mp;
    rt_queue_init(&p->out, Q_PEER, p);
    icbc_list_init(&p->unreg_link);
    icbc_list_init(&p->credit_link);
    icbc_list_push(&r->peers, &p->all_link);
    mx_peer_set_arg(mp, p);
    if (getrandom(p->nonce, sizeof(p->nonce), 0) != sizeof(p->nonce)) {
        icbc_error("router %s: getrandom failed; closing %s", r->name, mx_peer_addr_text(mp));
        mx_server_close(mp, 0);
        peer_free(p);
        return;
    }
    p->deadline = icbc_clock_ms() + r->cfg.register_ms;
    icbc_list_push(&r->unregistered, &p->unreg_link);
    icbc_debug("router %s: process connected from %s", r->name, mx_peer_addr_text(mp));
    send_control(p, ICBC_ROUTE_CHALLENGE, 0, p->nonce, sizeof(p->nonce));
}

/* Queued behind the messages already on their way to the process, so that
 * what arrived from that cluster before it was lost is delivered first. */
static void cluster_state_to(rt_peer_t *p, int cluster, int reachable)
{
    icbc_router_t *r = p->r;
    uint8_t hdr[ICBC_ROUTE_HDR_SIZE];
    icbc_route_hdr_t h = {
        .type = ICBC_ROUTE_CLUSTER_STATE,
        .flags = reachable ? ICBC_ROUTE_F_OK : 0,
        .src_cluster = (uint16_t) cluster,
        .dst_cluster = (uint16_t) r->cluster,
        .dst_rank = p->rank,
        .job = p->job,
    };
    rt_msg_t *m;

    icbc_route_hdr_pack(&h, hdr);
    m = rt_msg_new(r, hdr, sizeof(hdr), &h, FROM_ROUTER);
    if (m == NULL) {
        icbc_error("router %s: out of memory; job %llu rank %u not told about cluster %d", r->name,
                   (unsigned long long) p->job, p->rank, cluster);
        return;
    }
    rt_enqueue(&p->out, m);
    rt_pump_later(r, &p->out);
}

/* The statistics of (JOB, RANK), made at its first registration; NULL
 * beyond PSTATS_MAX processes (or out of memory): not counted. */
#define PSTATS_MAX 65536

static rt_pstat_t *pstat_of(icbc_router_t *r, uint64_t job, uint32_t rank)
{
    rt_pstat_t *ps = icbc_hmap_get(&r->pstat_map, job, rank);

    if (ps || r->pstat_map.count >= PSTATS_MAX || (ps = calloc(1, sizeof(*ps))) == NULL)
        return ps;
    ps->job = job;
    ps->rank = rank;
    if (icbc_hmap_put(&r->pstat_map, job, rank, ps) != ICBC_OK) {
        free(ps);
        return NULL;
    }
    icbc_list_push(&r->pstats, &ps->link);
    return ps;
}

/* A REGISTER that rt_fabric_admit found well-formed and proven. */
static void do_register(rt_peer_t *p, const icbc_route_hdr_t *rh)
{
    icbc_router_t *r = p->r;
    rt_peer_t *old;

    old = rt_lookup(r, rh->job, rh->src_rank);
    if (old && old != p) {
        icbc_info("router %s: job %llu rank %u registered again from %s (was %s)", r->name,
                  (unsigned long long) rh->job, rh->src_rank, mx_peer_addr_text(p->mp),
                  mx_peer_addr_text(old->mp));
        old->registered = 0;
    }
    if (icbc_hmap_put(&r->registry, rh->job, rh->src_rank, p) != ICBC_OK) {
        refuse(p, 1, "out of memory");
        return;
    }
    p->registered = 1;
    mx_server_trust_peer(p->mp);
    p->job = rh->job;
    p->rank = rh->src_rank;
    p->ps = pstat_of(r, p->job, p->rank);
    icbc_list_del(&p->unreg_link);
    r->st.registered = r->registry.count;
    icbc_debug("router %s: job %llu rank %u registered from %s", r->name,
               (unsigned long long) p->job, p->rank, mx_peer_addr_text(p->mp));
    uint8_t ack[ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX];
    send_control(
        p, ICBC_ROUTE_REGISTER_ACK, ICBC_ROUTE_F_OK, ack,
        icbc_route_ack_pack(r->cfg.eager_window, r->bind.bound ? r->bind.cpus : NULL, ack));
    for (size_t d = 0; r->reach && d < icbc_routerfile_num_clusters(r->rf); d++)
        if (r->reach[d].announced)
            cluster_state_to(p, (int) d, 0);
}

void rt_fabric_credit(icbc_router_t *r, uint64_t job, uint32_t rank, size_t n)
{
    rt_peer_t *p = r->destroying || n == 0 ? NULL : rt_lookup(r, job, rank);

    if (p == NULL)
        return; /* nothing owed, or gone: nobody waits for it */
    p->credit_due += n;
    if (p->credit_due >= r->cfg.eager_window / 4 && !icbc_list_linked(&p->credit_link))
        icbc_list_push(&r->credit_pending, &p->credit_link);
}

/* What is due to P (maybe 0 bytes), now. */
static void send_credit(rt_peer_t *p)
{
    uint8_t count[ICBC_ROUTE_COUNT_SIZE];

    icbc_list_del(&p->credit_link);
    icbc_put64(count, p->credit_due);
    p->credit_due = 0;
    send_control(p, ICBC_ROUTE_CREDIT, 0, count, sizeof(count));
}

void rt_fabric_send_credits(icbc_router_t *r)
{
    while (!icbc_list_empty(&r->credit_pending))
        send_credit(ICBC_CONTAINER(r->credit_pending.next, rt_peer_t, credit_link));
}

void rt_fabric_cluster_state(icbc_router_t *r, int cluster, int reachable)
{
    for (icbc_list_t *e = r->peers.next; e != &r->peers; e = e->next) {
        rt_peer_t *p = ICBC_CONTAINER(e, rt_peer_t, all_link);
        if (p->registered)
            cluster_state_to(p, cluster, reachable);
    }
}

static void pull_go(rt_waiter_t *w)
{
    rt_msg_t *m = ICBC_CONTAINER(w, rt_msg_t, wait);
    icbc_router_t *r = m->r;
    void *desc = m->desc;

    r->pulls++;
    m->charged = m->len;
    m->kind = PAY_POOL;
    m->payload = malloc(m->len);
    m->desc = NULL;
    r->st.descs_held--;
    m->state = MSG_PULLING;
    if (m->payload == NULL ||
        mx_server_recv_data(r->fabric, desc, m->payload, m->len, rt_on_pulled, m) != ICBC_OK) {
        if (m->payload == NULL)
            mx_server_data_release(r->fabric, desc);
        rt_on_pulled(m, ICBC_ERR_NO_MEMORY);
    }
}

/* A MSG from a registered process: queue it for its output. Runs inside
 * the UCX receive callback, so nothing is sent or pulled from here. */
static int forward(rt_peer_t *p, const mx_recv_t *rcv, const icbc_route_hdr_t *rh)
{
    icbc_router_t *r = p->r;
    size_t credit = rcv->rndv ? 0 : rcv->hdr_len + rcv->len;
    rt_queue_t *q;
    rt_msg_t *m;

    if (rh->job != p->job || rh->src_rank != p->rank || rh->src_cluster != r->cluster) {
        icbc_debug("router %s: MSG from %s names another source; dropped", r->name,
                   mx_peer_addr_text(p->mp));
        return 0; /* not from a process of ours: no credit either */
    }
    q = rt_route(r, rh);
    if (q == NULL) {
        rt_unreachable(r, rh,
                       rh->dst_cluster == r->cluster                            ? "not registered"
                       : rh->dst_cluster >= icbc_routerfile_num_clusters(r->rf) ? "no such cluster"
                                                                                : "trunk down");
        rt_fabric_credit(r, p->job, p->rank, credit);
        return 0;
    }
    m = rt_msg_new(r, rcv->hdr, rcv->hdr_len, rh, FROM_FABRIC);
    if (m == NULL) {
        rt_unreachable(r, rh, "out of memory");
        rt_fabric_credit(r, p->job, p->rank, credit);
        return 0;
    }
    m->len = rcv->len;
    m->credit = credit;
    if (p->ps) {
        p->ps->msgs_from++;
        p->ps->bytes_from += rcv->len;
    }
    rt_enqueue(q, m);
    if (rcv->len == 0) {
        rt_pump_later(r, q);
        return 0;
    }
    if (!rcv->rndv) {
        m->kind = PAY_UCX;
        m->payload = rcv->data;
        m->charged = rcv->len;
        rt_mem_charge_eager(r, rcv->len);
        rt_pump_later(r, q);
        return 1;
    }
    m->state = MSG_WAIT_MEM;
    m->desc = rcv->data;
    if (++r->st.descs_held > r->st.peak_descs_held)
        r->st.peak_descs_held = r->st.descs_held;
    m->wait.need = rcv->len;
    m->wait.go = pull_go;
    m->wait.pull = 1;
    rt_mem_wait(r, &m->wait); /* served by rt_mem_kick from the loop */
    return 1;
}

static int on_recv(mx_peer_t *mp, const mx_recv_t *rcv, void *arg)
{
    rt_peer_t *p = mx_peer_arg(mp);
    icbc_route_hdr_t rh;
    const char *why;

    if (p == NULL)
        return 0;
    rt_admit_ctx_t ctx = {
        .registered = p->registered,
        .awaiting_register = icbc_list_linked(&p->unreg_link),
        .cluster = (uint16_t) p->r->cluster,
        .key = p->r->key,
        .keylen = p->r->keylen,
        .nonce = p->nonce,
    };
    switch (rt_fabric_admit(&ctx, rcv->hdr, rcv->hdr_len, rcv->len, &rh, &why)) {
    case RT_ADMIT_FORWARD: return forward(p, rcv, &rh);
    case RT_ADMIT_REGISTER: do_register(p, &rh); return 0;
    case RT_ADMIT_REFUSE: refuse(p, 0, why); return 0;
    case RT_ADMIT_REFUSE_ANSWER: refuse(p, 1, why); return 0;
    case RT_ADMIT_PACE:
        set_pace(p, icbc_get64((const uint8_t *) rcv->hdr + ICBC_ROUTE_HDR_SIZE));
        return 0;
    case RT_ADMIT_DEREGISTER:
        icbc_debug("router %s: job %llu rank %u deregistered", p->r->name,
                   (unsigned long long) p->job, p->rank);
        unregister(p);
        return 0;
    case RT_ADMIT_DROP:
    case RT_ADMIT_UNEXPECTED:
        icbc_debug("router %s: %s from %s dropped", p->r->name, why, mx_peer_addr_text(mp));
        return 0;
    case RT_ADMIT_IGNORE: return 0;
    }
    return 0;
}

static void on_lost(mx_peer_t *mp, icbc_status_t status, void *arg)
{
    rt_peer_t *p = mx_peer_arg(mp);

    if (p == NULL)
        return;
    if (p->registered)
        icbc_info("router %s: job %llu rank %u (%s) gone", p->r->name, (unsigned long long) p->job,
                  p->rank, mx_peer_addr_text(mp));
    peer_free(p);
}

const mx_server_cbs_t rt_fabric_cbs = {
    .on_connect = on_connect,
    .on_recv = on_recv,
    .on_lost = on_lost,
};

void rt_fabric_timers(icbc_router_t *r, double now, double *next)
{
    while (!icbc_list_empty(&r->unregistered)) {
        rt_peer_t *p = ICBC_CONTAINER(r->unregistered.next, rt_peer_t, unreg_link);
        if (p->deadline > now) {
            if (p->deadline < *next)
                *next = p->deadline;
            break;
        }
        refuse(p, 0, "no REGISTER in time");
    }
    /* Connections UCX holds for hosts without a registered process: each
     * is shut down once it is as old as the registration deadline. */
    if (now >= r->next_guard) {
        double period = r->cfg.register_ms / 20.0;
        if (period > 250)
            period = 250;
        if (period < 10)
            period = 10;
        r->st.fabric_conns_closed +=
            mx_server_guard(r->fabric, r->cfg.register_ms, (size_t) r->cfg.max_unregistered);
        r->next_guard = now + period;
    }
    if (r->next_guard < *next)
        *next = r->next_guard;
    if (now >= r->next_keepalive) {
        for (icbc_list_t *e = r->peers.next; e != &r->peers; e = e->next) {
            rt_peer_t *p = ICBC_CONTAINER(e, rt_peer_t, all_link);
            if (p->registered)
                send_credit(p);
        }
        r->next_keepalive = now + MX_ROUTER_KEEPALIVE_MS;
    }
    if (r->next_keepalive < *next)
        *next = r->next_keepalive;
}

void rt_fabric_destroy(icbc_router_t *r)
{
    while (!icbc_list_empty(&r->peers)) {
        rt_peer_t *p = ICBC_CONTAINER(r->peers.next, rt_peer_t, all_link);
        peer_free(p);
    }
}
