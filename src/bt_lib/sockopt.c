/* Socket tuning for WAN trunks: buffers, Nagle, pacing, keepalive. */
#include "bt_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

#include "icbc_log.h"

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

static void set_int(int fd, int level, int name, int val, const char *what, const char *who)
{
    if (setsockopt(fd, level, name, &val, sizeof(val)) != 0)
        icbc_warn("bt_lib: %s: setsockopt %s=%d: %s", who, what, val, strerror(errno));
}

/* Pacing: Linux takes a 64-bit rate when given 8 bytes (since 5.x) and a
 * 32-bit one before; ~0U means unlimited in the 32-bit form. */
static void set_pacing(int fd, uint64_t rate, const char *who)
{
    unsigned int rate32;

    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) == 0)
        return;
    rate32 = rate >= 0xffffffffu ? 0xfffffffeu : (unsigned int) rate;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate32, sizeof(rate32)) != 0)
        icbc_warn("bt_lib: %s: SO_MAX_PACING_RATE %llu B/s not accepted: %s", who,
                  (unsigned long long) rate, strerror(errno));
}

void bt_sock_tune(int fd, const bt_opts_t *o, const char *who)
{
    if (o->sndbuf > 0)
        set_int(fd, SOL_SOCKET, SO_SNDBUF, o->sndbuf, "SO_SNDBUF", who);
    if (o->rcvbuf > 0)
        set_int(fd, SOL_SOCKET, SO_RCVBUF, o->rcvbuf, "SO_RCVBUF", who);
    if (o->nodelay)
        set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", who);
    set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE", who);
    if (o->pacing_rate > 0)
        set_pacing(fd, o->pacing_rate, who);
    if (o->notsent_lowat > 0)
        set_int(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, o->notsent_lowat, "TCP_NOTSENT_LOWAT", who);
}

void bt_sock_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "(family %d)", sa->sa_family);
    }
}

void bt_conn_set_pacing(bt_conn_t *c, uint64_t rate)
{
    int fd = bt_conn_fd(c);

    /* 0 to the kernel would stop the socket: ~0 is unlimited */
    if (fd >= 0)
        set_pacing(fd, rate > 0 ? rate : ~(uint64_t) 0, bt_conn_peer_text(c));
}

int bt_sock_open(const char *what, const struct sockaddr *addr, const bt_opts_t *opts,
                 bt_cfg_t **cfg, char *text, icbc_status_t *st)
{
    int fd;

    if (addr == NULL || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
        icbc_error("bt_lib: %s needs a poller and an IPv4 or IPv6 address", what);
        *st = ICBC_ERR_INVALID;
        return -1;
    }
    *st = bt_cfg_create(opts, cfg);
    if (*st != ICBC_OK)
        return -1;
    bt_sock_addr_text(addr, text, 64);
    fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        icbc_error("bt_lib: %s: socket for %s: %s", what, text, strerror(errno));
        bt_cfg_unref(*cfg);
        *st = ICBC_ERR_IO;
    }
    return fd;
}
