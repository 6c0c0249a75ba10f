/*
 * One IMPI client of one host with one process, built from libicbc's IMPI
 * parts alone (impi_client, impi_hostconn, impi_rx, impi_p2p): it starts
 * through impi-server, connects to the other hosts, and ping-pongs with
 * world rank --peer. The other side is test/impi/lam_pingpong.c run by
 * LAM/MPI 7.1.4 (test/pytest/test_impi_lam.py), or another impi_pingpong.
 *
 *   impi_pingpong --server ADDR:PORT --client K --host ADDR --peer R
 *                 [--sizes N,N,...] [--iters N] [--sync] [--coll] [--timeout S]
 *                 [--hostile type|len|proc|cid]
 *
 * For each size and iteration the lower world rank sends first; each side
 * checks every byte it receives (pattern(size, iteration) one way,
 * pattern(size, iteration + 1000) back), with --sync the first send of
 * each iteration is synchronous. Prints one line per size (bytes,
 * iterations, microseconds per round trip) and exits 0, or names what went
 * wrong and exits 1. --coll then runs the collectives of
 * test/impi/lam_coll.c (Barrier; Bcast and Reduce from every root;
 * Allreduce) with the global phase of impi_coll, and prints "rank R: coll
 * ok" (--peer may then be left out, with --sizes ""). --hostile sends
 * PEER's host one packet it must refuse (an unknown type, a payload beyond
 * DATALEN, a source process that is not this host's, a context id no MPICH
 * communicator has) once connected, and instead of the rest expects that
 * host to close the connection: prints "hostile KIND: closed by the peer"
 * and exits 0, or exits 1 when it stays open. At the end it takes part in the barrier on
 * MPI_COMM_WORLD that IMPI requires of MPI_Finalize (LAM's IMPI_Finalize:
 * the clients' masters, linear up to 4 of them), then sends FINI.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
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
#include "impi_client.h"
#include "impi_coll.h"
#include "impi_hostconn.h"
#include "impi_p2p.h"
#include "impi_rx.h"

#define TAG 17
/* MPI_COMM_WORLD's context ids as LAM/MPI puts them on the wire: 0 for
 * point-to-point, 1 for IMPI collectives (pt2pt + 1, IMPI section 4.3) */
#define WORLD_CID 0
#define WORLD_COLL_CID 1

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "impi_pingpong: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- connections to the other hosts ------------------------------------- */

typedef struct conn {
    int fd;
    impi_rx_t rx;
    uint8_t *out; /* bytes not yet written */
    size_t out_len, out_cap;
    int fini_in;
} conn_t;

static impi_layout_t layout;
static int self_host, self_rank;
static conn_t *conns; /* per host */
static impi_p2p_t *p2p;
static double deadline_ms;
static int trace; /* IMPI_PINGPONG_TRACE=1: every packet on stderr */

static void trace_pkt(const char *dir, int host, const uint8_t *hdr)
{
    impi_pkt_hdr_t h;

    if (!trace)
        return;
    impi_pkt_hdr_parse(hdr, layout.datalen, &h);
    fprintf(stderr,
            "%s host %d: type %u len %u msglen %llu srqid %llu drqid %llu tag %d cid %llu\n", dir,
            host, h.type, h.len, (unsigned long long) h.msglen, (unsigned long long) h.srqid,
            (unsigned long long) h.drqid, h.tag, (unsigned long long) h.cid);
}

static void out_append(conn_t *c, const void *b, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        c->out_cap = 2 * (c->out_len + n);
        c->out = realloc(c->out, c->out_cap);
        if (!c->out)
            die("out of memory");
    }
    memcpy(c->out + c->out_len, b, n);
    c->out_len += n;
}

static void flush(conn_t *c)
{
    while (c->out_len > 0) {
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0)
            die("writing to an IMPI host: %s", strerror(errno));
        memmove(c->out, c->out + n, c->out_len - (size_t) n);
        c->out_len -= (size_t) n;
    }
}

static icbc_status_t emit(void *arg, int host, const uint8_t *hdr, const void *payload, size_t len)
{
    (void) arg;
    if (host < 0 || host >= layout.nhosts_total || conns[host].fd < 0)
        return ICBC_ERR_INVALID;
    trace_pkt("to", host, hdr);
    out_append(&conns[host], hdr, IMPI_PKT_HDR_SIZE);
    if (len)
        out_append(&conns[host], payload, len);
    flush(&conns[host]);
    return ICBC_OK;
}

/* ---- messages ----------------------------------------------------------- */

typedef struct arrival {
    impi_msg_t m;
    uint8_t *bytes; /* the head's bytes */
    struct arrival *next;
} arrival_t;

static arrival_t *unexpected, **unexpected_tail = &unexpected;
static uint8_t *long_buf; /* the long message being received */
static uint64_t long_drqid, long_len;
static int long_done;
static int send_done_flag;

static void on_arrived(void *arg, const impi_msg_t *m)
{
    arrival_t *a = calloc(1, sizeof(*a));

    (void) arg;
    if (!a || !(a->bytes = malloc(m->len ? m->len : 1)))
        die("out of memory");
    a->m = *m;
    memcpy(a->bytes, m->payload, m->len);
    a->m.payload = a->bytes;
    *unexpected_tail = a;
    unexpected_tail = &a->next;
}

static void on_data(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *b, size_t len,
                    int last)
{
    (void) arg;
    if (drqid != long_drqid || offset + len > long_len)
        die("long-message bytes for drqid %llu at %llu", (unsigned long long) drqid,
            (unsigned long long) offset);
    memcpy(long_buf + offset, b, len);
    long_done = last;
}

static void on_send_done(void *arg, uint64_t srqid)
{
    (void) arg;
    (void) srqid;
    send_done_flag = 1;
}

static void on_fini(void *arg, int host)
{
    (void) arg;
    conns[host].fini_in = 1;
}

static const impi_p2p_ops_t ops = { emit, on_arrived, on_data, on_send_done, NULL, on_fini };

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    char err[256];
    int host = *(int *) arg;
    uint8_t raw[IMPI_PKT_HDR_SIZE];

    impi_pkt_hdr_pack(pkt->hdr, raw);
    trace_pkt("from", host, raw);
    if (impi_p2p_packet(p2p, host, pkt, err, sizeof(err)) != ICBC_OK)
        die("%s", err);
}

/* Moves bytes both ways for at most WAIT_MS. */
static void progress(int wait_ms)
{
    struct pollfd pfd[64];
    int idx[64], n = 0;

    if (icbc_clock_ms() > deadline_ms)
        die("no progress before the time limit");
    for (int h = 0; h < layout.nhosts_total && n < 64; h++) {
        if (conns[h].fd < 0)
            continue;
        pfd[n].fd = conns[h].fd;
        pfd[n].events = POLLIN | (conns[h].out_len ? POLLOUT : 0);
        idx[n++] = h;
    }
    if (poll(pfd, (nfds_t) n, wait_ms) < 0 && errno != EINTR)
        die("poll: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        conn_t *c = &conns[idx[i]];
        if (pfd[i].revents & POLLOUT)
            flush(c);
        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
            static uint8_t buf[1 << 16];
            char err[256];
            ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (r <= 0) {
                if (c->fini_in)
                    continue;
                die("IMPI host %d closed its connection", idx[i]);
            }
            if (impi_rx_feed(&c->rx, buf, (size_t) r, on_packet, &idx[i], err, sizeof(err)) !=
                ICBC_OK)
                die("%s", err);
        }
    }
}

static void pattern(uint8_t *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t) (i * 131 + (size_t) seed * 7 + (i >> 8));
}

static void send_msg(int dest, int tag, uint64_t cid, const uint8_t *buf, size_t len, int sync)
{
    static uint64_t srqid = 1;
    impi_send_t s = { .src = self_rank,
                      .dest = dest,
                      .lsrank = self_rank,
                      .tag = tag,
                      .cid = cid,
                      .srqid = srqid++,
                      .buf = buf,
                      .len = len,
                      .sync = sync };

    send_done_flag = 0;
    if (impi_p2p_send(p2p, &s) != ICBC_OK)
        die("send of %zu bytes to rank %d refused", len, dest);
    while (!send_done_flag)
        progress(100);
}

/* Receives the next message from SRC with TAG on CID into BUF (LEN bytes
 * exactly). */
static void recv_msg(int src, int tag, uint64_t cid, uint8_t *buf, size_t len)
{
    arrival_t *a;

    for (;;) {
        arrival_t **pp = &unexpected;
        for (a = unexpected; a; pp = &a->next, a = a->next)
            if (a->m.src == src && a->m.tag == tag && a->m.cid == cid)
                break;
        if (a) {
            *pp = a->next;
            if (unexpected_tail == &a->next)
                unexpected_tail = pp;
            break;
        }
        progress(100);
    }
    if (a->m.msglen != len)
        die("a message of %llu bytes from rank %d where %zu were due",
            (unsigned long long) a->m.msglen, src, len);
    if (a->m.len)
        memcpy(buf, a->bytes, a->m.len);
    if (a->m.kind != IMPI_MSG_SHORT) {
        uint64_t drqid = 0;
        long_buf = buf;
        long_len = len;
        long_done = 0;
        if (impi_p2p_matched(p2p, &a->m, &drqid) != ICBC_OK)
            die("matching a message from rank %d", src);
        long_drqid = drqid;
        if (a->m.kind == IMPI_MSG_LONG_HEAD)
            while (!long_done)
                progress(100);
    }
    free(a->bytes);
    free(a);
}

/* ---- collectives on MPI_COMM_WORLD (this process is its client's master) */

static int *world_client; /* the client of each world rank */

static impi_coll_group_t world_group(void)
{
    impi_coll_group_t g = { layout.nprocs_total, world_client, layout.coll_maxlinear };
    return g;
}

/* Ints on the wire: LAM/MPI 7.1.4 sends its native (little-endian x86)
 * representation, not external32. */
static int32_t get_int(const uint8_t *b)
{
    return (int32_t) ((uint32_t) b[0] | (uint32_t) b[1] << 8 | (uint32_t) b[2] << 16 |
                      (uint32_t) b[3] << 24);
}

static void put_int(uint8_t *b, int32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t) ((uint32_t) v >> (8 * i));
}

/* Runs STEPS with TAG on context CID on BUF (LEN bytes); a reduction adds
 * ints. */
static void run_steps(const impi_coll_step_t *steps, int n, int tag, uint64_t cid, uint8_t *buf,
                      size_t len)
{
    uint8_t *tmp = malloc(len ? len : 1);

    for (int k = 0; k < n; k++) {
        if (steps[k].op == IMPI_COLL_SEND) {
            send_msg(steps[k].peer, tag, cid, buf, len, 0);
        } else if (steps[k].op == IMPI_COLL_RECV) {
            recv_msg(steps[k].peer, tag, cid, buf, len);
        } else {
            recv_msg(steps[k].peer, tag, cid, tmp, len);
            for (size_t i = 0; i + 4 <= len; i += 4)
                put_int(buf + i, get_int(buf + i) + get_int(tmp + i));
        }
    }
    free(tmp);
}

static void barrier_world(void)
{
    impi_coll_group_t g = world_group();
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    run_steps(steps, impi_coll_barrier(&g, self_rank, steps), IMPI_TAG_BARRIER, WORLD_COLL_CID,
              NULL, 0);
}

static void bcast_world(uint8_t *buf, size_t len, int root)
{
    impi_coll_group_t g = world_group();
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    run_steps(steps, impi_coll_bcast(&g, self_rank, root, steps), IMPI_TAG_BCAST, WORLD_COLL_CID,
              buf, len);
}

/* LAM/MPI 7.1.4's reduce never switches to the collective context id: its
 * global phase goes on the point-to-point one. */
static void reduce_world(uint8_t *buf, size_t len, int root)
{
    impi_coll_group_t g = world_group();
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    run_steps(steps, impi_coll_reduce(&g, self_rank, root, steps), IMPI_TAG_REDUCE, WORLD_CID, buf,
              len);
}

/* The collectives of test/impi/lam_coll.c, with the same values. */
#define NINTS 4
static void coll_world(void)
{
    int size = layout.nprocs_total;
    uint8_t v[4 * NINTS], s[4 * NINTS];

    barrier_world();
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < NINTS; i++)
            put_int(v + 4 * i, root == self_rank ? root * 100 + i : -1);
        bcast_world(v, sizeof(v), root);
        for (int i = 0; i < NINTS; i++)
            if (get_int(v + 4 * i) != root * 100 + i)
                die("bcast from root %d: int %d is %d", root, i, get_int(v + 4 * i));
        for (int i = 0; i < NINTS; i++)
            put_int(s + 4 * i, (self_rank + 1) * (i + 1));
        reduce_world(s, sizeof(s), root);
        if (root == self_rank)
            for (int i = 0; i < NINTS; i++)
                if (get_int(s + 4 * i) != (i + 1) * size * (size + 1) / 2)
                    die("reduce to root %d: int %d is %d", root, i, get_int(s + 4 * i));
    }
    /* Allreduce as LAM composes it: reduce to rank 0, bcast from it */
    for (int i = 0; i < NINTS; i++)
        put_int(s + 4 * i, (self_rank + 1) * (i + 1));
    reduce_world(s, sizeof(s), 0);
    bcast_world(s, sizeof(s), 0);
    for (int i = 0; i < NINTS; i++)
        if (get_int(s + 4 * i) != (i + 1) * size * (size + 1) / 2)
            die("allreduce: int %d is %d", i, get_int(s + 4 * i));
    printf("rank %d: coll ok\n", self_rank);
    fflush(stdout);
}

/* ---- start-up and connections ------------------------------------------ */

static int listen_on(const char *addr, uint16_t *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof(sa);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, addr, &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *) &sa, &sl))
        die("listening on %s: %s", addr, strerror(errno));
    *port = ntohs(sa.sin_port);
    return fd;
}

static void connect_hosts(int lfd, const char *self_addr)
{
    uint8_t *connected = calloc((size_t) layout.nhosts_total, 1);
    int want_accept = layout.nhosts_total - 1 - self_host;
    char err[256];

    /* the higher host connects, from the address it advertised */
    for (int h = 0; h < self_host; h++) {
        struct sockaddr_in me = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
        uint8_t rank[IMPI_HOST_RANK_SIZE];
        inet_pton(AF_INET, self_addr, &me.sin_addr);
        uint32_t v4 = impi_host_v4(&layout.hosts[h]);
        memcpy(&to.sin_addr, &v4, 4);
        to.sin_port = htons((uint16_t) layout.hosts[h].port);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)) ||
            connect(fd, (struct sockaddr *) &to, sizeof(to)))
            die("connecting to IMPI host %d: %s", h, strerror(errno));
        icbc_put32(rank, (uint32_t) self_host);
        if (send(fd, rank, sizeof(rank), MSG_NOSIGNAL) != sizeof(rank))
            die("sending the host rank to IMPI host %d", h);
        conns[h].fd = fd;
        connected[h] = 1;
    }
    while (want_accept > 0) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        uint8_t rank[IMPI_HOST_RANK_SIZE];
        int host, one = 1;
        int fd = accept(lfd, (struct sockaddr *) &from, &fl);
        if (fd < 0)
            die("accept: %s", strerror(errno));
        if (recv(fd, rank, sizeof(rank), MSG_WAITALL) != sizeof(rank)) {
            close(fd);
            continue;
        }
        if (impi_host_accept_check(&layout, self_host, rank, from.sin_addr.s_addr, connected, &host,
                                   err, sizeof(err)) != ICBC_OK) {
            fprintf(stderr, "impi_pingpong: refused: %s\n", err);
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conns[host].fd = fd;
        connected[host] = 1;
        want_accept--;
    }
    for (int h = 0; h < layout.nhosts_total; h++)
        if (h != self_host) {
            fcntl(conns[h].fd, F_SETFL, O_NONBLOCK);
            if (impi_rx_init(&conns[h].rx, &layout, self_host, h) != ICBC_OK)
                die("out of memory");
        }
    free(connected);
}

/* One packet host HOST must refuse, then its connection must close. */
static int hostile(const char *kind, int host, int peer_rank)
{
    impi_pkt_hdr_t h;
    uint8_t raw[IMPI_PKT_HDR_SIZE + 16];
    size_t n = IMPI_PKT_HDR_SIZE;

    memset(&h, 0, sizeof(h));
    memset(raw, 0, sizeof(raw));
    h.type = IMPI_PK_DATA;
    h.src = layout.procs[self_rank];
    h.dest = layout.procs[peer_rank];
    h.srqid = 1;
    h.msglen = 16;
    h.len = 16;
    h.lsrank = self_rank;
    h.tag = 1;
    if (!strcmp(kind, "type")) {
        h.type = 99;
        h.len = 0;
    } else if (!strcmp(kind, "len")) {
        h.msglen = h.len = layout.datalen + 1;
    } else if (!strcmp(kind, "proc")) {
        h.src.pid = -12345;
    } else if (!strcmp(kind, "cid")) {
        h.cid = 1u << 20;
    } else {
        die("--hostile %s: type, len, proc or cid", kind);
    }
    impi_pkt_hdr_pack(&h, raw);
    if (h.type == IMPI_PK_DATA && h.len == 16)
        n += 16;
    if (send(conns[host].fd, raw, n, MSG_NOSIGNAL) != (ssize_t) n)
        die("sending the hostile packet: %s", strerror(errno));
    for (;;) {
        struct pollfd p = { conns[host].fd, POLLIN, 0 };
        uint8_t buf[4096];
        if (icbc_clock_ms() > deadline_ms)
            die("hostile %s: host %d kept its connection open", kind, host);
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = recv(conns[host].fd, buf, sizeof(buf), 0);
        if (r <= 0) {
            printf("hostile %s: closed by the peer\n", kind);
            fflush(stdout);
            return 0;
        }
    }
}

int main(int argc, char **argv)
{
    const char *server = NULL, *host_addr = "127.0.0.1", *sizes_arg = "0,4,1000,65536,100000";
    int client = -1, peer = -1, iters = 10, sync = 0, coll = 0;
    const char *hostile_kind = NULL;
    double timeout_s = 120;
    static const struct option opts[] = {
        { "server", 1, 0, 's' },  { "client", 1, 0, 'c' }, { "host", 1, 0, 'h' },
        { "peer", 1, 0, 'p' },    { "sizes", 1, 0, 'z' },  { "iters", 1, 0, 'i' },
        { "sync", 0, 0, 'y' },    { "coll", 0, 0, 'o' },   { "timeout", 1, 0, 't' },
        { "hostile", 1, 0, 'x' }, { 0, 0, 0, 0 }
    };
    int o;

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': server = optarg; break;
        case 'c': client = atoi(optarg); break;
        case 'h': host_addr = optarg; break;
        case 'p': peer = atoi(optarg); break;
        case 'z': sizes_arg = optarg; break;
        case 'i': iters = atoi(optarg); break;
        case 'y': sync = 1; break;
        case 'o': coll = 1; break;
        case 't': timeout_s = atof(optarg); break;
        case 'x': hostile_kind = optarg; break;
        default: return 2;
        }
    }
    if (!server || client < 0 || (peer < 0 && !coll)) {
        fprintf(stderr, "usage: impi_pingpong --server ADDR:PORT --client K --host ADDR --peer R "
                        "[--sizes N,...] [--iters N] [--sync] [--coll] [--timeout S]\n");
        return 2;
    }
    deadline_ms = icbc_clock_ms() + timeout_s * 1000;
    trace = getenv("IMPI_PINGPONG_TRACE") && atoi(getenv("IMPI_PINGPONG_TRACE"));

    uint16_t port;
    int lfd = listen_on(host_addr, &port);
    impi_host_t me = { .port = port, .nprocs = 1 };
    impi_proc_t proc = { .pid = getpid() };
    inet_pton(AF_INET, host_addr, me.addr + 12);
    memcpy(proc.host, me.addr, 16);
    impi_local_t local = { .nhosts = 1,
                           .nprocs = 1,
                           .hosts = &me,
                           .procs = &proc,
                           .coll_xsize = -1,
                           .coll_maxlinear = -1 };
    impi_client_params_t params = { .server = server,
                                    .client = client,
                                    .timeout_ms = (int) (timeout_s * 1000) };
    impi_client_t *ic;
    char err[512];
    if (impi_client_startup(&params, &local, &ic, &layout, err, sizeof(err)) != ICBC_OK)
        die("%s", err);
    self_host = layout.first_host[client];
    self_rank = layout.hosts[self_host].first_rank;
    if (peer >= layout.nprocs_total || peer == self_rank || (peer < 0 && !coll))
        die("--peer %d: the job has ranks 0..%d and this process is %d", peer,
            layout.nprocs_total - 1, self_rank);
    fprintf(stderr, "impi_pingpong: world rank %d of %d, host %d of %d, DATALEN %u\n", self_rank,
            layout.nprocs_total, self_host, layout.nhosts_total, layout.datalen);
    conns = calloc((size_t) layout.nhosts_total, sizeof(*conns));
    for (int h = 0; h < layout.nhosts_total; h++)
        conns[h].fd = -1;
    connect_hosts(lfd, host_addr);
    if (impi_p2p_create(&layout, self_host, &ops, NULL, &p2p) != ICBC_OK)
        die("impi_p2p_create");
    if (hostile_kind) {
        int ph = 0;
        while (ph + 1 < layout.nhosts_total && layout.hosts[ph + 1].first_rank <= peer)
            ph++;
        return hostile(hostile_kind, ph, peer);
    }
    world_client = malloc(sizeof(int) * (size_t) layout.nprocs_total);
    for (int h = 0; h < layout.nhosts_total; h++)
        for (uint32_t k = 0; k < layout.hosts[h].nprocs; k++)
            world_client[layout.hosts[h].first_rank + (int) k] = layout.hosts[h].client;

    int first = self_rank < peer;
    char *sizes = strdup(sizes_arg);
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        size_t n = strtoul(tok, NULL, 10);
        uint8_t *out = malloc(n ? n : 1), *in = malloc(n ? n : 1), *want = malloc(n ? n : 1);
        double t0 = 0;
        for (int it = 0; it < iters; it++) {
            if (it == 1)
                t0 = icbc_clock_ms();
            if (first) {
                pattern(out, n, it);
                send_msg(peer, TAG, WORLD_CID, out, n, sync);
                recv_msg(peer, TAG, WORLD_CID, in, n);
                pattern(want, n, it + 1000);
            } else {
                recv_msg(peer, TAG, WORLD_CID, in, n);
                pattern(want, n, it);
                if (memcmp(in, want, n))
                    die("%zu bytes from rank %d, iteration %d: wrong data", n, peer, it);
                pattern(out, n, it + 1000);
                send_msg(peer, TAG, WORLD_CID, out, n, sync);
                continue;
            }
            if (memcmp(in, want, n))
                die("%zu bytes back from rank %d, iteration %d: wrong data", n, peer, it);
        }
        double us = iters > 1 ? (icbc_clock_ms() - t0) * 1000 / (iters - 1) : 0;
        printf("%zu bytes %d iterations %.1f us per round trip\n", n, iters, us);
        fflush(stdout);
        free(out);
        free(in);
        free(want);
    }
    free(sizes);

    if (coll)
        coll_world();
    barrier_world();

    /* FINI to every host, then wait for theirs */
    for (int h = 0; h < layout.nhosts_total; h++)
        if (h != self_host && impi_p2p_fini(p2p, h) != ICBC_OK)
            die("FINI to host %d", h);
    for (;;) {
        int all = 1, pending = 0;
        for (int h = 0; h < layout.nhosts_total; h++) {
            if (h == self_host)
                continue;
            all &= conns[h].fini_in;
            pending |= conns[h].out_len > 0;
        }
        if (all && !pending)
            break;
        progress(100);
    }
    for (int h = 0; h < layout.nhosts_total; h++)
        if (h != self_host) {
            close(conns[h].fd);
            impi_rx_free(&conns[h].rx);
            free(conns[h].out);
        }
    impi_p2p_destroy(p2p);
    if (impi_client_fini(ic) != ICBC_OK)
        die("FINI to the IMPI server");
    impi_layout_free(&layout);
    close(lfd);
    return 0;
}
