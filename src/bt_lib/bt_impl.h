/*
 * bt_lib internals: the objects behind the opaque types of bt_lib.h and the
 * functions the files of src/bt_lib call in each other.
 *
 * Callbacks run only from bt_poller_wait (and, for send completions, from
 * bt_conn_destroy). Work found outside it -- a send that completed or failed
 * inside bt_conn_send, a bt_conn_resume -- is put on the poller's deferred
 * list and runs at the next bt_poller_wait. Objects destroyed while the poller
 * is dispatching are only marked dead and freed when dispatching ends, so a
 * callback may destroy any connection, its own included.
 */
#ifndef BT_IMPL_H
#define BT_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "bt_lib.h"
#include "icbc_clock.h"
#include "icbc_list.h"
#include "icbc_queue.h"

#define BT_DEFAULT_SOCKBUF (4 << 20)
#define BT_DEFAULT_MAX_QUEUED ((size_t) 16 << 20)
#define BT_DEFAULT_MAX_PAYLOAD ((uint64_t) 64 << 20)
#define BT_DEFAULT_HANDSHAKE_MS 5000

#define BT_RX_BUF_SIZE (64 * 1024) /* per connection: frame headers and small payloads */
#define BT_RX_READS_PER_EVENT 16   /* socket reads per readiness event: fairness */
#define BT_TX_IOV_BATCH 64         /* iovecs gathered into one sendmsg */
#define BT_SEND_IOV_MAX 1024       /* payload iovecs of one bt_conn_send */

/* Anything registered in the epoll set; epoll's data.ptr points here. */
typedef enum { BT_W_CONN, BT_W_LISTENER, BT_W_FD } bt_watch_kind_t;

typedef struct bt_watch {
    bt_watch_kind_t kind;
    bool dead; /* destroyed; memory kept until dispatching ends */
    struct bt_watch *next_dead;
} bt_watch_t;

/* Options with defaults applied, key and id copied. Shared by a listener and
 * the connections it accepted, hence the reference count. */
typedef struct bt_cfg {
    int refs;
    bt_opts_t o; /* o.key and o.id point into this struct */
    char id[BT_ID_MAX + 1];
    size_t idlen;
    unsigned char key[];
} bt_cfg_t;

icbc_status_t bt_cfg_create(const bt_opts_t *opts, bt_cfg_t **out);
void bt_cfg_unref(bt_cfg_t *cfg);

/* ---- sockets (sockopt.c) ---- */
void bt_sock_tune(int fd, const bt_opts_t *o, const char *who);
/* A non-blocking TCP socket for ADDR (IPv4 or IPv6; WHAT, e.g. "bt_connect",
 * names the caller in errors), the configuration of OPTS in *CFG (one
 * reference) and ADDR as text in TEXT (64 bytes). -1 with nothing held on
 * error, the reason in *ST. */
int bt_sock_open(const char *what, const struct sockaddr *addr, const bt_opts_t *opts,
                 bt_cfg_t **cfg, char *text, icbc_status_t *st);

/* ---- send queue entries ---- */
typedef struct bt_send {
    icbc_queue_elem_t qe; /* in a connection's ctlq, dataq or doneq */
    bt_send_cb_t cb;      /* NULL for bt_lib's own frames */
    void *cb_arg;
    uint8_t type;       /* bt_frame_type_t */
    size_t left;        /* bytes of this frame not yet written */
    int iovpos, iovcnt; /* iov[iovpos..iovcnt) still to write; iov[iovpos] advanced */
    struct iovec *iov;  /* iov[0]: frame header + header copy; then payload */
    bool pooled;        /* from the poller's free list (bt_poller_send_new) */
} bt_send_t;

/* Frames whose entry (bt_send_t, its iovec and header copy) fits in this
 * many bytes come from the poller's free list: a connection's frames
 * allocate nothing once the list holds as many as are queued at once. The
 * list is the poller's, not the connection's, because a completion may
 * destroy the connection its frame was on. */
#define BT_SEND_POOLED 512

typedef icbc_queue_t bt_sendq_t;

typedef enum {
    BT_CONN_CONNECTING,   /* connector: TCP connect in progress */
    BT_CONN_WAIT_HELLO,   /* connector: waiting for the acceptor's nonce */
    BT_CONN_WAIT_AUTH,    /* acceptor: HELLO queued, waiting for AUTH */
    BT_CONN_WAIT_AUTH_OK, /* connector: AUTH queued, waiting for the acceptor's proof */
    BT_CONN_READY,        /* authenticated: DATA flows */
    BT_CONN_DRAINING,     /* bt_conn_shutdown: CLOSE queued behind the data */
    BT_CONN_LINGER,       /* CLOSE written, write side shut: waiting for the peer's end */
    BT_CONN_CLOSED,       /* socket closed; on_close delivered or deferred */
} bt_conn_state_t;

typedef enum {
    BT_RX_FRAME,  /* assembling the 24-byte frame header */
    BT_RX_HDR,    /* copying the frame's header part into hdrbuf */
    BT_RX_DECIDE, /* header complete: handle it / ask on_header */
    BT_RX_WAIT,   /* on_header said BT_RECV_WAIT; socket not read */
    BT_RX_BODY,   /* payload going to body (or dropped when body is NULL) */
} bt_rx_state_t;

struct bt_conn {
    bt_watch_t w;
    bt_poller_t *p;
    icbc_list_t link;       /* in the poller's list of connections */
    icbc_list_t defer_link; /* poller's deferred-work list; linked: deferred */
    bool destroyed;
    bool resume_pending; /* bt_conn_resume called; ask on_header again */
    bool acceptor;
    int fd;          /* -1 once closed */
    uint32_t events; /* epoll interest registered for fd */
    bt_conn_state_t state;
    bt_cfg_t *cfg; /* counted reference */
    bt_conn_cbs_t cbs;
    void *arg;
    int64_t deadline_ms; /* monotonic; 0: none */

    icbc_status_t close_status; /* why the connection ended, for on_close */
    char close_msg[192];
    bool close_reported;

    char peer_text[64];
    char peer_id[BT_ID_MAX + 1];

    /* handshake */
    unsigned char nonce_local[BT_NONCE_SIZE];
    unsigned char nonce_peer[BT_NONCE_SIZE];
    unsigned char auth_id[BT_ID_MAX]; /* AUTH payload as received */

    /* send side: control frames go first; DATA (and the final CLOSE) only
     * once authenticated. Entries fully written wait in doneq for their
     * completion callback, which runs in poller context. */
    bt_sendq_t ctlq, dataq, doneq;
    size_t queued;   /* bytes in ctlq and dataq not yet written */
    bool above_half; /* queued went above max_queued / 2 */

    /* receive side; rxbuf[rx_pos, rx_end) holds bytes read but not consumed */
    bt_rx_state_t rx;
    unsigned char *rxbuf;
    size_t rx_pos, rx_end;
    bt_frame_t f; /* frame being received */
    unsigned char fhdr[BT_FRAME_HDR_SIZE];
    unsigned char *hdrbuf; /* owned; grows up to the frame's hdr_len */
    uint32_t hdr_cap, hdr_got;
    unsigned char *body; /* payload destination (caller's or auth_id); NULL: drop */
    uint64_t body_got;
};

struct bt_listener {
    bt_watch_t w;
    bt_poller_t *p;
    icbc_list_t link; /* in the poller's list of listeners */
    int fd;
    bt_cfg_t *cfg;
    bt_conn_cbs_t cbs;
    bt_accept_cb_t accept_cb;
    void *arg;
    int64_t retry_ms; /* paused after EMFILE & co until then; 0: running */
    char addr_text[64];
};

/* ---- poller.c ---- */
void bt_poller_link_conn(bt_poller_t *p, bt_conn_t *c);
void bt_poller_unlink_conn(bt_poller_t *p, bt_conn_t *c);
void bt_poller_link_listener(bt_poller_t *p, bt_listener_t *l);
void bt_poller_unlink_listener(bt_poller_t *p, bt_listener_t *l);
/* Frees W now, or when dispatching ends if the poller is inside a callback. */
void bt_poller_retire(bt_poller_t *p, bt_watch_t *w);
void bt_poller_enter(bt_poller_t *p);
void bt_poller_leave(bt_poller_t *p);
int bt_poller_epfd(bt_poller_t *p);
void bt_poller_defer(bt_poller_t *p, bt_conn_t *c);
/* A send entry of SZ bytes, and its return. */
bt_send_t *bt_poller_send_new(bt_poller_t *p, size_t sz);
void bt_poller_send_free(bt_poller_t *p, bt_send_t *e);
void bt_poller_undefer(bt_poller_t *p, bt_conn_t *c);
void bt_poller_deadline_changed(bt_poller_t *p, int delta);

/* ---- conn.c ---- */
icbc_status_t bt_conn_new(bt_poller_t *p, int fd, bt_cfg_t *cfg, const bt_conn_cbs_t *cbs,
                          void *arg, bool acceptor, const struct sockaddr *peer, bt_conn_t **out);
void bt_conn_on_events(bt_conn_t *c, uint32_t events);
void bt_conn_run_deferred(bt_conn_t *c);
void bt_conn_check_deadline(bt_conn_t *c, int64_t now);
void bt_conn_set_deadline(bt_conn_t *c, int64_t deadline_ms);
void bt_conn_update_events(bt_conn_t *c);
/* Ends the connection: closes the socket now, logs, and defers the
 * callbacks (completions, failed sends, on_close) to poller context. */
void bt_conn_fail(bt_conn_t *c, icbc_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void bt_conn_free(bt_conn_t *c);
void bt_conn_free_sends(bt_poller_t *p, bt_sendq_t *q);

/* ---- send.c ---- */
icbc_status_t bt_send_ctl(bt_conn_t *c, bt_frame_type_t type, const void *hdr, size_t hdr_len,
                          const void *payload, size_t payload_len);
icbc_status_t bt_send_close(bt_conn_t *c);
/* Writes what the socket takes; returns false if the connection failed. */
bool bt_send_flush(bt_conn_t *c);
bool bt_send_pending(const bt_conn_t *c); /* something writable is queued */
void bt_send_fail_all(bt_conn_t *c, icbc_status_t status);
void bt_send_complete_done(bt_conn_t *c);

/* ---- listen.c ---- */
void bt_listener_on_events(bt_listener_t *l);
void bt_listener_check_retry(bt_listener_t *l, int64_t now);

/* ---- recv.c ---- */
void bt_recv_progress(bt_conn_t *c);

/* ---- auth.c ---- */
void bt_auth_start_acceptor(bt_conn_t *c);
void bt_auth_on_hello(bt_conn_t *c);
void bt_auth_on_auth(bt_conn_t *c);
void bt_auth_on_auth_ok(bt_conn_t *c);
bool bt_auth_done(const bt_conn_t *c);

#endif /* BT_IMPL_H */
