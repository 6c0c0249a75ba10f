/* Bound on the unregistered connections of the router's UCX ports; see mx_guard.h. */
#include "mx_guard.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icbc_log.h"

#define GUARD_PORTS_MAX 16

typedef struct {
    struct sockaddr_storage addr; /* port zeroed */
    int count;                    /* registered processes on the host now */
    double last_ms;               /* when the last one left */
} guard_host_t;

typedef struct {
    unsigned long ino;
    double first_ms; /* the scan that first saw it */
    int shut;
} guard_conn_t;

typedef struct {
    int fd;
    double first_ms;
    size_t conn; /* index in the scan's connections */
} guard_cand_t;

struct mx_guard {
    unsigned long *before; /* listening sockets before UCX was set up */
    size_t nbefore;
    struct {
        int family;
        uint16_t port; /* host order */
    } ports[GUARD_PORTS_MAX];
    size_t nports;
    guard_host_t *hosts;
    size_t nhosts, caphosts;
    guard_conn_t *conns; /* sorted by ino */
    size_t nconns;
    size_t untrusted;
};

/* Calls FN for every socket descriptor of this process. */
static void each_socket(void (*fn)(int fd, unsigned long ino, void *arg), void *arg)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char link[64];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        unsigned long ino;
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        ssize_t n;

        if (*end != '\0' || fd < 0 || fd == dirfd(d))
            continue;
        n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) == 1)
            fn((int) fd, ino, arg);
    }
    closedir(d);
}

static int is_listening_tcp(int fd)
{
    int v = 0, t = 0;
    socklen_t l = sizeof(v), tl = sizeof(t);

    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &tl) == 0 && t == SOCK_STREAM &&
           getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v;
}

static int sock_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *) ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *) ss)->sin6_port);
    return -1;
}

static void note_listener(int fd, unsigned long ino, void *arg)
{
    mx_guard_t *g = arg;
    unsigned long *b;

    if (!is_listening_tcp(fd))
        return;
    b = realloc(g->before, (g->nbefore + 1) * sizeof(*b));
    if (b == NULL)
        return;
    g->before = b;
    g->before[g->nbefore++] = ino;
}

icbc_status_t mx_guard_begin(mx_guard_t **out)
{
    mx_guard_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return ICBC_ERR_NO_MEMORY;
    each_socket(note_listener, g);
    *out = g;
    return ICBC_OK;
}

static void take_new_listener(int fd, unsigned long ino, void *arg)
{
    mx_guard_t *g = arg;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (!is_listening_tcp(fd))
        return;
    for (size_t i = 0; i < g->nbefore; i++)
        if (g->before[i] == ino)
            return;
    if (g->nports == GUARD_PORTS_MAX || getsockname(fd, (struct sockaddr *) &ss, &sl) != 0 ||
        sock_port(&ss) < 0)
        return;
    g->ports[g->nports].family = ss.ss_family;
    g->ports[g->nports].port = (uint16_t) sock_port(&ss);
    g->nports++;
}

size_t mx_guard_end(mx_guard_t *g)
{
    each_socket(take_new_listener, g);
    free(g->before);
    g->before = NULL;
    g->nbefore = 0;
    for (size_t i = 0; i < g->nports; i++)
        icbc_debug("fabric guard: the fabric listens on port %u", g->ports[i].port);
    return g->nports;
}

void mx_guard_free(mx_guard_t *g)
{
    if (g == NULL)
        return;
    free(g->before);
    free(g->hosts);
    free(g->conns);
    free(g);
}

static void host_key(const struct sockaddr *sa, struct sockaddr_storage *key)
{
    memset(key, 0, sizeof(*key));
    key->ss_family = sa->sa_family;
    if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *) key)->sin_addr = ((const struct sockaddr_in *) sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *) key)->sin6_addr = ((const struct sockaddr_in6 *) sa)->sin6_addr;
}

static guard_host_t *find_host(const mx_guard_t *g, const struct sockaddr *sa)
{
    struct sockaddr_storage key;

    host_key(sa, &key);
    for (size_t i = 0; i < g->nhosts; i++)
        if (memcmp(&g->hosts[i].addr, &key, sizeof(key)) == 0)
            return &g->hosts[i];
    return NULL;
}

void mx_guard_trust(mx_guard_t *g, const struct sockaddr *host, int delta, double now_ms)
{
    guard_host_t *h = find_host(g, host);

    if (h == NULL) {
        if (delta <= 0)
            return;
        if (g->nhosts == g->caphosts) {
            size_t cap = g->caphosts ? 2 * g->caphosts : 16;
            guard_host_t *n = realloc(g->hosts, cap * sizeof(*n));
            if (n == NULL)
                return; /* the host stays untrusted: its processes re-register */
            g->hosts = n;
            g->caphosts = cap;
        }
        h = &g->hosts[g->nhosts++];
        host_key(host, &h->addr);
        h->count = 0;
    }
    h->count += delta;
    if (h->count < 0)
        h->count = 0;
    if (h->count == 0)
        h->last_ms = now_ms;
}

static int trusted(const mx_guard_t *g, const struct sockaddr *peer, double now_ms,
                   double timeout_ms)
{
    const guard_host_t *h = find_host(g, peer);

    return h && (h->count > 0 || now_ms - h->last_ms < timeout_ms);
}

static int guarded_port(const mx_guard_t *g, const struct sockaddr_storage *local)
{
    int port = sock_port(local);

    for (size_t i = 0; i < g->nports; i++)
        if (g->ports[i].family == local->ss_family && g->ports[i].port == port)
            return 1;
    return 0;
}

static guard_conn_t *find_conn(guard_conn_t *v, size_t n, unsigned long ino)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].ino == ino)
            return &v[mid];
        if (v[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

typedef struct {
    mx_guard_t *g;
    double now, timeout;
    guard_conn_t *conns; /* this scan's */
    size_t nconns, cap;
    guard_cand_t *cands; /* untrusted and younger than the timeout */
    size_t ncands, capcands;
    size_t shut;
    int oom;
} scan_t;

static void shut(int fd, guard_conn_t *c, size_t *count)
{
    if (c->shut)
        return;
    c->shut = 1;
    (*count)++;
    /* Not close(): the descriptor stays UCX's; it sees the end of the stream. */
    shutdown(fd, SHUT_RDWR);
}

static void scan_one(int fd, unsigned long ino, void *arg)
{
    scan_t *sc = arg;
    struct sockaddr_storage local, peer;
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    const guard_conn_t *old;
    guard_conn_t *c;
    int t = 0;
    socklen_t tl = sizeof(t);

    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &tl) != 0 || t != SOCK_STREAM ||
        is_listening_tcp(fd) || getsockname(fd, (struct sockaddr *) &local, &ll) != 0 ||
        !guarded_port(sc->g, &local) || getpeername(fd, (struct sockaddr *) &peer, &pl) != 0)
        return;
    if (sc->nconns == sc->cap) {
        size_t cap = sc->cap ? 2 * sc->cap : 64;
        guard_conn_t *n = realloc(sc->conns, cap * sizeof(*n));
        if (n == NULL) {
            sc->oom = 1;
            return;
        }
        sc->conns = n;
        sc->cap = cap;
    }
    old = find_conn(sc->g->conns, sc->g->nconns, ino);
    c = &sc->conns[sc->nconns++];
    c->ino = ino;
    c->first_ms = old ? old->first_ms : sc->now;
    c->shut = old ? old->shut : 0;
    if (trusted(sc->g, (const struct sockaddr *) &peer, sc->now, sc->timeout))
        return;
    if (sc->now - c->first_ms >= sc->timeout) {
        shut(fd, c, &sc->shut);
        return;
    }
    if (c->shut)
        return;
    if (sc->ncands == sc->capcands) {
        size_t cap = sc->capcands ? 2 * sc->capcands : 64;
        guard_cand_t *n = realloc(sc->cands, cap * sizeof(*n));
        if (n == NULL) {
            sc->oom = 1;
            return;
        }
        sc->cands = n;
        sc->capcands = cap;
    }
    sc->cands[sc->ncands].fd = fd;
    sc->cands[sc->ncands].first_ms = c->first_ms;
    sc->cands[sc->ncands].conn = sc->nconns - 1;
    sc->ncands++;
}

static int by_ino(const void *a, const void *b)
{
    unsigned long x = ((const guard_conn_t *) a)->ino, y = ((const guard_conn_t *) b)->ino;
    return x < y ? -1 : x > y;
}

static int by_age(const void *a, const void *b)
{
    double x = ((const guard_cand_t *) a)->first_ms, y = ((const guard_cand_t *) b)->first_ms;
    return x < y ? -1 : x > y;
}

size_t mx_guard_scan(mx_guard_t *g, double now_ms, double timeout_ms, size_t max_untrusted)
{
    scan_t sc = { .g = g, .now = now_ms, .timeout = timeout_ms };

    if (g->nports == 0)
        return 0;
    each_socket(scan_one, &sc);
    if (sc.oom) {
        /* keep what we knew; try again at the next scan */
        free(sc.conns);
        free(sc.cands);
        return sc.shut;
    }
    g->untrusted = sc.ncands;
    if (sc.ncands > max_untrusted) {
        /* Too many silent newcomers: the oldest go first. */
        qsort(sc.cands, sc.ncands, sizeof(*sc.cands), by_age);
        for (size_t i = 0; i < sc.ncands - max_untrusted; i++)
            shut(sc.cands[i].fd, &sc.conns[sc.cands[i].conn], &sc.shut);
        g->untrusted = max_untrusted;
    }
    if (sc.nconns > 1)
        qsort(sc.conns, sc.nconns, sizeof(*sc.conns), by_ino);
    free(sc.cands);
    free(g->conns);
    g->conns = sc.conns;
    g->nconns = sc.nconns;
    if (sc.shut)
        icbc_info("fabric guard: shut down %zu connection(s) of hosts without a registered "
                  "process (%zu untrusted left)",
                  sc.shut, g->untrusted);
    return sc.shut;
}

size_t mx_guard_untrusted(const mx_guard_t *g)
{
    return g->untrusted;
}
