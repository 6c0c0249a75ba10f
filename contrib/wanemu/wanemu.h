/*
 * icbc-wanemu: a user-space WAN segment between the external switches of
 * emulated clusters. Frames read from one port (an AF_PACKET socket on a
 * veth) go through a per-direction link model -- drop-tail bottleneck buffer,
 * serialisation at the WAN rate, one-way delay -- and are written to the
 * destination port when due. Every interval (1 ms) a CSV row records the
 * bytes, packets, drops and queue of each direction.
 *
 * Times are int64 nanoseconds of CLOCK_MONOTONIC unless a name says _ps
 * (picoseconds, relative to the start of the link).
 */
#ifndef ICBC_WANEMU_H
#define ICBC_WANEMU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "icbc_status.h"

#define WANEMU_MAX_PORTS 26
#define WANEMU_MAX_FRAME 9238 /* jumbo frame with VLAN tag, no FCS */
#define WANEMU_NAME_LEN 16

/* ---- units.c: "400mbit", "5ms", "256KiB" ---------------------------------- */

icbc_status_t wanemu_parse_rate(const char *s, uint64_t *bps);
icbc_status_t wanemu_parse_time(const char *s, int64_t *ns);
icbc_status_t wanemu_parse_size(const char *s, uint64_t *bytes);

/* ---- frame.c: what the link model needs to know about a frame --------------- */

/* TCP/UDP payload bytes of an Ethernet frame (IPv4 or IPv6, optional VLAN
 * tag); 0 for anything else or when a header is truncated. */
uint32_t wanemu_frame_payload(const uint8_t *frame, size_t len);

/* ---- link.c: one direction of the WAN ---------------------------------------- */

struct wanemu_link_conf {
    uint64_t rate_bps;     /* 0: no serialisation (infinitely fast) */
    int64_t delay_ns;      /* one-way propagation delay */
    uint64_t buffer_bytes; /* drop-tail bottleneck buffer */
    uint32_t overhead;     /* bytes added to each frame for serialisation */
    uint64_t max_mem;      /* ring size limit when rate_bps == 0 */
};

/* Counters of one direction; the link adds, the owner reads and resets the
 * per-interval copy. */
struct wanemu_counters {
    uint64_t bytes;   /* frame bytes delivered */
    uint64_t pkts;
    uint64_t payload; /* TCP/UDP payload bytes delivered */
    uint64_t drops;   /* frames dropped at the bottleneck buffer */
    uint64_t qmax;    /* largest backlog (bytes): at the interval's start or after an arrival */
};

struct wanemu_frame {
    int64_t due_ns; /* delivery time */
    uint32_t len;
    uint32_t payload;
    const uint8_t *data; /* in the link's ring; valid until its next pop or offer */
};

/* A FIFO of frames in one direction. The ring (owned by the link) holds both
 * the queued frames and those "on the wire" waiting for their delay; its size
 * follows from buffer + rate * delay, so memory is bounded. */
struct wanemu_link {
    struct wanemu_link_conf conf;
    int64_t start_ns;      /* origin of busy_until_ps */
    int64_t busy_until_ps; /* end of the last frame's serialisation */
    uint8_t *ring;
    size_t cap, head, tail, used;
    size_t nframes;
    uint64_t ring_drops; /* frames dropped because the ring was full */
};

icbc_status_t wanemu_link_init(struct wanemu_link *l, const struct wanemu_link_conf *conf,
                               int64_t now_ns);
void wanemu_link_fini(struct wanemu_link *l);

/* Backlog in bytes that a frame arriving at now_ns finds in the buffer. */
uint64_t wanemu_link_backlog(const struct wanemu_link *l, int64_t now_ns);

/* Offer a frame arriving at now_ns. Returns ICBC_OK when queued (its due
 * time in *due_ns), ICBC_ERR_BUSY when dropped; updates c->drops and c->qmax. */
icbc_status_t wanemu_link_offer(struct wanemu_link *l, int64_t now_ns, const uint8_t *frame,
                                uint32_t len, uint32_t payload, struct wanemu_counters *c,
                                int64_t *due_ns);

/* Due time of the oldest frame, or INT64_MAX when empty. */
int64_t wanemu_link_next_due(const struct wanemu_link *l);

/* Take the oldest frame if it is due at now_ns; returns 0 when none is. The
 * frame's data stays valid until the next call. */
int wanemu_link_pop(struct wanemu_link *l, int64_t now_ns, struct wanemu_frame *f);

/* ---- port.c: AF_PACKET socket on one interface ----------------------------------- */

struct wanemu_port_stats {
    uint64_t rx, rx_bytes, tx, tx_bytes;
    uint64_t tx_errors;    /* send() failed: frame lost */
    uint64_t truncated;    /* frames longer than WANEMU_MAX_FRAME */
    uint64_t kernel_drops; /* socket receive queue overflowed */
};

struct wanemu_port {
    char name[WANEMU_NAME_LEN];  /* cluster name, e.g. "a" */
    char ifname[WANEMU_NAME_LEN]; /* e.g. "sw-a" */
    int ifindex;
    int fd;
    struct wanemu_port_stats st;
};

icbc_status_t wanemu_port_open(struct wanemu_port *p);
void wanemu_port_close(struct wanemu_port *p);
/* Receive up to max frames into bufs (each WANEMU_MAX_FRAME+1 bytes); lens
 * gets their lengths, stamps their kernel receive times (CLOCK_REALTIME ns,
 * 0 when unknown). Returns the number received, 0 when none is pending. */
int wanemu_port_recv(struct wanemu_port *p, uint8_t (*bufs)[WANEMU_MAX_FRAME + 1], uint32_t *lens,
                     int64_t *stamps, int max);
icbc_status_t wanemu_port_send(struct wanemu_port *p, const uint8_t *frame, uint32_t len);
/* Refresh st.kernel_drops from the kernel's counters. */
void wanemu_port_poll_stats(struct wanemu_port *p);

/* ---- trace.c: the interval CSV and the stats file ------------------------------- */

struct wanemu_dir {
    int src, dst; /* port indices */
    struct wanemu_link link;
    struct wanemu_counters total; /* since start */
    int64_t late_max_ns;          /* largest delivery lateness */
    int64_t late_sum_ns;          /* sum of (send time - due time) */
    uint64_t late_n;
};

struct wanemu_trace {
    FILE *csv;            /* NULL: no trace */
    int64_t interval_ns;
    int64_t start_ns;     /* t = 0 of the CSV */
    struct wanemu_dir *dirs;
    int ndirs;
    int nslots;                   /* rows kept open: the window plus two */
    struct wanemu_counters *ring; /* nslots rows of ndirs counters */
    uint64_t written;             /* rows written; the oldest open row */
    uint64_t opened;              /* rows opened; the newest is opened - 1 */
    uint64_t late_rows;           /* counts for rows already written */
};

icbc_status_t wanemu_trace_open(struct wanemu_trace *t, const char *path, int64_t interval_ns,
                                int64_t now_ns, const struct wanemu_port *ports,
                                struct wanemu_dir *dirs, int ndirs);
/* The counters of direction dir in the row holding time_ns (the oldest open
 * row when that one was written already). */
struct wanemu_counters *wanemu_trace_at(struct wanemu_trace *t, int64_t time_ns, int dir);
/* Open rows up to now_ns; write the rows that ended a window before it. */
void wanemu_trace_advance(struct wanemu_trace *t, int64_t now_ns);
/* Write every row ended by now_ns and close the file. */
void wanemu_trace_close(struct wanemu_trace *t, int64_t now_ns);

icbc_status_t wanemu_stats_write(const char *path, int64_t uptime_ns,
                                 const struct wanemu_port *ports, int nports,
                                 const struct wanemu_dir *dirs, int ndirs, uint64_t late_rows);

#endif /* ICBC_WANEMU_H */
