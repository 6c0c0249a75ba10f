/* The epoll poller: registered objects, deferred work, deadlines, and the
 * deferred free that makes destroying objects from callbacks safe. */
#include "bt_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "icbc_freelist.h"
#include "icbc_log.h"

#define BT_EPOLL_BATCH 64

/* A foreign descriptor watched for the caller. */
typedef struct bt_fdw {
    bt_watch_t w;
    struct bt_fdw *next;
    int fd;
    bt_fd_cb_t cb;
    void *arg;
} bt_fdw_t;

struct bt_poller {
    int epfd;
    int depth;             /* > 0 while dispatching: frees are deferred */
    icbc_list_t conns;     /* bt_conn_t.link */
    icbc_list_t listeners; /* bt_listener_t.link */
    bt_fdw_t *fds;
    icbc_list_t deferred;  /* bt_conn_t.defer_link, in the order deferred */
    bt_watch_t *graveyard; /* dead objects to free when depth drops to 0 */
    int n_deadlines;       /* connections with a deadline: timers are scanned */
    icbc_freelist_t sends; /* send entries up to BT_SEND_POOLED bytes */
};

icbc_status_t bt_poller_create(bt_poller_t **out)
{
    bt_poller_t *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return ICBC_ERR_NO_MEMORY;
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (p->epfd < 0) {
        icbc_error("bt_lib: epoll_create1: %s", strerror(errno));
        free(p);
        return ICBC_ERR_IO;
    }
    icbc_list_init(&p->conns);
    icbc_list_init(&p->deferred);
    icbc_list_init(&p->listeners);
    icbc_freelist_init(&p->sends, BT_SEND_POOLED, 64);
    *out = p;
    return ICBC_OK;
}

static void free_watch(bt_watch_t *w)
{
    switch (w->kind) {
    case BT_W_CONN: bt_conn_free((bt_conn_t *) w); break;
    case BT_W_LISTENER: {
        bt_listener_t *l = (bt_listener_t *) w;
        bt_cfg_unref(l->cfg);
        free(l);
        break;
    }
    case BT_W_FD: free(w); break;
    }
}

void bt_poller_retire(bt_poller_t *p, bt_watch_t *w)
{
    w->dead = true;
    if (p->depth > 0) {
        w->next_dead = p->graveyard;
        p->graveyard = w;
    } else {
        free_watch(w);
    }
}

void bt_poller_enter(bt_poller_t *p)
{
    p->depth++;
}

void bt_poller_leave(bt_poller_t *p)
{
    if (--p->depth > 0)
        return;
    while (p->graveyard != NULL) {
        bt_watch_t *w = p->graveyard;
        p->graveyard = w->next_dead;
        free_watch(w);
    }
}

void bt_poller_destroy(bt_poller_t *p)
{
    if (p == NULL)
        return;
    p->depth++; /* bt_conn_destroy must not run callbacks' frees under us */
    while (!icbc_list_empty(&p->conns)) {
        bt_conn_t *c = ICBC_CONTAINER(p->conns.next, bt_conn_t, link);
        /* no callbacks: drop the queues before destroying */
        bt_conn_free_sends(p, &c->ctlq);
        bt_conn_free_sends(p, &c->dataq);
        bt_conn_free_sends(p, &c->doneq);
        c->queued = 0;
        bt_conn_destroy(c);
    }
    while (!icbc_list_empty(&p->listeners))
        bt_listener_destroy(ICBC_CONTAINER(p->listeners.next, bt_listener_t, link));
    while (p->fds != NULL)
        bt_poller_del_fd(p, p->fds->fd);
    p->depth = 1;
    bt_poller_leave(p);
    icbc_freelist_destroy(&p->sends); /* every entry is back: no connection is left */
    close(p->epfd);
    free(p);
}

int bt_poller_fd(const bt_poller_t *p)
{
    return p->epfd;
}

int bt_poller_epfd(bt_poller_t *p)
{
    return p->epfd;
}

void bt_poller_link_conn(bt_poller_t *p, bt_conn_t *c)
{
    icbc_list_push(&p->conns, &c->link);
}

void bt_poller_unlink_conn(bt_poller_t *p, bt_conn_t *c)
{
    (void) p;
    icbc_list_del(&c->link);
}

void bt_poller_link_listener(bt_poller_t *p, bt_listener_t *l)
{
    icbc_list_push(&p->listeners, &l->link);
}

void bt_poller_unlink_listener(bt_poller_t *p, bt_listener_t *l)
{
    (void) p;
    icbc_list_del(&l->link);
}

void bt_poller_defer(bt_poller_t *p, bt_conn_t *c)
{
    if (icbc_list_linked(&c->defer_link) || c->destroyed)
        return;
    icbc_list_push(&p->deferred, &c->defer_link);
}

void bt_poller_undefer(bt_poller_t *p, bt_conn_t *c)
{
    (void) p;
    /* from the poller's list, or from the round run_deferred is running */
    icbc_list_del(&c->defer_link);
}

void bt_poller_deadline_changed(bt_poller_t *p, int delta)
{
    p->n_deadlines += delta;
}

/* Runs the deferred work present now; work queued by these callbacks waits
 * for the next round, so a callback that always sends cannot loop forever. */
static int run_deferred(bt_poller_t *p)
{
    icbc_list_t round;
    int n = 0;

    icbc_list_init(&round);
    icbc_list_splice_init(&p->deferred, &round);
    while (!icbc_list_empty(&round)) {
        bt_conn_t *c = ICBC_CONTAINER(round.next, bt_conn_t, defer_link);
        icbc_list_del(&c->defer_link);
        if (!c->destroyed) {
            bt_conn_run_deferred(c);
            n++;
        }
    }
    return n;
}

static int next_timeout(bt_poller_t *p, int timeout_ms)
{
    int64_t now, first = INT64_MAX;

    if (!icbc_list_empty(&p->deferred))
        return 0;
    if (p->n_deadlines == 0)
        return timeout_ms;
    for (icbc_list_t *e = p->conns.next; e != &p->conns; e = e->next) {
        bt_conn_t *c = ICBC_CONTAINER(e, bt_conn_t, link);
        if (c->deadline_ms != 0 && c->deadline_ms < first)
            first = c->deadline_ms;
    }
    for (icbc_list_t *e = p->listeners.next; e != &p->listeners; e = e->next) {
        bt_listener_t *l = ICBC_CONTAINER(e, bt_listener_t, link);
        if (l->retry_ms != 0 && l->retry_ms < first)
            first = l->retry_ms;
    }
    if (first == INT64_MAX)
        return timeout_ms;
    now = ((int64_t) icbc_clock_ms());
    if (first <= now)
        return 0;
    if (timeout_ms < 0 || first - now < timeout_ms)
        return (int) (first - now + 1);
    return timeout_ms;
}

static int run_timers(bt_poller_t *p)
{
    int64_t now;
    int n = 0;

    if (p->n_deadlines == 0)
        return 0;
    now = ((int64_t) icbc_clock_ms());
    for (icbc_list_t *e = p->conns.next; e != &p->conns; e = e->next) {
        bt_conn_t *c = ICBC_CONTAINER(e, bt_conn_t, link);
        if (c->deadline_ms != 0 && c->deadline_ms <= now) {
            bt_conn_check_deadline(c, now); /* only defers callbacks: list stays intact */
            n++;
        }
    }
    for (icbc_list_t *e = p->listeners.next; e != &p->listeners; e = e->next)
        bt_listener_check_retry(ICBC_CONTAINER(e, bt_listener_t, link), now);
    return n;
}

static void dispatch(bt_watch_t *w, uint32_t events)
{
    if (w->dead)
        return; /* destroyed by an earlier callback of this batch */
    switch (w->kind) {
    case BT_W_CONN: bt_conn_on_events((bt_conn_t *) w, events); break;
    case BT_W_LISTENER: bt_listener_on_events((bt_listener_t *) w); break;
    case BT_W_FD: {
        bt_fdw_t *f = (bt_fdw_t *) w;
        f->cb(f->fd, events, f->arg);
        break;
    }
    }
}

int bt_poller_wait(bt_poller_t *p, int timeout_ms)
{
    struct epoll_event ev[BT_EPOLL_BATCH];
    int n, handled = 0;

    bt_poller_enter(p);
    handled += run_deferred(p);
    n = epoll_wait(p->epfd, ev, BT_EPOLL_BATCH, next_timeout(p, timeout_ms));
    if (n < 0) {
        int err = errno;
        bt_poller_leave(p);
        if (err == EINTR)
            return handled;
        icbc_error("bt_lib: epoll_wait: %s", strerror(err));
        return ICBC_ERR_IO;
    }
    for (int i = 0; i < n; i++)
        dispatch(ev[i].data.ptr, ev[i].events);
    handled += n;
    handled += run_timers(p);
    handled += run_deferred(p);
    bt_poller_leave(p);
    return handled;
}

int bt_poller_run_deferred(bt_poller_t *p)
{
    int n;

    if (icbc_list_empty(&p->deferred))
        return 0;
    bt_poller_enter(p);
    n = run_deferred(p);
    bt_poller_leave(p);
    return n;
}

/* ---- foreign descriptors ---- */

icbc_status_t bt_poller_add_fd(bt_poller_t *p, int fd, uint32_t events, bt_fd_cb_t cb, void *arg)
{
    struct epoll_event ev = { .events = events };
    bt_fdw_t *f;

    if (cb == NULL || fd < 0)
        return ICBC_ERR_INVALID;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return ICBC_ERR_NO_MEMORY;
    f->w.kind = BT_W_FD;
    f->fd = fd;
    f->cb = cb;
    f->arg = arg;
    ev.data.ptr = f;
    if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        icbc_error("bt_lib: epoll_ctl(ADD, fd %d): %s", fd, strerror(errno));
        free(f);
        return ICBC_ERR_IO;
    }
    f->next = p->fds;
    p->fds = f;
    return ICBC_OK;
}

static bt_fdw_t **find_fd(bt_poller_t *p, int fd)
{
    bt_fdw_t **pp = &p->fds;

    while (*pp != NULL && (*pp)->fd != fd)
        pp = &(*pp)->next;
    return pp;
}

icbc_status_t bt_poller_mod_fd(bt_poller_t *p, int fd, uint32_t events)
{
    bt_fdw_t *f = *find_fd(p, fd);
    struct epoll_event ev = { .events = events };

    if (f == NULL)
        return ICBC_ERR_NOT_FOUND;
    ev.data.ptr = f;
    if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev) != 0) {
        icbc_error("bt_lib: epoll_ctl(MOD, fd %d): %s", fd, strerror(errno));
        return ICBC_ERR_IO;
    }
    return ICBC_OK;
}

void bt_poller_del_fd(bt_poller_t *p, int fd)
{
    bt_fdw_t **pp = find_fd(p, fd), *f = *pp;

    if (f == NULL)
        return;
    *pp = f->next;
    epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
    bt_poller_retire(p, &f->w);
}

bt_send_t *bt_poller_send_new(bt_poller_t *p, size_t sz)
{
    bool pooled = sz <= BT_SEND_POOLED;
    bt_send_t *e = pooled ? icbc_freelist_get(&p->sends) : malloc(sz);

    if (e != NULL)
        e->pooled = pooled;
    return e;
}

void bt_poller_send_free(bt_poller_t *p, bt_send_t *e)
{
    if (e->pooled)
        icbc_freelist_put(&p->sends, e);
    else
        free(e);
}
