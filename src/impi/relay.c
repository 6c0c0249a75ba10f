/*
 * The IMPI relay's daemon: start-up's two sockets around relay_startup.c,
 * then the host connections of both sides and the packets between them on
 * bt_lib's poller; see impi_relay.h.
 *
 * A packet from inside host I on persona P's connection (for a process of
 * the client P stands for) leaves on the relay's connection to the outside
 * host of its destination, and one from outside host X (for a process of
 * the private client) on persona(X's client)'s connection to the inside
 * host of its destination. Its source and destination become the ids the
 * next side knows them by (impi_rly_inside / impi_rly_outside: world ranks
 * are the same on both sides). Flow control, synchronous and long
 * messages stay end to end: the relay reads no more of a packet than its
 * addresses. FINI is per hop: the relay says it outside once every inside
 * host said it to every persona, and a persona says it inside once every
 * host of its client said it to the relay.
 *
 * Losing a host before its FINI ends the relay: every connection closes,
 * so the processes on both sides see their peers fail, with an error, as
 * they would if the host of the other side had died.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "impi_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bt_lib.h"
#include "icbc_bytes.h"
#include "icbc_clock.h"
#include "icbc_log.h"
#include "impi_agent.h"
#include "impi_hostconn.h"
#include "impi_rx.h"

enum { INSIDE = 0, OUTSIDE = 1 };

typedef struct conn {
    struct impi_relay *r;
    int side;
    int client; /* inside: the client the persona stands for; outside: the host's */
    int self;   /* the relay's host on this connection, in the side's layout */
    int peer;   /* the other host, in the side's layout */
    int fd;
    impi_rx_t rx;
    uint8_t *out;
    size_t off, len, cap;
    uint32_t events;
    int fini_in, fini_out, closed;
    int dirty; /* queued to in this round, written at its end (in relay.dirty) */
} conn_t;

struct impi_relay {
    impi_relay_config_t cfg;
    struct in_addr in_v4, out_v4, srv_v4;
    uint16_t srv_port;
    int startup_lfd, startup_fd, server_fd, out_lfd;
    int persona_lfd[IMPI_MAX_CLIENTS];
    uint16_t port, out_port;
    impi_rly_t *rly;
    const impi_layout_t *in, *out;
    int client, self_out; /* the private client; the relay's outside host */
    conn_t *outs;         /* per outside host (the relay's own: unused) */
    conn_t *ins;          /* per client, per inside host of the private client */
    int nin;              /* inside hosts of the private client */
    bt_poller_t *poller;
    int paused[2]; /* a side's reading stopped: a queue of the other side is full */
    int failed;
    conn_t **dirty; /* connections written to since the round began */
    int ndirty;
    char why[512];
    uint8_t buf[1 << 16];
};

#define QUEUE_MAX IMPI_AGENT_QUEUE_MAX

static void failf(impi_relay_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(impi_relay_t *r, const char *fmt, ...)
{
    va_list ap;

    if (r->failed)
        return;
    r->failed = 1;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof(r->why), fmt, ap);
    va_end(ap);
}

static void addr16(uint8_t a[16], struct in_addr v4)
{
    memset(a, 0, 16);
    memcpy(a + 12, &v4, 4);
}

/* A listening socket on ADDR, any port; its port in *PORT. */
static int listen_on(struct in_addr addr, uint16_t want, uint16_t *port)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(want) };
    socklen_t sl = sizeof(sin);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *) &sin, sizeof(sin)) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *) &sin, &sl) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sin.sin_port);
    return fd;
}

static uint32_t persona_port(void *arg, int client)
{
    impi_relay_t *r = arg;
    uint16_t port = 0;

    r->persona_lfd[client] = listen_on(r->in_v4, 0, &port);
    return r->persona_lfd[client] < 0 ? 0 : port;
}

/* Connects to impi-server (from the outside address when one was given,
 * which is otherwise the address the server is reached from) and opens the
 * relay's outside host port there. */
static icbc_status_t connect_server(impi_relay_t *r, char *err, size_t errlen)
{
    struct sockaddr_in to = { .sin_family = AF_INET,
                              .sin_addr = r->srv_v4,
                              .sin_port = htons(r->srv_port) };
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = r->out_v4 };
    socklen_t sl = sizeof(me);
    int one = 1;

    r->server_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (r->server_fd < 0 ||
        (r->cfg.outside_addr && bind(r->server_fd, (struct sockaddr *) &me, sizeof(me)) != 0) ||
        connect(r->server_fd, (struct sockaddr *) &to, sizeof(to)) != 0)
        return icbc_err(ICBC_ERR_UNREACHABLE, err, errlen, "cannot reach impi-server at %s: %s",
                        r->cfg.server, strerror(errno));
    setsockopt(r->server_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    getsockname(r->server_fd, (struct sockaddr *) &me, &sl);
    r->out_v4 = me.sin_addr;
    r->out_lfd = listen_on(r->out_v4, 0, &r->out_port);
    if (r->out_lfd < 0)
        return icbc_err(ICBC_ERR_IO, err, errlen, "cannot listen on the outside address: %s",
                        strerror(errno));
    return ICBC_OK;
}

/* The first non-loopback IPv4 address of this node other than NOT. */
static int other_address(struct in_addr not, struct in_addr *found)
{
    struct ifaddrs *ifa, *i;
    int ok = 0;

    if (getifaddrs(&ifa) != 0)
        return 0;
    for (i = ifa; i && !ok; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        struct in_addr a = ((struct sockaddr_in *) i->ifa_addr)->sin_addr;
        if (a.s_addr != not .s_addr) {
            *found = a;
            ok = 1;
        }
    }
    freeifaddrs(ifa);
    return ok;
}

/* ---- create / destroy ---------------------------------------------------- */

icbc_status_t impi_relay_create(const impi_relay_config_t *cfg, impi_relay_t **out, char *err,
                                size_t errlen)
{
    impi_relay_t *r = calloc(1, sizeof(*r));
    char host[64];
    const char *colon;
    long port;

    if (r == NULL)
        return ICBC_ERR_NO_MEMORY;
    r->cfg = *cfg;
    r->startup_lfd = r->startup_fd = r->server_fd = r->out_lfd = -1;
    for (int c = 0; c < IMPI_MAX_CLIENTS; c++)
        r->persona_lfd[c] = -1;
    colon = cfg->server ? strrchr(cfg->server, ':') : NULL;
    port = colon ? strtol(colon + 1, NULL, 10) : 0;
    if (!colon || (size_t) (colon - cfg->server) >= sizeof(host) || port < 1 || port > 65535) {
        snprintf(err, errlen, "-server '%s': want ADDR:PORT", cfg->server ? cfg->server : "");
        goto fail;
    }
    memcpy(host, cfg->server, (size_t) (colon - cfg->server));
    host[colon - cfg->server] = '\0';
    r->srv_port = (uint16_t) port;
    if (inet_pton(AF_INET, host, &r->srv_v4) != 1) {
        snprintf(err, errlen, "-server '%s': '%s' is not an IPv4 address", cfg->server, host);
        goto fail;
    }
    if (cfg->outside_addr && inet_pton(AF_INET, cfg->outside_addr, &r->out_v4) != 1) {
        snprintf(err, errlen, "-outside '%s' is not an IPv4 address", cfg->outside_addr);
        goto fail;
    }
    if (cfg->inside_addr && inet_pton(AF_INET, cfg->inside_addr, &r->in_v4) != 1) {
        snprintf(err, errlen, "-inside '%s' is not an IPv4 address", cfg->inside_addr);
        goto fail;
    }
    if (connect_server(r, err, errlen) != ICBC_OK)
        goto fail;
    if (!cfg->inside_addr && !other_address(r->out_v4, &r->in_v4)) {
        snprintf(err, errlen,
                 "this node has no IPv4 address beside %s, the one it reaches "
                 "impi-server from: name the inside one with -inside",
                 inet_ntoa(r->out_v4));
        goto fail;
    }
    r->startup_lfd = listen_on(r->in_v4, cfg->port, &r->port);
    if (r->startup_lfd < 0) {
        snprintf(err, errlen, "cannot listen on %s:%u: %s", inet_ntoa(r->in_v4), cfg->port,
                 strerror(errno));
        goto fail;
    }
    impi_rly_config_t rc = { .outside_port = r->out_port,
                             .require_key = cfg->require_key,
                             .key = cfg->key,
                             .persona_port = persona_port,
                             .arg = r };
    addr16(rc.inside_addr, r->in_v4);
    addr16(rc.outside_addr, r->out_v4);
    if (impi_rly_create(&rc, &r->rly) != ICBC_OK) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    *out = r;
    return ICBC_OK;
fail:
    impi_relay_destroy(r);
    return ICBC_ERR_INVALID;
}

const char *impi_relay_inside_addr(const impi_relay_t *r)
{
    static char text[INET_ADDRSTRLEN];

    return inet_ntop(AF_INET, &r->in_v4, text, sizeof(text));
}

uint16_t impi_relay_port(const impi_relay_t *r)
{
    return r->port;
}

static void conn_close(conn_t *c)
{
    if (c->fd >= 0) {
        bt_poller_del_fd(c->r->poller, c->fd);
        close(c->fd);
    }
    c->fd = -1;
    c->closed = 1;
}

static void conn_free(conn_t *c)
{
    if (c->r && c->fd >= 0)
        conn_close(c);
    if (c->r)
        impi_rx_free(&c->rx);
    free(c->out);
}

void impi_relay_destroy(impi_relay_t *r)
{
    if (r == NULL)
        return;
    if (r->outs && r->out)
        for (int h = 0; h < r->out->nhosts_total; h++)
            conn_free(&r->outs[h]);
    if (r->ins)
        for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
            conn_free(&r->ins[i]);
    free(r->outs);
    free(r->ins);
    free(r->dirty);
    int fds[] = { r->startup_lfd, r->startup_fd, r->server_fd, r->out_lfd };
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int c = 0; c < IMPI_MAX_CLIENTS; c++)
        if (r->persona_lfd[c] >= 0)
            close(r->persona_lfd[c]);
    if (r->poller)
        bt_poller_destroy(r->poller);
    impi_rly_destroy(r->rly);
    free(r);
}

/* ---- start-up ------------------------------------------------------------ */

static int send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

/* Writes what start-up has for both sides. */
static icbc_status_t startup_flush(impi_relay_t *r, char *err, size_t errlen)
{
    size_t n;
    const void *p = impi_rly_server_output(r->rly, &n);

    if (n && send_all(r->server_fd, p, n) < 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "writing to impi-server: %s",
                        strerror(errno));
    impi_rly_server_consume(r->rly, n);
    p = impi_rly_inside_output(r->rly, &n);
    if (n && r->startup_fd >= 0 && send_all(r->startup_fd, p, n) < 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "writing to the inside client: %s",
                        strerror(errno));
    impi_rly_inside_consume(r->rly, n);
    return ICBC_OK;
}

/* Start-up: the inside client's commands through to the server and its
 * answers back, until the server's DONE went inside. */
static icbc_status_t run_startup(impi_relay_t *r, char *err, size_t errlen)
{
    double progress = icbc_clock_now();
    icbc_status_t st;

    while (!impi_rly_started(r->rly)) {
        struct pollfd p[3] = { { r->startup_fd >= 0 ? -1 : r->startup_lfd, POLLIN, 0 },
                               { r->startup_fd, POLLIN, 0 },
                               { r->server_fd, POLLIN, 0 } };
        int n = poll(p, 3, 1000);
        if (n < 0 && errno != EINTR)
            return icbc_err(ICBC_ERR_IO, err, errlen, "poll: %s", strerror(errno));
        if (r->cfg.timeout > 0 && icbc_clock_now() - progress > r->cfg.timeout)
            return icbc_err(ICBC_ERR_TIMEOUT, err, errlen,
                            "start-up made no progress for %.0f s (%s)", r->cfg.timeout,
                            r->startup_fd < 0 ? "no inside client connected"
                                              : "waiting for the inside client or the server");
        if (n <= 0)
            continue;
        progress = icbc_clock_now();
        if (p[0].revents & POLLIN) {
            r->startup_fd = accept4(r->startup_lfd, NULL, NULL, SOCK_CLOEXEC);
            if (r->startup_fd >= 0) {
                int one = 1;
                setsockopt(r->startup_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            }
        }
        for (int i = 1; i < 3; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)) || p[i].fd < 0)
                continue;
            ssize_t got = recv(p[i].fd, r->buf, sizeof(r->buf), 0);
            if (got <= 0)
                st = icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "%s closed during start-up",
                              i == 1 ? "the inside client" : "impi-server");
            else
                st = i == 1 ? impi_rly_inside_input(r->rly, r->buf, (size_t) got, err, errlen)
                            : impi_rly_server_input(r->rly, r->buf, (size_t) got, err, errlen);
            if (st != ICBC_OK && i == 1 && !impi_rly_inside_known(r->rly)) {
                /* nobody yet: dropped alone, and the port waits for the
                 * client */
                icbc_warn("dropped a connection to the inside port before it named its "
                          "client: %s",
                          err);
                close(r->startup_fd);
                r->startup_fd = -1;
                impi_rly_inside_reset(r->rly);
                continue;
            }
            if (st != ICBC_OK)
                return st;
        }
        if ((st = startup_flush(r, err, errlen)) != ICBC_OK)
            return st;
    }
    return ICBC_OK;
}

/* ---- packets ------------------------------------------------------------- */

static void conn_arm(conn_t *c)
{
    uint32_t want = (c->r->paused[c->side] ? 0 : EPOLLIN) | (c->len > c->off ? EPOLLOUT : 0);

    if (c->fd >= 0 && want != c->events && bt_poller_mod_fd(c->r->poller, c->fd, want) == ICBC_OK)
        c->events = want;
}

static void side_arm(impi_relay_t *r, int side)
{
    if (side == OUTSIDE) {
        for (int h = 0; h < r->out->nhosts_total; h++)
            conn_arm(&r->outs[h]);
    } else {
        for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
            conn_arm(&r->ins[i]);
    }
}

/* Back-pressure: while a connection holds more than QUEUE_MAX bytes the
 * other side (which feeds it) is not read, until it is below half. */
static void pressure(impi_relay_t *r, int side, size_t queued)
{
    int other = !side;

    if (!r->paused[other] && queued > QUEUE_MAX) {
        r->paused[other] = 1;
        side_arm(r, other);
    } else if (r->paused[other] && queued < QUEUE_MAX / 2) {
        size_t most = 0;
        int n = side == OUTSIDE ? r->out->nhosts_total : IMPI_MAX_CLIENTS * r->nin;
        for (int i = 0; i < n; i++) {
            conn_t *c = side == OUTSIDE ? &r->outs[i] : &r->ins[i];
            if (c->len - c->off > most)
                most = c->len - c->off;
        }
        if (most < QUEUE_MAX / 2) {
            r->paused[other] = 0;
            side_arm(r, other);
        }
    }
}

static void conn_flush(conn_t *c)
{
    if (c->fd >= 0 && impi_send_pending(c->fd, c->out, &c->off, &c->len) != 0)
        failf(c->r, "writing to %s host %d: %s", c->side == INSIDE ? "inside" : "outside", c->peer,
              strerror(errno));
}

static void conn_put(conn_t *c, const uint8_t *hdr, const void *payload, size_t len)
{
    size_t need = c->len + IMPI_PKT_HDR_SIZE + len;

    if (c->fd < 0 || c->r->failed)
        return;
    if (need > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 65536;
        while (cap < need)
            cap *= 2;
        uint8_t *p = realloc(c->out, cap);
        if (p == NULL) {
            failf(c->r, "out of memory queueing for %s host %d",
                  c->side == INSIDE ? "inside" : "outside", c->peer);
            return;
        }
        c->out = p;
        c->cap = cap;
    }
    memcpy(c->out + c->len, hdr, IMPI_PKT_HDR_SIZE);
    if (len)
        memcpy(c->out + c->len + IMPI_PKT_HDR_SIZE, payload, len);
    c->len = need;
    /* written once the round's packets are all queued: one send for the
     * packets of one read */
    if (!c->dirty) {
        c->dirty = 1;
        c->r->dirty[c->r->ndirty++] = c;
    }
}

/* The end of a round: what the round queued goes out. */
static void flush_dirty(impi_relay_t *r)
{
    for (int i = 0; i < r->ndirty; i++) {
        conn_t *c = r->dirty[i];
        c->dirty = 0;
        conn_flush(c);
        conn_arm(c);
        pressure(r, c->side, c->len - c->off);
    }
    r->ndirty = 0;
}

static void send_fini(conn_t *c)
{
    impi_pkt_hdr_t h;
    uint8_t b[IMPI_PKT_HDR_SIZE];

    if (c->fini_out || c->fd < 0)
        return;
    memset(&h, 0, sizeof(h));
    h.type = IMPI_PK_FINI;
    h.src.pid = h.dest.pid = -1;
    h.lsrank = h.tag = -1;
    h.count = -1;
    impi_pkt_hdr_pack(&h, b);
    c->fini_out = 1;
    conn_put(c, b, NULL, 0);
}

static conn_t *inside_conn(impi_relay_t *r, int client, int host)
{
    return &r->ins[client * r->nin + (host - r->in->first_host[r->client])];
}

/* FINI per hop (the file's comment). */
static void fini_check(impi_relay_t *r)
{
    int all_in = 1;

    for (int c = 0; c < r->in->nclients; c++)
        for (int i = 0; c != r->client && i < r->nin; i++)
            all_in &= r->ins[c * r->nin + i].fini_in;
    if (all_in)
        for (int h = 0; h < r->out->nhosts_total; h++)
            if (r->out->hosts[h].client != r->client)
                send_fini(&r->outs[h]);
    for (int c = 0; c < r->out->nclients; c++) {
        int all = 1;
        if (c == r->client)
            continue;
        for (int h = r->out->first_host[c]; h < r->out->first_host[c] + (int) r->out->nhosts[c];
             h++)
            all &= r->outs[h].fini_in;
        if (all)
            for (int i = 0; i < r->nin; i++)
                send_fini(&r->ins[c * r->nin + i]);
    }
}

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    conn_t *c = arg;
    impi_relay_t *r = c->r;
    impi_pkt_hdr_t h = *pkt->hdr;
    uint8_t b[IMPI_PKT_HDR_SIZE];
    conn_t *to;
    int host;

    if (h.type == IMPI_PK_FINI) {
        c->fini_in = 1;
        fini_check(r);
        return;
    }
    impi_rly_route(r->rly, c->side == INSIDE, pkt, &h, &host);
    to = c->side == INSIDE ? &r->outs[host] : inside_conn(r, c->client, host);
    impi_pkt_hdr_pack(&h, b);
    conn_put(to, b, pkt->payload, pkt->len);
}

/* A payload with at least this many bytes still to come is received
 * straight into the packet, as the agent does. */
#define READ_DIRECT_MIN 4096

static void conn_read(conn_t *c)
{
    impi_relay_t *r = c->r;
    char err[256];
    size_t want;
    uint8_t *room = impi_rx_payload_room(&c->rx, &want);
    int direct = room != NULL && want >= READ_DIRECT_MIN;
    ssize_t n = direct ? recv(c->fd, room, want, MSG_DONTWAIT)
                       : recv(c->fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);

    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        if (c->fini_in) { /* it said FINI: its close is its end */
            conn_close(c);
            return;
        }
        failf(r, "%s host %d (client %d) closed its connection before FINI",
              c->side == INSIDE ? "inside" : "outside", c->peer,
              c->side == INSIDE ? r->client : c->client);
        return;
    }
    if (direct)
        impi_rx_payload_filled(&c->rx, (size_t) n, on_packet, c);
    else if (impi_rx_feed(&c->rx, r->buf, (size_t) n, on_packet, c, err, sizeof(err)) != ICBC_OK)
        failf(r, "%s host %d: %s", c->side == INSIDE ? "inside" : "outside", c->peer, err);
}

static void on_ready(int fd, uint32_t events, void *arg)
{
    conn_t *c = arg;

    (void) fd;
    if (events & EPOLLOUT) {
        conn_flush(c);
        pressure(c->r, c->side, c->len - c->off);
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->r->failed && c->fd >= 0)
        conn_read(c);
    flush_dirty(c->r);
    if (c->fd >= 0 && c->fini_in && c->fini_out && c->len == c->off)
        shutdown(c->fd, SHUT_WR);
    conn_arm(c);
}

static icbc_status_t conn_open(impi_relay_t *r, conn_t *c, int side, int client, int self, int peer,
                               int fd)
{
    const impi_layout_t *l = side == INSIDE ? r->in : r->out;

    c->r = r;
    c->side = side;
    c->client = client;
    c->self = self;
    c->peer = peer;
    c->fd = fd;
    c->events = EPOLLIN;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (impi_rx_init(&c->rx, l, self, peer) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    return bt_poller_add_fd(r->poller, fd, c->events, on_ready, c);
}

/* Connects from FROM to host PEER of L and names SELF; retries while the
 * peer is not listening yet, until DEADLINE. */
static int connect_host(const impi_layout_t *l, int self, int peer, struct in_addr from,
                        double deadline, char *err, size_t errlen)
{
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = from };
    struct sockaddr_in to = { .sin_family = AF_INET,
                              .sin_port = htons((uint16_t) l->hosts[peer].port) };
    uint32_t v4 = impi_host_v4(&l->hosts[peer]);
    uint8_t rank[IMPI_HOST_RANK_SIZE];
    int one = 1;

    memcpy(&to.sin_addr, &v4, 4);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* from the address the relay advertised on this side: LAM knows a
         * host by it */
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)) == 0 &&
            connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0) {
            icbc_put32(rank, (uint32_t) self);
            if (send_all(fd, rank, sizeof(rank)) == 0)
                return fd;
        }
        close(fd);
        if (icbc_clock_now() > deadline)
            break;
        usleep(20000);
    }
    snprintf(err, errlen, "connecting to host %d (client %d) at %s:%u: %s", peer,
             l->hosts[peer].client, inet_ntoa(to.sin_addr), l->hosts[peer].port, strerror(errno));
    return -1;
}

static void log_layout(const char *side, const impi_layout_t *l)
{
    for (int h = 0; h < l->nhosts_total; h++) {
        struct in_addr a;
        memcpy(&a, l->hosts[h].addr + 12, 4);
        icbc_debug("%s host %d: client %d, %s:%u, %u process(es) from rank %d", side, h,
                   l->hosts[h].client, inet_ntoa(a), l->hosts[h].port, l->hosts[h].nprocs,
                   l->hosts[h].first_rank);
    }
}

/* The connections of both sides: the relay connects to the hosts below it
 * on each side and accepts the ones above (impi_hostconn.h). */
static icbc_status_t run_connect(impi_relay_t *r, char *err, size_t errlen)
{
    double deadline = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 600);
    int expect = 0, got = 0, K = impi_rly_client(r->rly);
    icbc_status_t st;

    r->client = K;
    r->in = impi_rly_inside(r->rly);
    r->out = impi_rly_outside(r->rly);
    r->self_out = r->out->first_host[K];
    log_layout("inside", r->in);
    log_layout("outside", r->out);
    r->nin = (int) r->in->nhosts[K];
    r->outs = calloc((size_t) r->out->nhosts_total, sizeof(conn_t));
    r->ins = calloc((size_t) IMPI_MAX_CLIENTS * (size_t) r->nin, sizeof(conn_t));
    r->dirty = calloc((size_t) r->out->nhosts_total + (size_t) IMPI_MAX_CLIENTS * (size_t) r->nin,
                      sizeof(conn_t *));
    if (!r->outs || !r->ins || !r->dirty || bt_poller_create(&r->poller) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    for (int h = 0; h < r->out->nhosts_total; h++)
        r->outs[h].fd = -1;
    for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
        r->ins[i].fd = -1;
    for (int h = 0; h < r->out->nhosts_total; h++) {
        if (h == r->self_out)
            continue;
        if (!impi_host_connects(r->self_out, h)) {
            expect++;
            continue;
        }
        int fd = connect_host(r->out, r->self_out, h, r->out_v4, deadline, err, errlen);
        if (fd < 0)
            return ICBC_ERR_UNREACHABLE;
        if ((st = conn_open(r, &r->outs[h], OUTSIDE, r->out->hosts[h].client, r->self_out, h,
                            fd)) != ICBC_OK)
            return st;
    }
    for (int c = 0; c < r->in->nclients; c++) {
        if (c == K)
            continue;
        int p = r->in->first_host[c];
        for (int i = 0; i < r->nin; i++) {
            int host = r->in->first_host[K] + i;
            if (!impi_host_connects(p, host)) {
                expect++;
                continue;
            }
            int fd = connect_host(r->in, p, host, r->in_v4, deadline, err, errlen);
            if (fd < 0)
                return ICBC_ERR_UNREACHABLE;
            if ((st = conn_open(r, inside_conn(r, c, host), INSIDE, c, p, host, fd)) != ICBC_OK)
                return st;
        }
    }
    while (got < expect) {
        struct pollfd p[IMPI_MAX_CLIENTS + 1];
        int which[IMPI_MAX_CLIENTS + 1], n = 0;
        p[n] = (struct pollfd){ r->out_lfd, POLLIN, 0 };
        which[n++] = -1;
        for (int c = 0; c < r->in->nclients; c++)
            if (c != K && r->persona_lfd[c] >= 0) {
                p[n] = (struct pollfd){ r->persona_lfd[c], POLLIN, 0 };
                which[n++] = c;
            }
        if (icbc_clock_now() > deadline)
            return icbc_err(ICBC_ERR_TIMEOUT, err, errlen,
                            "%d of the hosts that connect to the relay did not", expect - got);
        if (poll(p, (nfds_t) n, 500) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (!(p[k].revents & POLLIN))
                continue;
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            int fd = accept4(p[k].fd, (struct sockaddr *) &from, &fl, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            struct timeval tv = { 5, 0 };
            uint8_t rank[IMPI_HOST_RANK_SIZE];
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            ssize_t rn = recv(fd, rank, sizeof(rank), MSG_WAITALL);
            int c = which[k], host = -1;
            const impi_layout_t *l = c < 0 ? r->out : r->in;
            int self = c < 0 ? r->self_out : r->in->first_host[c];
            uint8_t *connected = calloc((size_t) l->nhosts_total, 1);
            char why[256] = "it sent no host rank";
            if (connected == NULL) {
                close(fd);
                return ICBC_ERR_NO_MEMORY;
            }
            for (int h = 0; h < l->nhosts_total; h++)
                connected[h] = c < 0 ? r->outs[h].fd >= 0
                                     : (l->hosts[h].client == K && inside_conn(r, c, h)->fd >= 0);
            icbc_status_t ok = rn == (ssize_t) sizeof(rank)
                                   ? impi_host_accept_check(l, self, rank, from.sin_addr.s_addr,
                                                            connected, &host, why, sizeof(why))
                                   : ICBC_ERR_INVALID;
            free(connected);
            if (ok == ICBC_OK &&
                (c < 0 ? l->hosts[host].client == K : l->hosts[host].client != K)) {
                snprintf(why, sizeof(why), "host %d is not one the relay stands for here", host);
                ok = ICBC_ERR_INVALID;
            }
            if (ok != ICBC_OK) {
                icbc_warn("refused a connection to the %s port: %s", c < 0 ? "outside" : "inside",
                          why);
                close(fd);
                continue;
            }
            tv.tv_sec = 0;
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            conn_t *cn = c < 0 ? &r->outs[host] : inside_conn(r, c, host);
            if ((st = conn_open(r, cn, c < 0 ? OUTSIDE : INSIDE, c < 0 ? l->hosts[host].client : c,
                                self, host, fd)) != ICBC_OK)
                return st;
            got++;
        }
    }
    return ICBC_OK;
}

static int all_closed(const impi_relay_t *r)
{
    for (int h = 0; h < r->out->nhosts_total; h++)
        if (r->outs[h].fd >= 0)
            return 0;
    for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
        if (r->ins[i].fd >= 0)
            return 0;
    return 1;
}

/* The start-up connections after start-up: the inside client's FINI goes
 * to the server; the server closing before it ends the job. */
static void watch_startup(impi_relay_t *r)
{
    struct pollfd p[2] = { { r->startup_fd, POLLIN, 0 }, { r->server_fd, POLLIN, 0 } };
    char err[256];

    if (poll(p, 2, 0) <= 0)
        return;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = recv(r->startup_fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
        if (n > 0 && impi_rly_inside_input(r->rly, r->buf, (size_t) n, err, sizeof(err)) != ICBC_OK)
            failf(r, "%s", err);
        else if (n == 0 && !impi_rly_finished(r->rly))
            failf(r, "the inside client closed its start-up connection before FINI");
        if (n == 0) {
            close(r->startup_fd);
            r->startup_fd = -1;
        }
        if (startup_flush(r, err, sizeof(err)) != ICBC_OK)
            failf(r, "%s", err);
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = recv(r->server_fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
        if (n == 0 && impi_rly_finished(r->rly)) {
            close(r->server_fd);
            r->server_fd = -1;
        } else if (n >= 0) {
            failf(r, "impi-server %s",
                  n == 0 ? "closed its connection: the IMPI job ended" : "spoke after start-up");
        }
    }
}

icbc_status_t impi_relay_run(impi_relay_t *r, char *err, size_t errlen)
{
    icbc_status_t st;
    double end_by = 0;

    if ((st = run_startup(r, err, errlen)) != ICBC_OK)
        return st;
    if ((st = run_connect(r, err, errlen)) != ICBC_OK)
        return st;
    /* the second line of stdout: start-up is over, packets go through */
    printf("relaying client %d: %d inside host(s), %d outside host(s)\n", r->client, r->nin,
           r->out->nhosts_total - 1);
    fflush(stdout);
    while (!r->failed) {
        bt_poller_wait(r->poller, 100);
        if (r->startup_fd >= 0 || r->server_fd >= 0)
            watch_startup(r);
        if (all_closed(r) && impi_rly_finished(r->rly))
            break;
        /* once FINI went both ways on every connection the rest is the
         * peers' closing; bounded */
        int fini_all = 1;
        for (int h = 0; h < r->out->nhosts_total; h++)
            if (h != r->self_out && !(r->outs[h].fini_in && r->outs[h].fini_out))
                fini_all = 0;
        if (fini_all && end_by == 0)
            end_by = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 600);
        if (end_by && icbc_clock_now() > end_by) {
            failf(r, "the hosts did not close their connections after FINI");
            break;
        }
    }
    if (r->failed)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "%s", r->why);
    return ICBC_OK;
}
