/*
 * The IMPI relay (docs/impi-relay.md): how a cluster whose nodes have
 * private addresses joins an IMPI job. The relay runs on a node with both
 * an inside (private) and an outside address. Toward impi-server it is the
 * client of the private cluster; toward the client inside it is the
 * server. It stands in as one host on each side: outside, one host holding
 * every process of the private client; inside, one host per client
 * outside (a *persona*), holding that client's processes. It rewrites the
 * host and process tables of start-up and the process ids of every packet
 * in both directions, so that no IMPI implementation on either side needs
 * to know it is there. World ranks are the same on both sides.
 *
 * In two layers:
 *
 *   impi_rly_*     start-up, without sockets: the inside client's commands
 *                  and the server's answers go in, the rewritten commands
 *                  and answers come out, and both sides' layouts are built
 *                  from what went by (unit-tested and fuzzed alone)
 *   impi_relay_*   the daemon: the sockets of start-up, the host
 *                  connections on both sides, and packets forwarded between
 *                  them on bt_lib's poller
 */
#ifndef ICBC_IMPI_RELAY_H
#define ICBC_IMPI_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"
#include "impi_client.h"
#include "impi_rx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- start-up ------------------------------------------------------------ */

typedef struct impi_rly impi_rly_t;

/* Relays of one private client (trunking, docs/impi-relay.md): relay 0,
 * the leader, runs start-up; the inside hosts are split in blocks, one per
 * relay, each relay one host outside holding its block's processes, and
 * every other client's processes likewise, each relay a persona inside for
 * its block of them. */
#define IMPI_RELAY_TRUNKS_MAX 16

/* Of N items in K blocks, the first of block J (J = K: N). */
static inline uint32_t impi_relay_block_first(uint32_t n, uint32_t k, uint32_t j)
{
    return (uint32_t) ((uint64_t) j * n / k);
}

typedef struct impi_rly_trunk {
    uint8_t inside_addr[16];  /* the relay as the inside sees it (IPv4 in bytes 12..15) */
    uint8_t outside_addr[16]; /* the relay as the other clients see it */
    uint32_t outside_port;    /* its host port outside */
} impi_rly_trunk_t;

typedef struct impi_rly_config {
    int ntrunks; /* relays, 1..IMPI_RELAY_TRUNKS_MAX (0: 1); trunk[0] is this one */
    impi_rly_trunk_t trunk[IMPI_RELAY_TRUNKS_MAX];
    int require_key; /* the inside client must send KEY; the relay sends it on */
    uint64_t key;
    /* The port of relay RELAY's persona of outside client C, asked once the
     * number of clients is known; 0: none could be opened (start-up fails).
     * ADDR: the persona's address inside, the relay's inside address unless
     * the relay gives each persona one of its own (-persona-addrs). */
    uint32_t (*persona_port)(void *arg, int relay, int client, uint8_t addr[16]);
    void *arg;
} impi_rly_config_t;

icbc_status_t impi_rly_create(const impi_rly_config_t *cfg, impi_rly_t **rly);
void impi_rly_destroy(impi_rly_t *rly);

/* LEN bytes from the inside client / from impi-server. An error (message in
 * ERR, naming the side and what was wrong) ends start-up. */
icbc_status_t impi_rly_inside_input(impi_rly_t *rly, const void *bytes, size_t len, char *err,
                                    size_t errlen);
icbc_status_t impi_rly_server_input(impi_rly_t *rly, const void *bytes, size_t len, char *err,
                                    size_t errlen);
/* Bytes waiting for the inside client / the server (*LEN 0: none);
 * consume what was written. */
const void *impi_rly_inside_output(impi_rly_t *rly, size_t *len);
void impi_rly_inside_consume(impi_rly_t *rly, size_t n);
const void *impi_rly_server_output(impi_rly_t *rly, size_t *len);
void impi_rly_server_consume(impi_rly_t *rly, size_t n);

/* The inside connection authenticated and named its client rank; before
 * that it is nobody, and a connection that fails then (a port scan, a
 * stranger, a wrong key) is dropped alone: impi_rly_inside_reset forgets
 * it, and the next connection starts over. */
int impi_rly_inside_known(const impi_rly_t *rly);
void impi_rly_inside_reset(impi_rly_t *rly);
/* The server's DONE went inside: the layouts are whole. */
int impi_rly_started(const impi_rly_t *rly);
/* The inside client sent FINI (passed on to the server). */
int impi_rly_finished(const impi_rly_t *rly);
/* The private client's rank, or -1 before its IMPI command. */
int impi_rly_client(const impi_rly_t *rly);
/* The number of clients, 0 before the server's IMPI answer. */
int impi_rly_nclients(const impi_rly_t *rly);
/* The job as the inside sees it (personas for the other clients) and as
 * the outside sees it (the relay one host of the private client's
 * processes); valid once started. */
const impi_layout_t *impi_rly_inside(const impi_rly_t *rly);
const impi_layout_t *impi_rly_outside(const impi_rly_t *rly);

/* A packet that impi_rx took from a connection of one side (FROM_INSIDE:
 * from an inside host, to a persona; else from an outside host, to a
 * relay's outside host), not FINI, with layouts IN and OUT of private
 * client CLIENT: *HDR is its header as the other side knows its processes,
 * *HOST (in that side's layout) the host it goes to, and *RELAY the relay
 * whose connection to that host carries it (the one holding its source on
 * that side). impi_rx has held its source and destination to the side's
 * layout. */
void impi_relay_route(const impi_layout_t *in, const impi_layout_t *out, int client,
                      int from_inside, const impi_rx_pkt_t *pkt, impi_pkt_hdr_t *hdr, int *host,
                      int *relay);

/* ---- the daemon ---------------------------------------------------------- */

typedef struct impi_relay_config {
    const char *server;       /* impi-server's "ADDR:PORT" */
    const char *inside_addr;  /* the relay's address inside; NULL: this node's first IPv4
                                 address that is not the outside one */
    const char *outside_addr; /* its address outside; NULL: the one it reaches the server
                                 from */
    uint16_t port;            /* the inside start-up port; 0: any free one */
    int require_key;
    uint64_t key;
    double timeout;            /* seconds start-up and the end may make no progress */
    int trunks;                /* the leader: the client's relays, itself included (0: 1) */
    const char *followers;     /* the leader: the inside addresses of relays 1 .. trunks - 1,
                              comma-separated; a follower joins only from its own.
                              NULL: from any address */
    const char *leader;        /* a follower: the leader's start-up "ADDR:PORT"; NULL: a leader */
    int rank;                  /* a follower: its rank, 1 .. trunks - 1 */
    const char *persona_addrs; /* this relay's inside addresses for its personas, one per
                                  other client in client order (used again from the first
                                  when there are fewer), comma-separated; NULL: inside_addr */
    int lazy_server;           /* the leader: connect to the server once the inside client
                                  has authenticated and named its rank, not at create (a
                                  relay that serves job after job for a server that starts
                                  with each) */
    void (*on_started)(void *arg, int client, int inside_hosts, int outside_hosts);
    void *arg;            /* called once start-up is over and packets go through */
    int given_startup_fd; /* the leader: start-up takes its connections from
                                  startup_fd, a listening socket of the caller's that stays
                                  open from one job to the next (the next job's client and
                                  followers wait in its backlog), not from a port of its own */
    int startup_fd;
} impi_relay_config_t;

typedef struct impi_relay impi_relay_t;

/* Opens the inside start-up port. */
icbc_status_t impi_relay_create(const impi_relay_config_t *cfg, impi_relay_t **relay, char *err,
                                size_t errlen);
/* The inside start-up address and port: what the client inside is given
 * as its server. */
const char *impi_relay_inside_addr(const impi_relay_t *relay);
uint16_t impi_relay_port(const impi_relay_t *relay);
/* Start-up is over: the job's layouts are known (after impi_relay_run,
 * whether it got that far). */
int impi_relay_started(const impi_relay_t *relay);
/* The packets forwarded so far: cut through (going on as they arrive), and
 * whole (BEHIND of them waited behind a packet in progress). */
typedef struct impi_relay_counts {
    uint64_t cut, whole, behind;
} impi_relay_counts_t;
void impi_relay_counts(const impi_relay_t *relay, impi_relay_counts_t *counts);
/* Serves one IMPI job: start-up, then the packets, until every host on
 * both sides said FINI and the inside client sent FINI (ICBC_OK), or an
 * error (message in ERR). */
icbc_status_t impi_relay_run(impi_relay_t *relay, char *err, size_t errlen);
void impi_relay_destroy(impi_relay_t *relay);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_RELAY_H */
