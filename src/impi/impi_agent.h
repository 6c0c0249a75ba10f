/*
 * The IMPI host of a node (docs/impi.md, "An IMPI host is a node"): one
 * host stands for every process of the node, as IMPI means it, and holds
 * the node's one connection to each host of the other clients. The
 * processes reach their host over local links (Unix sockets inside the
 * node); the agent moves whole IMPI packets between those links and the
 * host connections, holds what comes from the WAN to the layout
 * (impi_rx), and keeps what belongs to the host rather than to a process:
 * FINI at the end, and the news that a host was lost. What belongs to a
 * pair of processes (flow control, synchronous and long messages) stays
 * with the processes' engines (impi_p2p): the agent reads no more of a
 * packet than its addresses.
 *
 * A local link carries frames, {Uint4 kind, Uint4 host, Uint4 len} and
 * LEN bytes, big-endian:
 *
 *   IMPI_FRAME_PACKET  one IMPI packet, header and payload; from a process:
 *                      for host HOST; to a process: from host HOST
 *   IMPI_FRAME_HELLO   process -> agent, first: HOST is its world rank
 *   IMPI_FRAME_DONE    process -> agent: it finalized and sends no more
 *   IMPI_FRAME_LOST    agent -> process: host HOST is gone, the reason as
 *                      text; what the process has with it fails
 *   IMPI_FRAME_PACKET_AT  agent -> the in-process process only (never on a
 *                      link): a packet from host HOST whose payload stays
 *                      where the agent received it; the body is the
 *                      packet's header and the payload's address (a
 *                      uintptr_t in host order), valid until the next
 *                      impi_agent_local_swap
 *
 * The host's end: once every process said DONE (or ended), FINI to every
 * host, and the connections close when each host's FINI came too (bounded
 * by a timeout). A process that ends without DONE takes the host down:
 * IMPI cannot tell the other hosts that one process of a host is gone, so
 * every connection closes and their processes see this host's processes
 * fail, as they would see a process that is its own host.
 */
#ifndef ICBC_IMPI_AGENT_H
#define ICBC_IMPI_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "icbc_status.h"
#include "impi_client.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    IMPI_FRAME_PACKET = 1,
    IMPI_FRAME_HELLO = 2,
    IMPI_FRAME_DONE = 3,
    IMPI_FRAME_LOST = 4,
    IMPI_FRAME_PACKET_AT = 5,
};

#define IMPI_FRAME_HDR_SIZE 12
#define IMPI_FRAME_LOST_MAX 1024 /* bytes of a LOST frame's reason */

void impi_frame_hdr_pack(uint32_t kind, uint32_t host, uint32_t len, uint8_t *buf);

/* Frames in from a local link, in any pieces. */
typedef struct impi_frames {
    uint8_t hdr[IMPI_FRAME_HDR_SIZE];
    uint32_t kind, host, len;
    size_t have;
    int in_body;
    uint8_t *body; /* owned */
    size_t cap;
    uint32_t max_len; /* the largest frame body accepted */
} impi_frames_t;

typedef void (*impi_frame_cb_t)(void *arg, uint32_t kind, uint32_t host, const uint8_t *body,
                                size_t len);

/* Frames of at most an IMPI packet of DATALEN payload bytes (or a LOST
 * reason). */
icbc_status_t impi_frames_init(impi_frames_t *f, uint32_t datalen);
void impi_frames_free(impi_frames_t *f);
/* CB once per whole frame. ICBC_ERR_INVALID with the reason in ERR: an
 * unknown kind or a length above the bound; the link must close. */
icbc_status_t impi_frames_feed(impi_frames_t *f, const void *bytes, size_t len, impi_frame_cb_t cb,
                               void *arg, char *err, size_t errlen);

/* While the body of a frame is being read: where its next bytes go and how
 * many it still wants (*WANT), so that a reader receives a large body there
 * itself (no copy); NULL between frames. impi_frames_body_filled: N bytes
 * were written there; CB runs if that completed the frame. */
uint8_t *impi_frames_body_room(impi_frames_t *f, size_t *want);
void impi_frames_body_filled(impi_frames_t *f, size_t n, impi_frame_cb_t cb, void *arg);
/* Writes what FD takes now of IOV[0 .. N) without waiting and without
 * copying, and advances IOV past what it wrote: the bytes written, -1 if the
 * connection broke. */
ssize_t impi_send_iov(int fd, struct iovec *iov, int n);
/* Writes what FD takes of BUF[*OFF .. *LEN) without waiting; both become 0
 * once all is out. -1: the connection broke. (A link's sender, the agent
 * and a process alike.) */
int impi_send_pending(int fd, const uint8_t *buf, size_t *off, size_t *len);

typedef struct impi_agent impi_agent_t;

/* In LOCAL_FDS: the process is the caller itself, whose frames go in and
 * out by impi_agent_local_input (frames), impi_agent_local_packet and
 * impi_agent_local_swap. */
#define IMPI_AGENT_INPROC (-2)

/* The agent of host SELF of LAYOUT (which must outlive it). HOST_FDS: per
 * host of the job, its connection (connected, -1: none, e.g. the hosts of
 * this client); LOCAL_FDS: the links of the host's processes, in world-rank
 * order (HELLO already read), or IMPI_AGENT_INPROC. The agent owns every
 * descriptor (it makes them non-blocking). FINI_TIMEOUT_MS bounds the wait
 * for the other hosts' FINI once every process is done.
 *
 * The agent runs on a bt_lib poller of its own (one epoll descriptor for all
 * of them). A host connection's queue and a process's link's queue are
 * bounded by back-pressure: while one holds more than IMPI_AGENT_QUEUE_MAX
 * bytes, what feeds it is not read (the links of the processes, or the host
 * connections), until it is below half of that. IMPI's flow control
 * (HIWATER packets per pair) keeps the queues below it in a job of a few
 * hosts; the bound holds where many pairs fill one connection at once.
 *
 * An agent is not thread-safe: a caller that runs it from two threads (the
 * node's first process in its progress loop, and a thread of its own while
 * that process computes) holds a lock around every call, and waits for its
 * descriptor (impi_agent_fd) without it. */
#define IMPI_AGENT_QUEUE_MAX (16u << 20)

icbc_status_t impi_agent_create(const impi_layout_t *layout, int self, const int *host_fds,
                                const int *local_fds, int fini_timeout_ms, impi_agent_t **agent);
/* Waits up to TIMEOUT_MS for the connections and moves what they have.
 * Returns 1 once the host has ended: every process done and every host
 * connection closed. */
int impi_agent_poll(impi_agent_t *agent, int timeout_ms);
/* The one descriptor to wait on (readable when the agent has work: poll(2)
 * it, then impi_agent_poll with timeout 0). */
int impi_agent_fd(const impi_agent_t *agent);
/* Frames from the in-process process K (any pieces). */
void impi_agent_local_input(impi_agent_t *agent, int k, const void *bytes, size_t len);
/* The in-process process's packet for HOST, without a frame: HEAD (its
 * IMPI_PKT_HDR_SIZE-byte header and maybe the first payload bytes, HEAD_LEN
 * in all), then LEN more payload bytes. ICBC_ERR_PEER_FAILED when that
 * connection is gone. */
icbc_status_t impi_agent_local_packet(impi_agent_t *agent, int host, const void *head,
                                      size_t head_len, const void *payload, size_t len);
/* Bytes for HOST's connection that it has not taken yet. */
size_t impi_agent_host_backlog(const impi_agent_t *agent, int host);
/* The frames waiting for in-process process K, whole, without a copy: the
 * agent's buffer is swapped with *BUF (of *CAP bytes, which the agent keeps
 * and grows); returns their length. */
size_t impi_agent_local_swap(impi_agent_t *agent, int k, uint8_t **buf, size_t *cap);
/* A packet for the in-process process with at least this many payload
 * bytes reaches it as IMPI_FRAME_PACKET_AT: its payload stays in the
 * buffer the agent received it into (read there from the socket), which the
 * agent lends until the next swap and replaces by a spare one, so that the
 * process's copy into the user's buffer is the only one. The agent's
 * payload buffers (DATALEN bytes each) are made as needed and kept: their
 * number (impi_agent_payload_buffers) stays put once a job is in its
 * stride. Their bytes count toward the link's queue bound. */
#define IMPI_AGENT_LEND_MIN 4096
int impi_agent_payload_buffers(const impi_agent_t *agent);
/* Closes every descriptor it still has. */
void impi_agent_destroy(impi_agent_t *agent);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_AGENT_H */
