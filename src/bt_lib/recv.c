/* Receive state machine: frame header -> header part -> decision ->
 * payload. Small frames are parsed out of the connection's receive buffer;
 * a payload's remaining bytes are read straight into the caller's
 * destination (readv, the receive buffer catching what follows). */
#include "bt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "icbc_log.h"

static const char *state_name(bt_conn_state_t s)
{
    switch (s) {
    case BT_CONN_CONNECTING: return "connecting";
    case BT_CONN_WAIT_HELLO: return "waiting for HELLO";
    case BT_CONN_WAIT_AUTH: return "waiting for AUTH";
    case BT_CONN_WAIT_AUTH_OK: return "waiting for AUTH_OK";
    case BT_CONN_READY: return "ready";
    case BT_CONN_DRAINING: return "draining";
    case BT_CONN_LINGER: return "closing";
    case BT_CONN_CLOSED: return "closed";
    }
    return "?";
}

static void peer_ended(bt_conn_t *c)
{
    if (c->state == BT_CONN_LINGER)
        bt_conn_fail(c, ICBC_OK, "closed");
    else if (!bt_auth_done(c))
        bt_conn_fail(c, ICBC_ERR_AUTH,
                     "peer closed the connection while %s (wrong key, or not a bt_lib peer?)",
                     state_name(c->state));
    else if (c->rx == BT_RX_BODY)
        bt_conn_fail(c, ICBC_ERR_PEER_FAILED,
                     "peer closed the connection in the middle of a payload (%llu of %llu bytes)",
                     (unsigned long long) c->body_got, (unsigned long long) c->f.payload_len);
    else if (c->rx != BT_RX_FRAME || c->rx_end > c->rx_pos)
        bt_conn_fail(c, ICBC_ERR_PEER_FAILED,
                     "peer closed the connection in the middle of a frame");
    else
        bt_conn_fail(c, ICBC_ERR_PEER_FAILED, "peer closed the connection without CLOSE");
}

/* Result of a read: 1 bytes arrived, 0 nothing now, -1 the connection ended. */
static int read_result(bt_conn_t *c, ssize_t r)
{
    if (r > 0)
        return 1;
    if (r == 0) {
        peer_ended(c);
        return -1;
    }
    if (errno == EINTR)
        return 1;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
    if (c->state == BT_CONN_LINGER)
        bt_conn_fail(c, ICBC_OK, "closed (%s)", strerror(errno));
    else
        bt_conn_fail(c, bt_auth_done(c) ? ICBC_ERR_PEER_FAILED : ICBC_ERR_AUTH,
                     "receive failed while %s: %s", state_name(c->state), strerror(errno));
    return -1;
}

/* Appends socket bytes to the receive buffer. Called only when fewer bytes
 * are buffered than a frame header, so the move to the front is tiny. */
static int fill(bt_conn_t *c)
{
    size_t avail = c->rx_end - c->rx_pos;
    ssize_t r;

    if (c->rx_pos > 0) {
        memmove(c->rxbuf, c->rxbuf + c->rx_pos, avail);
        c->rx_pos = 0;
        c->rx_end = avail;
    }
    r = recv(c->fd, c->rxbuf + c->rx_end, BT_RX_BUF_SIZE - c->rx_end, 0);
    if (r > 0)
        c->rx_end += (size_t) r;
    return read_result(c, r);
}

/* Buffer empty, payload destination known: read into it directly. */
static int read_direct(bt_conn_t *c)
{
    uint64_t left = c->f.payload_len - c->body_got;
    struct iovec v[2];
    ssize_t r;

    c->rx_pos = c->rx_end = 0;
    v[0].iov_base = c->body + c->body_got;
    v[0].iov_len = left;
    v[1].iov_base = c->rxbuf;
    v[1].iov_len = BT_RX_BUF_SIZE;
    r = readv(c->fd, v, 2);
    if (r > 0) {
        if ((uint64_t) r <= left) {
            c->body_got += (uint64_t) r;
        } else {
            c->body_got += left;
            c->rx_end = (size_t) ((uint64_t) r - left);
        }
    }
    return read_result(c, r);
}

static bool type_allowed(const bt_conn_t *c, int type)
{
    switch (type) {
    case BT_FRAME_HELLO: return c->state == BT_CONN_WAIT_HELLO;
    case BT_FRAME_AUTH: return c->state == BT_CONN_WAIT_AUTH;
    case BT_FRAME_AUTH_OK: return c->state == BT_CONN_WAIT_AUTH_OK;
    case BT_FRAME_DATA: return bt_auth_done(c);
    case BT_FRAME_CLOSE: return true;
    }
    return false;
}

/* The 24 bytes at rx_pos are a frame header: check it against the state. */
static bool frame_start(bt_conn_t *c)
{
    char why[200];
    const bt_opts_t *o = &c->cfg->o;

    if (bt_frame_parse(c->rxbuf + c->rx_pos, o->max_hdr, o->max_payload, &c->f, why, sizeof(why)) !=
        ICBC_OK) {
        bt_conn_fail(c, bt_auth_done(c) ? ICBC_ERR_INVALID : ICBC_ERR_AUTH, "bad frame: %s", why);
        return false;
    }
    if (!type_allowed(c, c->f.type)) {
        if (c->f.type == BT_FRAME_DATA)
            bt_conn_fail(c, ICBC_ERR_AUTH, "DATA frame before authentication");
        else
            bt_conn_fail(c, ICBC_ERR_INVALID, "unexpected frame type %u while %s", c->f.type,
                         state_name(c->state));
        return false;
    }
    c->rx_pos += BT_FRAME_HDR_SIZE;
    if (c->f.hdr_len > c->hdr_cap) {
        /* bounded by max_hdr (checked by the parser) */
        uint32_t cap = c->f.hdr_len < 256 ? 256 : c->f.hdr_len;
        unsigned char *b = realloc(c->hdrbuf, cap);
        if (b == NULL) {
            bt_conn_fail(c, ICBC_ERR_NO_MEMORY, "no memory for a %u-byte header", c->f.hdr_len);
            return false;
        }
        c->hdrbuf = b;
        c->hdr_cap = cap;
    }
    c->hdr_got = 0;
    c->rx = BT_RX_HDR;
    return true;
}

static void start_body(bt_conn_t *c, unsigned char *dest)
{
    c->body = dest;
    c->body_got = 0;
    c->rx = BT_RX_BODY;
}

/* Header part complete: handshake frames are handled here; DATA asks the
 * caller where the payload goes. */
static void frame_decide(bt_conn_t *c)
{
    void *dest = NULL;
    bt_recv_action_t a = BT_RECV_DISCARD;

    switch (c->f.type) {
    case BT_FRAME_HELLO:
        c->rx = BT_RX_FRAME;
        bt_auth_on_hello(c);
        return;
    case BT_FRAME_AUTH_OK:
        c->rx = BT_RX_FRAME;
        bt_auth_on_auth_ok(c);
        return;
    case BT_FRAME_AUTH: start_body(c, c->auth_id); return;
    case BT_FRAME_CLOSE:
        c->rx = BT_RX_FRAME;
        if (c->state == BT_CONN_LINGER)
            bt_conn_fail(c, ICBC_OK, "closed");
        else if (!bt_auth_done(c))
            bt_conn_fail(c, ICBC_ERR_AUTH, "peer refused the authentication");
        else
            bt_conn_fail(c, ICBC_OK, "peer closed the connection");
        return;
    }
    if (c->cbs.on_header)
        a = c->cbs.on_header(c, c->hdrbuf, c->f.hdr_len, c->f.payload_len, &dest, c->arg);
    if (c->destroyed || c->state == BT_CONN_CLOSED)
        return;
    switch (a) {
    case BT_RECV_INTO:
        if (dest == NULL && c->f.payload_len > 0) {
            bt_conn_fail(c, ICBC_ERR_INVALID,
                         "on_header chose BT_RECV_INTO without a destination for %llu bytes",
                         (unsigned long long) c->f.payload_len);
            return;
        }
        start_body(c, dest);
        return;
    case BT_RECV_DISCARD: start_body(c, NULL); return;
    case BT_RECV_WAIT: c->rx = BT_RX_WAIT; return;
    }
    bt_conn_fail(c, ICBC_ERR_INVALID, "on_header returned %d, not a bt_recv_action_t", (int) a);
}

static void frame_done(bt_conn_t *c)
{
    c->rx = BT_RX_FRAME;
    if (c->f.type == BT_FRAME_AUTH)
        bt_auth_on_auth(c);
    else if (c->cbs.on_payload)
        c->cbs.on_payload(c, c->arg);
}

void bt_recv_progress(bt_conn_t *c)
{
    int reads = 0;

    while (!c->destroyed && c->state != BT_CONN_CLOSED) {
        size_t avail = c->rx_end - c->rx_pos;
        int r;

        switch (c->rx) {
        case BT_RX_WAIT: return;
        case BT_RX_FRAME:
            if (avail >= BT_FRAME_HDR_SIZE) {
                if (!frame_start(c))
                    return;
                continue;
            }
            break;
        case BT_RX_HDR: {
            size_t k = c->f.hdr_len - c->hdr_got;
            if (k > avail)
                k = avail;
            if (k > 0)
                memcpy(c->hdrbuf + c->hdr_got, c->rxbuf + c->rx_pos, k);
            c->rx_pos += k;
            c->hdr_got += (uint32_t) k;
            if (c->hdr_got == c->f.hdr_len) {
                c->rx = BT_RX_DECIDE;
                continue;
            }
            break;
        }
        case BT_RX_DECIDE: frame_decide(c); continue;
        case BT_RX_BODY: {
            uint64_t left = c->f.payload_len - c->body_got;
            if (left == 0) {
                frame_done(c);
                continue;
            }
            if (avail > 0) {
                size_t k = left < avail ? (size_t) left : avail;
                if (c->body != NULL)
                    memcpy(c->body + c->body_got, c->rxbuf + c->rx_pos, k);
                c->rx_pos += k;
                c->body_got += k;
                continue;
            }
            if (reads++ >= BT_RX_READS_PER_EVENT)
                return; /* level-triggered epoll calls again: other sockets first */
            r = c->body != NULL ? read_direct(c) : fill(c);
            if (r <= 0)
                return;
            continue;
        }
        }
        /* the buffered bytes are used up: more from the socket */
        if (reads++ >= BT_RX_READS_PER_EVENT)
            return;
        r = fill(c);
        if (r <= 0)
            return;
    }
}
