/* The IMPI host of a node; see impi_agent.h. */
#include "impi_agent.h"
#include "impi_rx.h"
#include "bt_lib.h"
#include "icbc_bytes.h"
#include "icbc_clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- frames -------------------------------------------------------------- */

void impi_frame_hdr_pack(uint32_t kind, uint32_t host, uint32_t len, uint8_t *buf)
{
    icbc_put32(buf, kind);
    icbc_put32(buf + 4, host);
    icbc_put32(buf + 8, len);
}

icbc_status_t impi_frames_init(impi_frames_t *f, uint32_t datalen)
{
    memset(f, 0, sizeof(*f));
    f->max_len = IMPI_PKT_HDR_SIZE + datalen;
    if (f->max_len < IMPI_FRAME_LOST_MAX)
        f->max_len = IMPI_FRAME_LOST_MAX;
    f->body = malloc(f->max_len);
    f->cap = f->max_len;
    return f->body ? ICBC_OK : ICBC_ERR_NO_MEMORY;
}

void impi_frames_free(impi_frames_t *f)
{
    free(f->body);
    f->body = NULL;
}

icbc_status_t impi_frames_feed(impi_frames_t *f, const void *bytes, size_t len, impi_frame_cb_t cb,
                               void *arg, char *err, size_t errlen)
{
    const uint8_t *p = bytes;

    while (len > 0) {
        if (!f->in_body) {
            if (!icbc_fill(f->hdr, &f->have, IMPI_FRAME_HDR_SIZE, &p, &len))
                break;
            f->kind = icbc_get32(f->hdr);
            f->host = icbc_get32(f->hdr + 4);
            f->len = icbc_get32(f->hdr + 8);
            if (f->kind < IMPI_FRAME_PACKET || f->kind > IMPI_FRAME_LOST || f->len > f->max_len ||
                (f->kind == IMPI_FRAME_PACKET && f->len < IMPI_PKT_HDR_SIZE)) {
                snprintf(err, errlen, "a local frame of kind %u with %u bytes", f->kind, f->len);
                return ICBC_ERR_INVALID;
            }
            f->in_body = 1;
            f->have = 0;
        } else {
            icbc_fill(f->body, &f->have, f->len, &p, &len);
        }
        if (f->in_body && f->have == f->len) {
            f->in_body = 0;
            f->have = 0;
            cb(arg, f->kind, f->host, f->body, f->len);
        }
    }
    return ICBC_OK;
}

uint8_t *impi_frames_body_room(impi_frames_t *f, size_t *want)
{
    if (!f->in_body) {
        *want = 0;
        return NULL;
    }
    *want = f->len - f->have;
    return f->body + f->have;
}

void impi_frames_body_filled(impi_frames_t *f, size_t n, impi_frame_cb_t cb, void *arg)
{
    f->have += n;
    if (f->have == f->len) {
        f->in_body = 0;
        f->have = 0;
        cb(arg, f->kind, f->host, f->body, f->len);
    }
}

/* ---- the agent ------------------------------------------------------------ */

#define MAX_SZ(a, b) ((a) > (b) ? (a) : (b))

typedef struct {
    struct impi_agent *a;
    int who;    /* >= 0: a host; < 0: local -(who) - 1 */
    int fd;     /* -1: none or closed */
    int inproc; /* the caller's own process: OUT waits for impi_agent_local_swap */
    uint8_t *out;
    size_t off, len, cap;
    int broken;      /* a write failed; handled after the round */
    uint32_t events; /* what the poller waits for on FD */
} wire_t;

typedef struct {
    wire_t w;
    impi_rx_t rx;
    int fini_in, fini_out, closed;
} host_conn_t;

/* Payload buffers lent to the in-process process (IMPI_FRAME_PACKET_AT). */
typedef struct {
    uint8_t **v;
    int n, cap;
} bufs_t;

typedef struct {
    wire_t w;
    impi_frames_t fr;
    int done, gone;
    /* in-process: the payloads named by the frames in W's queue, and by
     * those the last impi_agent_local_swap handed over */
    bufs_t lent, handed;
} local_link_t;

struct impi_agent {
    const impi_layout_t *l;
    int self, first, nlocal, nhosts;
    host_conn_t *hosts;
    local_link_t *locals;
    bt_poller_t *poller;
    /* back-pressure: while a host connection holds more than
     * IMPI_AGENT_QUEUE_MAX bytes, the links that feed it are not read, and
     * while a process's link does, the host connections are not; reading
     * starts again below half of it */
    int locals_paused, hosts_paused;
    bufs_t spare;     /* DATALEN-byte payload buffers to lend */
    int payload_bufs; /* how many there are in all */
    int fini_timeout_ms;
    double fini_deadline; /* 0 until every process is done */
    int down;             /* the host was taken down */
    uint8_t buf[1 << 16];
};

int impi_send_pending(int fd, const uint8_t *buf, size_t *off, size_t *len)
{
    while (*off < *len) {
        ssize_t n = send(fd, buf + *off, *len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0)
            return -1;
        *off += (size_t) n;
    }
    if (*off == *len)
        *off = *len = 0;
    return 0;
}

ssize_t impi_send_iov(int fd, struct iovec *iov, int n)
{
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t) n };
    size_t sent = 0;

    for (;;) {
        while (m.msg_iovlen > 0 && m.msg_iov[0].iov_len == 0) {
            m.msg_iov++;
            m.msg_iovlen--;
        }
        if (m.msg_iovlen == 0)
            break;
        ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0)
            return -1;
        sent += (size_t) r;
        for (size_t left = (size_t) r; left > 0; m.msg_iov++, m.msg_iovlen--) {
            size_t k = left < m.msg_iov[0].iov_len ? left : m.msg_iov[0].iov_len;
            m.msg_iov[0].iov_base = (uint8_t *) m.msg_iov[0].iov_base + k;
            m.msg_iov[0].iov_len -= k;
            left -= k;
            if (m.msg_iov[0].iov_len > 0)
                break;
        }
    }
    return (ssize_t) sent;
}

static int wire_flush(wire_t *w)
{
    return impi_send_pending(w->fd, w->out, &w->off, &w->len);
}

static size_t wire_queued(const wire_t *w)
{
    return w->len - w->off;
}

/* What the poller waits for on W: input, unless reading it is paused
 * (back-pressure), and room to write while W has bytes queued. */
static void wire_arm(wire_t *w)
{
    int paused = w->who >= 0 ? w->a->hosts_paused : w->a->locals_paused;
    uint32_t want = (paused ? 0 : EPOLLIN) | (wire_queued(w) ? EPOLLOUT : 0);

    if (w->fd >= 0 && want != w->events && bt_poller_mod_fd(w->a->poller, w->fd, want) == ICBC_OK)
        w->events = want;
}

/* Writes A and B (either may be empty) as far as the socket takes them and
 * queues the rest. With nothing queued they go from the caller's bytes:
 * only what the socket does not take now is copied. */
static void wire_put(wire_t *w, const void *a, size_t alen, const void *b, size_t blen)
{
    if ((w->fd < 0 && !w->inproc) || w->broken)
        return;
    if (!w->inproc && w->len == w->off) {
        struct iovec iov[2] = { { (void *) a, alen }, { (void *) b, blen } };
        if (impi_send_iov(w->fd, iov, 2) < 0) {
            w->broken = 1;
            return;
        }
        a = iov[0].iov_base;
        alen = iov[0].iov_len;
        b = iov[1].iov_base;
        blen = iov[1].iov_len;
        if (alen + blen == 0)
            return;
    }
    size_t need = w->len + alen + blen;
    if (icbc_grow(&w->out, &w->cap, need) != 0) {
        w->broken = 1;
        return;
    }
    if (alen)
        memcpy(w->out + w->len, a, alen);
    if (blen)
        memcpy(w->out + w->len + alen, b, blen);
    w->len = need;
    if (!w->inproc && wire_flush(w) != 0)
        w->broken = 1;
    if (!w->inproc)
        wire_arm(w);
}

static void wire_close(wire_t *w)
{
    if (w->fd >= 0) {
        if (w->a)
            bt_poller_del_fd(w->a->poller, w->fd);
        close(w->fd);
    }
    w->fd = -1;
    w->off = w->len = 0;
}

static void send_lost(impi_agent_t *a, int k, int host, const char *why)
{
    local_link_t *lk = &a->locals[k];
    uint8_t fh[IMPI_FRAME_HDR_SIZE];
    size_t n = strlen(why);

    if (lk->done || lk->gone)
        return;
    if (n > IMPI_FRAME_LOST_MAX)
        n = IMPI_FRAME_LOST_MAX;
    impi_frame_hdr_pack(IMPI_FRAME_LOST, (uint32_t) host, (uint32_t) n, fh);
    wire_put(&lk->w, fh, sizeof(fh), why, n);
}

/* Host HOST is gone (or broke the protocol): its connection closes and
 * every process of this host hears why. */
static void host_lost(impi_agent_t *a, int host, const char *why)
{
    host_conn_t *h = &a->hosts[host];

    if (h->closed)
        return;
    h->closed = 1;
    wire_close(&h->w);
    for (int k = 0; k < a->nlocal; k++)
        send_lost(a, k, host, why);
}

/* Process K ended: after DONE that is its normal end; without, it died,
 * and the host goes down with it (impi_agent.h). */
static void local_ended(impi_agent_t *a, int k)
{
    local_link_t *lk = &a->locals[k];
    char why[160];

    if (lk->gone)
        return;
    lk->gone = 1;
    wire_close(&lk->w);
    if (lk->done || a->down)
        return;
    a->down = 1;
    snprintf(why, sizeof(why),
             "process %d of this node's IMPI host ended without MPI_Finalize, so the host's "
             "connections closed",
             a->first + k);
    for (int h = 0; h < a->nhosts; h++)
        if (a->hosts[h].w.fd >= 0)
            host_lost(a, h, why);
}

static int bufs_push(bufs_t *b, uint8_t *p)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        uint8_t **v = realloc(b->v, sizeof(*v) * (size_t) cap);
        if (v == NULL)
            return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = p;
    return 0;
}

static void bufs_free(bufs_t *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->v[i]);
    free(b->v);
    memset(b, 0, sizeof(*b));
}

/* The packet's payload, whole in HOST's receive buffer, goes to the
 * in-process process by reference: the buffer is lent to it and the
 * connection reads on into a spare one. 0: no buffer to spare (the packet
 * is copied instead). */
static int lend(impi_agent_t *a, int host, local_link_t *lk, const impi_rx_pkt_t *pkt)
{
    uint8_t fh[IMPI_FRAME_HDR_SIZE + IMPI_PKT_HDR_SIZE];
    uint8_t *spare, *full;
    uintptr_t at;

    if (lk->lent.n == lk->lent.cap && bufs_push(&lk->lent, NULL) == 0)
        lk->lent.n--; /* room for one more, reserved before anything moves */
    if (lk->lent.n == lk->lent.cap)
        return 0;
    if (a->spare.n > 0) {
        spare = a->spare.v[--a->spare.n];
    } else {
        if ((spare = malloc(a->l->datalen)) == NULL)
            return 0;
        a->payload_bufs++;
    }
    full = impi_rx_swap_payload(&a->hosts[host].rx, spare);
    lk->lent.v[lk->lent.n++] = full;
    at = (uintptr_t) full; /* pkt->payload */
    impi_frame_hdr_pack(IMPI_FRAME_PACKET_AT, (uint32_t) host,
                        (uint32_t) (IMPI_PKT_HDR_SIZE + sizeof(at)), fh);
    impi_pkt_hdr_pack(pkt->hdr, fh + IMPI_FRAME_HDR_SIZE);
    wire_put(&lk->w, fh, sizeof(fh), &at, sizeof(at));
    return 1;
}

static void on_host_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    const wire_t *w = arg; /* the host connection it came on */
    impi_agent_t *a = w->a;
    int host = w->who;
    uint8_t fh[IMPI_FRAME_HDR_SIZE + IMPI_PKT_HDR_SIZE];

    if (a->hosts[host].closed)
        return;
    if (pkt->hdr->type == IMPI_PK_FINI) {
        a->hosts[host].fini_in = 1;
        return;
    }
    /* impi_rx found the destination among this host's processes */
    local_link_t *lk = &a->locals[pkt->dest - a->first];
    if (lk->done || lk->gone)
        return; /* it finalized: nothing it could still want */
    if (lk->w.inproc && pkt->len >= IMPI_AGENT_LEND_MIN && lend(a, host, lk, pkt))
        return;
    impi_frame_hdr_pack(IMPI_FRAME_PACKET, (uint32_t) host,
                        (uint32_t) (IMPI_PKT_HDR_SIZE + pkt->len), fh);
    impi_pkt_hdr_pack(pkt->hdr, fh + IMPI_FRAME_HDR_SIZE);
    wire_put(&lk->w, fh, sizeof(fh), pkt->payload, pkt->len);
}

static void on_local_frame(void *arg, uint32_t kind, uint32_t host, const uint8_t *body, size_t len)
{
    const wire_t *w = arg; /* the link it came on */
    impi_agent_t *a = w->a;
    int k = -w->who - 1;

    switch (kind) {
    case IMPI_FRAME_PACKET:
        /* for a host this one is connected to; one that closed already
         * told the process so */
        if (host < (uint32_t) a->nhosts && a->hosts[host].w.fd >= 0)
            wire_put(&a->hosts[host].w, body, len, NULL, 0);
        break;
    case IMPI_FRAME_DONE: a->locals[k].done = 1; break;
    default: break; /* HELLO again, or LOST, which processes do not send */
    }
}

static void read_host(impi_agent_t *a, int h);
static void read_local(impi_agent_t *a, int k);

/* The poller's callback for every descriptor. */
static void on_ready(int fd, uint32_t events, void *arg)
{
    wire_t *w = arg;

    (void) fd;
    if ((events & EPOLLOUT) && wire_flush(w) != 0)
        w->broken = 1;
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !w->broken) {
        if (w->who >= 0)
            read_host(w->a, w->who);
        else
            read_local(w->a, -w->who - 1);
    }
    wire_arm(w);
}

/* W on FD, non-blocking, read from now on. */
static icbc_status_t wire_open(impi_agent_t *a, wire_t *w, int who, int fd)
{
    w->a = a;
    w->who = who;
    w->fd = fd;
    if (fd < 0)
        return ICBC_OK;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    w->events = EPOLLIN;
    return bt_poller_add_fd(a->poller, fd, w->events, on_ready, w);
}

icbc_status_t impi_agent_create(const impi_layout_t *l, int self, const int *host_fds,
                                const int *local_fds, int fini_timeout_ms, impi_agent_t **out)
{
    impi_agent_t *a;
    icbc_status_t st = ICBC_ERR_NO_MEMORY;

    if (self < 0 || self >= l->nhosts_total || l->hosts[self].nprocs == 0)
        return ICBC_ERR_INVALID;
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return ICBC_ERR_NO_MEMORY;
    a->l = l;
    a->self = self;
    a->first = l->hosts[self].first_rank;
    a->nlocal = (int) l->hosts[self].nprocs;
    a->nhosts = l->nhosts_total;
    a->fini_timeout_ms = fini_timeout_ms;
    a->hosts = calloc((size_t) a->nhosts, sizeof(*a->hosts));
    a->locals = calloc((size_t) a->nlocal, sizeof(*a->locals));
    if (!a->hosts || !a->locals)
        goto fail;
    for (int h = 0; h < a->nhosts; h++)
        a->hosts[h].w.fd = -1;
    for (int k = 0; k < a->nlocal; k++)
        a->locals[k].w.fd = -1;
    if ((st = bt_poller_create(&a->poller)) != ICBC_OK)
        goto fail;
    for (int h = 0; h < a->nhosts; h++) {
        host_conn_t *hc = &a->hosts[h];
        st = wire_open(a, &hc->w, h, host_fds[h]);
        if (st != ICBC_OK)
            goto fail;
        if (hc->w.fd < 0) {
            hc->closed = 1;
            continue;
        }
        if ((st = impi_rx_init(&hc->rx, l, self, h)) != ICBC_OK)
            goto fail;
    }
    for (int k = 0; k < a->nlocal; k++) {
        local_link_t *lk = &a->locals[k];
        st = wire_open(a, &lk->w, -k - 1, local_fds[k] >= 0 ? local_fds[k] : -1);
        if (st != ICBC_OK)
            goto fail;
        lk->w.inproc = local_fds[k] == IMPI_AGENT_INPROC;
        if (lk->w.fd < 0 && !lk->w.inproc) {
            lk->gone = 1;
            continue;
        }
        if ((st = impi_frames_init(&lk->fr, l->datalen)) != ICBC_OK)
            goto fail;
    }
    *out = a;
    return ICBC_OK;
fail:
    impi_agent_destroy(a);
    return st;
}

/* A payload (or a frame's body) with at least this many bytes still to
 * come is received straight into the packet (impi_rx_payload_room,
 * impi_frames_body_room), not through BUF: no
 * copy in user space for the bulk of a long message. Below it one read
 * takes what has come of several packets. */
#define READ_DIRECT_MIN 4096

static void read_host(impi_agent_t *a, int h)
{
    host_conn_t *hc = &a->hosts[h];
    char err[256];
    size_t want;
    uint8_t *room = impi_rx_payload_room(&hc->rx, &want);
    int direct = room != NULL && want >= READ_DIRECT_MIN;
    ssize_t r = direct ? recv(hc->w.fd, room, want, MSG_DONTWAIT)
                       : recv(hc->w.fd, a->buf, sizeof(a->buf), MSG_DONTWAIT);

    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r <= 0) {
        if (hc->fini_in) { /* it said FINI: the end is normal */
            hc->closed = 1;
            wire_close(&hc->w);
            return;
        }
        host_lost(a, h, r == 0 ? "it closed its connection" : strerror(errno));
        return;
    }
    if (direct)
        impi_rx_payload_filled(&hc->rx, (size_t) r, on_host_packet, &hc->w);
    else if (impi_rx_feed(&hc->rx, a->buf, (size_t) r, on_host_packet, &hc->w, err, sizeof(err)) !=
             ICBC_OK)
        host_lost(a, h, err);
}

static void read_local(impi_agent_t *a, int k)
{
    local_link_t *lk = &a->locals[k];
    char err[256];
    size_t want;
    uint8_t *room = impi_frames_body_room(&lk->fr, &want);
    int direct = room != NULL && want >= READ_DIRECT_MIN;
    ssize_t r = direct ? recv(lk->w.fd, room, want, MSG_DONTWAIT)
                       : recv(lk->w.fd, a->buf, sizeof(a->buf), MSG_DONTWAIT);

    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r <= 0)
        local_ended(a, k);
    else if (direct)
        impi_frames_body_filled(&lk->fr, (size_t) r, on_local_frame, &lk->w);
    else if (impi_frames_feed(&lk->fr, a->buf, (size_t) r, on_local_frame, &lk->w, err,
                              sizeof(err)) != ICBC_OK)
        local_ended(a, k);
}

/* The host's end: once every process is done, FINI to every host; a
 * connection closes once both FINIs passed and its bytes are out. */
static void check_end(impi_agent_t *a)
{
    for (int k = 0; k < a->nlocal; k++)
        if (!a->locals[k].done && !a->locals[k].gone)
            return;
    if (a->fini_deadline == 0) {
        uint8_t b[IMPI_PKT_HDR_SIZE];
        impi_pkt_fini_pack(b);
        for (int h = 0; h < a->nhosts; h++)
            if (!a->hosts[h].closed) {
                wire_put(&a->hosts[h].w, b, sizeof(b), NULL, 0);
                a->hosts[h].fini_out = 1;
            }
        a->fini_deadline = icbc_clock_coarse() + a->fini_timeout_ms / 1000.0;
    }
    int late = icbc_clock_coarse() > a->fini_deadline;
    for (int h = 0; h < a->nhosts; h++) {
        host_conn_t *hc = &a->hosts[h];
        if (!hc->closed && (late || (hc->fini_in && hc->w.len == hc->w.off))) {
            hc->closed = 1;
            wire_close(&hc->w);
        }
    }
}

int impi_agent_fd(const impi_agent_t *a)
{
    return bt_poller_fd(a->poller);
}

/* Back-pressure (struct impi_agent), then what each descriptor waits for. */
static void update_interest(impi_agent_t *a)
{
    size_t to_hosts = 0, to_locals = 0;

    for (int h = 0; h < a->nhosts; h++)
        to_hosts = MAX_SZ(to_hosts, wire_queued(&a->hosts[h].w));
    for (int k = 0; k < a->nlocal; k++)
        to_locals = MAX_SZ(to_locals, wire_queued(&a->locals[k].w) +
                                          (size_t) a->locals[k].lent.n * a->l->datalen);
    a->locals_paused = to_hosts > IMPI_AGENT_QUEUE_MAX ||
                       (a->locals_paused && to_hosts > IMPI_AGENT_QUEUE_MAX / 2);
    a->hosts_paused = to_locals > IMPI_AGENT_QUEUE_MAX ||
                      (a->hosts_paused && to_locals > IMPI_AGENT_QUEUE_MAX / 2);
    for (int h = 0; h < a->nhosts; h++)
        wire_arm(&a->hosts[h].w);
    for (int k = 0; k < a->nlocal; k++)
        wire_arm(&a->locals[k].w);
}

void impi_agent_local_input(impi_agent_t *a, int k, const void *bytes, size_t len)
{
    char err[128];
    local_link_t *lk = &a->locals[k];

    if (lk->gone || !lk->w.inproc)
        return;
    if (impi_frames_feed(&lk->fr, bytes, len, on_local_frame, &lk->w, err, sizeof(err)) != ICBC_OK)
        lk->w.broken = 1;
}

icbc_status_t impi_agent_local_packet(impi_agent_t *a, int host, const void *head, size_t head_len,
                                      const void *payload, size_t len)
{
    if (host < 0 || host >= a->nhosts || host == a->self || head_len < IMPI_PKT_HDR_SIZE)
        return ICBC_ERR_INVALID;
    if (a->hosts[host].w.fd < 0)
        return ICBC_ERR_PEER_FAILED; /* the process heard why (LOST) */
    wire_put(&a->hosts[host].w, head, head_len, payload, len);
    return ICBC_OK;
}

size_t impi_agent_host_backlog(const impi_agent_t *a, int host)
{
    if (host < 0 || host >= a->nhosts)
        return 0;
    return a->hosts[host].w.len - a->hosts[host].w.off;
}

size_t impi_agent_local_swap(impi_agent_t *a, int k, uint8_t **buf, size_t *cap)
{
    wire_t *w = &a->locals[k].w;
    uint8_t *mine = w->out;
    size_t n = w->len - w->off, mycap = w->cap;

    if (w->off > 0)
        memmove(w->out, w->out + w->off, n);
    w->out = *buf;
    w->cap = *cap;
    w->off = w->len = 0;
    *buf = mine;
    *cap = mycap;
    /* the process is done with the payloads of the frames it took last */
    local_link_t *lk = &a->locals[k];
    for (int i = 0; i < lk->handed.n; i++)
        if (bufs_push(&a->spare, lk->handed.v[i]) != 0) {
            free(lk->handed.v[i]);
            a->payload_bufs--;
        }
    bufs_t t = lk->handed;
    lk->handed = lk->lent;
    lk->lent = t;
    lk->lent.n = 0;
    return n;
}

int impi_agent_payload_buffers(const impi_agent_t *a)
{
    return a->payload_bufs;
}

int impi_agent_poll(impi_agent_t *a, int timeout_ms)
{
    if (a->fini_deadline > 0 && timeout_ms > 100)
        timeout_ms = 100; /* the end has a deadline */
    bt_poller_wait(a->poller, timeout_ms);
    /* what failed to be written in this round */
    for (int h = 0; h < a->nhosts; h++)
        if (a->hosts[h].w.broken && !a->hosts[h].closed)
            host_lost(a, h, "writing to it failed");
    for (int k = 0; k < a->nlocal; k++)
        if (a->locals[k].w.broken)
            local_ended(a, k);
    check_end(a);
    update_interest(a);
    for (int h = 0; h < a->nhosts; h++)
        if (!a->hosts[h].closed)
            return 0;
    for (int k = 0; k < a->nlocal; k++)
        if (!a->locals[k].done && !a->locals[k].gone)
            return 0;
    return 1;
}

void impi_agent_destroy(impi_agent_t *a)
{
    if (a == NULL)
        return;
    for (int h = 0; a->hosts && h < a->nhosts; h++) {
        wire_close(&a->hosts[h].w);
        free(a->hosts[h].w.out);
        impi_rx_free(&a->hosts[h].rx);
    }
    for (int k = 0; a->locals && k < a->nlocal; k++) {
        wire_close(&a->locals[k].w);
        free(a->locals[k].w.out);
        impi_frames_free(&a->locals[k].fr);
        bufs_free(&a->locals[k].lent);
        bufs_free(&a->locals[k].handed);
    }
    bufs_free(&a->spare);
    free(a->hosts);
    free(a->locals);
    bt_poller_destroy(a->poller);
    free(a);
}
