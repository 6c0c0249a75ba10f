/*
 * The client side of IMPI start-up: how one client (an ICBC job, one MPI
 * implementation's part of an IMPI job) joins the others through
 * impi-server, in two layers.
 *
 *   impi_layout_*   what the COLL answers say about the whole job: clients,
 *                   hosts, processes, the negotiated parameters; built one
 *                   answer at a time from the server's bytes, every field
 *                   checked (unit-tested and fuzzed alone)
 *   impi_client_*   the start-up over a socket: AUTH, IMPI, a COLL per
 *                   label in ascending order, DONE; FINI at the end
 *
 * The order of MPI_COMM_WORLD is the IMPI order: by client rank, then host
 * order in the client, then process order in the host. docs/impi.md.
 */
#ifndef ICBC_IMPI_CLIENT_H
#define ICBC_IMPI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"
#include "impi_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds a client accepts from the others. */
#define IMPI_HOSTS_MAX (1u << 16)
#define IMPI_PROCS_MAX (1u << 20)
#define IMPI_DATALEN_MIN 1024u
#define IMPI_DATALEN_MAX (16u << 20) /* what every host connection may have to buffer */
#define IMPI_TAGUB_MIN 32767

/* Defaults for a client that does not give an optional label. */
#define IMPI_DEFAULT_DATALEN 65536u
#define IMPI_DEFAULT_TAGUB 0x7fffffff
#define IMPI_DEFAULT_COLL_XSIZE 1024
#define IMPI_DEFAULT_COLL_MAXLINEAR 4
#define IMPI_DEFAULT_ACKMARK 10u
#define IMPI_DEFAULT_HIWATER 20u

typedef struct impi_host {
    uint8_t addr[16]; /* IPv4 in bytes 12..15 */
    uint32_t port;
    uint32_t nprocs;
    uint32_t ackmark, hiwater;
    int client;
    int first_rank; /* world rank of its first process */
} impi_host_t;

/* One client's part, as it gives it (and as the others' parts are read). */
typedef struct impi_local {
    uint32_t nhosts, nprocs;
    const impi_host_t *hosts; /* nhosts: addr, port, nprocs, ackmark, hiwater */
    const impi_proc_t *procs; /* nprocs, in host order */
    uint32_t datalen;         /* 0: IMPI_DEFAULT_DATALEN */
    int32_t tagub;            /* 0: IMPI_DEFAULT_TAGUB */
    int32_t coll_xsize;       /* -1: the default */
    int32_t coll_maxlinear;   /* -1: the default */
    const uint64_t *machines; /* nprocs machine ids (P_ICBC_MACHINE); NULL: unknown */
} impi_local_t;

/* The job, as every client learns it. */
typedef struct impi_layout {
    int nclients;
    uint32_t nhosts[IMPI_MAX_CLIENTS], nprocs[IMPI_MAX_CLIENTS];
    int first_host[IMPI_MAX_CLIENTS + 1]; /* index of a client's first host */
    int first_rank[IMPI_MAX_CLIENTS + 1]; /* world rank of its first process */
    int nhosts_total, nprocs_total;
    impi_host_t *hosts; /* nhosts_total, in IMPI order */
    impi_proc_t *procs; /* nprocs_total, in world-rank order */
    uint64_t *machines; /* nprocs_total: P_ICBC_MACHINE, 0 where no client said */
    /* negotiated */
    uint32_t version_major, version_minor; /* highest version every client has */
    uint32_t datalen;                      /* the smallest */
    int32_t tagub;                         /* the smallest */
    int32_t coll_xsize, coll_maxlinear;    /* every client's (they must agree) */
    uint32_t ackmark, hiwater;             /* the smallest over all hosts */
    uint32_t labels_seen;                  /* bit per label of impi_layout_labels */
    uint32_t datarep_mask;                 /* bit c: client c gave C_ICBC_DATAREP */
    uint32_t icbc_hosts_mask;              /* bit c: client c gave C_ICBC_HOSTS */
    uint8_t datarep[IMPI_MAX_CLIENTS][IMPI_DATAREP_SIZE];
} impi_layout_t;

/* The labels in the order clients give them; *N is their number. */
const uint32_t *impi_layout_labels(int *n);

/* An empty layout for NCLIENTS (the server's IMPI answer). */
icbc_status_t impi_layout_init(impi_layout_t *layout, int nclients);
void impi_layout_free(impi_layout_t *layout);
/* The COLL answer for LABEL: MASK (bit c: client c gave a part) and the
 * parts in client order, LEN bytes at BYTES. ICBC_ERR_INVALID with the
 * reason in ERR: a label out of order or unknown, a part whose size or
 * values the label cannot have, counts that do not add up, a client that
 * left out a label every client must give. */
icbc_status_t impi_layout_add(impi_layout_t *layout, uint32_t label, uint32_t mask,
                              const void *bytes, size_t len, char *err, size_t errlen);
/* After the last label: every required label was answered; fills in the
 * defaults of labels no client gave and the flow-control marks. */
icbc_status_t impi_layout_check(impi_layout_t *layout, char *err, size_t errlen);

/* The host of world rank RANK (0 <= RANK < nprocs_total): the last host
 * whose first rank is at most RANK. */
int impi_layout_host_of(const impi_layout_t *layout, int rank);

/* The layout as bytes, to hand it from the process that ran start-up to
 * the others of its client (same program, same machine kind: the fields are
 * in host order). *BUF is malloc'd. */
icbc_status_t impi_layout_pack(const impi_layout_t *layout, uint8_t **buf, size_t *len);
/* A layout from impi_layout_pack's bytes; ICBC_ERR_INVALID with the reason
 * in ERR when LEN or the counts do not add up. The caller frees it with
 * impi_layout_free. */
icbc_status_t impi_layout_unpack(const void *buf, size_t len, impi_layout_t *layout, char *err,
                                 size_t errlen);

/* The bytes this client gives for LABEL (in *BUF, malloc'd, *LEN bytes).
 * ICBC_ERR_INVALID: LOCAL is inconsistent (its hosts' process counts do not
 * add up to nprocs). */
icbc_status_t impi_local_part(const impi_local_t *local, uint32_t label, uint8_t **buf,
                              size_t *len);

/* This machine's part of C_ICBC_DATAREP. */
void impi_datarep_local(uint8_t rep[IMPI_DATAREP_SIZE]);

/* ---- start-up over a socket --------------------------------------------- */

typedef struct impi_client_params {
    const char *server; /* "ADDR:PORT" (IPv4) */
    int client;         /* this client's rank */
    int have_key;       /* authenticate with KEY, else IMPI_AUTH_NONE */
    uint64_t key;
    int timeout_ms; /* for each answer of the server */
    /* When every client gives C_ICBC_HOSTS, this client's part from the
     * host labels on (each process a host of its own); NULL: LOCAL always */
    const impi_local_t *local_own_hosts;
} impi_client_params_t;

typedef struct impi_client impi_client_t;

/* Connects, runs start-up to DONE and fills LAYOUT (the caller frees it
 * with impi_layout_free). On failure the message in ERR names the server
 * and what went wrong. */
icbc_status_t impi_client_startup(const impi_client_params_t *params, const impi_local_t *local,
                                  impi_client_t **client, impi_layout_t *layout, char *err,
                                  size_t errlen);
/* After start-up the server says nothing until this client's FINI: its
 * connection closing (or anything arriving on it) means the IMPI job
 * ended, e.g. because another client's job died and the server ended
 * start-up's bookkeeping with an error. Polls without waiting: ICBC_OK
 * while the connection is quiet, else ICBC_ERR_PEER_FAILED with the
 * reason in ERR naming the server. */
icbc_status_t impi_client_check(impi_client_t *client, char *err, size_t errlen);
/* Sends FINI (every process of this client has finished) and closes. */
icbc_status_t impi_client_fini(impi_client_t *client);
/* Closes without FINI (the server sees a client that died). */
void impi_client_destroy(impi_client_t *client);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_CLIENT_H */
