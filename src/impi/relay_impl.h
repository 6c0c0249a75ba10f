/*
 * What the IMPI relay's daemon files share (relay.c: start-up and the
 * connections; relay_fwd.c: the packets between them). Not installed.
 */
#ifndef ICBC_RELAY_IMPL_H
#define ICBC_RELAY_IMPL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "bt_lib.h"
#include "impi_relay.h"
#include "impi_relay_link.h"
#include "impi_rx.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RELAY_INSIDE = 0, RELAY_OUTSIDE = 1, RELAY_LINK = 2 };

/* One connection of the data phase: to a host of either side, or to
 * another relay of the same client. */
typedef struct relay_conn {
    struct impi_relay *r;
    int side;   /* RELAY_INSIDE, RELAY_OUTSIDE or RELAY_LINK */
    int client; /* inside: the client the persona stands for; outside: the host's */
    int self;   /* the relay's host on this connection, in the side's layout */
    int peer;   /* the other host in the side's layout; a link: the other relay's rank */
    int fd;
    impi_rx_t rx;           /* a host's packets */
    impi_link_rx_t link_rx; /* a link's frames */
    uint8_t *out;
    size_t off, len, cap;
    uint32_t events;
    int fini_in, fini_out, closed;
    int dirty; /* queued to in this round, written at its end (in relay.dirty) */
    /* Cut-through (relay_fwd.c): a host's packet goes on as it comes, into
     * one connection, which keeps what others queue for it meanwhile. */
    struct relay_conn *stream_to; /* as a source: where its packet is going */
    size_t streamed;              /* as a source: payload bytes of it handed on */
    struct relay_conn *owner;     /* as a destination: the source streaming into it */
    uint8_t *held;                /* as a destination: queued behind that packet */
    size_t hlen, hcap;
} relay_conn_t;

/* A relay of the same client, as start-up tells of it. */
typedef struct relay_peer {
    struct in_addr in_v4, out_v4;
    uint32_t out_port, link_port;
    int ctl_fd; /* the start-up connection between it and the leader (-1: none) */
    int asked;  /* the leader asked it for its persona ports */
    uint32_t ports[IMPI_MAX_CLIENTS];
    struct in_addr paddr[IMPI_MAX_CLIENTS]; /* and its personas' addresses */
} relay_peer_t;

struct impi_relay {
    impi_relay_config_t cfg;
    int rank, ntrunks; /* this relay's rank (0: the leader) and the client's relays */
    struct in_addr in_v4, out_v4, srv_v4;
    uint16_t srv_port;
    int startup_lfd, startup_fd, server_fd, out_lfd, link_lfd;
    uint16_t port, out_port, link_port;
    int persona_lfd[IMPI_MAX_CLIENTS];
    struct in_addr persona_v4[IMPI_MAX_CLIENTS]; /* -persona-addrs, npersona_v4 of them */
    int npersona_v4;
    relay_peer_t peer[IMPI_RELAY_TRUNKS_MAX];
    struct in_addr follower_v4[IMPI_RELAY_TRUNKS_MAX]; /* -followers; 0: any */
    impi_rly_t *rly;                                   /* the leader's start-up */
    impi_layout_t own_in, own_out;                     /* a follower's layouts, from the leader */
    const impi_layout_t *in, *out;
    int client;         /* the private client */
    int self_out;       /* this relay's outside host; -1: it has none */
    relay_conn_t *outs; /* per outside host */
    relay_conn_t *ins;  /* per client, per inside host of the private client */
    int nin;            /* inside hosts of the private client */
    relay_conn_t links[IMPI_RELAY_TRUNKS_MAX];
    bt_poller_t *poller;
    /* back-pressure: per kind of connection (RELAY_INSIDE, _OUTSIDE, _LINK),
     * one of them holds more than the bound; what feeds that kind (every
     * other kind) is not read meanwhile */
    int full[3];
    /* FINI per hop across the relays: persona connections that had FINI
     * (this relay's and the others', told on the links), and per client the
     * relays' outside connections that had it */
    long fini_in_seen, fini_in_want;
    long fini_out_seen[IMPI_MAX_CLIENTS], fini_out_want[IMPI_MAX_CLIENTS];
    /* host packets handed on: cut through, whole, and whole ones that
     * waited behind a packet streaming into their connection */
    uint64_t pkts_cut, pkts_whole, pkts_behind;
    int failed;
    relay_conn_t **dirty; /* connections written to since the round began */
    int ndirty;
    char why[512];
    uint8_t buf[1 << 16];
};

void relay_failf(impi_relay_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* relay_fwd.c */
/* The data phase's tables (connections per outside host and per persona
 * and inside host, none open yet), its poller and the FINI counts, from the
 * layouts, the client and the rank; relay_data_free closes and frees them. */
icbc_status_t relay_data_init(impi_relay_t *r);
void relay_data_free(impi_relay_t *r);
icbc_status_t relay_conn_open(impi_relay_t *r, relay_conn_t *c, int side, int client, int self,
                              int peer, int fd);
void relay_conn_free(relay_conn_t *c);
relay_conn_t *relay_inside_conn(impi_relay_t *r, int client, int host);
/* Whether every connection has ended (after FINI). */
int relay_all_closed(const impi_relay_t *r);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_RELAY_IMPL_H */
