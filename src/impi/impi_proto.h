/*
 * IMPI (Interoperable MPI) wire formats: the start-up commands between
 * clients and the server, and the 128-byte packet header between hosts.
 * Everything is big-endian; one parse function per format checks every
 * field before it is used. docs/impi.md describes the protocol and what
 * LAM/MPI 7.1.4, the peer it is tested against, actually sends.
 */
#ifndef ICBC_IMPI_PROTO_H
#define ICBC_IMPI_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IMPI_MAX_CLIENTS 32

/* ---- start-up commands: {Int4 cmd, Int4 len} + len bytes -------------- */

#define IMPI_CMD_HDR_SIZE 8
#define IMPI_CMD_AUTH 0x41555448u /* "AUTH" */
#define IMPI_CMD_IMPI 0x494d5049u /* "IMPI" */
#define IMPI_CMD_COLL 0x434f4c4cu /* "COLL" */
#define IMPI_CMD_DONE 0x444f4e45u /* "DONE" */
#define IMPI_CMD_FINI 0x46494e49u /* "FINI" */

/* Largest command payload the server takes: a COLL of 16-byte process
 * identifiers for a million processes. */
#define IMPI_CMD_LEN_MAX (16u << 20)

/* AUTH: the client's mask of methods it can do, the server's choice. */
#define IMPI_AUTH_NONE 0
#define IMPI_AUTH_KEY 1
#define IMPI_AUTH_MASK_NONE (1u << IMPI_AUTH_NONE)
#define IMPI_AUTH_MASK_KEY (1u << IMPI_AUTH_KEY)
#define IMPI_AUTH_REPLY_SIZE 8 /* {Int4 which, Int4 len}, no command header */
#define IMPI_AUTH_KEY_SIZE 8   /* Uint8 key, raw */

/* The key in file PATH: a decimal number on its first line, as LAM/MPI's
 * IMPI_AUTH_KEY (impi-server's and impi-relay's -auth key:FILE). */
icbc_status_t impi_key_read(const char *path, uint64_t *key, char *err, size_t errlen);

/* COLL labels: per client (C_), per host (H_), per process (P_). */
#define IMPI_C_VERSION 0x1000u
#define IMPI_C_NHOSTS 0x1100u
#define IMPI_C_NPROCS 0x1200u
#define IMPI_C_DATALEN 0x1300u
#define IMPI_C_TAGUB 0x1400u
#define IMPI_C_COLL_XSIZE 0x1500u
#define IMPI_C_COLL_MAXLINEAR 0x1600u
#define IMPI_H_IPV6 0x2000u
#define IMPI_H_PORT 0x2100u
#define IMPI_H_NPROCS 0x2200u
#define IMPI_H_ACKMARK 0x2300u
#define IMPI_H_HIWATER 0x2400u
#define IMPI_P_IPV6 0x3000u
#define IMPI_P_PID 0x3100u
/* Not an IMPI label: ICBC clients give it after the others, other
 * implementations (LAM/MPI) do not. A server answers a label once every
 * client not yet DONE gave it or a higher one, so a client that skips it
 * does not hold the others. Its part is IMPI_DATAREP_SIZE bytes: the byte
 * order (IMPI_DATAREP_*) and the sizes of short, int, long, long long,
 * float, double, long double, void *, _Bool and wchar_t, then zeros. */
#define IMPI_C_ICBC_DATAREP 0x7f00u
/* Not an IMPI label either, and the one ICBC label before IMPI's host
 * labels: a client that gives it (4 bytes, 1) can make each of its
 * processes an IMPI host of its own. When every client gives it (all are
 * ICBC), each does, and no message between them passes through a node's
 * agent; else (a client of another MPI, which tells hosts apart by
 * address) every node is one host (docs/impi.md). */
#define IMPI_C_ICBC_HOSTS 0x1010u
#define IMPI_DATAREP_SIZE 12
#define IMPI_DATAREP_LITTLE 1
#define IMPI_DATAREP_BIG 2
/* Not an IMPI label either: per process, the 8-byte id of the machine (one
 * kernel) it runs on, 0 when unknown, so that a process can tell how many
 * processes of the whole job, not only of its own client, share its
 * cores (emulated nodes of one host are one machine). */
#define IMPI_P_ICBC_MACHINE 0x7f10u

typedef struct impi_cmd_hdr {
    uint32_t cmd;
    uint32_t len;
} impi_cmd_hdr_t;

void impi_cmd_hdr_pack(uint32_t cmd, uint32_t len, void *buf);
/* BUF holds at least IMPI_CMD_HDR_SIZE bytes. ICBC_ERR_INVALID: unknown
 * command, or a length the command cannot have (AUTH and IMPI carry 4
 * bytes, DONE and FINI none, COLL a label and at most IMPI_CMD_LEN_MAX). */
icbc_status_t impi_cmd_hdr_parse(const void *buf, impi_cmd_hdr_t *hdr);
/* The command's name ("AUTH", ...), or "?" */
const char *impi_cmd_name(uint32_t cmd);

/* ---- host-to-host packets ------------------------------------------------ */

#define IMPI_PKT_HDR_SIZE 128
#define IMPI_PROC_SIZE 24 /* 16-byte host id + Int8 pid */

enum {
    IMPI_PK_DATA = 0,
    IMPI_PK_DATASYNC = 1,
    IMPI_PK_PROTOACK = 2,
    IMPI_PK_SYNCACK = 3,
    IMPI_PK_CANCEL = 4,
    IMPI_PK_CANCELYES = 5,
    IMPI_PK_CANCELNO = 6,
    IMPI_PK_FINI = 7,
    /* Not an IMPI type: a message of ICBC's own protocol between processes
     * of two ICBC clients (both gave C_ICBC_DATAREP), which carries what IMPI
     * has no packet for (one-sided operations). LEN payload bytes, at most
     * DATALEN; MSGLEN: the message's payload bytes; COUNT: bytes of its ICBC
     * header at the start of this packet's payload (0: a continuation);
     * SEQNUM: the offset in the message's payload of this packet's payload
     * bytes after that header. Never sent to a client of another MPI. */
    IMPI_PK_ICBC = 0x100,
};

typedef struct impi_proc {
    uint8_t host[16]; /* IPv4 in bytes 12..15 */
    int64_t pid;
} impi_proc_t;

typedef struct impi_pkt_hdr {
    uint32_t type;
    uint32_t len; /* payload bytes (DATA, DATASYNC); others: ignore */
    impi_proc_t src, dest;
    uint64_t srqid, drqid;
    uint64_t msglen;
    int32_t lsrank;
    int32_t tag;
    uint64_t cid;
    uint64_t seqnum;
    int64_t count;
    uint64_t dtype;
    uint64_t reserved;
} impi_pkt_hdr_t;

void impi_pkt_hdr_pack(const impi_pkt_hdr_t *hdr, void *buf);
/* FINI as a host sends it, into BUF's IMPI_PKT_HDR_SIZE bytes: no process
 * (pid -1, as LAM/MPI sends it), rank, tag and count -1. */
void impi_pkt_fini_pack(void *buf);
/* BUF holds IMPI_PKT_HDR_SIZE bytes. ICBC_ERR_INVALID: unknown type, a
 * DATA or DATASYNC payload above DATALEN or above the message length, an
 * ICBC packet above DATALEN or whose pieces do not fit its message. The
 * payload length of control packets is set to 0 (LAM sends 128 there). */
icbc_status_t impi_pkt_hdr_parse(const void *buf, uint32_t datalen, impi_pkt_hdr_t *hdr);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_PROTO_H */
