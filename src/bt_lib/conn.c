/* Connection life cycle: connect, events, deferred callbacks, failure,
 * shutdown, destroy. The protocol steps live in auth.c, send.c and recv.c. */
#include "bt_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "icbc_log.h"

icbc_status_t bt_conn_new(bt_poller_t *p, int fd, bt_cfg_t *cfg, const bt_conn_cbs_t *cbs,
                          void *arg, bool acceptor, const struct sockaddr *peer, bt_conn_t **out)
{
    bt_conn_t *c = calloc(1, sizeof(*c));
    struct epoll_event ev;

    if (c == NULL || (c->rxbuf = malloc(BT_RX_BUF_SIZE)) == NULL) {
        free(c);
        return ICBC_ERR_NO_MEMORY;
    }
    icbc_list_init(&c->link);
    icbc_list_init(&c->defer_link);
    c->w.kind = BT_W_CONN;
    c->p = p;
    c->fd = fd;
    cfg->refs++;
    c->cfg = cfg;
    if (cbs != NULL)
        c->cbs = *cbs;
    c->arg = arg;
    c->acceptor = acceptor;
    c->state = acceptor ? BT_CONN_WAIT_AUTH : BT_CONN_CONNECTING;
    c->rx = BT_RX_FRAME;
    bt_sock_addr_text(peer, c->peer_text, sizeof(c->peer_text));
    c->events = acceptor ? EPOLLIN : EPOLLOUT;
    ev.events = c->events;
    ev.data.ptr = c;
    if (epoll_ctl(bt_poller_epfd(p), EPOLL_CTL_ADD, fd, &ev) != 0) {
        icbc_error("bt_lib: %s: epoll_ctl(ADD): %s", c->peer_text, strerror(errno));
        bt_cfg_unref(cfg);
        free(c->rxbuf);
        free(c);
        return ICBC_ERR_IO;
    }
    bt_poller_link_conn(p, c);
    bt_conn_set_deadline(c, ((int64_t) icbc_clock_ms()) + cfg->o.handshake_ms);
    *out = c;
    return ICBC_OK;
}

icbc_status_t bt_connect(bt_poller_t *p, const struct sockaddr *addr, socklen_t addrlen,
                         const bt_opts_t *opts, const bt_conn_cbs_t *cbs, void *arg,
                         bt_conn_t **out)
{
    char text[64];
    bt_cfg_t *cfg;
    icbc_status_t st;
    int fd, rc;

    fd = bt_sock_open("bt_connect", p && out ? addr : NULL, opts, &cfg, text, &st);
    if (fd < 0)
        return st;
    bt_sock_tune(fd, &cfg->o, text);
    rc = connect(fd, addr, addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
        icbc_error("bt_lib: connect to %s: %s", text, strerror(errno));
        close(fd);
        bt_cfg_unref(cfg);
        return ICBC_ERR_UNREACHABLE;
    }
    st = bt_conn_new(p, fd, cfg, cbs, arg, false, addr, out);
    bt_cfg_unref(cfg); /* the connection holds its own reference */
    if (st != ICBC_OK) {
        close(fd);
        return st;
    }
    if (rc == 0) {
        (*out)->state = BT_CONN_WAIT_HELLO;
        bt_conn_update_events(*out);
    }
    return ICBC_OK;
}

void bt_conn_update_events(bt_conn_t *c)
{
    struct epoll_event ev;
    uint32_t want = 0;

    if (c->fd < 0)
        return;
    if (c->state == BT_CONN_CONNECTING) {
        want = EPOLLOUT;
    } else {
        if (c->rx != BT_RX_WAIT)
            want |= EPOLLIN;
        if (bt_send_pending(c))
            want |= EPOLLOUT;
    }
    if (want == c->events)
        return;
    ev.events = want;
    ev.data.ptr = c;
    if (epoll_ctl(bt_poller_epfd(c->p), EPOLL_CTL_MOD, c->fd, &ev) != 0)
        bt_conn_fail(c, ICBC_ERR_IO, "epoll_ctl(MOD): %s", strerror(errno));
    else
        c->events = want;
}

static void finish_connect(bt_conn_t *c)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        bt_conn_fail(c, ICBC_ERR_UNREACHABLE, "connect failed: %s", strerror(err));
        return;
    }
    c->state = BT_CONN_WAIT_HELLO;
}

void bt_conn_on_events(bt_conn_t *c, uint32_t events)
{
    if (c->state == BT_CONN_CLOSED)
        return;
    if (c->state == BT_CONN_CONNECTING) {
        finish_connect(c);
    } else {
        if ((events & EPOLLOUT) && !bt_send_flush(c))
            return;
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
            if (c->rx == BT_RX_WAIT) {
                /* not reading: only learn why the socket broke */
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                bt_conn_fail(c, ICBC_ERR_PEER_FAILED, "connection lost while receive waits: %s",
                             err ? strerror(err) : "peer hung up");
                return;
            }
            bt_recv_progress(c);
        }
    }
    if (!c->destroyed && c->state != BT_CONN_CLOSED)
        bt_conn_update_events(c);
}

void bt_conn_set_deadline(bt_conn_t *c, int64_t deadline_ms)
{
    if ((c->deadline_ms != 0) != (deadline_ms != 0))
        bt_poller_deadline_changed(c->p, deadline_ms != 0 ? 1 : -1);
    c->deadline_ms = deadline_ms;
}

void bt_conn_check_deadline(bt_conn_t *c, int64_t now)
{
    if (c->deadline_ms == 0 || now < c->deadline_ms)
        return;
    if (c->state == BT_CONN_LINGER)
        bt_conn_fail(c, ICBC_OK, "closed after shutdown (the peer did not close within %d ms)",
                     c->cfg->o.handshake_ms);
    else
        bt_conn_fail(c, ICBC_ERR_TIMEOUT, "authentication not finished within %d ms",
                     c->cfg->o.handshake_ms);
}

static void close_socket(bt_conn_t *c)
{
    if (c->fd < 0)
        return;
    epoll_ctl(bt_poller_epfd(c->p), EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->events = 0;
}

void bt_conn_fail(bt_conn_t *c, icbc_status_t status, const char *fmt, ...)
{
    va_list ap;

    if (c->state == BT_CONN_CLOSED || c->destroyed)
        return;
    va_start(ap, fmt);
    vsnprintf(c->close_msg, sizeof(c->close_msg), fmt, ap);
    va_end(ap);
    c->close_status = status;
    if (status == ICBC_OK)
        icbc_debug("bt_lib: %s%s%s: %s", c->peer_text, c->peer_id[0] ? " " : "", c->peer_id,
                   c->close_msg);
    else
        icbc_warn("bt_lib: %s%s%s: %s; connection closed", c->peer_text, c->peer_id[0] ? " " : "",
                  c->peer_id, c->close_msg);
    close_socket(c);
    c->state = BT_CONN_CLOSED;
    bt_conn_set_deadline(c, 0);
    bt_poller_defer(c->p, c);
}

void bt_conn_run_deferred(bt_conn_t *c)
{
    bt_send_complete_done(c);
    if (c->destroyed)
        return;
    if (c->state == BT_CONN_CLOSED) {
        bt_send_fail_all(c, ICBC_ERR_PEER_FAILED);
        if (!c->destroyed && !c->close_reported) {
            c->close_reported = true;
            if (c->cbs.on_close)
                c->cbs.on_close(c, c->close_status, c->close_msg, c->arg);
        }
        return;
    }
    if (c->above_half && c->queued <= c->cfg->o.max_queued / 2) {
        c->above_half = false;
        if (c->state == BT_CONN_READY && c->cbs.on_writable)
            c->cbs.on_writable(c, c->arg);
        if (c->destroyed || c->state == BT_CONN_CLOSED)
            return;
    }
    if (c->resume_pending) {
        c->resume_pending = false;
        if (c->rx == BT_RX_WAIT) {
            c->rx = BT_RX_DECIDE;
            bt_recv_progress(c);
        }
    }
    if (!c->destroyed && c->state != BT_CONN_CLOSED)
        bt_conn_update_events(c);
}

void bt_conn_resume(bt_conn_t *c)
{
    if (c == NULL || c->destroyed || c->state == BT_CONN_CLOSED || c->rx != BT_RX_WAIT)
        return;
    c->resume_pending = true;
    bt_poller_defer(c->p, c);
}

void bt_conn_shutdown(bt_conn_t *c)
{
    if (c == NULL || c->destroyed || c->state >= BT_CONN_DRAINING)
        return;
    if (!bt_auth_done(c)) {
        bt_conn_fail(c, ICBC_OK, "shut down before authentication finished");
        return;
    }
    if (bt_send_close(c) != ICBC_OK) {
        bt_conn_fail(c, ICBC_ERR_NO_MEMORY, "no memory for the CLOSE frame");
        return;
    }
    c->state = BT_CONN_DRAINING;
    if (!(c->events & EPOLLOUT) && !bt_send_flush(c))
        return;
    if (c->state != BT_CONN_CLOSED)
        bt_conn_update_events(c);
}

void bt_conn_free_sends(bt_poller_t *p, bt_sendq_t *q)
{
    icbc_queue_elem_t *e;

    while ((e = icbc_queue_pop(q)) != NULL)
        bt_poller_send_free(p, ICBC_CONTAINER(e, bt_send_t, qe));
}

void bt_conn_free(bt_conn_t *c)
{
    bt_conn_free_sends(c->p, &c->ctlq);
    bt_conn_free_sends(c->p, &c->dataq);
    bt_conn_free_sends(c->p, &c->doneq);
    bt_cfg_unref(c->cfg);
    free(c->hdrbuf);
    free(c->rxbuf);
    free(c);
}

void bt_conn_destroy(bt_conn_t *c)
{
    bt_poller_t *p;

    if (c == NULL || c->destroyed)
        return;
    p = c->p;
    bt_poller_enter(p); /* callbacks below may destroy others: defer their frees */
    close_socket(c);
    c->state = BT_CONN_CLOSED;
    c->destroyed = true;
    bt_conn_set_deadline(c, 0);
    bt_poller_undefer(p, c);
    bt_poller_unlink_conn(p, c);
    bt_send_complete_done(c);
    bt_send_fail_all(c, ICBC_ERR_PEER_FAILED);
    bt_poller_retire(p, &c->w);
    bt_poller_leave(p);
}

size_t bt_conn_queued(const bt_conn_t *c)
{
    return c->queued;
}

size_t bt_conn_unsent(const bt_conn_t *c)
{
    int in_kernel = 0;

    if (c->fd < 0 || ioctl(c->fd, SIOCOUTQNSD, &in_kernel) != 0 || in_kernel < 0)
        in_kernel = 0;
    return c->queued + (size_t) in_kernel;
}

const char *bt_conn_peer_text(const bt_conn_t *c)
{
    return c->peer_text;
}

const char *bt_conn_peer_id(const bt_conn_t *c)
{
    return c->peer_id;
}

void bt_conn_set_arg(bt_conn_t *c, void *arg)
{
    c->arg = arg;
}

int bt_conn_fd(const bt_conn_t *c)
{
    return c->fd;
}
