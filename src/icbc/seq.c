/* Numbered ordered lanes; see icbc_seq.h. */
#include "icbc_seq.h"
#include "icbc_freelist.h"

#include <stdlib.h>
#include <string.h>

/* Numbers run 1 .. 2^32 - 1 and wrap to 1: a cycle of SEQ_CYCLE values. */
#define SEQ_CYCLE 0xffffffffull
/* The number before 1: what "nothing yet" is as a predecessor. */
#define SEQ_NONE UINT32_MAX

typedef struct {
    /* sender */
    uint32_t next;  /* number of the next message */
    uint32_t acked; /* highest acknowledged */
    icbc_list_t kept;
    size_t nkept;
    /* receiver */
    uint32_t delivered;   /* highest delivered in order */
    uint32_t ack_sent;    /* highest acknowledged to the peer */
    double unacked_since; /* first delivery not acknowledged; valid while ack_link is linked */
    icbc_list_t held;     /* early messages, in number order */
    icbc_list_t ack_link;
} pair_t;

/* A kept or held message of at most this many bytes, its header and
 * payload included (headers, RTS, CTS, small messages), comes from the free
 * list: none is allocated per message in steady state. */
#define SEQ_SMALL_BYTES 640

struct icbc_seq {
    icbc_seq_config_t cfg;
    pair_t *pairs;
    icbc_list_t acks_due; /* pairs with a delivery not acknowledged */
    icbc_list_t retired;  /* acknowledged while a send of them is out */
    icbc_seq_stats_t st;
    icbc_freelist_t small;
};

static uint32_t seq_next(uint32_t s)
{
    return s == UINT32_MAX ? 1 : s + 1;
}

static uint32_t seq_prev(uint32_t s)
{
    return s == 1 ? UINT32_MAX : s - 1;
}

/* Steps from A forward to B along the cycle. */
static uint64_t seq_dist(uint32_t a, uint32_t b)
{
    return ((uint64_t) b - 1 + SEQ_CYCLE - ((uint64_t) a - 1)) % SEQ_CYCLE;
}

static pair_t *pair_of(icbc_seq_t *q, int peer)
{
    return peer >= 0 && peer < q->cfg.npeers ? &q->pairs[peer] : NULL;
}

static int msg_is_small(size_t hdr_len, size_t len)
{
    return sizeof(icbc_seq_msg_t) + hdr_len + len <= SEQ_SMALL_BYTES;
}

static void msg_free(icbc_seq_t *q, icbc_seq_msg_t *m)
{
    if (msg_is_small(m->hdr_len, m->len))
        icbc_freelist_put(&q->small, m);
    else
        free(m);
}

static icbc_seq_msg_t *msg_new(icbc_seq_t *q, int peer, uint32_t seq_no, const void *hdr,
                               size_t hdr_len, const void *payload, size_t len)
{
    icbc_seq_msg_t *m = msg_is_small(hdr_len, len) ? icbc_freelist_get(&q->small)
                                                   : malloc(sizeof(*m) + hdr_len + len);

    if (m == NULL)
        return NULL;
    memset(m, 0, sizeof(*m));
    icbc_list_init(&m->link);
    m->peer = peer;
    m->seq = seq_no;
    m->hdr = (uint8_t *) (m + 1);
    m->hdr_len = hdr_len;
    m->payload = m->hdr + hdr_len;
    m->len = len;
    if (hdr_len)
        memcpy(m->hdr, hdr, hdr_len);
    if (len)
        memcpy(m->payload, payload, len);
    return m;
}

icbc_status_t icbc_seq_create(const icbc_seq_config_t *config, icbc_seq_t **seq_p)
{
    icbc_seq_t *q;

    if (config->npeers < 0)
        return ICBC_ERR_INVALID;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return ICBC_ERR_NO_MEMORY;
    q->cfg = *config;
    icbc_freelist_init(&q->small, SEQ_SMALL_BYTES, 64);
    if (q->cfg.ack_every == 0)
        q->cfg.ack_every = 32;
    if (q->cfg.ack_delay <= 0)
        q->cfg.ack_delay = 0.002;
    if (q->cfg.max_ahead == 0)
        q->cfg.max_ahead = 1u << 20;
    q->pairs = calloc(config->npeers > 0 ? (size_t) config->npeers : 1, sizeof(pair_t));
    if (q->pairs == NULL) {
        free(q);
        return ICBC_ERR_NO_MEMORY;
    }
    for (int i = 0; i < config->npeers; i++) {
        pair_t *p = &q->pairs[i];
        p->next = q->cfg.first ? q->cfg.first : 1;
        p->acked = p->delivered = p->ack_sent = seq_prev(p->next);
        icbc_list_init(&p->kept);
        icbc_list_init(&p->held);
        icbc_list_init(&p->ack_link);
    }
    icbc_list_init(&q->acks_due);
    icbc_list_init(&q->retired);
    *seq_p = q;
    return ICBC_OK;
}

static void free_list(icbc_seq_t *q, icbc_list_t *l)
{
    while (!icbc_list_empty(l)) {
        icbc_seq_msg_t *m = ICBC_CONTAINER(l->next, icbc_seq_msg_t, link);
        icbc_list_del(&m->link);
        msg_free(q, m);
    }
}

void icbc_seq_destroy(icbc_seq_t *q)
{
    if (q == NULL)
        return;
    for (int i = 0; i < q->cfg.npeers; i++) {
        free_list(q, &q->pairs[i].kept);
        free_list(q, &q->pairs[i].held);
    }
    free_list(q, &q->retired);
    icbc_freelist_destroy(&q->small);
    free(q->pairs);
    free(q);
}

/* ---- sender -------------------------------------------------------------- */

icbc_seq_msg_t *icbc_seq_keep(icbc_seq_t *q, int peer, int route, const void *hdr, size_t hdr_len,
                              const void *payload, size_t len)
{
    pair_t *p = pair_of(q, peer);
    icbc_seq_msg_t *m;

    if (p == NULL || (m = msg_new(q, peer, p->next, hdr, hdr_len, payload, len)) == NULL)
        return NULL;
    p->next = seq_next(p->next);
    m->route = route;
    m->sends = 1;
    icbc_list_push(&p->kept, &m->link);
    p->nkept++;
    q->st.kept++;
    q->st.kept_bytes += hdr_len + len;
    return m;
}

/* M leaves the kept list: freed, or retired until its sends complete. */
static void unkeep(icbc_seq_t *q, pair_t *p, icbc_seq_msg_t *m)
{
    icbc_list_del(&m->link);
    p->nkept--;
    q->st.kept--;
    q->st.kept_bytes -= m->hdr_len + m->len;
    m->acked = 1;
    if (m->sends > 0)
        icbc_list_push(&q->retired, &m->link);
    else
        msg_free(q, m);
}

void icbc_seq_send_done(icbc_seq_t *q, icbc_seq_msg_t *m)
{
    if (m->sends > 0)
        m->sends--;
    if (m->acked && m->sends == 0) {
        icbc_list_del(&m->link);
        msg_free(q, m);
    }
}

icbc_status_t icbc_seq_acked(icbc_seq_t *q, int peer, uint32_t upto)
{
    pair_t *p = pair_of(q, peer);
    uint64_t span;

    if (p == NULL || upto == 0) {
        q->st.acks_invalid++;
        return ICBC_ERR_INVALID;
    }
    /* an old acknowledgement (overtaken by a later one) changes nothing */
    if (seq_dist(upto, p->acked) < (1ull << 31)) {
        q->st.acks_received++;
        return ICBC_OK;
    }
    /* the acknowledged range may only grow up to the last number sent */
    span = seq_dist(p->acked, upto);
    if (span > seq_dist(p->acked, seq_prev(p->next))) {
        q->st.acks_invalid++;
        return ICBC_ERR_INVALID;
    }
    q->st.acks_received++;
    while (!icbc_list_empty(&p->kept)) {
        icbc_seq_msg_t *m = ICBC_CONTAINER(p->kept.next, icbc_seq_msg_t, link);
        if (seq_dist(p->acked, m->seq) > span)
            break;
        unkeep(q, p, m);
    }
    p->acked = upto;
    return ICBC_OK;
}

int icbc_seq_for_each_kept(icbc_seq_t *q, int peer, int route,
                           int (*resend)(void *arg, icbc_seq_msg_t *m), void *arg)
{
    pair_t *p = pair_of(q, peer);
    int n = 0;

    if (p == NULL)
        return 0;
    for (icbc_list_t *e = p->kept.next, *next; e != &p->kept; e = next) {
        icbc_seq_msg_t *m = ICBC_CONTAINER(e, icbc_seq_msg_t, link);
        next = e->next;
        if (route >= 0 && m->route != route)
            continue;
        if (resend(arg, m))
            break;
        n++;
        q->st.resent++;
    }
    return n;
}

size_t icbc_seq_kept_count(const icbc_seq_t *q, int peer)
{
    return peer >= 0 && peer < q->cfg.npeers ? q->pairs[peer].nkept : 0;
}

/* ---- receiver ------------------------------------------------------------ */

static void count_delivered(icbc_seq_t *q, pair_t *p, uint32_t seq_no, double now)
{
    p->delivered = seq_no;
    q->st.delivered++;
    if (!icbc_list_linked(&p->ack_link)) {
        p->unacked_since = now;
        icbc_list_push(&q->acks_due, &p->ack_link);
    }
}

icbc_seq_arrival_t icbc_seq_arrived(icbc_seq_t *q, int peer, uint32_t seq_no, double now)
{
    pair_t *p = pair_of(q, peer);
    uint64_t d;

    if (p == NULL || seq_no == 0) {
        q->st.invalid++;
        return ICBC_SEQ_INVALID;
    }
    d = seq_dist(p->delivered, seq_no);
    if (d == 1) {
        count_delivered(q, p, seq_no, now);
        return ICBC_SEQ_DELIVER;
    }
    if (d == 0 || SEQ_CYCLE - d <= (1ull << 31)) {
        q->st.duplicates++;
        return ICBC_SEQ_DUPLICATE;
    }
    if (d <= q->cfg.max_ahead)
        return ICBC_SEQ_EARLY;
    q->st.invalid++;
    return ICBC_SEQ_INVALID;
}

icbc_status_t icbc_seq_hold(icbc_seq_t *q, int peer, uint32_t seq_no, const void *hdr,
                            size_t hdr_len, const void *payload, size_t len)
{
    pair_t *p = pair_of(q, peer);
    icbc_list_t *at;
    icbc_seq_msg_t *m;
    uint64_t d;

    if (p == NULL)
        return ICBC_ERR_INVALID;
    d = seq_dist(p->delivered, seq_no);
    /* the first held message further ahead: the new one goes before it */
    for (at = p->held.next; at != &p->held; at = at->next) {
        uint64_t e = seq_dist(p->delivered, ICBC_CONTAINER(at, icbc_seq_msg_t, link)->seq);
        if (e == d) {
            q->st.duplicates++;
            return ICBC_OK;
        }
        if (e > d)
            break;
    }
    m = msg_new(q, peer, seq_no, hdr, hdr_len, payload, len);
    if (m == NULL)
        return ICBC_ERR_NO_MEMORY;
    icbc_list_push(at, &m->link); /* before AT */
    q->st.held++;
    q->st.held_now++;
    return ICBC_OK;
}

icbc_seq_msg_t *icbc_seq_ready(icbc_seq_t *q, int peer, double now)
{
    pair_t *p = pair_of(q, peer);
    icbc_seq_msg_t *m;

    if (p == NULL || icbc_list_empty(&p->held))
        return NULL;
    m = ICBC_CONTAINER(p->held.next, icbc_seq_msg_t, link);
    if (m->seq != seq_next(p->delivered))
        return NULL;
    icbc_list_del(&m->link);
    q->st.held_now--;
    count_delivered(q, p, m->seq, now);
    return m;
}

void icbc_seq_release(icbc_seq_t *q, icbc_seq_msg_t *m)
{
    icbc_list_del(&m->link);
    msg_free(q, m);
}

int icbc_seq_take_ack(icbc_seq_t *q, double now, int *peer, uint32_t *upto)
{
    for (icbc_list_t *e = q->acks_due.next; e != &q->acks_due; e = e->next) {
        pair_t *p = ICBC_CONTAINER(e, pair_t, ack_link);
        if (seq_dist(p->ack_sent, p->delivered) < q->cfg.ack_every &&
            now - p->unacked_since < q->cfg.ack_delay)
            continue;
        icbc_list_del(&p->ack_link);
        p->ack_sent = p->delivered;
        *peer = (int) (p - q->pairs);
        *upto = p->delivered;
        q->st.acks_sent++;
        return 1;
    }
    return 0;
}

/* ---- both ---------------------------------------------------------------- */

void icbc_seq_peer_reset(icbc_seq_t *q, int peer)
{
    pair_t *p = pair_of(q, peer);

    if (p == NULL)
        return;
    while (!icbc_list_empty(&p->kept))
        unkeep(q, p, ICBC_CONTAINER(p->kept.next, icbc_seq_msg_t, link));
    while (!icbc_list_empty(&p->held)) {
        icbc_seq_msg_t *m = ICBC_CONTAINER(p->held.next, icbc_seq_msg_t, link);
        q->st.held_now--;
        icbc_seq_release(q, m);
    }
    icbc_list_del(&p->ack_link);
}

void icbc_seq_stats(const icbc_seq_t *q, icbc_seq_stats_t *stats)
{
    *stats = q->st;
}
