/*
 * The IMPI relay's packets (docs/impi-relay.md): the host connections of
 * both sides and the links between the relays of one client, on bt_lib's
 * poller.
 *
 * A packet from an inside host to a persona goes out on the connection to
 * the outside host of its destination that belongs to the relay holding
 * its source outside; one from an outside host, on the connection of the
 * persona holding its source inside to the inside host of its destination
 * (impi_relay_route). When that is another relay of the client, the packet
 * crosses the link to it first. Its process ids are those of the next side
 * (world ranks are the same on both). Flow control, synchronous and long
 * messages stay end to end: a relay reads no more of a packet than its
 * addresses.
 *
 * Cut-through: a packet whose payload is still arriving at the end of a
 * read goes on at once, its header and what came of it, and the rest as it
 * comes, into the connection toward its destination. That connection then
 * belongs to the packet until its last byte: whatever else is queued for it
 * meanwhile (whole packets of other hosts, FINI) waits behind it, in order,
 * and a packet for a connection that is busy so, or for another relay of
 * the trunk (its link frames carry whole packets), goes on whole. So a hop
 * adds the time of a read, not of a packet.
 *
 * FINI is per hop. Every relay tells the others, on the links, each FINI a
 * host sent it (after every packet of that host it passed them, so a FINI
 * counted means the host's packets are through). A relay says FINI outside
 * once every inside host said it to every persona of every relay, and a
 * persona says it inside once every host of its client said it to every
 * relay.
 *
 * Losing a host or a link before the end ends the relay: every connection
 * closes, so the processes on both sides see their peers fail with an
 * error, as they would if the host of the other side had died.
 */
#include "relay_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icbc_bytes.h"
#include "impi_agent.h"

#define QUEUE_MAX IMPI_AGENT_QUEUE_MAX

static const char *side_name(int side)
{
    return side == RELAY_INSIDE ? "inside host" : side == RELAY_OUTSIDE ? "outside host" : "relay";
}

relay_conn_t *relay_inside_conn(impi_relay_t *r, int client, int host)
{
    return &r->ins[client * r->nin + (host - r->in->first_host[r->client])];
}

static void conn_close(relay_conn_t *c)
{
    if (c->fd >= 0) {
        bt_poller_del_fd(c->r->poller, c->fd);
        close(c->fd);
    }
    c->fd = -1;
    c->closed = 1;
}

void relay_conn_free(relay_conn_t *c)
{
    if (c->r && c->fd >= 0)
        conn_close(c);
    if (c->r && c->side != RELAY_LINK)
        impi_rx_free(&c->rx);
    if (c->r && c->side == RELAY_LINK)
        impi_link_rx_free(&c->link_rx);
    free(c->out);
    c->out = NULL;
    free(c->held);
    c->held = NULL;
}

int relay_all_closed(const impi_relay_t *r)
{
    for (int h = 0; h < r->out->nhosts_total; h++)
        if (r->outs[h].fd >= 0)
            return 0;
    for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
        if (r->ins[i].fd >= 0)
            return 0;
    return 1;
}

/* ---- queues and back-pressure --------------------------------------------- */

/* Reading connections of kind SIDE stops while a kind they feed is full:
 * an inside host's packets go out to the outside hosts or over a link, an
 * outside host's in or over a link, a link's in or out. */
static int reading_paused(const impi_relay_t *r, int side)
{
    for (int k = 0; k < 3; k++)
        if (k != side && r->full[k])
            return 1;
    return 0;
}

static void conn_arm(relay_conn_t *c)
{
    if (c->fd < 0)
        return;
    uint32_t want =
        (reading_paused(c->r, c->side) ? 0 : EPOLLIN) | (c->len > c->off ? EPOLLOUT : 0);
    if (want != c->events && bt_poller_mod_fd(c->r->poller, c->fd, want) == ICBC_OK)
        c->events = want;
}

/* The connections of kind SIDE, *N of them. */
static relay_conn_t *kind_conns(impi_relay_t *r, int side, int *n)
{
    if (side == RELAY_OUTSIDE) {
        *n = r->out->nhosts_total;
        return r->outs;
    }
    if (side == RELAY_INSIDE) {
        *n = IMPI_MAX_CLIENTS * r->nin;
        return r->ins;
    }
    *n = IMPI_RELAY_TRUNKS_MAX;
    return r->links;
}

static void arm_all(impi_relay_t *r)
{
    for (int k = 0; k < 3; k++) {
        int n;
        relay_conn_t *c = kind_conns(r, k, &n);
        for (int i = 0; i < n; i++)
            conn_arm(&c[i]);
    }
}

/* While a connection holds more than QUEUE_MAX bytes, what feeds its kind
 * is not read, until every one of the kind is below half of it. The links
 * between the relays of a trunk are held so too: IMPI's flow control bounds
 * what each pair of processes has in flight, but not how many pairs
 * cross one link. */
static void pressure(impi_relay_t *r, int side, size_t queued)
{
    if (!r->full[side] && queued > QUEUE_MAX) {
        r->full[side] = 1;
        arm_all(r);
    } else if (r->full[side] && queued < QUEUE_MAX / 2) {
        size_t most = 0;
        int n;
        relay_conn_t *c = kind_conns(r, side, &n);
        for (int i = 0; i < n; i++)
            if (c[i].len - c[i].off > most)
                most = c[i].len - c[i].off;
        if (most < QUEUE_MAX / 2) {
            r->full[side] = 0;
            arm_all(r);
        }
    }
}

static void conn_flush(relay_conn_t *c)
{
    if (c->fd >= 0 && impi_send_pending(c->fd, c->out, &c->off, &c->len) != 0)
        relay_failf(c->r, "writing to %s %d: %s", side_name(c->side), c->peer, strerror(errno));
}

/* Appends A, B and P (any may be empty) to the bytes *BUF holds. */
static int append(uint8_t **buf, size_t *len, size_t *cap, const void *a, size_t alen,
                  const void *b, size_t blen, const void *p, size_t plen)
{
    size_t need = *len + alen + blen + plen;

    if (icbc_grow(buf, cap, need) != 0)
        return -1;
    if (alen)
        memcpy(*buf + *len, a, alen);
    if (blen)
        memcpy(*buf + *len + alen, b, blen);
    if (plen)
        memcpy(*buf + *len + alen + blen, p, plen);
    *len = need;
    return 0;
}

/* Appends A, B and P from FROM (NULL: this relay); written at the end of
 * the round, or, while another source's packet streams into C, behind it. */
static void conn_put(relay_conn_t *c, const relay_conn_t *from, const void *a, size_t alen,
                     const void *b, size_t blen, const void *p, size_t plen)
{
    int behind = c->owner != NULL && c->owner != from;

    if (c->fd < 0 || c->r->failed)
        return;
    if (behind ? append(&c->held, &c->hlen, &c->hcap, a, alen, b, blen, p, plen)
               : append(&c->out, &c->len, &c->cap, a, alen, b, blen, p, plen)) {
        relay_failf(c->r, "out of memory queueing for %s %d", side_name(c->side), c->peer);
        return;
    }
    if (behind)
        return;
    /* one send for the packets of one read */
    if (!c->dirty) {
        c->dirty = 1;
        c->r->dirty[c->r->ndirty++] = c;
    }
}

/* The end of a round: what the round queued goes out. */
static void flush_dirty(impi_relay_t *r)
{
    for (int i = 0; i < r->ndirty; i++) {
        relay_conn_t *c = r->dirty[i];
        c->dirty = 0;
        conn_flush(c);
        conn_arm(c);
        pressure(r, c->side, c->len - c->off);
    }
    r->ndirty = 0;
}

static void link_put(impi_relay_t *r, int rank, uint32_t kind, uint32_t a, uint32_t b,
                     const void *hdr, size_t hlen, const void *payload, size_t plen)
{
    uint8_t fh[IMPI_LINK_HDR_SIZE];

    impi_link_hdr_pack(kind, a, b, (uint32_t) (hlen + plen), fh);
    conn_put(&r->links[rank], NULL, fh, sizeof(fh), hdr, hlen, payload, plen);
}

/* Tells every other relay of a FINI this relay had. */
static void link_broadcast(impi_relay_t *r, uint32_t kind, uint32_t a, uint32_t b)
{
    for (int j = 0; j < r->ntrunks; j++)
        if (j != r->rank)
            link_put(r, j, kind, a, b, NULL, 0, NULL, 0);
}

/* ---- FINI ------------------------------------------------------------------ */

/* The FINI counts this relay waits for, from the layouts. */
static void fini_init(impi_relay_t *r)
{
    /* every inside host has a connection with every persona of every relay;
     * every outside host of client C with every relay's outside host */
    r->fini_in_want = 0;
    for (int c = 0; c < r->in->nclients; c++) {
        if (c == r->client)
            continue;
        r->fini_in_want += (long) r->in->nhosts[c] * r->nin;
        r->fini_out_want[c] = (long) r->out->nhosts[c] * r->out->nhosts[r->client];
    }
}

/* ---- the data phase's tables --------------------------------------------- */

icbc_status_t relay_data_init(impi_relay_t *r)
{
    int K = r->client;

    r->self_out = r->rank < (int) r->out->nhosts[K] ? r->out->first_host[K] + r->rank : -1;
    r->nin = (int) r->in->nhosts[K];
    r->outs = calloc((size_t) r->out->nhosts_total, sizeof(relay_conn_t));
    r->ins = calloc((size_t) IMPI_MAX_CLIENTS * (size_t) r->nin, sizeof(relay_conn_t));
    r->dirty = calloc((size_t) r->out->nhosts_total + (size_t) IMPI_MAX_CLIENTS * (size_t) r->nin +
                          IMPI_RELAY_TRUNKS_MAX,
                      sizeof(relay_conn_t *));
    if (!r->outs || !r->ins || !r->dirty || bt_poller_create(&r->poller) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    for (int h = 0; h < r->out->nhosts_total; h++)
        r->outs[h].fd = -1;
    for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
        r->ins[i].fd = -1;
    fini_init(r);
    return ICBC_OK;
}

void relay_data_free(impi_relay_t *r)
{
    if (r->outs && r->out)
        for (int h = 0; h < r->out->nhosts_total; h++)
            relay_conn_free(&r->outs[h]);
    if (r->ins)
        for (int i = 0; i < IMPI_MAX_CLIENTS * r->nin; i++)
            relay_conn_free(&r->ins[i]);
    for (int j = 0; j < IMPI_RELAY_TRUNKS_MAX; j++)
        relay_conn_free(&r->links[j]);
    free(r->outs);
    free(r->ins);
    free(r->dirty);
    r->outs = r->ins = NULL;
    r->dirty = NULL;
    if (r->poller)
        bt_poller_destroy(r->poller);
    r->poller = NULL;
}

static void send_fini(relay_conn_t *c)
{
    uint8_t b[IMPI_PKT_HDR_SIZE];

    if (c->fini_out || c->fd < 0)
        return;
    impi_pkt_fini_pack(b);
    c->fini_out = 1;
    conn_put(c, NULL, b, sizeof(b), NULL, 0, NULL, 0);
}

static void fini_check(impi_relay_t *r)
{
    if (r->fini_in_seen == r->fini_in_want && r->self_out >= 0)
        for (int h = 0; h < r->out->nhosts_total; h++)
            if (r->out->hosts[h].client != r->client)
                send_fini(&r->outs[h]);
    for (int c = 0; c < r->out->nclients; c++) {
        if (c == r->client || r->fini_out_seen[c] != r->fini_out_want[c] ||
            r->rank >= (int) r->in->nhosts[c])
            continue;
        for (int i = 0; i < r->nin; i++)
            send_fini(&r->ins[c * r->nin + i]);
    }
}

/* A host said FINI to this relay: counted, and told to the others. */
static void had_fini(impi_relay_t *r, relay_conn_t *c)
{
    if (c->fini_in)
        return;
    c->fini_in = 1;
    if (c->side == RELAY_INSIDE) {
        r->fini_in_seen++;
        link_broadcast(r, IMPI_LINK_FINI_IN, (uint32_t) c->peer, (uint32_t) c->client);
    } else {
        r->fini_out_seen[c->client]++;
        link_broadcast(r, IMPI_LINK_FINI_OUT, (uint32_t) c->peer, (uint32_t) c->client);
    }
    fini_check(r);
}

/* ---- cut-through ------------------------------------------------------------ */

/* The packet streaming into TO is through: what waited behind it follows. */
static void stream_end(relay_conn_t *to)
{
    to->owner = NULL;
    if (to->hlen > 0) {
        conn_put(to, NULL, to->held, to->hlen, NULL, 0, NULL, 0);
        to->hlen = 0;
    }
}

/* After a read of host connection C: the packet it is in the middle of
 * starts going on, or its new bytes follow what went. */
static void stream_more(relay_conn_t *c)
{
    impi_relay_t *r = c->r;
    impi_rx_pkt_t pkt;

    if (r->failed || !impi_rx_partial(&c->rx, &pkt))
        return;
    if (c->stream_to == NULL) {
        impi_pkt_hdr_t h;
        uint8_t b[IMPI_PKT_HDR_SIZE];
        int host, relay, inside = c->side == RELAY_INSIDE;
        relay_conn_t *to;

        impi_relay_route(r->in, r->out, r->client, inside, &pkt, &h, &host, &relay);
        if (relay != r->rank)
            return; /* over a link: whole, in one frame */
        to = inside ? &r->outs[host] : relay_inside_conn(r, c->client, host);
        if (to->owner != NULL || to->hlen > 0)
            return; /* another packet streams into TO: this one goes whole */
        impi_pkt_hdr_pack(&h, b);
        conn_put(to, c, b, sizeof(b), pkt.payload, pkt.len, NULL, 0);
        r->pkts_cut++;
        to->owner = c;
        c->stream_to = to;
        c->streamed = pkt.len;
    } else if (pkt.len > c->streamed) {
        conn_put(c->stream_to, c, pkt.payload + c->streamed, pkt.len - c->streamed, NULL, 0, NULL,
                 0);
        c->streamed = pkt.len;
    }
}

/* ---- packets ------------------------------------------------------------------ */

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    relay_conn_t *c = arg;
    impi_relay_t *r = c->r;
    impi_pkt_hdr_t h;
    uint8_t b[IMPI_PKT_HDR_SIZE];
    int host, relay, inside = c->side == RELAY_INSIDE;

    if (c->stream_to != NULL) { /* streamed: its last bytes */
        relay_conn_t *to = c->stream_to;
        conn_put(to, c, pkt->payload + c->streamed, pkt->len - c->streamed, NULL, 0, NULL, 0);
        c->stream_to = NULL;
        stream_end(to);
        return;
    }
    if (pkt->hdr->type == IMPI_PK_FINI) {
        had_fini(r, c);
        return;
    }
    impi_relay_route(r->in, r->out, r->client, inside, pkt, &h, &host, &relay);
    impi_pkt_hdr_pack(&h, b);
    r->pkts_whole++;
    if (relay != r->rank) {
        link_put(r, relay, inside ? IMPI_LINK_OUT : IMPI_LINK_IN, (uint32_t) host,
                 (uint32_t) c->client, b, sizeof(b), pkt->payload, pkt->len);
        return;
    }
    relay_conn_t *to = inside ? &r->outs[host] : relay_inside_conn(r, c->client, host);
    r->pkts_behind += to->owner != NULL;
    conn_put(to, c, b, sizeof(b), pkt->payload, pkt->len, NULL, 0);
}

/* A frame from relay C->peer in the data phase. */
static void on_link_frame(void *arg, uint32_t kind, uint32_t a, uint32_t b, const uint8_t *body,
                          size_t len)
{
    relay_conn_t *c = arg;
    impi_relay_t *r = c->r;
    const impi_layout_t *l;

    switch (kind) {
    case IMPI_LINK_OUT:
    case IMPI_LINK_IN:
        l = kind == IMPI_LINK_OUT ? r->out : r->in;
        if (len < IMPI_PKT_HDR_SIZE || a >= (uint32_t) l->nhosts_total ||
            (kind == IMPI_LINK_OUT
                 ? r->self_out < 0 || l->hosts[a].client == r->client
                 : l->hosts[a].client != r->client || b >= (uint32_t) l->nclients ||
                       (int) b == r->client || r->rank >= (int) l->nhosts[b])) {
            relay_failf(r,
                        "relay %d handed on a packet for a host this relay has no "
                        "connection to (%u, client %u)",
                        c->peer, a, b);
            return;
        }
        conn_put(kind == IMPI_LINK_OUT ? &r->outs[a] : relay_inside_conn(r, (int) b, (int) a), c,
                 body, len, NULL, 0, NULL, 0);
        return;
    case IMPI_LINK_FINI_IN:
        r->fini_in_seen++;
        fini_check(r);
        return;
    case IMPI_LINK_FINI_OUT:
        if (b < (uint32_t) r->out->nclients)
            r->fini_out_seen[b]++;
        fini_check(r);
        return;
    default: relay_failf(r, "relay %d sent a frame of kind %u on its link", c->peer, kind);
    }
}

/* A payload with at least this many bytes still to come is received
 * straight into the packet, as the IMPI host's agent does. */
#define READ_DIRECT_MIN 4096

static void conn_read(relay_conn_t *c)
{
    impi_relay_t *r = c->r;
    char err[256];
    size_t want = 0;
    uint8_t *room = c->side != RELAY_LINK ? impi_rx_payload_room(&c->rx, &want) : NULL;
    int direct = room != NULL && want >= READ_DIRECT_MIN;
    ssize_t n = direct ? recv(c->fd, room, want, MSG_DONTWAIT)
                       : recv(c->fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);

    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        int done = c->side == RELAY_LINK ? r->fini_in_seen == r->fini_in_want : c->fini_in;
        if (c->side == RELAY_LINK)
            for (int k = 0; k < r->out->nclients; k++)
                done &= k == r->client || r->fini_out_seen[k] == r->fini_out_want[k];
        if (done) { /* its end after FINI */
            conn_close(c);
            return;
        }
        relay_failf(r, "%s %d%s closed its connection before FINI", side_name(c->side), c->peer,
                    c->side == RELAY_OUTSIDE ? " (another client's)" : "");
        return;
    }
    if (c->side == RELAY_LINK) {
        if (impi_link_rx_feed(&c->link_rx, r->buf, (size_t) n, on_link_frame, c, err,
                              sizeof(err)) != ICBC_OK)
            relay_failf(r, "relay %d: %s", c->peer, err);
    } else if (direct) {
        impi_rx_payload_filled(&c->rx, (size_t) n, on_packet, c);
        stream_more(c);
    } else if (impi_rx_feed(&c->rx, r->buf, (size_t) n, on_packet, c, err, sizeof(err)) !=
               ICBC_OK) {
        relay_failf(r, "%s %d: %s", side_name(c->side), c->peer, err);
    } else {
        stream_more(c);
    }
}

static void on_ready(int fd, uint32_t events, void *arg)
{
    relay_conn_t *c = arg;

    (void) fd;
    if (events & EPOLLOUT) {
        conn_flush(c);
        pressure(c->r, c->side, c->len - c->off);
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->r->failed && c->fd >= 0)
        conn_read(c);
    flush_dirty(c->r);
    if (c->fd >= 0 && c->side != RELAY_LINK && c->fini_in && c->fini_out && c->len == c->off &&
        c->owner == NULL && c->hlen == 0)
        shutdown(c->fd, SHUT_WR);
    conn_arm(c);
}

icbc_status_t relay_conn_open(impi_relay_t *r, relay_conn_t *c, int side, int client, int self,
                              int peer, int fd)
{
    c->r = r;
    c->side = side;
    c->client = client;
    c->self = self;
    c->peer = peer;
    c->fd = fd;
    c->events = EPOLLIN;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (side == RELAY_LINK)
        impi_link_rx_init(&c->link_rx, IMPI_PKT_HDR_SIZE + r->in->datalen);
    else if (impi_rx_init(&c->rx, side == RELAY_INSIDE ? r->in : r->out, self, peer) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    return bt_poller_add_fd(r->poller, fd, c->events, on_ready, c);
}
