/*
 * IMPI host connections: the transport to the processes of other IMPI
 * clients (icbc_impi.h, docs/impi.md). Every node of this job is one IMPI
 * host with one TCP connection to every host of the other clients, held by
 * the host's agent (src/impi/impi_agent.h) in a thread of the node's first
 * process; every process of the node reaches it over a local link, on which
 * its packets travel whole. At MPI_Init the first process connects to the
 * lower hosts, from the address the host advertised, and names the host; an
 * accepted connection is held to the job's layout before it carries
 * anything (impi_host_accept_check).
 *
 * What the packets say is the protocols': IMPI's packets go to the IMPI
 * protocol (icbc_proto_impi.c) through the callbacks it attached
 * (MPIDI_ICBC_impi_up_t); between two ICBC clients, ICBC's own protocol
 * (icbc_xfer.h) travels as IMPI_PK_ICBC packets on the same connections,
 * which this file reassembles and hands up like any path (icbc_path.h). The
 * port faces the WAN: a packet the layout or the protocol does not allow
 * closes the connection with a message naming the host, and its processes
 * fail like a lost peer.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_path.h"
#include "icbc_impi.h"
#include "impi/impi_agent.h"
#include "impi/impi_hostconn.h"
#include "impi/impi_rx.h"
#include "core/icbc_bytes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* What this process has with one host of another client: whether it is
 * lost. Every host is reached through this node's IMPI host (the agent),
 * which held its packets to the layout; they come whole, each in a frame,
 * and are read where they lie (frame_packet). */
typedef struct {
    int failed;
} conn_t;

static struct {
    int open;
    int self_host; /* this node's IMPI host */
    conn_t *conns; /* per host of the job */
    int link;      /* to the agent: frames (impi_agent.h) */
    uint8_t *out;  /* bytes not yet written: out[out_off .. out_len) */
    size_t out_off, out_len, out_cap;
    impi_frames_t frames;
    /* the node's first process: the agent, which its progress and a thread
     * of its own both run (under AGENT_LOCK) */
    impi_agent_t *agent;
    pthread_t agent_thread;
    int has_thread; /* the host has other processes, which the thread serves */
    pthread_mutex_t agent_lock;
    uint8_t *in; /* frames from the agent, swapped out of it whole */
    size_t in_cap;
    int in_walk;
    /* ICBC messages (icbc_xfer.h) between ICBC clients */
    struct icbc_in **icbc_in;      /* per world rank: its message arriving in pieces */
    MPIDI_ICBC_path_done_t *dones; /* lane sends copied out, to complete in progress */
    int ndones, dones_cap;
} impi_host; /* this process's side of its node's IMPI host */

static const MPIDI_ICBC_path_up_t *above;   /* the layer above, for ICBC's packets */
static const MPIDI_ICBC_impi_up_t *impi_up; /* the IMPI protocol */

/* ---- connections --------------------------------------------------------- */

static void host_failed(int host, const char *why);
static void link_lost(const char *why);

/* Writes what the link takes now; -1: it broke. */
static int flush_out(void)
{
    return impi_send_pending(impi_host.link, impi_host.out, &impi_host.out_off, &impi_host.out_len);
}

/* Queues the bytes of IOV[0 .. N) (what the link did not take). */
static icbc_status_t out_queue(const struct iovec *iov, int n)
{
    size_t need = impi_host.out_len;

    for (int i = 0; i < n; i++)
        need += iov[i].iov_len;
    if (need > impi_host.out_cap) {
        size_t cap = MPL_MAX(2 * impi_host.out_cap, need);
        uint8_t *p = MPL_realloc(impi_host.out, cap, MPL_MEM_BUFFER);
        if (p == NULL)
            return ICBC_ERR_NO_MEMORY;
        impi_host.out = p;
        impi_host.out_cap = cap;
    }
    for (int i = 0; i < n; i++)
        if (iov[i].iov_len) {
            memcpy(impi_host.out + impi_host.out_len, iov[i].iov_base, iov[i].iov_len);
            impi_host.out_len += iov[i].iov_len;
        }
    return ICBC_OK;
}

/* A frame to the agent: its header, then A and B (either may be empty).
 * With nothing queued on the link the bytes go from the caller's: only what
 * the link does not take now is copied. */
static icbc_status_t link_put(uint32_t kind, uint32_t host, const void *a, size_t alen,
                              const void *b, size_t blen)
{
    uint8_t fh[IMPI_FRAME_HDR_SIZE];
    struct iovec iov[3] = { { fh, sizeof(fh) }, { (void *) a, alen }, { (void *) b, blen } };
    icbc_status_t st;

    if (impi_host.link < 0 && !impi_host.agent)
        return ICBC_ERR_PEER_FAILED;
    impi_frame_hdr_pack(kind, host, (uint32_t) (alen + blen), fh);
    if (impi_host.agent) { /* this process is the node's first: straight to the agent */
        impi_host.out_len = 0;
        if ((st = out_queue(iov, 3)) != ICBC_OK)
            return st;
        pthread_mutex_lock(&impi_host.agent_lock);
        impi_agent_local_input(impi_host.agent, 0, impi_host.out, impi_host.out_len);
        pthread_mutex_unlock(&impi_host.agent_lock);
        impi_host.out_len = 0;
        return ICBC_OK;
    }
    if (impi_host.out_len == impi_host.out_off && impi_send_iov(impi_host.link, iov, 3) < 0) {
        link_lost("writing to it failed");
        return ICBC_ERR_PEER_FAILED;
    }
    if ((st = out_queue(iov, 3)) != ICBC_OK)
        return st;
    if (flush_out() != 0) {
        link_lost("writing to it failed");
        return ICBC_ERR_PEER_FAILED;
    }
    return ICBC_OK;
}

/* A packet for HOST: HEAD (its header, maybe more) and PAYLOAD; held back
 * (ICBC_ERR_BUSY) while more than HOLD_ABOVE bytes wait to go towards HOST
 * (0: never). What waits is on the agent's connection to HOST in the
 * node's first process, on the link to the agent (for every host) in the
 * others; the first process asks and sends under one lock. */
icbc_status_t MPIDI_ICBC_impi_emit(int host, const uint8_t *head, size_t head_len,
                                   const void *payload, size_t len, size_t hold_above)
{
    icbc_status_t st;

    if (host < 0 || host >= MPIDI_ICBC_impi.layout.nhosts_total || impi_host.conns[host].failed)
        return ICBC_ERR_PEER_FAILED;
    if (!impi_host.agent) {
        if (hold_above && impi_host.out_len - impi_host.out_off > hold_above)
            return ICBC_ERR_BUSY;
        return link_put(IMPI_FRAME_PACKET, (uint32_t) host, head, head_len, payload, len);
    }
    /* this process is its host's first: straight onto the host connection */
    pthread_mutex_lock(&impi_host.agent_lock);
    if (hold_above && impi_agent_host_backlog(impi_host.agent, host) > hold_above)
        st = ICBC_ERR_BUSY;
    else
        st = impi_agent_local_packet(impi_host.agent, host, head, head_len, payload, len);
    pthread_mutex_unlock(&impi_host.agent_lock);
    return st;
}

/* ---- ICBC messages between ICBC clients ---------------------------------- */

/* Where both clients are ICBC, the netmod's own protocol (icbc_xfer.h:
 * whole active messages, the striping rendezvous on one lane, SYNC) travels
 * between their processes as IMPI_PK_ICBC packets on the host connections
 * that carry IMPI's, so one-sided operations and whatever else MPIDIG builds
 * on active messages work across the clients. A message is one packet of at
 * most DATALEN bytes or several: the first carries its ICBC header and the
 * first payload bytes, the others the rest at their offsets. A pair's
 * packets travel in order (one local link, one agent, one connection), so a
 * process reassembles at most one message per source at a time. */

typedef struct icbc_in {
    int active;
    int host;
    uint64_t got, total;
    uint8_t *dest; /* where the payload goes; NULL: dropped */
    MPIDI_ICBC_xrecv_t x;
} icbc_in_t;

/* The packets are copied out when sent: the sends complete in the next
 * progress, not inside the caller's send. */
static int done_later(MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    if (impi_host.ndones == impi_host.dones_cap) {
        int cap = MPL_MAX(64, 2 * impi_host.dones_cap);
        MPIDI_ICBC_path_done_t *p = MPL_realloc(impi_host.dones, sizeof(*p) * cap, MPL_MEM_OTHER);
        if (p == NULL)
            return -1;
        impi_host.dones = p;
        impi_host.dones_cap = cap;
    }
    impi_host.dones[impi_host.ndones].cb = cb;
    impi_host.dones[impi_host.ndones].arg = arg;
    impi_host.ndones++;
    return 0;
}

static int fire_dones(void)
{
    int n = impi_host.ndones;

    /* a completion may send again and queue more: they wait for the next round */
    for (int i = 0; i < n; i++)
        impi_host.dones[i].cb(impi_host.dones[i].arg, ICBC_OK);
    memmove(impi_host.dones, impi_host.dones + n,
            sizeof(*impi_host.dones) * (impi_host.ndones - n));
    impi_host.ndones -= n;
    return n;
}

static int impi_lane_send(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                          const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                          int *busy)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    uint8_t head[IMPI_PKT_HDR_SIZE + 4096 + 256];
    int client, host;
    size_t room = l->datalen, n;

    *busy = 0;
    if (!MPIDI_ICBC_impi_speaks_icbc(peer->rank))
        return MPIDI_ICBC_ERR_PEER(peer->rank, MPIDI_ICBC_IMPI_NOT_ICBC_WHY);
    if (peer->state == ICBC_PEER_FAILED)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    MPIR_Assert(inner_len > 0 && inner_len <= sizeof(head) - IMPI_PKT_HDR_SIZE);
    if (inner_len >= room)
        return MPIDI_ICBC_ERR_PEER(peer->rank,
                                   "the IMPI job's DATALEN is too small for ICBC's messages");
    MPIDI_ICBC_impi_where(peer->rank, &client, &host);
    impi_pkt_hdr_t h = {
        .type = IMPI_PK_ICBC,
        .src = l->procs[MPIR_Process.rank],
        .dest = l->procs[peer->rank],
        .msglen = len,
        .count = (int64_t) inner_len,
    };
    n = MPL_MIN(len, room - inner_len);
    h.len = (uint32_t) (inner_len + n);
    impi_pkt_hdr_pack(&h, head);
    memcpy(head + IMPI_PKT_HDR_SIZE, inner, inner_len);
    /* the message's first packet waits while the connection is full
     * (but for the ordered lane's); the others follow it */
    icbc_status_t st =
        MPIDI_ICBC_impi_emit(host, head, IMPI_PKT_HDR_SIZE + inner_len, payload, n,
                             lane != MPIDI_ICBC_LANE_ORDERED ? MPIDI_ICBC_IMPI_BACKLOG : 0);
    if (st == ICBC_ERR_BUSY) {
        *busy = 1;
        return MPI_SUCCESS;
    }
    if (st != ICBC_OK)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    h.count = 0;
    for (size_t off = n; off < len; off += n) {
        n = MPL_MIN(len - off, room);
        h.len = (uint32_t) n;
        h.seqnum = off;
        impi_pkt_hdr_pack(&h, head);
        if (MPIDI_ICBC_impi_emit(host, head, IMPI_PKT_HDR_SIZE, (const uint8_t *) payload + off, n,
                                 0) != ICBC_OK)
            return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    }
    if (done_later(cb, arg) != 0)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "out of memory");
    return MPI_SUCCESS;
}

static void icbc_in_end(icbc_in_t *in, int ok)
{
    in->active = 0;
    above->recv_end(&in->x, ok);
}

/* An ICBC packet from world rank SRC of HOST (impi_pkt_hdr_parse checked
 * its pieces against its message, impi_rx that both clients are ICBC). */
static void on_icbc_packet(int host, const impi_rx_pkt_t *pkt)
{
    const impi_pkt_hdr_t *h = pkt->hdr;
    icbc_in_t *in = impi_host.icbc_in ? impi_host.icbc_in[pkt->src] : NULL;
    size_t count = (size_t) h->count, part = pkt->len - count;
    void *dest;

    if (in && in->active) { /* the next piece of SRC's message */
        if (count != 0 || h->seqnum != in->got || h->msglen != in->total) {
            host_failed(host, "an ICBC packet out of its message's order");
            return;
        }
        if (in->dest)
            memcpy(in->dest + in->got, pkt->payload, pkt->len);
        in->got += pkt->len;
        if (in->got == in->total)
            icbc_in_end(in, 1);
        return;
    }
    if (count == 0) {
        host_failed(host, "an ICBC packet continuing no message");
        return;
    }
    if (part == h->msglen) { /* whole */
        MPIDI_ICBC_xrecv_t x;
        if (above->recv_begin(pkt->src, pkt->payload, count, part, pkt->payload + count, &x,
                              &dest) != 0) {
            host_failed(host, "a malformed ICBC message");
            return;
        }
        if (dest)
            memcpy(dest, pkt->payload + count, part);
        above->recv_end(&x, 1);
        return;
    }
    if (impi_host.icbc_in == NULL) {
        impi_host.icbc_in =
            MPL_calloc(MPIR_Process.size, sizeof(*impi_host.icbc_in), MPL_MEM_OTHER);
        if (impi_host.icbc_in == NULL) {
            host_failed(host, "out of memory for an arriving message");
            return;
        }
    }
    if (in == NULL &&
        (in = impi_host.icbc_in[pkt->src] = MPL_calloc(1, sizeof(*in), MPL_MEM_OTHER)) == NULL) {
        host_failed(host, "out of memory for an arriving message");
        return;
    }
    if (above->recv_begin(pkt->src, pkt->payload, count, h->msglen, NULL, &in->x, &dest) != 0) {
        host_failed(host, "a malformed ICBC message");
        return;
    }
    in->active = 1;
    in->host = host;
    in->total = h->msglen;
    in->got = part;
    in->dest = dest;
    if (dest)
        memcpy(in->dest, pkt->payload + count, part);
}

/* ---- packets in and failures ---------------------------------------------- */

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    int host = (int) (intptr_t) arg;
    char err[256];

    if (impi_host.conns[host].failed)
        return;
    if (pkt->hdr->type == IMPI_PK_ICBC) {
        on_icbc_packet(host, pkt);
        return;
    }
    if (impi_up == NULL)
        host_failed(host, "an IMPI packet before this process speaks IMPI");
    else if (impi_up->packet(host, pkt, err, sizeof(err)) != ICBC_OK)
        host_failed(host, err);
}

/* Host HOST is gone or broke the protocol (the agent closed its
 * connection and said why, or this process found a packet it does not
 * allow): its processes fail like lost peers (operations with them end in MPI errors),
 * and the sends to them in flight end with an error. */
static void host_failed(int host, const char *why)
{
    conn_t *c = &impi_host.conns[host];
    const impi_host_t *h = &MPIDI_ICBC_impi.layout.hosts[host];

    if (c->failed)
        return;
    c->failed = 1;
    if (!MPIDI_ICBC_global.finalizing) {
        char a[INET_ADDRSTRLEN];
        uint32_t v4 = impi_host_v4(h);
        inet_ntop(AF_INET, &v4, a, sizeof(a));
        icbc_error("IMPI host %d (client %d, %s:%u): %s; its connection is closed", host, h->client,
                   a, h->port, why);
    }
    for (uint32_t k = 0; k < h->nprocs; k++)
        above->peer_failed(h->first_rank + (int) k, why);
    if (impi_up)
        impi_up->host_lost(host, why);
    for (uint32_t k = 0; impi_host.icbc_in && k < h->nprocs; k++) {
        icbc_in_t *in = impi_host.icbc_in[h->first_rank + (int) k];
        if (in && in->active)
            icbc_in_end(in, 0);
    }
}

void MPIDI_ICBC_impi_host_failed(int host, const char *why)
{
    host_failed(host, why);
}

/* PMI rank 0 holds the client's connection to impi-server until FINI. The
 * server closes it when the IMPI job ends early (another client's job
 * died: LAM's mpirun closes its server connection when one of its
 * processes is killed, while its impid keeps the host connections open
 * and silent), so its closing fails every host of the other clients here;
 * the job then ends after the grace period of lost peers. Checked every
 * 100 ms. */
static void server_check(void)
{
    static double next;
    double now = icbc_clock_coarse();
    char err[256];

    if (MPIDI_ICBC_impi.conn == NULL || MPIDI_ICBC_global.finalizing || now < next)
        return;
    next = now + 0.1;
    if (impi_client_check(MPIDI_ICBC_impi.conn, err, sizeof(err)) == ICBC_OK)
        return;
    impi_client_destroy(MPIDI_ICBC_impi.conn);
    MPIDI_ICBC_impi.conn = NULL;
    for (int host = 0; host < MPIDI_ICBC_impi.layout.nhosts_total; host++)
        if (MPIDI_ICBC_impi.layout.hosts[host].client != MPIDI_ICBC_impi.client)
            host_failed(host, err);
}

/* The link to the agent broke: the node's IMPI host is gone (its first
 * process ended), and with it every host of the other clients. */
static void link_lost(const char *why)
{
    char err[256];

    if (impi_host.link < 0)
        return;
    close(impi_host.link);
    impi_host.link = -1;
    snprintf(err, sizeof(err), "the link to this node's IMPI host (world rank %d) broke: %s",
             MPIDI_ICBC_impi.layout.hosts[impi_host.self_host].first_rank, why);
    for (int host = 0; host < MPIDI_ICBC_impi.layout.nhosts_total; host++)
        if (MPIDI_ICBC_impi.layout.hosts[host].client != MPIDI_ICBC_impi.client)
            host_failed(host, err);
}

/* A packet from HOST, whole where it lies: its header at HEAD, its
 * payload at PAYLOAD, LEN bytes (LENT: as many as the header says; the
 * agent lent its buffer, IMPI_FRAME_PACKET_AT). The agent held it to the
 * layout when it read it from the WAN; that it is this process's is checked
 * once more, as the frame crossed a local link. */
static void frame_packet(uint32_t host, const uint8_t *head, const uint8_t *payload, size_t len,
                         int lent)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    impi_pkt_hdr_t hdr;
    impi_rx_pkt_t pkt = { &hdr, -1, -1, payload, len };
    char err[256];

    if (impi_host.conns[host].failed)
        return;
    if (impi_pkt_hdr_parse(head, l->datalen, &hdr) == ICBC_OK) {
        pkt.src = impi_layout_proc_rank(l, (int) host, &hdr.src);
        pkt.dest = impi_layout_proc_rank(l, impi_host.self_host, &hdr.dest);
        if (lent)
            pkt.len = hdr.len;
    }
    if (pkt.src < 0 || pkt.dest != MPIR_Process.rank || pkt.len != hdr.len) {
        snprintf(err, sizeof(err),
                 "its agent handed on a packet of type %u that is not this process's", hdr.type);
        host_failed((int) host, err);
        return;
    }
    on_packet((void *) (intptr_t) host, &pkt);
}

static void on_frame(void *arg, uint32_t kind, uint32_t host, const uint8_t *body, size_t len)
{
    uintptr_t at;

    (void) arg;
    /* the agent checked HOST when it read the packet from the WAN */
    if (host >= (uint32_t) MPIDI_ICBC_impi.layout.nhosts_total ||
        host == (uint32_t) impi_host.self_host)
        return;
    if (kind == IMPI_FRAME_LOST) {
        char err[IMPI_FRAME_LOST_MAX + 1];
        snprintf(err, sizeof(err), "%.*s", (int) len, (const char *) body);
        host_failed((int) host, err);
    } else if (kind == IMPI_FRAME_PACKET && len >= IMPI_PKT_HDR_SIZE) {
        frame_packet(host, body, body + IMPI_PKT_HDR_SIZE, len - IMPI_PKT_HDR_SIZE, 0);
    } else if (kind == IMPI_FRAME_PACKET_AT && impi_host.agent &&
               len == IMPI_PKT_HDR_SIZE + sizeof(at)) {
        memcpy(&at, body + IMPI_PKT_HDR_SIZE, sizeof(at));
        frame_packet(host, body, (const uint8_t *) at, 0, 1);
    }
}

/* The node's first process runs its agent itself while it is in MPI: no
 * thread hand-off for its own packets, and the other processes' packets
 * move as fast as it polls. */
static int agent_progress(void)
{
    size_t n;

    if (impi_host.in_walk)
        return 0; /* a callback of the frames below made progress */
    pthread_mutex_lock(&impi_host.agent_lock);
    impi_agent_poll(impi_host.agent, 0);
    n = impi_agent_local_swap(impi_host.agent, 0, &impi_host.in, &impi_host.in_cap);
    pthread_mutex_unlock(&impi_host.agent_lock);
    /* whole frames, read in place; the payloads they name stay the
     * agent's until the next swap */
    impi_host.in_walk = 1;
    for (size_t off = 0; off + IMPI_FRAME_HDR_SIZE <= n;) {
        uint32_t kind = icbc_get32(impi_host.in + off), host = icbc_get32(impi_host.in + off + 4);
        uint32_t len = icbc_get32(impi_host.in + off + 8);
        on_frame(NULL, kind, host, impi_host.in + off + IMPI_FRAME_HDR_SIZE, len);
        off += IMPI_FRAME_HDR_SIZE + len;
    }
    impi_host.in_walk = 0;
    return n > 0;
}

/* A frame body with at least this many bytes still to come is received
 * from the link straight into the frame (impi_frames_body_room). */
#define LINK_DIRECT_MIN 4096

static int impi_move(void)
{
    static uint8_t buf[1 << 16];
    char err[256];
    int events = 0;

    if (impi_host.ndones)
        events = fire_dones();
    if (impi_host.open && impi_host.agent) {
        events += agent_progress();
        server_check();
        return events;
    }
    if (!impi_host.open || impi_host.link < 0)
        return events;
    struct pollfd p = { impi_host.link,
                        (short) (POLLIN | (impi_host.out_len > impi_host.out_off ? POLLOUT : 0)),
                        0 };
    if (poll(&p, 1, 0) > 0) {
        events++;
        if ((p.revents & POLLOUT) && flush_out() != 0) {
            link_lost("writing to it failed");
            return 1;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            /* a large frame body straight into the frame, not through BUF */
            size_t want;
            uint8_t *room = impi_frames_body_room(&impi_host.frames, &want);
            int direct = room != NULL && want >= LINK_DIRECT_MIN;
            ssize_t r = direct ? recv(impi_host.link, room, want, MSG_DONTWAIT)
                               : recv(impi_host.link, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
                link_lost(r == 0 ? "it closed" : strerror(errno));
            else if (r > 0 && direct)
                impi_frames_body_filled(&impi_host.frames, (size_t) r, on_frame, NULL);
            else if (r > 0 && impi_frames_feed(&impi_host.frames, buf, (size_t) r, on_frame, NULL,
                                               err, sizeof(err)) != ICBC_OK)
                link_lost(err);
        }
    }
    /* after the link: what the agent already said about a host (why it
     * was lost) comes before the server's closing, which follows it */
    server_check();
    return events;
}

static int impi_progress(void)
{
    int events = impi_move();

    /* what the protocol held back while the connections were full */
    if (impi_up && impi_up->writable)
        impi_up->writable();
    return events;
}

/* ---- set-up --------------------------------------------------------------- */

static int connect_host(int host, struct in_addr self_addr, double deadline, char *why,
                        size_t whylen)
{
    const impi_host_t *h = &MPIDI_ICBC_impi.layout.hosts[host];
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = self_addr };
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t) h->port) };
    uint32_t v4 = impi_host_v4(h);
    uint8_t rank[IMPI_HOST_RANK_SIZE];
    int one = 1;

    memcpy(&to.sin_addr, &v4, 4);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            return -1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* from the address this host advertised: LAM knows a host by it */
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)) == 0 &&
            connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0) {
            icbc_put32(rank, (uint32_t) impi_host.self_host);
            if (send(fd, rank, sizeof(rank), MSG_NOSIGNAL) == (ssize_t) sizeof(rank))
                return fd;
        }
        snprintf(why, whylen, "connecting to IMPI host %d (client %d): %s", host, h->client,
                 strerror(errno));
        close(fd);
        if (icbc_clock_coarse() > deadline || (errno != ECONNREFUSED && errno != EINTR))
            return -1;
        usleep(100000); /* its host may not listen yet */
    }
}

/* Reads exactly N bytes from FD before DEADLINE; -1: not in time. */
static int read_exact(int fd, uint8_t *b, size_t n, double deadline)
{
    size_t have = 0;

    while (have < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0 || poll(&p, 1, MPL_MIN(ms, 1000)) < 0)
            return -1;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = recv(fd, b + have, n - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t) r;
    }
    return 0;
}

static int accept_hosts(int *fds, int want, double deadline, char *why, size_t whylen)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    uint8_t *connected = MPL_calloc(l->nhosts_total, 1, MPL_MEM_OTHER);

    if (connected == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    while (want > 0) {
        struct pollfd p = { MPIDI_ICBC_impi.listen_fd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0) {
            snprintf(why, whylen, "%d IMPI host(s) of other clients did not connect in %d s", want,
                     MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT);
            MPL_free(connected);
            return -1;
        }
        if (poll(&p, 1, MPL_MIN(ms, 1000)) <= 0)
            continue;
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        int fd = accept(MPIDI_ICBC_impi.listen_fd, (struct sockaddr *) &from, &fl);
        if (fd < 0)
            continue;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        uint8_t rank[IMPI_HOST_RANK_SIZE];
        char err[256], a[INET_ADDRSTRLEN];
        int host, one = 1;
        inet_ntop(AF_INET, &from.sin_addr, a, sizeof(a));
        if (read_exact(fd, rank, sizeof(rank), MPL_MIN(deadline, icbc_clock_coarse() + 10)) != 0) {
            icbc_warn("refused an IMPI connection from %s: it did not name its host", a);
            close(fd);
            continue;
        }
        if (impi_host_accept_check(l, impi_host.self_host, rank, from.sin_addr.s_addr, connected,
                                   &host, err, sizeof(err)) != ICBC_OK ||
            l->hosts[host].client == MPIDI_ICBC_impi.client) {
            icbc_warn("refused an IMPI connection from %s: %s", a,
                      err[0] ? err : "a host of this client");
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fds[host] = fd;
        connected[host] = 1;
        want--;
    }
    MPL_free(connected);
    return 0;
}

/* The local links of a node's IMPI host: a Unix socket in the abstract
 * namespace of the node's network namespace, named by the host's address
 * and port (unique on the node, even for several clients' hosts of one
 * address). */
static socklen_t link_address(const impi_host_t *h, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "icbc-impi-%08x-%u",
                     (unsigned) ntohl(impi_host_v4(h)), (unsigned) h->port);
    return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* A process of the node but its first: the link to the agent, which the
 * first process opens (it may not listen yet), named by its HELLO. */
static int link_connect(const impi_host_t *h, double deadline, char *why, size_t whylen)
{
    struct sockaddr_un sa;
    socklen_t len = link_address(h, &sa);
    uint8_t hello[IMPI_FRAME_HDR_SIZE];

    impi_frame_hdr_pack(IMPI_FRAME_HELLO, (uint32_t) MPIR_Process.rank, 0, hello);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            return -1;
        }
        if (connect(fd, (struct sockaddr *) &sa, len) == 0 &&
            send(fd, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t) sizeof(hello))
            return fd;
        snprintf(why, whylen, "connecting to this node's IMPI host (world rank %d): %s",
                 h->first_rank, strerror(errno));
        close(fd);
        if (icbc_clock_coarse() > deadline || (errno != ECONNREFUSED && errno != ENOENT))
            return -1;
        usleep(10000); /* the node's first process opens it */
    }
}

/* The node's first process: the links of the others, each named by its
 * HELLO, into FDS (index: world rank - the host's first rank). */
static int link_accept(int lfd, const impi_host_t *h, int *fds, double deadline, char *why,
                       size_t whylen)
{
    for (int want = (int) h->nprocs - 1; want > 0;) {
        struct pollfd p = { lfd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0) {
            snprintf(why, whylen, "%d process(es) of this node did not reach its IMPI host in %d s",
                     want, MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT);
            return -1;
        }
        if (poll(&p, 1, MPL_MIN(ms, 1000)) <= 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        uint8_t hello[IMPI_FRAME_HDR_SIZE];
        int k = -1;
        if (read_exact(fd, hello, sizeof(hello), MPL_MIN(deadline, icbc_clock_coarse() + 10)) ==
                0 &&
            icbc_get32(hello) == IMPI_FRAME_HELLO)
            k = (int) icbc_get32(hello + 4) - h->first_rank;
        if (k <= 0 || k >= (int) h->nprocs || fds[k] >= 0) {
            icbc_warn("refused a local link to the IMPI host: not a process of this node");
            close(fd);
            continue;
        }
        fds[k] = fd;
        want--;
    }
    return 0;
}

/* The agent's thread: it waits for the connections without the lock, so
 * that the process is never held up by it, and moves what arrived at once,
 * whether the process computes, sleeps between polls while idle
 * (MPIR_CVAR_CH4_ICBC_IDLE_SLEEP) or polls itself (then whichever takes
 * the lock first moves it, and the other finds nothing). */
static void *agent_thread(void *arg)
{
    struct pollfd p = { impi_agent_fd(impi_host.agent), POLLIN, 0 };
    int done = 0;

    while (!done) {
        poll(&p, 1, 100);
        pthread_mutex_lock(&impi_host.agent_lock);
        done = impi_agent_poll(impi_host.agent, 0);
        pthread_mutex_unlock(&impi_host.agent_lock);
    }
    return NULL;
}

/* The node's first process is its IMPI host: it connects to (or accepts)
 * every host of the other clients, takes the links of the node's other
 * processes, and runs the agent in a thread of its own, so that the host
 * moves packets while this process computes. */
static int host_open(struct in_addr self_addr, double deadline)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    const impi_host_t *self = &l->hosts[impi_host.self_host];
    int n = l->nhosts_total, want = 0, lfd = -1;
    int *host_fds = MPL_malloc(sizeof(int) * n, MPL_MEM_OTHER);
    int *local_fds = MPL_malloc(sizeof(int) * self->nprocs, MPL_MEM_OTHER);
    struct sockaddr_un sa;
    socklen_t salen = link_address(self, &sa);
    char why[512];

    MPIR_ERR_CHKANDJUMP(!host_fds || !local_fds, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int h = 0; h < n; h++)
        host_fds[h] = -1;
    for (uint32_t k = 0; k < self->nprocs; k++)
        local_fds[k] = -1;
    /* the node's other processes wait in the backlog meanwhile */
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, salen) != 0 || listen(lfd, SOMAXCONN) != 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s",
                             "cannot open the local links of this node's IMPI host");

    /* the higher host connects; a connection completes in the peer's
     * backlog, so connecting to every lower host first cannot deadlock */
    for (int h = 0; h < n; h++) {
        if (l->hosts[h].client == MPIDI_ICBC_impi.client)
            continue;
        if (!impi_host_connects(impi_host.self_host, h)) {
            want++;
            continue;
        }
        host_fds[h] = connect_host(h, self_addr, deadline, why, sizeof(why));
        if (host_fds[h] < 0)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    }
    if (accept_hosts(host_fds, want, deadline, why, sizeof(why)) != 0 ||
        link_accept(lfd, self, local_fds, deadline, why, sizeof(why)) != 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    for (int h = 0; h < n; h++)
        if (host_fds[h] >= 0) {
            int one = 1;
            setsockopt(host_fds[h], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
    local_fds[0] = IMPI_AGENT_INPROC; /* this process */
    /* the agent owns the descriptors from here on, also when it fails */
    if (impi_agent_create(l, impi_host.self_host, host_fds, local_fds,
                          MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1) * 1000,
                          &impi_host.agent) != ICBC_OK) {
        for (int h = 0; h < n; h++)
            if (host_fds[h] >= 0)
                close(host_fds[h]);
        for (uint32_t k = 0; k < self->nprocs; k++)
            if (local_fds[k] >= 0)
                close(local_fds[k]);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    pthread_mutex_init(&impi_host.agent_lock, NULL);
    /* a host of one process (every process of a job of ICBC clients) needs
     * no thread: what it receives waits in the sockets for its progress, as
     * on every other path */
    impi_host.has_thread = self->nprocs > 1;
    MPIR_ERR_CHKANDJUMP(impi_host.has_thread &&
                            pthread_create(&impi_host.agent_thread, NULL, agent_thread, NULL) != 0,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
fn_exit:
    if (lfd >= 0)
        close(lfd);
    MPL_free(host_fds);
    MPL_free(local_fds);
    return mpi_errno;
fn_fail:
    if (impi_host.agent == NULL) {
        for (int h = 0; host_fds && h < n; h++)
            if (host_fds[h] >= 0)
                close(host_fds[h]);
        for (uint32_t k = 0; local_fds && k < self->nprocs; k++)
            if (local_fds[k] >= 0)
                close(local_fds[k]);
    } else {
        impi_agent_destroy(impi_host.agent);
        impi_host.agent = NULL;
    }
    goto fn_exit;
}

int MPIDI_ICBC_path_impi_open(const MPIDI_ICBC_path_up_t *above_)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    double deadline = icbc_clock_coarse() + MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1);
    int client;
    char why[512];

    above = above_;
    impi_host.link = -1;
    MPIDI_ICBC_impi_where(MPIR_Process.rank, &client, &impi_host.self_host);
    const impi_host_t *self = &l->hosts[impi_host.self_host];
    impi_host.conns = MPL_calloc(l->nhosts_total, sizeof(*impi_host.conns), MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP(impi_host.conns == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_ERR_CHKANDJUMP(impi_frames_init(&impi_host.frames, l->datalen) != ICBC_OK, mpi_errno,
                        MPI_ERR_OTHER, "**nomem");

    if (MPIR_Process.rank == self->first_rank) {
        struct in_addr self_addr;
        uint32_t v4 = impi_host_v4(self);
        memcpy(&self_addr, &v4, 4);
        mpi_errno = host_open(self_addr, deadline);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        impi_host.link = link_connect(self, deadline, why, sizeof(why));
        if (impi_host.link < 0)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    }
    /* every host this one talks to is connected (or it is the first
     * process's to reach): the port closes, nothing listens on the WAN while
     * the job runs */
    close(MPIDI_ICBC_impi.listen_fd);
    MPIDI_ICBC_impi.listen_fd = -1;
    if (impi_host.link >= 0)
        fcntl(impi_host.link, F_SETFL, O_NONBLOCK);
    impi_host.open = 1;
fn_fail:
    return mpi_errno;
}

/* At MPI_Finalize, every process of this client past its last message:
 * what this process still has for the agent is written, then DONE; the
 * node's first process waits for its agent, which ends the host (FINI to
 * every host and theirs awaited, bounded; impi_agent.h). */
static void impi_finalize(void)
{
    double deadline = icbc_clock_coarse() + MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1);

    if (!impi_host.open)
        return;
    if (link_put(IMPI_FRAME_DONE, 0, NULL, 0, NULL, 0) == ICBC_OK)
        while (impi_host.link >= 0 && impi_host.out_len > impi_host.out_off &&
               icbc_clock_coarse() < deadline) {
            impi_progress();
            usleep(1000);
        }
    if (impi_host.agent) {
        if (impi_host.has_thread) {
            pthread_join(impi_host.agent_thread, NULL);
        } else { /* FINI to every host, and theirs (bounded by the agent) */
            while (!impi_agent_poll(impi_host.agent, 10))
                ;
        }
        impi_agent_destroy(impi_host.agent);
        pthread_mutex_destroy(&impi_host.agent_lock);
    }
    if (impi_host.link >= 0)
        close(impi_host.link);
    impi_frames_free(&impi_host.frames);
    for (int r = 0; impi_host.icbc_in && r < MPIR_Process.size; r++) {
        if (impi_host.icbc_in[r] && impi_host.icbc_in[r]->active)
            icbc_in_end(impi_host.icbc_in[r], 0);
        MPL_free(impi_host.icbc_in[r]);
    }
    MPL_free(impi_host.icbc_in);
    MPL_free(impi_host.dones);
    MPL_free(impi_host.conns);
    MPL_free(impi_host.out);
    free(impi_host.in); /* grown by the agent (realloc) */
    memset(&impi_host, 0, sizeof(impi_host));
    impi_host.link = -1;
}

static int impi_active(void)
{
    return impi_host.open;
}

static int impi_nlanes(icbc_peer_t *peer)
{
    return 1;
}

static void impi_dump(FILE *f)
{
    fprintf(f, "  impi: host %d%s, %zu byte(s) to the host%s\n", impi_host.self_host,
            impi_host.agent ? " (its agent runs here)" : "", impi_host.out_len - impi_host.out_off,
            impi_host.link < 0 ? ", link closed" : "");
    for (int h = 0; h < MPIDI_ICBC_impi.layout.nhosts_total; h++)
        if (impi_host.conns[h].failed)
            fprintf(f, "  impi:   host %d: lost\n", h);
    for (int r = 0; impi_host.icbc_in && r < MPIR_Process.size; r++)
        if (impi_host.icbc_in[r] && impi_host.icbc_in[r]->active)
            fprintf(f, "  impi:   ICBC message from rank %d: %llu of %llu bytes\n", r,
                    (unsigned long long) impi_host.icbc_in[r]->got,
                    (unsigned long long) impi_host.icbc_in[r]->total);
    if (impi_up)
        impi_up->dump(f);
}

const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_impi_ops = {
    .name = "impi",
    .send = impi_lane_send,
    .nlanes = impi_nlanes,
    .active = impi_active,
    .progress = impi_progress,
    .dump = impi_dump,
    .finalize = impi_finalize,
};

void MPIDI_ICBC_impi_attach(const MPIDI_ICBC_impi_up_t *proto)
{
    impi_up = proto;
}
