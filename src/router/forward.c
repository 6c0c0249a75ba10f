/*
 * Forwarding: output queues, the memory bound and UNREACHABLE.
 *
 * Every message waits in the FIFO queue of its output (a trunk stream or a
 * registered process); only the queue's head is handed to the transport,
 * and only once its payload is in memory, so each queue keeps arrival order
 * even when a rendezvous payload is still being pulled.
 *
 * Memory: payload bytes held by the router are charged against max_memory.
 * Pulls of rendezvous payloads and reads of trunk payloads wait (FIFO) until
 * their bytes fit; eager UCX data has already arrived and is charged as it
 * comes. If nothing of ours is pooled, one request is let through even if
 * eager data alone fills the bound, so the router never stalls for good.
 */
#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"
#include "router_int.h"

void rt_queue_init(rt_queue_t *q, rt_queue_kind_t kind, void *owner)
{
    icbc_list_init(&q->msgs);
    icbc_list_init(&q->pump_link);
    q->bytes = 0;
    q->kind = kind;
    q->owner = owner;
}

rt_msg_t *rt_msg_new(icbc_router_t *r, const void *hdr, size_t hdr_len, const icbc_route_hdr_t *rh,
                     rt_origin_t origin)
{
    rt_msg_t *m = malloc(sizeof(*m) + hdr_len);

    if (m == NULL)
        return NULL;
    memset(m, 0, sizeof(*m));
    icbc_list_init(&m->qlink);
    icbc_list_init(&m->wait.link);
    m->r = r;
    m->rh = *rh;
    m->hdr = (uint8_t *) (m + 1);
    m->hdr_len = hdr_len;
    memcpy(m->hdr, hdr, hdr_len);
    m->kind = PAY_NONE;
    m->state = MSG_READY;
    m->origin = origin;
    return m;
}

void rt_msg_free(rt_msg_t *m)
{
    icbc_router_t *r = m->r;

    if (m->q) {
        icbc_list_del(&m->qlink);
        m->q->bytes -= m->len;
        m->q = NULL;
    }
    icbc_list_del(&m->wait.link);
    if (m->desc) {
        mx_server_data_release(r->fabric, m->desc);
        r->st.descs_held--;
    }
    if (m->kind == PAY_UCX)
        mx_server_data_release(r->fabric, m->payload);
    else if (m->kind == PAY_POOL)
        free(m->payload);
    size_t charged = m->charged;
    int pool = m->kind == PAY_POOL;
    if (m->credit)
        rt_fabric_credit(r, m->rh.job, m->rh.src_rank, m->credit);
    free(m);
    if (charged)
        rt_mem_release(r, charged, pool);
}

void rt_enqueue(rt_queue_t *q, rt_msg_t *m)
{
    if (q->kind == Q_WAIT)
        m->arrived = icbc_clock_ms();
    m->q = q;
    m->to_trunk = q->kind == Q_STREAM;
    q->bytes += m->len;
    icbc_list_push(&q->msgs, &m->qlink);
}

static void count_done(icbc_router_t *r, const rt_msg_t *m)
{
    if (m->origin == FROM_ROUTER)
        return;
    if (m->to_trunk) {
        r->st.msgs_out++;
        r->st.bytes_out += m->len;
    } else if (m->origin == FROM_TRUNK) {
        r->st.msgs_in++;
        r->st.bytes_in += m->len;
    } else {
        r->st.msgs_local++;
        r->st.bytes_local += m->len;
    }
}

/* Transport completion of a message handed on by rt_pump. */
void rt_on_sent(void *arg, icbc_status_t status)
{
    rt_msg_t *m = arg;

    if (status == ICBC_OK)
        count_done(m->r, m);
    else
        rt_unreachable(m->r, &m->rh, m->to_trunk ? "trunk lost" : "destination lost");
    rt_msg_free(m);
}

void rt_pump(rt_queue_t *q)
{
    if (q->kind == Q_WAIT)
        return; /* trunk_check_up moves them on */
    while (!icbc_list_empty(&q->msgs)) {
        rt_msg_t *m = ICBC_CONTAINER(q->msgs.next, rt_msg_t, qlink);
        icbc_status_t st;

        if (m->state != MSG_READY)
            break;
        if (q->kind == Q_STREAM) {
            rt_stream_t *s = q->owner;
            if (s->busy || !s->ready)
                break;
        }
        if (q->kind == Q_STREAM) {
            rt_trunk_t *t = ((rt_stream_t *) q->owner)->t;
            t->msgs_out++;
            t->bytes_out += m->len;
        } else if (q->kind == Q_PEER) {
            rt_peer_t *p = q->owner;
            if (p->ps) {
                p->ps->msgs_to++;
                p->ps->bytes_to += m->len;
            }
        }
        icbc_list_del(&m->qlink);
        q->bytes -= m->len;
        m->q = NULL;
        m->state = MSG_SENDING;
        if (q->kind == Q_STREAM) {
            st = rt_stream_send(q->owner, m);
            if (st == ICBC_ERR_BUSY) {
                /* Back to the head; on_writable pumps again. */
                icbc_list_t *first = q->msgs.next;
                m->state = MSG_READY;
                m->q = q;
                q->bytes += m->len;
                m->qlink.prev = &q->msgs;
                m->qlink.next = first;
                first->prev = &m->qlink;
                q->msgs.next = &m->qlink;
                ((rt_stream_t *) q->owner)->busy = 1;
                break;
            }
        } else {
            rt_peer_t *p = q->owner;
            st = mx_server_send(p->mp, m->hdr, m->hdr_len, m->payload, m->len, rt_on_sent, m);
        }
        if (st != ICBC_OK) {
            rt_unreachable(m->r, &m->rh, "send failed");
            rt_msg_free(m);
        }
    }
}

void rt_pump_later(icbc_router_t *r, rt_queue_t *q)
{
    if (!icbc_list_linked(&q->pump_link))
        icbc_list_push(&r->to_pump, &q->pump_link);
}

void rt_pump_deferred(icbc_router_t *r)
{
    while (!icbc_list_empty(&r->to_pump)) {
        rt_queue_t *q = ICBC_CONTAINER(r->to_pump.next, rt_queue_t, pump_link);
        icbc_list_del(&q->pump_link);
        rt_pump(q);
    }
    rt_fabric_send_credits(r);
}

void rt_msg_fail(rt_msg_t *m, const char *why)
{
    if (m->q) {
        icbc_list_del(&m->qlink);
        m->q->bytes -= m->len;
        m->q = NULL;
    }
    if (m->state == MSG_PULLING)
        return; /* rt_on_pulled finishes it */
    rt_unreachable(m->r, &m->rh, why);
    rt_msg_free(m);
}

void rt_queue_fail(rt_queue_t *q)
{
    while (!icbc_list_empty(&q->msgs))
        rt_msg_fail(ICBC_CONTAINER(q->msgs.next, rt_msg_t, qlink),
                    q->kind == Q_PEER ? "destination lost" : "trunk down");
}

rt_queue_t *rt_route(icbc_router_t *r, const icbc_route_hdr_t *rh)
{
    if (rh->dst_cluster == r->cluster) {
        rt_peer_t *p = rt_lookup(r, rh->job, rh->dst_rank);
        return p ? &p->out : NULL;
    } else {
        rt_stream_t *s = rt_trunk_pick(r, rh);
        if (s)
            return &s->q;
        /* No trunk up: wait for one, if this router has trunks there. */
        if (r->cfg.trunk_wait_ms > 0 && rh->dst_cluster < icbc_routerfile_num_clusters(r->rf))
            for (int i = 0; i < r->ntrunks; i++)
                if (r->trunks[i].cluster == rh->dst_cluster)
                    return &r->trunk_wait[rh->dst_cluster];
        return NULL;
    }
}

/* Log an unreachable destination once per (job, cluster, rank); the set is
 * bounded, after which further ones are counted only. */
#define UNREACH_LOG_MAX 65536

static void log_unreachable(icbc_router_t *r, const icbc_route_hdr_t *lost, const char *why)
{
    uint64_t k2 = (uint64_t) lost->dst_cluster << 32 | lost->dst_rank;

    if (icbc_hmap_get(&r->unreach_logged, lost->job, k2))
        return;
    if (r->unreach_logged.count >= UNREACH_LOG_MAX)
        return;
    icbc_hmap_put(&r->unreach_logged, lost->job, k2, (void *) 1);
    icbc_warn("router %s: job %llu rank %u of cluster %u unreachable (%s); message from "
              "rank %u of cluster %u dropped, source told",
              r->name, (unsigned long long) lost->job, lost->dst_rank, lost->dst_cluster, why,
              lost->src_rank, lost->src_cluster);
}

void rt_unreachable(icbc_router_t *r, const icbc_route_hdr_t *lost, const char *why)
{
    uint8_t hdr[2 * ICBC_ROUTE_HDR_SIZE];
    icbc_route_hdr_t uh = {
        .type = ICBC_ROUTE_UNREACHABLE,
        .src_cluster = lost->dst_cluster,
        .dst_cluster = lost->src_cluster,
        .src_rank = lost->dst_rank,
        .dst_rank = lost->src_rank,
        .job = lost->job,
        .inner_len = ICBC_ROUTE_HDR_SIZE,
    };
    rt_queue_t *q;
    rt_msg_t *m;

    if (lost->type != ICBC_ROUTE_MSG || r->destroying)
        return; /* never answer an answer */
    r->st.unreachable++;
    log_unreachable(r, lost, why);
    icbc_route_hdr_pack(&uh, hdr);
    icbc_route_hdr_pack(lost, hdr + ICBC_ROUTE_HDR_SIZE);
    q = rt_route(r, &uh);
    if (q == NULL) {
        icbc_debug("router %s: UNREACHABLE for job %llu rank %u has no way back", r->name,
                   (unsigned long long) uh.job, uh.dst_rank);
        return;
    }
    m = rt_msg_new(r, hdr, sizeof(hdr), &uh, FROM_ROUTER);
    if (m == NULL)
        return;
    rt_enqueue(q, m);
    rt_pump(q);
}

/* ---- memory bound ------------------------------------------------------ */

static void note_peak(icbc_router_t *r)
{
    r->st.buffered = r->charged;
    if (r->charged > r->st.peak_buffered)
        r->st.peak_buffered = r->charged;
}

/* With cfg.max_rss: the process's resident bytes, read at most once a
 * millisecond (and after a large buffer was freed), plus what was granted
 * since. */
static size_t rss_estimate(icbc_router_t *r)
{
    double now = icbc_clock_ms();

    if (now - r->rss_at >= 1.0) {
        size_t rss = rt_resident_bytes();
        if (rss) {
            r->rss_read = rss;
            r->rss_granted = 0;
            r->rss_at = now;
        }
    }
    return r->rss_read + r->rss_granted;
}

/* Payloads are taken while the resident size stays a sixteenth (at least
 * 1 MiB) below cfg.max_rss: the rest is room for what UCX and the sockets
 * allocate on their own while the payloads move (fragments, pools). */
static size_t rss_reserve(const icbc_router_t *r)
{
    size_t q = r->cfg.max_rss / 16;
    return q > (1u << 20) ? q : (1u << 20);
}

static int mem_fits(icbc_router_t *r, size_t n)
{
    if (r->charged_pool == 0)
        return 1; /* never stall for good */
    if (r->charged + n > r->cfg.max_memory)
        return 0;
    return r->cfg.max_rss == 0 || rss_estimate(r) + n + rss_reserve(r) <= r->cfg.max_rss;
}

static void mem_take(icbc_router_t *r, size_t n)
{
    r->charged += n;
    r->charged_pool += n;
    r->rss_granted += n;
    note_peak(r);
}

/* A pull for a trunk stream that already has --stream-queue bytes queued
 * waits: pulled, it would only sit in the router's memory. The sender's
 * window holds back what follows. */
static int pull_blocked(const rt_waiter_t *w)
{
    const rt_msg_t *m = ICBC_CONTAINER(w, rt_msg_t, wait);

    return m->q != NULL && m->q->kind == Q_STREAM && ((const rt_stream_t *) m->q->owner)->busy;
}

/* The waiter to serve next: the older of the first trunk reader and, while
 * fewer than max_pulls pulls are in flight, the first pull not blocked by
 * its stream. Pulls are bounded because a process's UCX serves all pulls of
 * a router at once: with dozens in flight every chunk completes late, and
 * the trunk idles until the first one is whole. */
static rt_waiter_t *first_waiter(icbc_router_t *r)
{
    rt_waiter_t *a = icbc_list_empty(&r->mem_waiters)
                         ? NULL
                         : ICBC_CONTAINER(r->mem_waiters.next, rt_waiter_t, link);
    rt_waiter_t *b = NULL;

    if (r->pulls < r->cfg.max_pulls)
        for (icbc_list_t *e = r->pull_waiters.next; e != &r->pull_waiters && b == NULL; e = e->next)
            if (!pull_blocked(ICBC_CONTAINER(e, rt_waiter_t, link)))
                b = ICBC_CONTAINER(e, rt_waiter_t, link);

    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    return a->seq < b->seq ? a : b;
}

int rt_mem_try(icbc_router_t *r, size_t n)
{
    if (first_waiter(r) != NULL || !mem_fits(r, n))
        return 0;
    mem_take(r, n);
    return 1;
}

void rt_mem_charge_eager(icbc_router_t *r, size_t n)
{
    r->charged += n;
    note_peak(r);
}

void rt_mem_release(icbc_router_t *r, size_t n, int pool)
{
    r->charged -= n;
    if (pool)
        r->charged_pool -= n;
    if (pool && n >= (64 << 10))
        r->rss_at = 0; /* an mmap'ed buffer went back */
    note_peak(r);
    if (first_waiter(r) != NULL)
        rt_mem_kick(r);
}

void rt_mem_wait(icbc_router_t *r, rt_waiter_t *w)
{
    w->seq = ++r->wait_seq;
    icbc_list_push(w->pull ? &r->pull_waiters : &r->mem_waiters, &w->link);
}

void rt_mem_kick(icbc_router_t *r)
{
    if (r->destroying)
        return;
    if (r->kicking) {
        r->kick_again = 1;
        return;
    }
    r->kicking = 1;
    do {
        r->kick_again = 0;
        for (;;) {
            rt_waiter_t *w = first_waiter(r);
            if (w == NULL || !mem_fits(r, w->need))
                break;
            icbc_list_del(&w->link);
            mem_take(r, w->need);
            w->go(w);
        }
    } while (r->kick_again);
    r->kicking = 0;
}

void rt_on_pulled(void *arg, icbc_status_t status)
{
    rt_msg_t *m = arg;

    m->r->pulls--;
    if (first_waiter(m->r) != NULL)
        rt_mem_kick(m->r);

    if (status != ICBC_OK || m->q == NULL) {
        rt_unreachable(m->r, &m->rh, status != ICBC_OK ? "source lost" : "destination lost");
        rt_msg_free(m);
        return;
    }
    m->state = MSG_READY;
    rt_pump(m->q);
}
