/*
 * The IMPI server: the rendezvous of the clients (one per MPI
 * implementation's part of the job) at start-up, in two layers.
 *
 *   impi_srv_*     the protocol, without sockets: bytes from a client go in,
 *                  bytes for clients come out (unit-tested and fuzzed alone)
 *   impi_server_*  the daemon: a listening socket and a poll loop around it
 *
 * Protocol (docs/impi.md): every client authenticates (AUTH), names its
 * client rank (IMPI; the server answers every client with the number of
 * clients once all N have), then exchanges COLL contributions label by
 * label (the server answers the lowest pending label once every client not
 * yet DONE has given it or moved past it, with all contributions in client
 * order and a mask of who gave one), then DONE (answered to all once all
 * are done), and FINI when its processes have finished. The server ends
 * after FINI from every client. Any protocol error, a client that closes
 * before FINI, or a client silent for the timeout during start-up ends the
 * server with a message naming the client and what was wrong.
 */
#ifndef ICBC_IMPI_SERVER_H
#define ICBC_IMPI_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct impi_srv impi_srv_t;

typedef struct impi_srv_config {
    int nclients;    /* 1 .. IMPI_MAX_CLIENTS */
    int require_key; /* 0: accept IMPI_AUTH_NONE */
    uint64_t key;
} impi_srv_config_t;

icbc_status_t impi_srv_create(const impi_srv_config_t *cfg, impi_srv_t **srv);
void impi_srv_destroy(impi_srv_t *srv);

/* A new connection: its slot (< 2 * nclients), or -1 when there is no room. */
int impi_srv_accept(impi_srv_t *srv, const char *peer_text);
/* LEN bytes from SLOT. ICBC_OK, or an error with the message in ERR; the
 * server cannot go on after an error. */
icbc_status_t impi_srv_input(impi_srv_t *srv, int slot, const void *bytes, size_t len, char *err,
                             size_t errlen);
/* SLOT's connection closed: an error unless it sent FINI. */
icbc_status_t impi_srv_closed(impi_srv_t *srv, int slot, char *err, size_t errlen);
/* Bytes waiting for SLOT (*LEN 0: none); consume what was written. */
const void *impi_srv_output(impi_srv_t *srv, int slot, size_t *len);
void impi_srv_consume(impi_srv_t *srv, int slot, size_t n);
/* Whether SLOT's connection can close (FINI received, all sent). */
int impi_srv_slot_done(const impi_srv_t *srv, int slot);
/* Start-up is over (DONE sent to all): silence is normal from now on. */
int impi_srv_started(const impi_srv_t *srv);
/* Every client sent FINI. */
int impi_srv_finished(const impi_srv_t *srv);
/* What start-up is waiting for (which clients, which label), for the
 * message of a server whose start-up stalled. */
void impi_srv_waiting_for(const impi_srv_t *srv, char *buf, size_t len);

/* ---- the daemon ---------------------------------------------------------- */

typedef struct impi_server_config {
    impi_srv_config_t proto;
    const char *listen_addr; /* NULL: every IPv4 address */
    uint16_t port;           /* 0: any free port */
    double timeout;          /* seconds a client may be silent during start-up */
} impi_server_config_t;

typedef struct impi_server impi_server_t;

/* Opens the listening socket. */
icbc_status_t impi_server_create(const impi_server_config_t *cfg, impi_server_t **server, char *err,
                                 size_t errlen);
/* The port it listens on. */
uint16_t impi_server_port(const impi_server_t *server);
/* Serves until every client sent FINI (ICBC_OK) or an error (message in ERR). */
icbc_status_t impi_server_run(impi_server_t *server, char *err, size_t errlen);
void impi_server_destroy(impi_server_t *server);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_SERVER_H */
