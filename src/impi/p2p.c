/* Point-to-point messages between IMPI hosts; see impi_p2p.h. */
#include "impi_p2p.h"
#include "icbc_freelist.h"
#include "icbc_list.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum send_state {
    SEND_HEAD,     /* the first packet is still to go */
    SEND_WAIT_ACK, /* the first packet went; waiting for SYNCACK */
    SEND_BODY,     /* a long message's DATA packets are going */
} send_state_t;

typedef struct send_op {
    impi_send_t s;
    send_state_t state;
    uint64_t sent; /* payload bytes emitted */
    uint64_t drqid;
    icbc_list_t link; /* in its pair's sends */
} send_op_t;

/* Between one process of this host and one process of the job. */
typedef struct pair {
    uint32_t unacked;  /* packets sent, not yet acknowledged by PROTOACK */
    uint32_t received; /* packets received since the last PROTOACK we sent */
    icbc_list_t sends; /* send_op_t.link in flight, in the order they started */
    int busy, again;   /* in pair_progress; a send_done callback started another send */
    int held;          /* the transport refused its next packet (in impi_p2p.held) */
} pair_t;

/* A long message being received. Its drqid names its slot of the table
 * (low 32 bits: index + 1) and the slot's use (high 32 bits), so a DATA
 * packet finds it at once and a stale drqid finds nothing. */
typedef struct long_recv {
    uint64_t drqid; /* 0: a free slot */
    uint32_t uses;
    int src, dest;
    uint64_t msglen, received;
} long_recv_t;

struct impi_p2p {
    const impi_layout_t *layout;
    int self;
    int first_local, nlocal; /* world ranks of this host's processes */
    impi_p2p_ops_t ops;
    void *arg;
    pair_t *pairs;       /* nlocal x nprocs_total */
    uint32_t *held;      /* indices of the pairs the transport refused: one slot per pair */
    uint32_t *held_walk; /* the list impi_p2p_progress walks while HELD refills */
    size_t nheld;
    long_recv_t *longs;
    uint32_t *longs_free; /* indices of free slots: a stack */
    size_t nfree, longs_cap;
    uint64_t next_seqnum;
    size_t sends_pending;
    icbc_freelist_t send_ops; /* send_op_t: none allocated per message once in stride */
};

static icbc_status_t refuse(char *err, size_t errlen, int host, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static icbc_status_t refuse(char *err, size_t errlen, int host, const char *fmt, ...)
{
    va_list ap;
    char who[32];

    snprintf(who, sizeof(who), "IMPI host %d: ", host);
    va_start(ap, fmt);
    icbc_verr(ICBC_ERR_INVALID, err, errlen, who, fmt, ap);
    va_end(ap);
    return ICBC_ERR_INVALID;
}

static int is_local(const impi_p2p_t *p, int rank)
{
    return rank >= p->first_local && rank < p->first_local + p->nlocal;
}

static pair_t *pair_of(impi_p2p_t *p, int local, int remote)
{
    return &p->pairs[(size_t) (local - p->first_local) * (size_t) p->layout->nprocs_total +
                     (size_t) remote];
}

icbc_status_t impi_p2p_create(const impi_layout_t *layout, int self, const impi_p2p_ops_t *ops,
                              void *arg, impi_p2p_t **out)
{
    if (self < 0 || self >= layout->nhosts_total || layout->ackmark == 0 || layout->hiwater == 0 ||
        layout->datalen == 0 || !ops->emit || !ops->arrived || !ops->data || !ops->send_done)
        return ICBC_ERR_INVALID;
    impi_p2p_t *p = calloc(1, sizeof(*p));
    if (!p)
        return ICBC_ERR_NO_MEMORY;
    p->layout = layout;
    p->self = self;
    p->first_local = layout->hosts[self].first_rank;
    p->nlocal = (int) layout->hosts[self].nprocs;
    p->ops = *ops;
    p->arg = arg;
    icbc_freelist_init(&p->send_ops, sizeof(send_op_t), 64);
    p->pairs = calloc((size_t) p->nlocal * (size_t) layout->nprocs_total, sizeof(pair_t));
    p->held = calloc((size_t) p->nlocal * (size_t) layout->nprocs_total, sizeof(uint32_t));
    p->held_walk = calloc((size_t) p->nlocal * (size_t) layout->nprocs_total, sizeof(uint32_t));
    if (!p->pairs || !p->held || !p->held_walk) {
        free(p->pairs);
        free(p->held);
        free(p->held_walk);
        free(p);
        return ICBC_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < (size_t) p->nlocal * (size_t) layout->nprocs_total; i++)
        icbc_list_init(&p->pairs[i].sends);
    *out = p;
    return ICBC_OK;
}

void impi_p2p_destroy(impi_p2p_t *p)
{
    if (!p)
        return;
    size_t npairs = (size_t) p->nlocal * (size_t) p->layout->nprocs_total;
    for (size_t i = 0; i < npairs; i++) {
        icbc_list_t *sends = &p->pairs[i].sends;
        while (!icbc_list_empty(sends)) {
            send_op_t *op = ICBC_CONTAINER(sends->next, send_op_t, link);
            icbc_list_del(&op->link);
            icbc_freelist_put(&p->send_ops, op);
        }
    }
    free(p->pairs);
    free(p->held);
    free(p->held_walk);
    free(p->longs);
    free(p->longs_free);
    icbc_freelist_destroy(&p->send_ops);
    free(p);
}

/* Packs and emits a packet from process SRC to process DEST (FINI: -1, -1). */
static icbc_status_t emit(impi_p2p_t *p, int host, uint32_t type, int src, int dest,
                          const impi_pkt_hdr_t *fields, const void *payload, uint32_t len)
{
    impi_pkt_hdr_t h = *fields;
    uint8_t bytes[IMPI_PKT_HDR_SIZE];

    h.type = type;
    h.len = len;
    memset(&h.src, 0, sizeof(h.src));
    memset(&h.dest, 0, sizeof(h.dest));
    if (src >= 0)
        h.src = p->layout->procs[src];
    else
        h.src.pid = -1;
    if (dest >= 0)
        h.dest = p->layout->procs[dest];
    else
        h.dest.pid = -1;
    h.seqnum = p->next_seqnum++;
    impi_pkt_hdr_pack(&h, bytes);
    return p->ops.emit(p->arg, host, bytes, payload, len);
}

static void send_complete(impi_p2p_t *p, pair_t *pr, send_op_t *op)
{
    uint64_t srqid = op->s.srqid;

    icbc_list_del(&op->link);
    icbc_freelist_put(&p->send_ops, op);
    p->sends_pending--;
    p->ops.send_done(p->arg, srqid);
}

static void send_fields(const send_op_t *op, impi_pkt_hdr_t *h)
{
    memset(h, 0, sizeof(*h));
    h->srqid = op->s.srqid;
    h->drqid = op->drqid;
    h->msglen = op->s.len;
    h->lsrank = op->s.lsrank;
    h->tag = op->s.tag;
    h->cid = op->s.cid;
    h->count = -1;
}

/* The transport refused a packet of the pair (ICBC_ERR_BUSY): the pair
 * waits, in order, for impi_p2p_progress. Any other error is the caller's. */
static icbc_status_t hold(impi_p2p_t *p, int local, int remote, pair_t *pr, icbc_status_t st)
{
    if (st != ICBC_ERR_BUSY)
        return st;
    if (!pr->held) {
        pr->held = 1;
        p->held[p->nheld++] =
            (uint32_t) ((size_t) (local - p->first_local) * (size_t) p->layout->nprocs_total +
                        (size_t) remote);
    }
    return ICBC_OK;
}

/* Emits what the window lets go of the sends from LOCAL to REMOTE, in the
 * order they started (a send waiting for SYNCACK lets later ones pass: the
 * receiver has its first packet, so their order is kept). */
static icbc_status_t pair_progress_once(impi_p2p_t *p, int local, int remote, pair_t *pr)
{
    int host = impi_layout_host_of(p->layout, remote);
    uint32_t datalen = p->layout->datalen;
    icbc_list_t *e = pr->sends.next;

    while (e != &pr->sends && pr->unacked < p->layout->hiwater) {
        send_op_t *op = ICBC_CONTAINER(e, send_op_t, link);
        impi_pkt_hdr_t h;

        e = e->next; /* before OP completes and leaves the list */
        send_fields(op, &h);
        if (op->state == SEND_HEAD) {
            int is_long = op->s.len > datalen;
            uint32_t n = is_long ? datalen : (uint32_t) op->s.len;
            uint32_t type = (is_long || op->s.sync) ? IMPI_PK_DATASYNC : IMPI_PK_DATA;
            icbc_status_t st = emit(p, host, type, local, remote, &h, op->s.buf, n);
            if (st != ICBC_OK)
                return hold(p, local, remote, pr, st);
            pr->unacked++;
            op->sent = n;
            if (type == IMPI_PK_DATA)
                send_complete(p, pr, op);
            else
                op->state = SEND_WAIT_ACK;
        } else if (op->state == SEND_BODY) {
            while (op->sent < op->s.len && pr->unacked < p->layout->hiwater) {
                uint64_t left = op->s.len - op->sent;
                uint32_t n = left > datalen ? datalen : (uint32_t) left;
                icbc_status_t st = emit(p, host, IMPI_PK_DATA, local, remote, &h,
                                        (const uint8_t *) op->s.buf + op->sent, n);
                if (st != ICBC_OK)
                    return hold(p, local, remote, pr, st);
                pr->unacked++;
                op->sent += n;
            }
            if (op->sent == op->s.len)
                send_complete(p, pr, op);
        }
    }
    return ICBC_OK;
}

/* send_done may start another send to the same peer: that send is queued
 * and the list walked again, never from inside the walk. */
static icbc_status_t pair_progress(impi_p2p_t *p, int local, int remote)
{
    pair_t *pr = pair_of(p, local, remote);
    icbc_status_t st;

    if (pr->busy) {
        pr->again = 1;
        return ICBC_OK;
    }
    pr->busy = 1;
    do {
        pr->again = 0;
        st = pair_progress_once(p, local, remote, pr);
    } while (st == ICBC_OK && pr->again);
    pr->busy = 0;
    return st;
}

icbc_status_t impi_p2p_send(impi_p2p_t *p, const impi_send_t *s)
{
    const impi_layout_t *l = p->layout;

    if (!is_local(p, s->src) || s->dest < 0 || s->dest >= l->nprocs_total || is_local(p, s->dest) ||
        (s->len > 0 && !s->buf))
        return ICBC_ERR_INVALID;
    pair_t *pr = pair_of(p, s->src, s->dest);
    for (icbc_list_t *e = pr->sends.next; e != &pr->sends; e = e->next)
        if (ICBC_CONTAINER(e, send_op_t, link)->s.srqid == s->srqid)
            return ICBC_ERR_INVALID;
    send_op_t *op = icbc_freelist_get(&p->send_ops);
    if (!op)
        return ICBC_ERR_NO_MEMORY;
    memset(op, 0, sizeof(*op));
    op->s = *s;
    op->state = SEND_HEAD;
    icbc_list_push(&pr->sends, &op->link);
    p->sends_pending++;
    return pair_progress(p, s->src, s->dest);
}

/* An answer to a packet (SYNCACK, CANCELYES/NO): counted like the peer
 * counts it, never held by the window (the peer's window opens only as we
 * answer). */
static icbc_status_t answer(impi_p2p_t *p, uint32_t type, int local, int remote, uint64_t srqid,
                            uint64_t drqid)
{
    impi_pkt_hdr_t h;

    memset(&h, 0, sizeof(h));
    h.srqid = srqid;
    h.drqid = drqid;
    h.lsrank = -1;
    h.tag = -1;
    h.count = -1;
    pair_of(p, local, remote)->unacked++;
    return emit(p, impi_layout_host_of(p->layout, remote), type, local, remote, &h, NULL, 0);
}

/* A free slot of the long messages' table, with its new drqid; the table
 * grows by doubling. NULL: out of memory. */
static long_recv_t *long_new(impi_p2p_t *p)
{
    if (p->nfree == 0) {
        size_t cap = p->longs_cap ? 2 * p->longs_cap : 8;
        long_recv_t *n = realloc(p->longs, cap * sizeof(*n));
        if (!n)
            return NULL;
        p->longs = n;
        uint32_t *f = realloc(p->longs_free, cap * sizeof(*f));
        if (!f)
            return NULL;
        p->longs_free = f;
        memset(n + p->longs_cap, 0, (cap - p->longs_cap) * sizeof(*n));
        for (size_t i = cap; i > p->longs_cap; i--)
            f[p->nfree++] = (uint32_t) (i - 1);
        p->longs_cap = cap;
    }
    uint32_t i = p->longs_free[--p->nfree];
    long_recv_t *lr = &p->longs[i];
    lr->uses++;
    lr->drqid = ((uint64_t) lr->uses << 32) | (i + 1);
    return lr;
}

static long_recv_t *long_find(impi_p2p_t *p, uint64_t drqid)
{
    uint64_t i = (drqid & 0xffffffffu) - 1;

    return drqid != 0 && i < p->longs_cap && p->longs[i].drqid == drqid ? &p->longs[i] : NULL;
}

static void long_free(impi_p2p_t *p, long_recv_t *lr)
{
    lr->drqid = 0;
    p->longs_free[p->nfree++] = (uint32_t) (lr - p->longs);
}

icbc_status_t impi_p2p_matched(impi_p2p_t *p, const impi_msg_t *m, uint64_t *drqid)
{
    if (!is_local(p, m->dest) || m->src < 0 || m->src >= p->layout->nprocs_total)
        return ICBC_ERR_INVALID;
    if (m->kind == IMPI_MSG_SHORT)
        return ICBC_OK;
    uint64_t d = 0;
    if (m->kind == IMPI_MSG_LONG_HEAD) {
        if (!drqid)
            return ICBC_ERR_INVALID;
        long_recv_t *lr = long_new(p);
        if (!lr)
            return ICBC_ERR_NO_MEMORY;
        lr->src = m->src;
        lr->dest = m->dest;
        lr->msglen = m->msglen;
        lr->received = m->len;
        d = lr->drqid;
        *drqid = d;
    }
    return answer(p, IMPI_PK_SYNCACK, m->dest, m->src, m->srqid, d);
}

/* Counts a packet from REMOTE to LOCAL; every ACKMARK packets, a PROTOACK. */
static icbc_status_t count_received(impi_p2p_t *p, int remote, int local)
{
    pair_t *pr = pair_of(p, local, remote);
    impi_pkt_hdr_t h;

    if (++pr->received < p->layout->ackmark)
        return ICBC_OK;
    pr->received -= p->layout->ackmark;
    memset(&h, 0, sizeof(h));
    h.lsrank = -1;
    h.tag = -1;
    h.count = -1;
    return emit(p, impi_layout_host_of(p->layout, remote), IMPI_PK_PROTOACK, local, remote, &h,
                NULL, 0);
}

static icbc_status_t on_data(impi_p2p_t *p, int host, const impi_rx_pkt_t *pkt, char *err,
                             size_t errlen)
{
    const impi_pkt_hdr_t *h = pkt->hdr;
    long_recv_t *lr = long_find(p, h->drqid);

    if (!lr)
        return refuse(err, errlen, host,
                      "DATA of a %llu-byte message for drqid %llu, which names no "
                      "long message being received",
                      (unsigned long long) h->msglen, (unsigned long long) h->drqid);
    if (lr->src != pkt->src || lr->dest != pkt->dest)
        return refuse(err, errlen, host,
                      "DATA for long message %llu from process %d to %d, which is "
                      "between %d and %d",
                      (unsigned long long) h->drqid, pkt->src, pkt->dest, lr->src, lr->dest);
    if (pkt->len > lr->msglen - lr->received)
        return refuse(err, errlen, host,
                      "DATA of %zu bytes beyond the end of long message %llu (%llu of %llu "
                      "bytes received)",
                      pkt->len, (unsigned long long) h->drqid, (unsigned long long) lr->received,
                      (unsigned long long) lr->msglen);
    uint64_t offset = lr->received;
    lr->received += pkt->len;
    int last = lr->received == lr->msglen;
    uint64_t drqid = lr->drqid;
    if (last)
        long_free(p, lr);
    p->ops.data(p->arg, drqid, offset, pkt->payload, pkt->len, last);
    return ICBC_OK;
}

static void deliver_head(impi_p2p_t *p, const impi_rx_pkt_t *pkt, impi_msg_kind_t kind)
{
    const impi_pkt_hdr_t *h = pkt->hdr;
    impi_msg_t m = { kind,   pkt->src, pkt->dest, h->lsrank,    h->tag,
                     h->cid, h->srqid, h->msglen, pkt->payload, pkt->len };

    p->ops.arrived(p->arg, &m);
}

static icbc_status_t on_syncack(impi_p2p_t *p, int host, const impi_rx_pkt_t *pkt, char *err,
                                size_t errlen)
{
    /* the SYNCACK comes from the receiver: our process is its destination */
    pair_t *pr = pair_of(p, pkt->dest, pkt->src);
    const impi_pkt_hdr_t *h = pkt->hdr;

    for (icbc_list_t *e = pr->sends.next; e != &pr->sends; e = e->next) {
        send_op_t *op = ICBC_CONTAINER(e, send_op_t, link);
        if (op->s.srqid != h->srqid)
            continue;
        if (op->state != SEND_WAIT_ACK)
            return refuse(err, errlen, host, "a second SYNCACK for send %llu",
                          (unsigned long long) h->srqid);
        if (op->s.len <= p->layout->datalen) {
            send_complete(p, pr, op);
            return ICBC_OK;
        }
        op->drqid = h->drqid;
        op->state = SEND_BODY;
        return pair_progress(p, pkt->dest, pkt->src);
    }
    return refuse(err, errlen, host,
                  "SYNCACK for send %llu, which no send from process %d to %d "
                  "waits for",
                  (unsigned long long) h->srqid, pkt->dest, pkt->src);
}

icbc_status_t impi_p2p_packet(impi_p2p_t *p, int host, const impi_rx_pkt_t *pkt, char *err,
                              size_t errlen)
{
    const impi_pkt_hdr_t *h = pkt->hdr;
    icbc_status_t st;

    if (h->type == IMPI_PK_FINI) {
        if (p->ops.fini)
            p->ops.fini(p->arg, host);
        return ICBC_OK;
    }
    if (!is_local(p, pkt->dest) || pkt->src < 0 || pkt->src >= p->layout->nprocs_total)
        return refuse(err, errlen, host, "packet from process %d to %d, not to this host", pkt->src,
                      pkt->dest);
    if (h->type == IMPI_PK_PROTOACK) {
        /* from the receiver, for what our process (its destination) sent */
        pair_t *pr = pair_of(p, pkt->dest, pkt->src);
        if (pr->unacked < p->layout->ackmark)
            return refuse(err, errlen, host,
                          "PROTOACK from process %d to %d with %u packets unacknowledged (ACKMARK "
                          "%u)",
                          pkt->src, pkt->dest, pr->unacked, p->layout->ackmark);
        pr->unacked -= p->layout->ackmark;
        return pair_progress(p, pkt->dest, pkt->src);
    }
    st = count_received(p, pkt->src, pkt->dest);
    if (st != ICBC_OK)
        return refuse(err, errlen, host, "PROTOACK could not be sent");
    switch (h->type) {
    case IMPI_PK_DATA:
        if (pkt->len == h->msglen) {
            deliver_head(p, pkt, IMPI_MSG_SHORT);
            return ICBC_OK;
        }
        return on_data(p, host, pkt, err, errlen);
    case IMPI_PK_DATASYNC:
        deliver_head(p, pkt, pkt->len == h->msglen ? IMPI_MSG_SHORT_SYNC : IMPI_MSG_LONG_HEAD);
        return ICBC_OK;
    case IMPI_PK_SYNCACK: return on_syncack(p, host, pkt, err, errlen);
    case IMPI_PK_CANCEL: {
        int yes = p->ops.cancel && p->ops.cancel(p->arg, pkt->src, h->srqid);
        return answer(p, yes ? IMPI_PK_CANCELYES : IMPI_PK_CANCELNO, pkt->dest, pkt->src, h->srqid,
                      h->drqid);
    }
    case IMPI_PK_CANCELYES:
    case IMPI_PK_CANCELNO:
        /* this engine sends no CANCEL */
        return refuse(err, errlen, host, "an answer to a CANCEL that was never sent");
    default: return refuse(err, errlen, host, "packet of unknown type %u", h->type);
    }
}

icbc_status_t impi_p2p_fini(impi_p2p_t *p, int host)
{
    impi_pkt_hdr_t h;

    if (host < 0 || host >= p->layout->nhosts_total || host == p->self)
        return ICBC_ERR_INVALID;
    memset(&h, 0, sizeof(h));
    h.lsrank = -1;
    h.tag = -1;
    h.count = -1;
    return emit(p, host, IMPI_PK_FINI, -1, -1, &h, NULL, 0);
}

icbc_status_t impi_p2p_progress(impi_p2p_t *p)
{
    size_t n = p->nheld, total = (size_t) p->layout->nprocs_total;
    uint32_t *walk = p->held;
    icbc_status_t st = ICBC_OK;

    /* a pair refused again, or one a completion started, goes on the other
     * list (a pair is on one list at most once: its flag stays set until it
     * is walked) */
    p->held = p->held_walk;
    p->held_walk = walk;
    p->nheld = 0;
    for (size_t i = 0; i < n; i++) {
        size_t idx = walk[i];
        p->pairs[idx].held = 0;
        icbc_status_t s =
            pair_progress(p, p->first_local + (int) (idx / total), (int) (idx % total));
        if (s != ICBC_OK && st == ICBC_OK)
            st = s;
    }
    return st;
}

size_t impi_p2p_held(const impi_p2p_t *p)
{
    return p->nheld;
}

size_t impi_p2p_sends_pending(const impi_p2p_t *p)
{
    return p->sends_pending;
}
