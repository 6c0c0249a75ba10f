/* Listening sockets: accept, tune, and start the acceptor's handshake. */
#define _GNU_SOURCE /* accept4 */
#include "bt_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "icbc_log.h"

#define BT_ACCEPTS_PER_EVENT 64
#define BT_ACCEPT_PAUSE_MS 100

static void set_interest(bt_listener_t *l, uint32_t events)
{
    struct epoll_event ev = { .events = events };

    ev.data.ptr = l;
    epoll_ctl(bt_poller_epfd(l->p), EPOLL_CTL_MOD, l->fd, &ev);
}

/* Out of descriptors or memory: the pending connection would wake the
 * level-triggered poller again at once, so stop watching for a while. */
static void pause_accepting(bt_listener_t *l, int err)
{
    icbc_warn("bt_lib: accept on %s: %s; not accepting for %d ms", l->addr_text, strerror(err),
              BT_ACCEPT_PAUSE_MS);
    set_interest(l, 0);
    l->retry_ms = ((int64_t) icbc_clock_ms()) + BT_ACCEPT_PAUSE_MS;
    bt_poller_deadline_changed(l->p, 1);
}

void bt_listener_check_retry(bt_listener_t *l, int64_t now)
{
    if (l->retry_ms == 0 || now < l->retry_ms)
        return;
    l->retry_ms = 0;
    bt_poller_deadline_changed(l->p, -1);
    set_interest(l, EPOLLIN);
}

icbc_status_t bt_listen(bt_poller_t *p, const struct sockaddr *addr, socklen_t addrlen,
                        const bt_opts_t *opts, const bt_conn_cbs_t *cbs, bt_accept_cb_t accept_cb,
                        void *arg, bt_listener_t **out)
{
    struct epoll_event ev;
    bt_listener_t *l;
    bt_cfg_t *cfg;
    icbc_status_t st;
    int fd, one = 1;
    char text[64];

    fd = bt_sock_open("bt_listen", p && out ? addr : NULL, opts, &cfg, text, &st);
    if (fd < 0)
        return st;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* buffer sizes before listen(): accepted sockets inherit them, and the
     * window scale of the handshake depends on the receive buffer */
    bt_sock_tune(fd, &cfg->o, text);
    if (bind(fd, addr, addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        icbc_error("bt_lib: listening on %s: %s", text, strerror(errno));
        close(fd);
        bt_cfg_unref(cfg);
        return ICBC_ERR_IO;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        close(fd);
        bt_cfg_unref(cfg);
        return ICBC_ERR_NO_MEMORY;
    }
    icbc_list_init(&l->link);
    l->w.kind = BT_W_LISTENER;
    l->p = p;
    l->fd = fd;
    l->cfg = cfg;
    if (cbs != NULL)
        l->cbs = *cbs;
    l->accept_cb = accept_cb;
    l->arg = arg;
    snprintf(l->addr_text, sizeof(l->addr_text), "%s", text);
    ev.events = EPOLLIN;
    ev.data.ptr = l;
    if (epoll_ctl(bt_poller_epfd(p), EPOLL_CTL_ADD, fd, &ev) != 0) {
        icbc_error("bt_lib: listening on %s: epoll_ctl: %s", text, strerror(errno));
        close(fd);
        bt_cfg_unref(cfg);
        free(l);
        return ICBC_ERR_IO;
    }
    bt_poller_link_listener(p, l);
    *out = l;
    return ICBC_OK;
}

void bt_listener_on_events(bt_listener_t *l)
{
    for (int i = 0; i < BT_ACCEPTS_PER_EVENT && !l->w.dead; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char text[64];
        bt_conn_t *c;
        int fd = accept4(l->fd, (struct sockaddr *) &ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accepting(l, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                icbc_warn("bt_lib: accept on %s: %s", l->addr_text, strerror(errno));
            return;
        }
        bt_sock_addr_text((struct sockaddr *) &ss, text, sizeof(text));
        bt_sock_tune(fd, &l->cfg->o, text);
        if (bt_conn_new(l->p, fd, l->cfg, &l->cbs, l->arg, true, (struct sockaddr *) &ss, &c) !=
            ICBC_OK) {
            icbc_warn("bt_lib: %s: connection refused: no memory", text);
            close(fd);
            continue;
        }
        bt_auth_start_acceptor(c);
        if (l->accept_cb != NULL && c->state != BT_CONN_CLOSED)
            l->accept_cb(l, c, l->arg);
        if (!c->destroyed && c->state != BT_CONN_CLOSED && bt_send_flush(c))
            bt_conn_update_events(c);
    }
}

icbc_status_t bt_listener_addr(const bt_listener_t *l, struct sockaddr_storage *addr,
                               socklen_t *addrlen)
{
    *addrlen = sizeof(*addr);
    if (getsockname(l->fd, (struct sockaddr *) addr, addrlen) != 0) {
        icbc_error("bt_lib: getsockname on %s: %s", l->addr_text, strerror(errno));
        return ICBC_ERR_IO;
    }
    return ICBC_OK;
}

void bt_listener_destroy(bt_listener_t *l)
{
    if (l == NULL || l->w.dead)
        return;
    if (l->retry_ms != 0)
        bt_poller_deadline_changed(l->p, -1);
    bt_poller_unlink_listener(l->p, l);
    epoll_ctl(bt_poller_epfd(l->p), EPOLL_CTL_DEL, l->fd, NULL);
    close(l->fd);
    l->fd = -1;
    bt_poller_retire(l->p, &l->w);
}
