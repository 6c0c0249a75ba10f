/*
 * bt_lib: the byte-transfer library. Framed messages over TCP with mutual
 * key authentication, non-blocking, driven by an epoll poller that the caller
 * either blocks in (icbc-router) or polls with a zero timeout (the netmod's
 * progress loop). Several connections between the same two endpoints form a
 * trunk; striping over them is the caller's business.
 *
 * Frame on the wire (network byte order):
 *
 *   offset  size  field
 *   0       4     magic "ICBT"
 *   4       1     version (BT_FRAME_VERSION)
 *   5       1     frame type (bt_frame_type: HELLO, AUTH, AUTH_OK, DATA, CLOSE)
 *   6       2     reserved, zero
 *   8       4     header length  (<= opts.max_hdr, at most BT_HDR_MAX)
 *   12      4     reserved, zero
 *   16      8     payload length (<= opts.max_payload)
 *   then the header bytes, then the payload bytes.
 *
 * Authentication (both sides prove the key; no DATA frame is accepted before
 * it completes; a failure closes the connection and is logged with the peer's
 * address; the handshake must finish within opts.handshake_ms):
 *   acceptor -> connector  HELLO   header = 32-byte nonce Na
 *   connector -> acceptor  AUTH    header = nonce Nc | HMAC-SHA256(key, "icbc-bt-c" | Na | Nc | id)
 *                                  payload = connector's id string (<= 256 bytes)
 *   acceptor -> connector  AUTH_OK header = HMAC-SHA256(key, "icbc-bt-a" | Nc | Na)
 *
 * Ownership: a header passed to bt_conn_send is copied; a payload is only
 * referenced and must stay valid until the send's completion callback runs.
 * Sends on one connection go out in the order they were posted.
 *
 * Receiving is two-step so payloads can land straight at their destination:
 * on_header sees the header and tells bt_lib where the payload goes (or asks
 * it to wait: back-pressure, the socket is not read further until
 * bt_conn_resume); on_payload runs when the payload is complete.
 *
 * Callbacks run only from bt_poller_wait (send completions also from
 * bt_conn_destroy), never from inside bt_conn_send, bt_conn_resume or
 * bt_conn_shutdown. Any callback may call bt_conn_send, bt_conn_shutdown,
 * bt_conn_resume and bt_conn_destroy on any connection, its own included:
 * destroyed objects are freed when the poller has finished dispatching.
 *
 * Not thread-safe: one poller and its connections belong to one thread.
 * See docs/bt_lib.md.
 */
#ifndef BT_LIB_H
#define BT_LIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BT_FRAME_VERSION 1
#define BT_FRAME_HDR_SIZE 24
#define BT_HDR_MAX 65600u /* route header + largest inner header, with room */
#define BT_NONCE_SIZE 32
#define BT_MAC_SIZE 32
#define BT_ID_MAX 256

/* ---- frame format ----------------------------------------------------- */

#define BT_FRAME_MAGIC "ICBT"

typedef enum {
    BT_FRAME_HELLO = 1,   /* acceptor's nonce */
    BT_FRAME_AUTH = 2,    /* connector's nonce, proof and id */
    BT_FRAME_AUTH_OK = 3, /* acceptor's proof */
    BT_FRAME_DATA = 4,    /* caller's header and payload */
    BT_FRAME_CLOSE = 5,   /* orderly end: no more frames follow */
} bt_frame_type_t;

typedef struct bt_frame {
    uint8_t type; /* bt_frame_type_t */
    uint32_t hdr_len;
    uint64_t payload_len;
} bt_frame_t;

/* Writes the BT_FRAME_HDR_SIZE bytes of F to BUF. */
void bt_frame_pack(const bt_frame_t *f, void *buf);
/* Parses BT_FRAME_HDR_SIZE bytes at BUF and checks every field: magic,
 * version, type, reserved bytes, and the lengths of the type (HELLO and
 * AUTH_OK: 32-byte header, no payload; AUTH: 64-byte header, id payload of
 * at most BT_ID_MAX; CLOSE: empty; DATA: header <= MAX_HDR, payload <=
 * MAX_PAYLOAD). On ICBC_ERR_INVALID, WHY (WHYLEN bytes) says what is wrong. */
icbc_status_t bt_frame_parse(const void *buf, uint32_t max_hdr, uint64_t max_payload, bt_frame_t *f,
                             char *why, size_t whylen);

/* ---- options ---------------------------------------------------------- */

typedef struct bt_poller bt_poller_t;
typedef struct bt_conn bt_conn_t;
typedef struct bt_listener bt_listener_t;

typedef struct bt_opts {
    const unsigned char *key; /* shared key; required (NULL/0 is an error) */
    size_t keylen;
    const char *id;       /* who we are, for the peer's logs (e.g. "router a1") */
    int sndbuf;           /* SO_SNDBUF bytes; 0: 4 MiB; <0: kernel default */
    int rcvbuf;           /* SO_RCVBUF bytes; 0: 4 MiB; <0: kernel default */
    int nodelay;          /* TCP_NODELAY; bt_opts_init sets 1 */
    uint64_t pacing_rate; /* SO_MAX_PACING_RATE in bytes/s; 0: off */
    int notsent_lowat;    /* TCP_NOTSENT_LOWAT bytes: at most this much written
                               * but not sent stays in the socket; 0: off */
    size_t max_queued;    /* payload+header bytes queued per connection before
                               * bt_conn_send refuses (ICBC_ERR_BUSY); 0: 16 MiB */
    uint32_t max_hdr;     /* largest header accepted; 0: BT_HDR_MAX */
    uint64_t max_payload; /* largest payload accepted; 0: 64 MiB */
    int handshake_ms;     /* authentication deadline (from the start of the
                               * connect or the accept); also how long a
                               * shutdown waits for the peer's close; 0: 5000 */
} bt_opts_t;

/* Fills OPTS with the defaults above (key and id left NULL). */
void bt_opts_init(bt_opts_t *opts);

/* ---- poller ---------------------------------------------------------- */

typedef void (*bt_fd_cb_t)(int fd, uint32_t events, void *arg);

icbc_status_t bt_poller_create(bt_poller_t **out);
/* Closes every connection and listener still attached (no callbacks). */
void bt_poller_destroy(bt_poller_t *p);
/* Waits up to TIMEOUT_MS (0: poll, -1: forever) and dispatches events, timers
 * (handshake deadlines) included. Returns the number of events handled, or
 * a negative icbc_status_t. EINTR returns 0. */
int bt_poller_wait(bt_poller_t *p, int timeout_ms);
/* Runs the deferred work queued now (send completions) without asking the
 * kernel for events: what a loop that also drives another event source does
 * before it decides to block. Returns how many connections had work. */
int bt_poller_run_deferred(bt_poller_t *p);
/* Foreign descriptors (a UCX worker's event fd, a signalfd, an eventfd). */
icbc_status_t bt_poller_add_fd(bt_poller_t *p, int fd, uint32_t events, bt_fd_cb_t cb, void *arg);
icbc_status_t bt_poller_mod_fd(bt_poller_t *p, int fd, uint32_t events);
void bt_poller_del_fd(bt_poller_t *p, int fd);
/* The epoll descriptor itself, to nest the poller in another event loop. */
int bt_poller_fd(const bt_poller_t *p);

/* ---- connections ----------------------------------------------------- */

/* Where the payload of an incoming DATA frame goes. */
typedef enum {
    BT_RECV_INTO,    /* *dest points to payload_len writable bytes */
    BT_RECV_DISCARD, /* read and drop the payload */
    BT_RECV_WAIT,    /* not now: stop reading; bt_conn_resume() asks again */
} bt_recv_action_t;

typedef struct bt_conn_cbs {
    /* Authentication finished; the connection carries DATA from now on. */
    void (*on_ready)(bt_conn_t *c, void *arg);
    /* A DATA frame's header (HDR, HDR_LEN bytes, valid during the call). */
    bt_recv_action_t (*on_header)(bt_conn_t *c, const void *hdr, size_t hdr_len,
                                  uint64_t payload_len, void **dest, void *arg);
    /* The payload announced by the last on_header is complete (also for
     * DISCARD and for payload_len 0). */
    void (*on_payload)(bt_conn_t *c, void *arg);
    /* The queue went from above max_queued/2 to at most max_queued/2 (it
     * runs after every such crossing, so always after an ICBC_ERR_BUSY). */
    void (*on_writable)(bt_conn_t *c, void *arg);
    /* The connection is gone; STATUS says why, MSG in words (the same words
     * bt_lib logged, with the peer's address, for errors):
     *   ICBC_OK               orderly: the peer sent CLOSE, or our
     *                         bt_conn_shutdown finished
     *   ICBC_ERR_PEER_FAILED  the peer vanished (EOF without CLOSE, reset)
     *   ICBC_ERR_AUTH         wrong key, or a non-bt_lib peer, before READY
     *   ICBC_ERR_TIMEOUT      authentication deadline (opts.handshake_ms)
     *   ICBC_ERR_INVALID      a bad frame after authentication
     *   ICBC_ERR_UNREACHABLE  the TCP connect failed
     * Completions of frames already written run first with ICBC_OK, then
     * the unwritten ones with ICBC_ERR_PEER_FAILED, then this. The socket is
     * already closed; the caller must still call bt_conn_destroy (it may do
     * so from inside this callback). */
    void (*on_close)(bt_conn_t *c, icbc_status_t status, const char *msg, void *arg);
} bt_conn_cbs_t;

typedef void (*bt_send_cb_t)(bt_conn_t *c, icbc_status_t status, void *arg);

/* Starts a non-blocking connect to ADDR; callbacks follow from the poller.
 * ICBC_ERR_UNREACHABLE if the connect fails at once; a later failure comes
 * as on_close(ICBC_ERR_UNREACHABLE). The opts (key and id included) are
 * copied. */
icbc_status_t bt_connect(bt_poller_t *p, const struct sockaddr *addr, socklen_t addrlen,
                         const bt_opts_t *opts, const bt_conn_cbs_t *cbs, void *arg,
                         bt_conn_t **out);

/* Queues one DATA frame. HDR (HDR_LEN bytes) is copied; the IOV payload is
 * referenced until CB (may be NULL) runs with ICBC_OK once the bytes went to
 * the kernel, or with an error if the connection died first.
 * ICBC_ERR_BUSY: the queue holds max_queued bytes or more; wait for
 * on_writable. A frame is accepted whenever the queue is below the limit,
 * so one frame larger than max_queued still goes out.
 * ICBC_ERR_PEER_FAILED: the connection is closed or shutting down.
 * ICBC_ERR_INVALID: header above opts.max_hdr, payload above
 * opts.max_payload (the limits this side would accept itself), more than
 * 1024 payload pieces, NULL pointers.
 * Bytes are written at once when the socket takes them; CB still runs from
 * the next bt_poller_wait. Before authentication completes, frames are
 * queued and sent after it. */
icbc_status_t bt_conn_send(bt_conn_t *c, const void *hdr, size_t hdr_len, const struct iovec *iov,
                           int iovcnt, bt_send_cb_t cb, void *cb_arg);

/* Bytes queued and not yet written. */
size_t bt_conn_queued(const bt_conn_t *c);
/* Bytes not on the wire yet: the queue's and those the kernel holds unsent
 * (SIOCOUTQNSD; sent and unacknowledged bytes do not count). */
size_t bt_conn_unsent(const bt_conn_t *c);
/* After BT_RECV_WAIT: ask on_header again for the waiting frame (from the
 * next bt_poller_wait). */
void bt_conn_resume(bt_conn_t *c);
/* Sends CLOSE after the queue drains and shuts the write side; DATA from
 * the peer is still delivered until it closes too (or opts.handshake_ms
 * passes), then on_close runs with ICBC_OK. Before authentication it
 * closes at once. Later bt_conn_send calls get ICBC_ERR_PEER_FAILED. */
void bt_conn_shutdown(bt_conn_t *c);
/* Closes now; pending send callbacks run with ICBC_ERR_PEER_FAILED; no on_close. */
void bt_conn_destroy(bt_conn_t *c);

const char *bt_conn_peer_text(const bt_conn_t *c); /* "10.1.0.2:41234" */
const char *bt_conn_peer_id(const bt_conn_t *c);   /* the id from AUTH, or "" */
void bt_conn_set_arg(bt_conn_t *c, void *arg);
int bt_conn_fd(const bt_conn_t *c);
/* SO_MAX_PACING_RATE of C's socket from now on, bytes/s; 0: unpaced. */
void bt_conn_set_pacing(bt_conn_t *c, uint64_t rate);

/* ---- listeners ------------------------------------------------------- */

/* A new connection was accepted (not yet authenticated). Set its callbacks'
 * argument with bt_conn_set_arg if needed; CBS of the listener apply. */
typedef void (*bt_accept_cb_t)(bt_listener_t *l, bt_conn_t *c, void *arg);

/* Listens on ADDR (port 0: any; see bt_listener_addr). Accepted
 * connections start with ARG as their callbacks' argument. When accept
 * fails for lack of descriptors or memory, the listener pauses for 100 ms
 * instead of spinning. bt_listener_destroy stops accepting; connections
 * already accepted live on. */
icbc_status_t bt_listen(bt_poller_t *p, const struct sockaddr *addr, socklen_t addrlen,
                        const bt_opts_t *opts, const bt_conn_cbs_t *cbs, bt_accept_cb_t accept_cb,
                        void *arg, bt_listener_t **out);
icbc_status_t bt_listener_addr(const bt_listener_t *l, struct sockaddr_storage *addr,
                               socklen_t *addrlen);
void bt_listener_destroy(bt_listener_t *l);

/* "a.b.c.d:port" or "[v6]:port" of SA into BUF (also the fabric's endpoints). */
void bt_sock_addr_text(const struct sockaddr *sa, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BT_LIB_H */
