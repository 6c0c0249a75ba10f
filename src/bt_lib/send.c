/* Send queues: framing a message into one entry, gathering entries into
 * sendmsg calls, resuming after partial writes, completions. */
#include "bt_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "icbc_log.h"

static void q_push(bt_sendq_t *q, bt_send_t *e)
{
    icbc_queue_push(q, &e->qe);
}

static bt_send_t *q_pop(bt_sendq_t *q)
{
    return ICBC_QUEUE_OBJ(icbc_queue_pop(q), bt_send_t, qe);
}

/* One allocation per frame: the entry, its iovecs (the frame header and
 * header copy first, then the caller's payload pieces), and the bytes. */
static icbc_status_t enqueue(bt_conn_t *c, bt_sendq_t *q, bt_frame_type_t type, const void *hdr,
                             size_t hdr_len, const struct iovec *iov, int iovcnt,
                             uint64_t payload_len, bt_send_cb_t cb, void *cb_arg)
{
    size_t sz = sizeof(bt_send_t) + (size_t) (iovcnt + 1) * sizeof(struct iovec) +
                BT_FRAME_HDR_SIZE + hdr_len;
    bt_send_t *e = bt_poller_send_new(c->p, sz);
    bt_frame_t f = { .type = type, .hdr_len = (uint32_t) hdr_len, .payload_len = payload_len };
    unsigned char *bytes;
    int n = 1;

    if (e == NULL)
        return ICBC_ERR_NO_MEMORY;
    e->cb = cb;
    e->cb_arg = cb_arg;
    e->type = type;
    e->iov = (struct iovec *) (e + 1);
    bytes = (unsigned char *) (e->iov + iovcnt + 1);
    bt_frame_pack(&f, bytes);
    if (hdr_len > 0)
        memcpy(bytes + BT_FRAME_HDR_SIZE, hdr, hdr_len);
    e->iov[0].iov_base = bytes;
    e->iov[0].iov_len = BT_FRAME_HDR_SIZE + hdr_len;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len > 0)
            e->iov[n++] = iov[i];
    e->iovcnt = n;
    e->iovpos = 0;
    e->left = BT_FRAME_HDR_SIZE + hdr_len + payload_len;
    q_push(q, e);
    c->queued += e->left;
    if (c->queued > c->cfg->o.max_queued / 2)
        c->above_half = true;
    return ICBC_OK;
}

icbc_status_t bt_send_ctl(bt_conn_t *c, bt_frame_type_t type, const void *hdr, size_t hdr_len,
                          const void *payload, size_t payload_len)
{
    struct iovec v = { .iov_base = (void *) payload, .iov_len = payload_len };

    return enqueue(c, &c->ctlq, type, hdr, hdr_len, &v, payload_len ? 1 : 0, payload_len, NULL,
                   NULL);
}

icbc_status_t bt_send_close(bt_conn_t *c)
{
    return enqueue(c, &c->dataq, BT_FRAME_CLOSE, NULL, 0, NULL, 0, 0, NULL, NULL);
}

icbc_status_t bt_conn_send(bt_conn_t *c, const void *hdr, size_t hdr_len, const struct iovec *iov,
                           int iovcnt, bt_send_cb_t cb, void *cb_arg)
{
    uint64_t payload_len = 0;
    icbc_status_t st;

    if (c == NULL)
        return ICBC_ERR_INVALID;
    if (c->destroyed || c->state >= BT_CONN_DRAINING)
        return ICBC_ERR_PEER_FAILED;
    if ((hdr_len > 0 && hdr == NULL) || iovcnt < 0 || iovcnt > BT_SEND_IOV_MAX ||
        (iovcnt > 0 && iov == NULL)) {
        icbc_error("bt_lib: %s: bt_conn_send with a NULL header or %d payload pieces", c->peer_text,
                   iovcnt);
        return ICBC_ERR_INVALID;
    }
    if (hdr_len > c->cfg->o.max_hdr) {
        icbc_error("bt_lib: %s: header of %zu bytes above max_hdr %u", c->peer_text, hdr_len,
                   c->cfg->o.max_hdr);
        return ICBC_ERR_INVALID;
    }
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > 0 && iov[i].iov_base == NULL) {
            icbc_error("bt_lib: %s: payload piece %d is NULL", c->peer_text, i);
            return ICBC_ERR_INVALID;
        }
        payload_len += iov[i].iov_len;
        if (payload_len > c->cfg->o.max_payload) {
            icbc_error("bt_lib: %s: payload above max_payload %llu bytes", c->peer_text,
                       (unsigned long long) c->cfg->o.max_payload);
            return ICBC_ERR_INVALID;
        }
    }
    if (c->queued >= c->cfg->o.max_queued)
        return ICBC_ERR_BUSY;
    st = enqueue(c, &c->dataq, BT_FRAME_DATA, hdr, hdr_len, iov, iovcnt, payload_len, cb, cb_arg);
    if (st != ICBC_OK)
        return st;
    /* Write now unless the socket is known to be full (EPOLLOUT armed):
     * latency. Completion still runs from the poller. */
    if (!(c->events & EPOLLOUT) && bt_send_flush(c))
        bt_conn_update_events(c);
    return ICBC_OK;
}

bool bt_send_pending(const bt_conn_t *c)
{
    return !icbc_queue_empty(&c->ctlq) || (bt_auth_done(c) && !icbc_queue_empty(&c->dataq));
}

/* Appends the unwritten iovecs of Q to V; returns false when V is full. */
static bool gather(const bt_sendq_t *q, struct iovec *v, int *n, size_t *bytes)
{
    icbc_queue_for_each (qe, q) {
        const bt_send_t *e = ICBC_CONTAINER(qe, bt_send_t, qe);
        for (int i = e->iovpos; i < e->iovcnt; i++) {
            if (*n == BT_TX_IOV_BATCH)
                return false;
            v[(*n)++] = e->iov[i];
            *bytes += e->iov[i].iov_len;
        }
    }
    return true;
}

/* The CLOSE frame is out: nothing more will be written. */
static void close_written(bt_conn_t *c)
{
    shutdown(c->fd, SHUT_WR);
    c->state = BT_CONN_LINGER;
    bt_conn_set_deadline(c, ((int64_t) icbc_clock_ms()) + c->cfg->o.handshake_ms);
}

/* Accounts W written bytes to the entries in gather order. */
static void advance(bt_conn_t *c, size_t w)
{
    c->queued -= w;
    while (w > 0) {
        bt_sendq_t *q = icbc_queue_empty(&c->ctlq) ? &c->dataq : &c->ctlq;
        bt_send_t *e = ICBC_CONTAINER(q->head, bt_send_t, qe);

        while (w > 0 && e->iovpos < e->iovcnt) {
            struct iovec *v = &e->iov[e->iovpos];
            size_t k = w < v->iov_len ? w : v->iov_len;
            v->iov_base = (char *) v->iov_base + k;
            v->iov_len -= k;
            e->left -= k;
            w -= k;
            if (v->iov_len == 0)
                e->iovpos++;
        }
        if (e->iovpos < e->iovcnt)
            break; /* partial write: resume inside E next time */
        q_pop(q);
        if (e->type == BT_FRAME_CLOSE) {
            bt_poller_send_free(c->p, e);
            close_written(c);
        } else if (e->cb != NULL) {
            q_push(&c->doneq, e);
        } else {
            bt_poller_send_free(c->p, e);
        }
    }
}

bool bt_send_flush(bt_conn_t *c)
{
    if (c->fd < 0 || c->state == BT_CONN_CONNECTING)
        return c->state != BT_CONN_CLOSED;
    for (;;) {
        struct iovec v[BT_TX_IOV_BATCH];
        struct msghdr m;
        size_t want = 0;
        ssize_t w;
        int n = 0;

        if (gather(&c->ctlq, v, &n, &want) && bt_auth_done(c))
            gather(&c->dataq, v, &n, &want);
        if (n == 0 || c->state == BT_CONN_LINGER)
            break;
        memset(&m, 0, sizeof(m));
        m.msg_iov = v;
        m.msg_iovlen = n;
        w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            bt_conn_fail(c, ICBC_ERR_PEER_FAILED, "send failed: %s", strerror(errno));
            return false;
        }
        advance(c, (size_t) w);
        if ((size_t) w < want)
            break; /* the socket buffer is full */
    }
    if (!icbc_queue_empty(&c->doneq) || (c->above_half && c->queued <= c->cfg->o.max_queued / 2))
        bt_poller_defer(c->p, c);
    return true;
}

void bt_send_complete_done(bt_conn_t *c)
{
    bt_poller_t *p = c->p; /* outlives C */
    bt_send_t *e;

    /* pop before calling: the callback may destroy C, which empties the queues */
    while ((e = q_pop(&c->doneq)) != NULL) {
        e->cb(c, ICBC_OK, e->cb_arg);
        bt_poller_send_free(p, e);
    }
}

void bt_send_fail_all(bt_conn_t *c, icbc_status_t status)
{
    bt_sendq_t *qs[2] = { &c->ctlq, &c->dataq };
    bt_poller_t *p = c->p;

    for (int i = 0; i < 2; i++) {
        bt_send_t *e;
        while ((e = q_pop(qs[i])) != NULL) {
            c->queued -= e->left;
            if (e->cb != NULL)
                e->cb(c, status, e->cb_arg);
            bt_poller_send_free(p, e);
        }
    }
}
