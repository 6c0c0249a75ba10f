/*
 * The IMPI relay's daemon: start-up and the connections (relay_fwd.c moves
 * the packets on them); see impi_relay.h and docs/impi-relay.md.
 *
 * One relay, or K relays of one private client (trunking): relay 0, the
 * leader, holds start-up's two sockets around relay_startup.c; the others
 * (followers) join it on its start-up port before the client does (HELLO),
 * give it their persona ports once the number of clients is known, and get
 * the two layouts when start-up is over (impi_relay_link.h). Then every
 * relay connects to the relays below it, and, as every IMPI host does, to
 * the hosts below its own hosts on each side, and accepts the ones above.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include "relay_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icbc_bytes.h"
#include "icbc_clock.h"
#include "icbc_log.h"
#include "impi_hostconn.h"

/* The largest TABLES frame a follower takes: two layouts of a job of
 * IMPI_PROCS_MAX processes fit. */
#define TABLES_MAX (128u << 20)

void relay_failf(impi_relay_t *r, const char *fmt, ...)
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

/* A listening socket on ADDR (port WANT, 0: any); its port in *PORT. */
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

static int send_frame(int fd, uint32_t kind, uint32_t a, uint32_t b, const void *body, uint32_t len)
{
    uint8_t h[IMPI_LINK_HDR_SIZE];

    impi_link_hdr_pack(kind, a, b, len, h);
    return send_all(fd, h, sizeof(h)) || (len && send_all(fd, body, len)) ? -1 : 0;
}

/* Waits for one frame of KIND, of at most MAX body bytes, on FD (a
 * start-up connection between relays) until DEADLINE: its A and B, and its
 * body (malloc'd) in *BODY. */
static icbc_status_t recv_frame(int fd, uint32_t kind, uint32_t max, double deadline, uint32_t *a,
                                uint32_t *b, uint8_t **body, uint32_t *len, char *err,
                                size_t errlen)
{
    uint8_t h[IMPI_LINK_HDR_SIZE];
    size_t have = 0, want = sizeof(h);
    uint8_t *p = h;

    *body = NULL;
    for (int phase = 0; phase < 2; phase++) {
        while (have < want) {
            struct pollfd pf = { fd, POLLIN, 0 };
            int ms = (int) ((deadline - icbc_clock_now()) * 1000);
            if (ms <= 0 || poll(&pf, 1, ms) <= 0) {
                free(*body);
                return icbc_err(ICBC_ERR_TIMEOUT, err, errlen,
                                "no frame of kind %u from the "
                                "other relay in time",
                                kind);
            }
            ssize_t n = recv(fd, p + have, want - have, 0);
            if (n <= 0) {
                free(*body);
                return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen,
                                "the other relay closed its start-up connection");
            }
            have += (size_t) n;
        }
        if (phase == 1)
            break;
        if (icbc_get32(h) != kind || icbc_get32(h + 12) > max)
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "the other relay sent a frame of kind %u (%u bytes), not %u",
                            icbc_get32(h), icbc_get32(h + 12), kind);
        *a = icbc_get32(h + 4);
        *b = icbc_get32(h + 8);
        *len = icbc_get32(h + 12);
        *body = malloc(*len ? *len : 1);
        if (*body == NULL)
            return ICBC_ERR_NO_MEMORY;
        p = *body;
        have = 0;
        want = *len;
    }
    return ICBC_OK;
}

/* The address this node sends to ADDR from (a UDP socket's route; nothing
 * is sent). */
static int route_source(struct in_addr addr, uint16_t port, struct in_addr *src)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(port) };
    struct sockaddr_in me;
    socklen_t sl = sizeof(me);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok;

    if (fd < 0)
        return 0;
    ok = connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0 &&
         getsockname(fd, (struct sockaddr *) &me, &sl) == 0;
    close(fd);
    if (ok)
        *src = me.sin_addr;
    return ok;
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

static int parse_addr_port(const char *text, struct in_addr *addr, uint16_t *port)
{
    char host[64];
    const char *colon = text ? strrchr(text, ':') : NULL;
    long p = colon ? strtol(colon + 1, NULL, 10) : 0;

    if (!colon || (size_t) (colon - text) >= sizeof(host) || p < 1 || p > 65535)
        return -1;
    memcpy(host, text, (size_t) (colon - text));
    host[colon - text] = '\0';
    if (inet_pton(AF_INET, host, addr) != 1)
        return -1;
    *port = (uint16_t) p;
    return 0;
}

/* ---- create / destroy ---------------------------------------------------- */

static uint32_t leader_persona_port(void *arg, int relay, int client, uint8_t addr[16]);

/* The comma-separated IPv4 addresses of LIST into OUT, MAX at most: how
 * many, or -1 (one that is no IPv4 address, or more than MAX). */
static int ipv4_list(const char *list, struct in_addr *out, int max)
{
    char buf[(IMPI_MAX_CLIENTS + IMPI_RELAY_TRUNKS_MAX) * 16], *save = NULL;
    int n = 0;

    if (strlen(list) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save))
        if (n >= max || inet_pton(AF_INET, a, &out[n++]) != 1)
            return -1;
    return n;
}

/* -persona-addrs A1,A2,..: this relay's inside addresses for its personas. */
static int parse_persona_addrs(impi_relay_t *r, const char *list, char *err, size_t errlen)
{
    r->npersona_v4 = ipv4_list(list, r->persona_v4, IMPI_MAX_CLIENTS - 1);
    if (r->npersona_v4 < 1) {
        snprintf(err, errlen, "-persona-addrs '%s': want 1 to %d IPv4 addresses", list,
                 IMPI_MAX_CLIENTS - 1);
        r->npersona_v4 = 0;
        return -1;
    }
    return 0;
}

/* The inside address of this relay's persona of client C, the private
 * client being OWN: the next of -persona-addrs in client order, else the
 * relay's inside address. LAM/MPI tells hosts apart by address: a LAM
 * client inside needs each persona at an address of its own. */
static struct in_addr persona_addr(const impi_relay_t *r, int own, int c)
{
    if (r->npersona_v4 == 0)
        return r->in_v4;
    return r->persona_v4[(c < own ? c : c - 1) % r->npersona_v4];
}

/* -followers A1,A2,..: one inside address per follower, in rank order. */
static int parse_followers(impi_relay_t *r, const char *list, char *err, size_t errlen)
{
    if (r->rank > 0) {
        snprintf(err, errlen, "-followers '%s': the leader's option, %d addresses at most", list,
                 IMPI_RELAY_TRUNKS_MAX - 1);
        return -1;
    }
    if (ipv4_list(list, &r->follower_v4[1], IMPI_RELAY_TRUNKS_MAX - 1) != r->ntrunks - 1) {
        snprintf(err, errlen, "-followers '%s': want %d IPv4 address%s, one per follower", list,
                 r->ntrunks - 1, r->ntrunks == 2 ? "" : "es");
        return -1;
    }
    return 0;
}

/* The leader's connection to impi-server, from its outside address. */
static icbc_status_t connect_server(impi_relay_t *r, char *err, size_t errlen)
{
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = r->out_v4 };
    struct sockaddr_in to = { .sin_family = AF_INET,
                              .sin_addr = r->srv_v4,
                              .sin_port = htons(r->srv_port) };
    int one = 1;

    r->server_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (r->server_fd < 0 || bind(r->server_fd, (struct sockaddr *) &me, sizeof(me)) != 0 ||
        connect(r->server_fd, (struct sockaddr *) &to, sizeof(to)) != 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen,
                        "cannot reach impi-server at %s from %s: %s", r->cfg.server,
                        inet_ntoa(r->out_v4), strerror(errno));
    setsockopt(r->server_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return ICBC_OK;
}

icbc_status_t impi_relay_create(const impi_relay_config_t *cfg, impi_relay_t **out, char *err,
                                size_t errlen)
{
    impi_relay_t *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return ICBC_ERR_NO_MEMORY;
    r->cfg = *cfg;
    r->rank = cfg->rank;
    r->ntrunks = cfg->trunks ? cfg->trunks : 1;
    r->startup_lfd = r->startup_fd = r->server_fd = r->out_lfd = r->link_lfd = -1;
    r->self_out = -1;
    for (int c = 0; c < IMPI_MAX_CLIENTS; c++)
        r->persona_lfd[c] = -1;
    for (int j = 0; j < IMPI_RELAY_TRUNKS_MAX; j++) {
        r->peer[j].ctl_fd = -1;
        r->links[j].fd = -1;
    }
    if (parse_addr_port(cfg->server, &r->srv_v4, &r->srv_port) < 0) {
        snprintf(err, errlen, "-server '%s': want ADDR:PORT (IPv4)",
                 cfg->server ? cfg->server : "");
        goto fail;
    }
    if (r->rank < 0 || r->rank >= IMPI_RELAY_TRUNKS_MAX || r->ntrunks < 1 ||
        r->ntrunks > IMPI_RELAY_TRUNKS_MAX || (r->rank > 0) != (cfg->leader != NULL)) {
        snprintf(err, errlen,
                 "want -trunks 1..%d on the leader, -leader and -rank 1..%d on "
                 "the others",
                 IMPI_RELAY_TRUNKS_MAX, IMPI_RELAY_TRUNKS_MAX - 1);
        goto fail;
    }
    if (cfg->followers && parse_followers(r, cfg->followers, err, errlen) < 0)
        goto fail;
    if (cfg->persona_addrs && parse_persona_addrs(r, cfg->persona_addrs, err, errlen) < 0)
        goto fail;
    if (cfg->outside_addr && inet_pton(AF_INET, cfg->outside_addr, &r->out_v4) != 1) {
        snprintf(err, errlen, "-outside '%s' is not an IPv4 address", cfg->outside_addr);
        goto fail;
    }
    if (cfg->inside_addr && inet_pton(AF_INET, cfg->inside_addr, &r->in_v4) != 1) {
        snprintf(err, errlen, "-inside '%s' is not an IPv4 address", cfg->inside_addr);
        goto fail;
    }
    if (!cfg->outside_addr && !route_source(r->srv_v4, r->srv_port, &r->out_v4)) {
        snprintf(err, errlen, "no route to impi-server at %s", cfg->server);
        goto fail;
    }
    if (!cfg->inside_addr && !other_address(r->out_v4, &r->in_v4)) {
        snprintf(err, errlen,
                 "this node has no IPv4 address beside %s, the one it reaches "
                 "impi-server from: name the inside one with -inside",
                 inet_ntoa(r->out_v4));
        goto fail;
    }
    r->out_lfd = listen_on(r->out_v4, 0, &r->out_port);
    r->link_lfd = listen_on(r->in_v4, 0, &r->link_port);
    if (r->out_lfd < 0 || r->link_lfd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s",
                 inet_ntoa(r->out_lfd < 0 ? r->out_v4 : r->in_v4), strerror(errno));
        goto fail;
    }
    if (r->rank == 0) {
        if (!cfg->lazy_server && connect_server(r, err, errlen) != ICBC_OK)
            goto fail;
        if (cfg->given_startup_fd) {
            struct sockaddr_in sin;
            socklen_t sl = sizeof(sin);
            r->startup_lfd = cfg->startup_fd;
            if (getsockname(r->startup_lfd, (struct sockaddr *) &sin, &sl) == 0)
                r->port = ntohs(sin.sin_port);
        } else {
            r->startup_lfd = listen_on(r->in_v4, cfg->port, &r->port);
        }
        if (r->startup_lfd < 0) {
            snprintf(err, errlen, "cannot listen on %s:%u: %s", inet_ntoa(r->in_v4), cfg->port,
                     strerror(errno));
            goto fail;
        }
        r->peer[0].in_v4 = r->in_v4;
        r->peer[0].out_v4 = r->out_v4;
        r->peer[0].out_port = r->out_port;
        r->peer[0].link_port = r->link_port;
    } else {
        struct in_addr la;
        uint16_t lp;
        uint8_t hello[16];
        int one = 1;
        if (parse_addr_port(cfg->leader, &la, &lp) < 0) {
            snprintf(err, errlen, "-leader '%s': want ADDR:PORT (IPv4)", cfg->leader);
            goto fail;
        }
        struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = r->in_v4 };
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = la, .sin_port = htons(lp) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *) &me, sizeof(me)) != 0 ||
            connect(fd, (struct sockaddr *) &to, sizeof(to)) != 0) {
            snprintf(err, errlen, "cannot reach the leader relay at %s: %s", cfg->leader,
                     strerror(errno));
            if (fd >= 0)
                close(fd);
            goto fail;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        r->peer[0].ctl_fd = fd;
        memcpy(hello, &r->in_v4, 4);
        memcpy(hello + 4, &r->out_v4, 4);
        icbc_put32(hello + 8, r->out_port);
        icbc_put32(hello + 12, r->link_port);
        if (send_frame(fd, IMPI_LINK_HELLO, (uint32_t) r->rank, 0, hello, sizeof(hello)) < 0) {
            snprintf(err, errlen, "writing to the leader relay: %s", strerror(errno));
            goto fail;
        }
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

int impi_relay_started(const impi_relay_t *r)
{
    return r->in != NULL;
}

void impi_relay_counts(const impi_relay_t *r, impi_relay_counts_t *c)
{
    c->cut = r->pkts_cut;
    c->whole = r->pkts_whole;
    c->behind = r->pkts_behind;
}

void impi_relay_destroy(impi_relay_t *r)
{
    if (r == NULL)
        return;
    relay_data_free(r);
    for (int j = 0; j < IMPI_RELAY_TRUNKS_MAX; j++)
        if (r->peer[j].ctl_fd >= 0)
            close(r->peer[j].ctl_fd);
    if (r->cfg.given_startup_fd)
        r->startup_lfd = -1; /* the caller's */
    int fds[] = { r->startup_lfd, r->startup_fd, r->server_fd, r->out_lfd, r->link_lfd };
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int c = 0; c < IMPI_MAX_CLIENTS; c++)
        if (r->persona_lfd[c] >= 0)
            close(r->persona_lfd[c]);
    impi_rly_destroy(r->rly);
    if (r->rank > 0 && r->in) {
        impi_layout_free(&r->own_in);
        impi_layout_free(&r->own_out);
    }
    free(r);
}

/* ---- the leader's start-up ---------------------------------------------------- */

static uint32_t leader_persona_port(void *arg, int relay, int client, uint8_t addr[16])
{
    impi_relay_t *r = arg;
    double deadline = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 600);
    relay_peer_t *pr = &r->peer[relay];
    uint16_t port = 0;
    char err[256];

    if (relay == 0) {
        struct in_addr a = persona_addr(r, impi_rly_client(r->rly), client);
        addr16(addr, a);
        r->persona_lfd[client] = listen_on(a, 0, &port);
        return r->persona_lfd[client] < 0 ? 0 : port;
    }
    if (!pr->asked) { /* CLIENTS, then its PORTS */
        uint32_t a, b, len;
        uint8_t *body;
        int n = impi_rly_nclients(r->rly), k = impi_rly_client(r->rly);
        pr->asked = 1;
        if (send_frame(r->peer[relay].ctl_fd, IMPI_LINK_CLIENTS, (uint32_t) n, (uint32_t) k, NULL,
                       0) < 0 ||
            recv_frame(r->peer[relay].ctl_fd, IMPI_LINK_PORTS, 8 * IMPI_MAX_CLIENTS, deadline, &a,
                       &b, &body, &len, err, sizeof(err)) != ICBC_OK) {
            icbc_error("relay %d: %s", relay, err);
            return 0;
        }
        /* per client its persona's port and address */
        for (int c = 0; c < n && 8 * (uint32_t) c + 8 <= len; c++) {
            pr->ports[c] = icbc_get32(body + 8 * c);
            memcpy(&pr->paddr[c], body + 8 * c + 4, 4);
        }
        free(body);
    }
    if (pr->paddr[client].s_addr != 0)
        addr16(addr, pr->paddr[client]);
    return pr->ports[client];
}

static icbc_status_t startup_flush(impi_relay_t *r, char *err, size_t errlen)
{
    size_t n;
    const void *p = impi_rly_server_output(r->rly, &n);
    icbc_status_t st;

    /* a relay that waits for job after job meets the job's server only
     * now: its first bytes for the server come once the client inside has
     * authenticated and named its rank (a stranger never gets so far) */
    if (n && r->server_fd < 0 && (st = connect_server(r, err, errlen)) != ICBC_OK)
        return st;
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

/* A connection to the start-up port whose first bytes are HELLO: a
 * follower. Its rank and addresses are kept; it is refused alone when they
 * are not those of a follower not yet joined, or (-followers) it comes from
 * another address than its rank's. */
static void take_follower(impi_relay_t *r, int fd, double deadline)
{
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    uint8_t rest[IMPI_LINK_HDR_SIZE - 4 + 16];
    size_t have = 0;

    while (have < sizeof(rest)) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, (int) ((deadline - icbc_clock_now()) * 1000)) <= 0)
            break;
        ssize_t n = recv(fd, rest + have, sizeof(rest) - have, 0);
        if (n <= 0)
            break;
        have += (size_t) n;
    }
    uint32_t rank = icbc_get32(rest), len = icbc_get32(rest + 8);
    if (have < sizeof(rest) || len != 16 || rank < 1 || rank >= (uint32_t) r->ntrunks ||
        r->peer[rank].ctl_fd >= 0) {
        icbc_warn("dropped a connection to the start-up port that is no follower relay of the "
                  "%d this one leads",
                  r->ntrunks - 1);
        close(fd);
        return;
    }
    if (r->follower_v4[rank].s_addr != 0 && (getpeername(fd, (struct sockaddr *) &from, &fl) != 0 ||
                                             from.sin_addr.s_addr != r->follower_v4[rank].s_addr ||
                                             memcmp(rest + 12, &r->follower_v4[rank], 4) != 0)) {
        char want[INET_ADDRSTRLEN], got[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &r->follower_v4[rank], want, sizeof(want));
        inet_ntop(AF_INET, &from.sin_addr, got, sizeof(got));
        icbc_warn("dropped relay %u joining from %s: -followers gives it %s", rank, got, want);
        close(fd);
        return;
    }
    relay_peer_t *p = &r->peer[rank];
    memcpy(&p->in_v4, rest + 12, 4);
    memcpy(&p->out_v4, rest + 16, 4);
    p->out_port = icbc_get32(rest + 20);
    p->link_port = icbc_get32(rest + 24);
    p->ctl_fd = fd;
}

static int followers_joined(const impi_relay_t *r)
{
    for (int j = 1; j < r->ntrunks; j++)
        if (r->peer[j].ctl_fd < 0)
            return 0;
    return 1;
}

static icbc_status_t make_rly(impi_relay_t *r, char *err, size_t errlen)
{
    impi_rly_config_t rc = { .ntrunks = r->ntrunks,
                             .require_key = r->cfg.require_key,
                             .key = r->cfg.key,
                             .persona_port = leader_persona_port,
                             .arg = r };

    for (int j = 0; j < r->ntrunks; j++) {
        addr16(rc.trunk[j].inside_addr, r->peer[j].in_v4);
        addr16(rc.trunk[j].outside_addr, r->peer[j].out_v4);
        rc.trunk[j].outside_port = r->peer[j].out_port;
    }
    if (impi_rly_create(&rc, &r->rly) != ICBC_OK)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "a follower gave a bad outside port");
    return ICBC_OK;
}

/* The leader's start-up: its followers join, then the inside client's
 * commands go through to the server and its answers back, until the
 * server's DONE went inside. */
static icbc_status_t leader_startup(impi_relay_t *r, char *err, size_t errlen)
{
    double progress = icbc_clock_now();
    icbc_status_t st;

    while (!r->rly || !impi_rly_started(r->rly)) {
        int joined = followers_joined(r);
        struct pollfd p[3] = { { r->startup_fd >= 0 && joined ? -1 : r->startup_lfd, POLLIN, 0 },
                               { joined ? r->startup_fd : -1, POLLIN, 0 },
                               { r->rly ? r->server_fd : -1, POLLIN, 0 } };
        if (joined && !r->rly && (st = make_rly(r, err, errlen)) != ICBC_OK)
            return st;
        int n = poll(p, 3, 1000);
        if (n < 0 && errno != EINTR)
            return icbc_err(ICBC_ERR_IO, err, errlen, "poll: %s", strerror(errno));
        if (r->cfg.timeout > 0 && icbc_clock_now() - progress > r->cfg.timeout)
            return icbc_err(ICBC_ERR_TIMEOUT, err, errlen,
                            "start-up made no progress for %.0f s (%s)", r->cfg.timeout,
                            !joined             ? "not every follower relay joined"
                            : r->startup_fd < 0 ? "no inside client connected"
                                                : "waiting for the inside client or the server");
        if (n <= 0)
            continue;
        progress = icbc_clock_now();
        if (p[0].revents & POLLIN) {
            int fd = accept4(r->startup_lfd, NULL, NULL, SOCK_CLOEXEC);
            uint8_t first[4];
            if (fd >= 0 && !joined) {
                /* a follower's first bytes are HELLO; a client is held,
                 * unread, until every follower joined (relays that serve
                 * one job after another meet again for each, and its
                 * client may come first) */
                struct pollfd pf = { fd, POLLIN, 0 };
                if (poll(&pf, 1, 2000) > 0 && recv(fd, first, 4, MSG_PEEK) == 4 &&
                    icbc_get32(first) == IMPI_LINK_HELLO && recv(fd, first, 4, 0) == 4) {
                    take_follower(r, fd, icbc_clock_now() + 5);
                    continue;
                }
            }
            if (fd >= 0 && r->startup_fd < 0) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                r->startup_fd = fd;
            } else if (fd >= 0) {
                icbc_warn("dropped a second connection to the start-up port while the first "
                          "waits for every follower relay to join");
                close(fd);
            }
        }
        for (int i = 1; i < 3 && r->rly; i++) {
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
        if (r->rly && (st = startup_flush(r, err, errlen)) != ICBC_OK)
            return st;
    }
    /* the job has its client: the start-up port is not read again. A port
     * of its own is closed (a later connection is refused); a given one
     * keeps what comes for the next job (its client, its followers back)
     * in its backlog */
    if (!r->cfg.given_startup_fd)
        close(r->startup_lfd);
    r->startup_lfd = -1;
    r->in = impi_rly_inside(r->rly);
    r->out = impi_rly_outside(r->rly);
    r->client = impi_rly_client(r->rly);
    /* the followers get the tables */
    for (int j = 1; j < r->ntrunks; j++) {
        uint8_t *pin = NULL, *pout = NULL;
        size_t nin = 0, nout = 0;
        if (impi_layout_pack(r->in, &pin, &nin) != ICBC_OK ||
            impi_layout_pack(r->out, &pout, &nout) != ICBC_OK) {
            free(pin);
            return ICBC_ERR_NO_MEMORY;
        }
        size_t len = (size_t) r->ntrunks * 8 + 8 + nin + nout;
        uint8_t *b = malloc(len);
        if (b == NULL) {
            free(pin);
            free(pout);
            return ICBC_ERR_NO_MEMORY;
        }
        for (int k = 0; k < r->ntrunks; k++) {
            memcpy(b + 8 * k, &r->peer[k].in_v4, 4);
            icbc_put32(b + 8 * k + 4, r->peer[k].link_port);
        }
        uint8_t *q = b + 8 * r->ntrunks;
        icbc_put32(q, (uint32_t) nin);
        memcpy(q + 4, pin, nin);
        icbc_put32(q + 4 + nin, (uint32_t) nout);
        memcpy(q + 8 + nin, pout, nout);
        int bad = send_frame(r->peer[j].ctl_fd, IMPI_LINK_TABLES, (uint32_t) r->ntrunks, 0, b,
                             (uint32_t) len);
        free(b);
        free(pin);
        free(pout);
        if (bad)
            return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "writing to relay %d: %s", j,
                            strerror(errno));
        close(r->peer[j].ctl_fd);
        r->peer[j].ctl_fd = -1;
    }
    return ICBC_OK;
}

/* ---- a follower's start-up ------------------------------------------------------ */

static icbc_status_t follower_startup(impi_relay_t *r, char *err, size_t errlen)
{
    double deadline = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 86400);
    int fd = r->peer[0].ctl_fd;
    uint32_t n, k, len, ntr;
    uint8_t *body;
    char why[256];
    icbc_status_t st;

    if ((st = recv_frame(fd, IMPI_LINK_CLIENTS, 0, deadline, &n, &k, &body, &len, err, errlen)) !=
        ICBC_OK)
        return st;
    free(body);
    if (n < 1 || n > IMPI_MAX_CLIENTS || k >= n)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "the leader relay says %u clients", n);
    uint8_t ports[8 * IMPI_MAX_CLIENTS] = { 0 };
    for (uint32_t c = 0; c < n; c++) {
        uint16_t port = 0;
        if (c == k)
            continue;
        struct in_addr a = persona_addr(r, (int) k, (int) c);
        r->persona_lfd[c] = listen_on(a, 0, &port);
        if (r->persona_lfd[c] < 0)
            return icbc_err(ICBC_ERR_IO, err, errlen, "cannot listen on %s: %s", inet_ntoa(a),
                            strerror(errno));
        icbc_put32(ports + 8 * c, port);
        memcpy(ports + 8 * c + 4, &a, 4);
    }
    if (send_frame(fd, IMPI_LINK_PORTS, n, 0, ports, 8 * n) < 0)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "writing to the leader relay: %s",
                        strerror(errno));
    r->client = (int) k;
    if ((st = recv_frame(fd, IMPI_LINK_TABLES, TABLES_MAX, deadline, &ntr, &k, &body, &len, err,
                         errlen)) != ICBC_OK)
        return st;
    st = ICBC_ERR_INVALID;
    if (ntr < 2 || ntr > IMPI_RELAY_TRUNKS_MAX || (uint32_t) r->rank >= ntr || len < 8 * ntr + 8)
        goto bad;
    r->ntrunks = (int) ntr;
    for (uint32_t j = 0; j < ntr; j++) {
        memcpy(&r->peer[j].in_v4, body + 8 * j, 4);
        r->peer[j].link_port = icbc_get32(body + 8 * j + 4);
    }
    uint8_t *q = body + 8 * ntr;
    size_t left = len - 8 * ntr;
    uint32_t nin = icbc_get32(q);
    if (nin > left - 8)
        goto bad;
    uint32_t nout = icbc_get32(q + 4 + nin);
    if (nout != left - 8 - nin ||
        impi_layout_unpack(q + 4, nin, &r->own_in, why, sizeof(why)) != ICBC_OK)
        goto bad;
    if (impi_layout_unpack(q + 8 + nin, nout, &r->own_out, why, sizeof(why)) != ICBC_OK) {
        impi_layout_free(&r->own_in);
        goto bad;
    }
    free(body);
    r->in = &r->own_in;
    r->out = &r->own_out;
    close(fd);
    r->peer[0].ctl_fd = -1;
    if (r->in->nclients != (int) n || r->out->nclients != (int) n)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "the leader relay's tables are of %d "
                        "clients, not %u",
                        r->in->nclients, n);
    return ICBC_OK;
bad:
    free(body);
    return icbc_err(ICBC_ERR_INVALID, err, errlen, "the leader relay's tables do not add up");
}

/* ---- the connections ------------------------------------------------------------- */

/* Connects from FROM to ADDR:PORT and sends FIRST (LEN bytes); retries
 * while nothing listens there yet, until DEADLINE. */
static int connect_from(struct in_addr from, struct in_addr addr, uint16_t port,
                        const uint8_t *first, size_t len, double deadline)
{
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = from };
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(port) };
    int one = 1;

    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* from the address the relay advertised on this side: LAM knows a
         * host by it */
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)) == 0 &&
            connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0 && send_all(fd, first, len) == 0)
            return fd;
        close(fd);
        if (icbc_clock_now() > deadline)
            return -1;
        usleep(20000);
    }
}

static int connect_host(const impi_layout_t *l, int self, int peer, struct in_addr from,
                        double deadline, char *err, size_t errlen)
{
    struct in_addr to;
    uint32_t v4 = impi_host_v4(&l->hosts[peer]);
    uint8_t rank[IMPI_HOST_RANK_SIZE];

    memcpy(&to, &v4, 4);
    icbc_put32(rank, (uint32_t) self);
    int fd = connect_from(from, to, (uint16_t) l->hosts[peer].port, rank, sizeof(rank), deadline);
    if (fd < 0)
        snprintf(err, errlen, "connecting to host %d (client %d) at %s:%u: %s", peer,
                 l->hosts[peer].client, inet_ntoa(to), l->hosts[peer].port, strerror(errno));
    return fd;
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

/* Whether this relay holds a persona of client C (its block of C's
 * processes is not empty). */
static int has_persona(const impi_relay_t *r, int c)
{
    return c != r->client && r->rank < (int) r->in->nhosts[c];
}

/* One accepted connection: to a link port (WHICH -2), the outside port
 * (-1) or client WHICH's persona port. Returns 1 when it was taken. */
static int take_accepted(impi_relay_t *r, int lfd, int which, char *err, size_t errlen)
{
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    int fd = accept4(lfd, (struct sockaddr *) &from, &fl, SOCK_CLOEXEC), one = 1;
    struct timeval tv = { 5, 0 };
    uint8_t first[IMPI_LINK_HDR_SIZE];
    char why[256] = "it sent nothing";

    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    size_t want = which == -2 ? IMPI_LINK_HDR_SIZE : IMPI_HOST_RANK_SIZE;
    ssize_t rn = recv(fd, first, want, MSG_WAITALL);
    tv.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (which == -2) { /* a relay above this one */
        uint32_t rank = icbc_get32(first + 4);
        if (rn == (ssize_t) want && icbc_get32(first) == IMPI_LINK_RANK &&
            rank > (uint32_t) r->rank && rank < (uint32_t) r->ntrunks && r->links[rank].fd < 0 &&
            from.sin_addr.s_addr == r->peer[rank].in_v4.s_addr) {
            if (relay_conn_open(r, &r->links[rank], RELAY_LINK, r->client, r->rank, (int) rank,
                                fd) != ICBC_OK)
                relay_failf(r, "out of memory");
            return 1;
        }
        icbc_warn("refused a connection to the link port from %s: no relay above this one",
                  inet_ntoa(from.sin_addr));
        close(fd);
        return 0;
    }
    const impi_layout_t *l = which < 0 ? r->out : r->in;
    int self = which < 0 ? r->self_out : r->in->first_host[which] + r->rank, host = -1;
    uint8_t *connected = calloc((size_t) l->nhosts_total, 1);
    if (connected == NULL) {
        close(fd);
        relay_failf(r, "out of memory");
        return 0;
    }
    for (int h = 0; h < l->nhosts_total; h++)
        connected[h] =
            which < 0 ? r->outs[h].fd >= 0
                      : l->hosts[h].client == r->client && relay_inside_conn(r, which, h)->fd >= 0;
    icbc_status_t ok = rn == (ssize_t) want
                           ? impi_host_accept_check(l, self, first, from.sin_addr.s_addr, connected,
                                                    &host, why, sizeof(why))
                           : ICBC_ERR_INVALID;
    free(connected);
    if (ok == ICBC_OK &&
        (which < 0 ? l->hosts[host].client == r->client : l->hosts[host].client != r->client)) {
        snprintf(why, sizeof(why), "host %d is not one the relay stands for here", host);
        ok = ICBC_ERR_INVALID;
    }
    if (ok != ICBC_OK) {
        icbc_warn("refused a connection to the %s port: %s", which < 0 ? "outside" : "inside", why);
        close(fd);
        return 0;
    }
    relay_conn_t *c = which < 0 ? &r->outs[host] : relay_inside_conn(r, which, host);
    if (relay_conn_open(r, c, which < 0 ? RELAY_OUTSIDE : RELAY_INSIDE,
                        which < 0 ? l->hosts[host].client : which, self, host, fd) != ICBC_OK) {
        snprintf(err, errlen, "out of memory");
        relay_failf(r, "out of memory");
        return 0;
    }
    return 1;
}

/* The links to the other relays, then the host connections of both sides:
 * a relay connects to the relays and hosts below it and accepts those
 * above (impi_hostconn.h). */
static icbc_status_t run_connect(impi_relay_t *r, char *err, size_t errlen)
{
    double deadline = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 600);
    int expect = 0, got = 0, K = r->client;
    icbc_status_t st;

    log_layout("inside", r->in);
    log_layout("outside", r->out);
    if ((st = relay_data_init(r)) != ICBC_OK)
        return st;
    /* the relays below */
    for (int j = 0; j < r->rank; j++) {
        uint8_t first[IMPI_LINK_HDR_SIZE];
        impi_link_hdr_pack(IMPI_LINK_RANK, (uint32_t) r->rank, 0, 0, first);
        int fd = connect_from(r->in_v4, r->peer[j].in_v4, (uint16_t) r->peer[j].link_port, first,
                              sizeof(first), deadline);
        if (fd < 0)
            return icbc_err(ICBC_ERR_UNREACHABLE, err, errlen, "cannot reach relay %d: %s", j,
                            strerror(errno));
        if ((st = relay_conn_open(r, &r->links[j], RELAY_LINK, K, r->rank, j, fd)) != ICBC_OK)
            return st;
    }
    expect += r->ntrunks - 1 - r->rank;
    /* the hosts below this relay's own hosts */
    if (r->self_out >= 0)
        for (int h = 0; h < r->out->nhosts_total; h++) {
            if (r->out->hosts[h].client == K)
                continue;
            if (!impi_host_connects(r->self_out, h)) {
                expect++;
                continue;
            }
            int fd = connect_host(r->out, r->self_out, h, r->out_v4, deadline, err, errlen);
            if (fd < 0)
                return ICBC_ERR_UNREACHABLE;
            if ((st = relay_conn_open(r, &r->outs[h], RELAY_OUTSIDE, r->out->hosts[h].client,
                                      r->self_out, h, fd)) != ICBC_OK)
                return st;
        }
    for (int c = 0; c < r->in->nclients; c++) {
        if (!has_persona(r, c))
            continue;
        int p = r->in->first_host[c] + r->rank;
        for (int i = 0; i < r->nin; i++) {
            int host = r->in->first_host[K] + i;
            if (!impi_host_connects(p, host)) {
                expect++;
                continue;
            }
            int fd = connect_host(r->in, p, host, persona_addr(r, K, c), deadline, err, errlen);
            if (fd < 0)
                return ICBC_ERR_UNREACHABLE;
            if ((st = relay_conn_open(r, relay_inside_conn(r, c, host), RELAY_INSIDE, c, p, host,
                                      fd)) != ICBC_OK)
                return st;
        }
    }
    while (got < expect && !r->failed) {
        struct pollfd p[IMPI_MAX_CLIENTS + 2];
        int which[IMPI_MAX_CLIENTS + 2], n = 0;
        p[n] = (struct pollfd){ r->link_lfd, POLLIN, 0 };
        which[n++] = -2;
        if (r->self_out >= 0) {
            p[n] = (struct pollfd){ r->out_lfd, POLLIN, 0 };
            which[n++] = -1;
        }
        for (int c = 0; c < r->in->nclients; c++)
            if (has_persona(r, c) && r->persona_lfd[c] >= 0) {
                p[n] = (struct pollfd){ r->persona_lfd[c], POLLIN, 0 };
                which[n++] = c;
            }
        if (icbc_clock_now() > deadline)
            return icbc_err(ICBC_ERR_TIMEOUT, err, errlen,
                            "%d of the hosts and relays that connect to this relay did not",
                            expect - got);
        if (poll(p, (nfds_t) n, 500) <= 0)
            continue;
        for (int k = 0; k < n; k++)
            if (p[k].revents & POLLIN)
                got += take_accepted(r, p[k].fd, which[k], err, errlen);
    }
    if (r->failed)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "%s", r->why);
    return ICBC_OK;
}

/* The leader's start-up connections after start-up: the inside client's
 * FINI goes to the server; the server closing before it ends the job. */
static void watch_startup(impi_relay_t *r)
{
    struct pollfd p[2] = { { r->startup_fd, POLLIN, 0 }, { r->server_fd, POLLIN, 0 } };
    char err[256];

    if (poll(p, 2, 0) <= 0)
        return;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = recv(r->startup_fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
        if (n > 0 && impi_rly_inside_input(r->rly, r->buf, (size_t) n, err, sizeof(err)) != ICBC_OK)
            relay_failf(r, "%s", err);
        else if (n == 0 && !impi_rly_finished(r->rly))
            relay_failf(r, "the inside client closed its start-up connection before FINI");
        if (n == 0) {
            close(r->startup_fd);
            r->startup_fd = -1;
        }
        if (startup_flush(r, err, sizeof(err)) != ICBC_OK)
            relay_failf(r, "%s", err);
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = recv(r->server_fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
        if (n == 0 && impi_rly_finished(r->rly)) {
            close(r->server_fd);
            r->server_fd = -1;
        } else if (n >= 0) {
            relay_failf(r, "impi-server %s",
                        n == 0 ? "closed its connection: the IMPI job ended"
                               : "spoke after start-up");
        }
    }
}

/* Every host said FINI to every relay: nothing more can come. */
static int fini_complete(const impi_relay_t *r)
{
    if (r->fini_in_seen != r->fini_in_want)
        return 0;
    for (int c = 0; c < r->out->nclients; c++)
        if (c != r->client && r->fini_out_seen[c] != r->fini_out_want[c])
            return 0;
    return 1;
}

static int links_open(const impi_relay_t *r)
{
    for (int j = 0; j < IMPI_RELAY_TRUNKS_MAX; j++)
        if (r->links[j].fd >= 0)
            return 1;
    return 0;
}

icbc_status_t impi_relay_run(impi_relay_t *r, char *err, size_t errlen)
{
    icbc_status_t st;
    double end_by = 0, linger_until = 0;

    st = r->rank == 0 ? leader_startup(r, err, errlen) : follower_startup(r, err, errlen);
    if (st != ICBC_OK)
        return st;
    if ((st = run_connect(r, err, errlen)) != ICBC_OK)
        return st;
    /* the second line of stdout: start-up is over, packets go through */
    printf("relaying client %d: %d inside host(s), %d outside host(s)", r->client, r->nin,
           r->out->nhosts_total - (int) r->out->nhosts[r->client]);
    if (r->cfg.on_started)
        r->cfg.on_started(r->cfg.arg, r->client, r->nin,
                          r->out->nhosts_total - (int) r->out->nhosts[r->client]);
    if (r->ntrunks > 1)
        printf(", relay %d of %d", r->rank, r->ntrunks);
    printf("\n");
    fflush(stdout);
    while (!r->failed) {
        bt_poller_wait(r->poller, 100);
        if (r->rank == 0 && (r->startup_fd >= 0 || r->server_fd >= 0))
            watch_startup(r);
        if (relay_all_closed(r) && fini_complete(r) && (r->rank > 0 || impi_rly_finished(r->rly))) {
            /* done; the other relays of a trunk may still wait for FINI notes
             * that a third one sent them: the links stay open until they
             * close theirs, or a second passed, so that none of them takes
             * this one's closing for a relay lost before FINI */
            if (linger_until == 0)
                linger_until = icbc_clock_now() + 1.0;
            if (!links_open(r) || icbc_clock_now() > linger_until)
                break;
        }
        /* once every host said FINI the rest is the hosts' closing; bounded */
        if (fini_complete(r) && end_by == 0)
            end_by = icbc_clock_now() + (r->cfg.timeout > 0 ? r->cfg.timeout : 600);
        if (end_by && icbc_clock_now() > end_by) {
            relay_failf(r, "the hosts did not close their connections after FINI");
            break;
        }
    }
    if (r->failed)
        return icbc_err(ICBC_ERR_PEER_FAILED, err, errlen, "%s", r->why);
    /* the last line of stdout */
    printf("relayed %llu packet(s): %llu cut through, %llu whole (%llu of them behind a packet "
           "in progress)\n",
           (unsigned long long) (r->pkts_cut + r->pkts_whole), (unsigned long long) r->pkts_cut,
           (unsigned long long) r->pkts_whole, (unsigned long long) r->pkts_behind);
    fflush(stdout);
    return ICBC_OK;
}
