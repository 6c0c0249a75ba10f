/*
 * One direction of the WAN: a drop-tail buffer in front of a link of fixed
 * rate, followed by a fixed propagation delay.
 *
 * A frame of w bytes (frame length plus the configured overhead) arriving at
 * time t finds the link busy until busy_until; the bytes still waiting in
 * the buffer are (busy_until - t) * rate. If they plus w exceed the buffer,
 * the frame is dropped. Otherwise its serialisation ends at
 * max(t, busy_until) + w * 8 / rate, which becomes the new busy_until, and
 * it is delivered one delay later. Because every frame has the same delay,
 * delivery order is arrival order and one FIFO ring serves both the queue
 * and the frames in flight.
 */
#include "wanemu.h"

#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"

/* Ring entry: header followed by the frame, padded to 8 bytes. */
struct entry {
    int64_t due_ns;
    uint32_t len; /* ENTRY_WRAP: rest of the ring is unused, continue at 0 */
    uint32_t payload;
};

#define ENTRY_WRAP UINT32_MAX
#define ALIGN8(x) (((x) + 7) & ~(size_t) 7)
#define PS_PER_S 1000000000000LL

static size_t entry_size(uint32_t len)
{
    return sizeof(struct entry) + ALIGN8(len);
}

icbc_status_t wanemu_link_init(struct wanemu_link *l, const struct wanemu_link_conf *conf,
                               int64_t now_ns)
{
    double bytes;

    memset(l, 0, sizeof(*l));
    l->conf = *conf;
    l->start_ns = now_ns;
    if (conf->rate_bps == 0) {
        bytes = (double) conf->max_mem;
    } else {
        /* Queue plus the bytes in flight during the delay, scaled for the
         * per-entry header of minimum-size (60-byte) frames. */
        double inflight = (double) conf->rate_bps / 8.0 * ((double) conf->delay_ns / 1e9);
        bytes = ((double) conf->buffer_bytes + inflight + 2.0 * WANEMU_MAX_FRAME) *
                (double) entry_size(60) / 60.0;
        bytes += 2.0 * entry_size(WANEMU_MAX_FRAME);
        if (bytes > (double) conf->max_mem) {
            icbc_error("link needs %.0f bytes of ring for rate %llu bit/s, delay %lld ns, buffer "
                       "%llu bytes; the limit (--max-mem) is %llu",
                       bytes, (unsigned long long) conf->rate_bps, (long long) conf->delay_ns,
                       (unsigned long long) conf->buffer_bytes,
                       (unsigned long long) conf->max_mem);
            return ICBC_ERR_INVALID;
        }
    }
    l->cap = ALIGN8((size_t) bytes);
    l->ring = malloc(l->cap);
    if (l->ring == NULL) {
        icbc_error("cannot allocate %zu bytes for a link ring", l->cap);
        return ICBC_ERR_NO_MEMORY;
    }
    return ICBC_OK;
}

void wanemu_link_fini(struct wanemu_link *l)
{
    free(l->ring);
    l->ring = NULL;
}

static int64_t now_ps(const struct wanemu_link *l, int64_t now_ns)
{
    return (now_ns - l->start_ns) * 1000;
}

uint64_t wanemu_link_backlog(const struct wanemu_link *l, int64_t now_ns)
{
    int64_t t = now_ps(l, now_ns);

    if (l->conf.rate_bps == 0 || l->busy_until_ps <= t) return 0;
    return (uint64_t) ((double) (l->busy_until_ps - t) * (double) l->conf.rate_bps /
                       (8.0 * (double) PS_PER_S));
}

/* Space for size contiguous bytes at the tail, or NULL when full. */
static uint8_t *ring_reserve(struct wanemu_link *l, size_t size)
{
    if (l->used == 0) l->head = l->tail = 0;
    if (l->tail >= l->head && l->used < l->cap) {
        if (l->cap - l->tail >= size) return l->ring + l->tail;
        if (l->head >= size) {
            size_t waste = l->cap - l->tail;
            if (waste >= sizeof(struct entry)) {
                struct entry *e = (struct entry *) (l->ring + l->tail);
                e->len = ENTRY_WRAP;
            }
            l->used += waste;
            l->tail = 0;
            return l->ring;
        }
        return NULL;
    }
    if (l->tail < l->head && l->head - l->tail >= size) return l->ring + l->tail;
    return NULL;
}

icbc_status_t wanemu_link_offer(struct wanemu_link *l, int64_t now_ns, const uint8_t *frame,
                                uint32_t len, uint32_t payload, struct wanemu_counters *c,
                                int64_t *due_ns)
{
    uint64_t wire = (uint64_t) len + l->conf.overhead;
    uint64_t backlog = wanemu_link_backlog(l, now_ns);
    int64_t t = now_ps(l, now_ns), done_ps = t;
    size_t size = entry_size(len);
    struct entry *e;
    uint8_t *p;

    if (l->conf.rate_bps != 0) {
        if (backlog + wire > l->conf.buffer_bytes) {
            c->drops++;
            return ICBC_ERR_BUSY;
        }
        if (backlog + wire > c->qmax) c->qmax = backlog + wire;
        done_ps = (l->busy_until_ps > t ? l->busy_until_ps : t) +
                  (int64_t) (wire * 8 * (uint64_t) PS_PER_S / l->conf.rate_bps);
    }
    p = ring_reserve(l, size);
    if (p == NULL) {
        /* Cannot happen with a ring sized from rate, delay and buffer; with
         * an unlimited rate it is the memory bound. */
        l->ring_drops++;
        c->drops++;
        return ICBC_ERR_BUSY;
    }
    l->busy_until_ps = done_ps;
    e = (struct entry *) p;
    e->due_ns = l->start_ns + done_ps / 1000 + l->conf.delay_ns;
    e->len = len;
    e->payload = payload;
    memcpy(p + sizeof(*e), frame, len);
    l->tail += size;
    l->used += size;
    l->nframes++;
    *due_ns = e->due_ns;
    return ICBC_OK;
}

/* The entry at head, skipping a wrap marker. */
static struct entry *ring_head(struct wanemu_link *l)
{
    if (l->nframes == 0) return NULL;
    if (l->cap - l->head < sizeof(struct entry) ||
        ((struct entry *) (l->ring + l->head))->len == ENTRY_WRAP) {
        l->used -= l->cap - l->head;
        l->head = 0;
    }
    return (struct entry *) (l->ring + l->head);
}

int64_t wanemu_link_next_due(const struct wanemu_link *l)
{
    const struct entry *e;

    if (l->nframes == 0) return INT64_MAX;
    e = (const struct entry *) (l->ring + l->head);
    if (l->cap - l->head < sizeof(struct entry) || e->len == ENTRY_WRAP)
        e = (const struct entry *) l->ring;
    return e->due_ns;
}

int wanemu_link_pop(struct wanemu_link *l, int64_t now_ns, struct wanemu_frame *f)
{
    struct entry *e = ring_head(l);
    size_t size;

    if (e == NULL || e->due_ns > now_ns) return 0;
    f->due_ns = e->due_ns;
    f->len = e->len;
    f->payload = e->payload;
    f->data = (const uint8_t *) (e + 1);
    size = entry_size(e->len);
    l->head += size;
    l->used -= size;
    l->nframes--;
    /* The data stays in place until a later offer reuses the space; offers
     * happen only after the caller has sent the frame. */
    return 1;
}
