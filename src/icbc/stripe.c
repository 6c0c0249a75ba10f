/*
 * Striping engine: send and slot tables, chunk cutting, placement and byte
 * accounting, stall detection. See icbc_stripe.h.
 */
#include "icbc_stripe.h"

#include <stdlib.h>
#include <string.h>

#include "icbc_log.h"

#define NONE (-1)

/* Failover: where each unit (chunk) of a send is. A lane number (below
 * ICBC_STRIPE_LANES_MAX) once the lane reported it sent. */
#define UNIT_NEW 255    /* not handed out yet (at or beyond next) */
#define UNIT_RESEND 254 /* to be handed out again */
#define UNIT_FLYING 253 /* with a lane, not reported yet */

/* Receives completed not long ago, to confirm again when chunks of theirs
 * arrive late. */
#define DONE_KEPT 64

typedef struct {
    icbc_stripe_send_state_t state;
    uint32_t gen;
    int peer;
    const char *base; /* the caller's, valid until send_complete */
    size_t size;
    size_t next;             /* first byte not yet handed to a lane */
    uint32_t slot, slot_gen; /* from the CTS */
    size_t chunk_size;       /* from the CTS: the receiver's unit */
    int outstanding;         /* chunks with a lane, not yet reported sent */
    icbc_status_t error;     /* first failure, ICBC_OK: none */
    const char *why;
    int lane; /* next lane to try */
    double t_last;
    void *user;
    int next_free;
    int blocked_prev, blocked_next; /* queue of BLOCKED sends */
    /* failover */
    uint8_t *where;     /* per unit, UNIT_* or the lane it went by (in WHERE_BUF) */
    uint8_t *where_buf; /* owned, kept from one message of the entry to the next */
    uint32_t where_cap;
    uint32_t nunits;    /* units of the message */
    uint32_t to_resend; /* units marked UNIT_RESEND */
    uint32_t rescan;    /* no UNIT_RESEND below this unit */
    uint32_t resent;    /* units handed out again, to bound a lane that loses all */
    int confirmed;      /* the receiver has it all */
} send_t;

typedef struct {
    icbc_stripe_slot_state_t state;
    uint32_t gen;
    int peer;
    char *dest; /* the caller's; NULL: chunks go through ops->place */
    size_t size;
    size_t received;   /* bytes whose chunk ended well */
    size_t unit;       /* length of every chunk but the last (our chunk size) */
    uint8_t *seen;     /* one bit per chunk, set when it began (in SEEN_BUF) */
    uint8_t *arrived;  /* failover: one bit per chunk, set when it is in place (in
                       * SEEN_BUF too); a second copy may stream meanwhile */
    uint8_t *seen_buf; /* owned, kept from one message of the slot to the next */
    size_t seen_cap;
    int streaming; /* chunks begun and not ended: until they end they may write
                       * to DEST, so the receive completes only after them */
    double t_last;
    void *user;
    int next_free;
    uint64_t cookie; /* the sender's, for confirmations */
} slot_t;

/* A chunk with a lane: the token the lane reports it by names this. */
typedef struct {
    uint32_t gen;
    int send; /* index, NONE when free */
    uint32_t send_gen;
    uint32_t unit;
    int lane;
    size_t len;
    int next_free;
} flight_t;

/* A lane as placement sees it. */
typedef struct {
    uint64_t inflight;    /* bytes handed to it, not reported yet */
    uint64_t undelivered; /* feedback: handed to it, not reported delivered */
    uint64_t sent;        /* bytes reported sent, in all */
    uint64_t win_bytes;   /* moved in the current window */
    double win_start;     /* when the lane last got work; 0: it has none */
    double win_busy;      /* seconds with work in the current window, before win_start */
    double rate;          /* bytes/s lately */
    int measured;         /* rate holds a measurement */
} lane_t;

typedef struct {
    int peer;
    uint32_t slot, gen;
    uint64_t cookie;
} done_t;

#ifndef NDEBUG
#define TRANSITIONS_KEPT 64
typedef struct {
    char table; /* 's' send, 'r' receive slot */
    int index;
    uint32_t gen;
    uint8_t from, to;
} transition_t;
#endif

struct icbc_stripe {
    icbc_stripe_config_t cfg;
    icbc_stripe_ops_t ops;
    void *ctx;
    send_t *sends;
    int nsends, free_send;
    slot_t *slots;
    int nslots, free_slot;
    flight_t *flights;
    int nflights, free_flight;
    uint64_t lanes_down; /* bit per lane */
    lane_t lanes[ICBC_STRIPE_LANES_MAX];
    int nlanes_seen; /* the most lanes a peer had: lanes measured */
    done_t done[DONE_KEPT];
    unsigned ndone;
    int blocked_head, blocked_tail;
    double *seen; /* per peer: when anything last arrived from it */
    int nseen;
    double last_scan;
    icbc_stripe_stats_t stats;
#ifndef NDEBUG
    transition_t log[TRANSITIONS_KEPT];
    unsigned nlog;
#endif
};

#define STATE_NAME_(name) #name,
static const char *send_state_names[] = { ICBC_STRIPE_SEND_STATES(STATE_NAME_) };
static const char *slot_state_names[] = { ICBC_STRIPE_SLOT_STATES(STATE_NAME_) };
#undef STATE_NAME_

const char *icbc_stripe_placement_str(icbc_stripe_placement_t placement)
{
    switch (placement) {
    case ICBC_STRIPE_PLACE_WINDOW: return "window";
    case ICBC_STRIPE_PLACE_ROUND_ROBIN: return "round-robin";
    case ICBC_STRIPE_PLACE_ADAPTIVE: return "adaptive";
    default: return "?";
    }
}

icbc_status_t icbc_stripe_placement_from_str(const char *name, icbc_stripe_placement_t *placement)
{
    for (int p = ICBC_STRIPE_PLACE_WINDOW; p <= ICBC_STRIPE_PLACE_ADAPTIVE; p++)
        if (strcmp(name, icbc_stripe_placement_str((icbc_stripe_placement_t) p)) == 0) {
            *placement = (icbc_stripe_placement_t) p;
            return ICBC_OK;
        }
    return ICBC_ERR_INVALID;
}

const char *icbc_stripe_send_state_str(icbc_stripe_send_state_t state)
{
    return (unsigned) state < sizeof(send_state_names) / sizeof(send_state_names[0])
               ? send_state_names[state]
               : "?";
}

const char *icbc_stripe_slot_state_str(icbc_stripe_slot_state_t state)
{
    return (unsigned) state < sizeof(slot_state_names) / sizeof(slot_state_names[0])
               ? slot_state_names[state]
               : "?";
}

/* ---- state transitions --------------------------------------------------- */

static void note_transition(icbc_stripe_t *st, char table, int index, uint32_t gen, int from,
                            int to)
{
#ifndef NDEBUG
    transition_t *t = &st->log[st->nlog++ % TRANSITIONS_KEPT];
    t->table = table;
    t->index = index;
    t->gen = gen;
    t->from = (uint8_t) from;
    t->to = (uint8_t) to;
#else
    (void) st;
    (void) table;
    (void) index;
    (void) gen;
    (void) from;
    (void) to;
#endif
}

static void send_set_state(icbc_stripe_t *st, int i, icbc_stripe_send_state_t to)
{
    send_t *s = &st->sends[i];
    note_transition(st, 's', i, s->gen, s->state, to);
    s->state = to;
}

static void slot_set_state(icbc_stripe_t *st, int i, icbc_stripe_slot_state_t to)
{
    slot_t *s = &st->slots[i];
    note_transition(st, 'r', i, s->gen, s->state, to);
    s->state = to;
}

/* Generations skip 0, so that a zeroed header never names a live entry. */
static uint32_t next_gen(uint32_t gen)
{
    return gen + 1 ? gen + 1 : 1;
}

/* ---- tables -------------------------------------------------------------- */

static int send_alloc(icbc_stripe_t *st)
{
    if (st->free_send == NONE) {
        int n = st->nsends ? 2 * st->nsends : 64;
        send_t *v = realloc(st->sends, n * sizeof(*v));
        if (v == NULL)
            return NONE;
        for (int i = n - 1; i >= st->nsends; i--) {
            memset(&v[i], 0, sizeof(v[i]));
            v[i].gen = st->cfg.first_gen;
            v[i].next_free = st->free_send;
            st->free_send = i;
        }
        st->sends = v;
        st->nsends = n;
    }
    int i = st->free_send;
    st->free_send = st->sends[i].next_free;
    st->stats.active_sends++;
    return i;
}

static void send_free(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];
    uint32_t gen = next_gen(s->gen);

    uint8_t *buf = s->where_buf;
    uint32_t cap = s->where_cap;

    send_set_state(st, i, ICBC_STRIPE_SEND_FREE);
    memset(s, 0, sizeof(*s));
    s->gen = gen;
    s->where_buf = buf;
    s->where_cap = cap;
    s->next_free = st->free_send;
    st->free_send = i;
    st->stats.active_sends--;
}

static int slot_alloc(icbc_stripe_t *st)
{
    if (st->free_slot == NONE) {
        int n = st->nslots ? 2 * st->nslots : 64;
        slot_t *v = realloc(st->slots, n * sizeof(*v));
        if (v == NULL)
            return NONE;
        for (int i = n - 1; i >= st->nslots; i--) {
            memset(&v[i], 0, sizeof(v[i]));
            v[i].gen = st->cfg.first_gen;
            v[i].next_free = st->free_slot;
            st->free_slot = i;
        }
        st->slots = v;
        st->nslots = n;
    }
    int i = st->free_slot;
    st->free_slot = st->slots[i].next_free;
    st->stats.active_slots++;
    return i;
}

static void slot_free(icbc_stripe_t *st, int i)
{
    slot_t *s = &st->slots[i];
    uint32_t gen = next_gen(s->gen);

    uint8_t *buf = s->seen_buf;
    size_t cap = s->seen_cap;

    slot_set_state(st, i, ICBC_STRIPE_SLOT_FREE);
    memset(s, 0, sizeof(*s));
    s->gen = gen;
    s->seen_buf = buf;
    s->seen_cap = cap;
    s->next_free = st->free_slot;
    st->free_slot = i;
    st->stats.active_slots--;
}

static slot_t *slot_lookup(icbc_stripe_t *st, uint32_t slot, uint32_t gen, int peer)
{
    if (slot >= (uint32_t) st->nslots)
        return NULL;
    slot_t *s = &st->slots[slot];
    return (s->state == ICBC_STRIPE_SLOT_RECEIVING && s->gen == gen && s->peer == peer) ? s : NULL;
}

static int flight_alloc(icbc_stripe_t *st)
{
    if (st->free_flight == NONE) {
        int n = st->nflights ? 2 * st->nflights : 64;
        flight_t *v = realloc(st->flights, n * sizeof(*v));
        if (v == NULL)
            return NONE;
        for (int i = n - 1; i >= st->nflights; i--) {
            memset(&v[i], 0, sizeof(v[i]));
            v[i].gen = 1;
            v[i].send = NONE;
            v[i].next_free = st->free_flight;
            st->free_flight = i;
        }
        st->flights = v;
        st->nflights = n;
    }
    int i = st->free_flight;
    st->free_flight = st->flights[i].next_free;
    return i;
}

static void flight_free(icbc_stripe_t *st, int i)
{
    flight_t *f = &st->flights[i];

    f->gen = next_gen(f->gen);
    f->send = NONE;
    f->next_free = st->free_flight;
    st->free_flight = i;
}

/* ---- queue of blocked sends ---------------------------------------------- */

static void blocked_push(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];

    s->blocked_prev = st->blocked_tail;
    s->blocked_next = NONE;
    if (st->blocked_tail == NONE)
        st->blocked_head = i;
    else
        st->sends[st->blocked_tail].blocked_next = i;
    st->blocked_tail = i;
    st->stats.blocked_sends++;
    send_set_state(st, i, ICBC_STRIPE_SEND_BLOCKED);
}

static void blocked_remove(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];

    if (s->blocked_prev == NONE)
        st->blocked_head = s->blocked_next;
    else
        st->sends[s->blocked_prev].blocked_next = s->blocked_next;
    if (s->blocked_next == NONE)
        st->blocked_tail = s->blocked_prev;
    else
        st->sends[s->blocked_next].blocked_prev = s->blocked_prev;
    s->blocked_prev = s->blocked_next = NONE;
    st->stats.blocked_sends--;
}

/* ---- create / destroy ---------------------------------------------------- */

icbc_status_t icbc_stripe_create(const icbc_stripe_config_t *config, const icbc_stripe_ops_t *ops,
                                 void *ctx, icbc_stripe_t **stripe_p)
{
    icbc_stripe_t *st = calloc(1, sizeof(*st));

    if (st == NULL)
        return ICBC_ERR_NO_MEMORY;
    st->cfg = *config;
    if (st->cfg.chunk_size < ICBC_STRIPE_CHUNK_MIN)
        st->cfg.chunk_size = ICBC_STRIPE_CHUNK_MIN;
    if (st->cfg.chunk_size > ICBC_STRIPE_CHUNK_MAX)
        st->cfg.chunk_size = ICBC_STRIPE_CHUNK_MAX;
    if (st->cfg.first_gen == 0)
        st->cfg.first_gen = 1;
    if (st->cfg.rate_window <= 0)
        st->cfg.rate_window = 0.25;
    if ((unsigned) st->cfg.placement > ICBC_STRIPE_PLACE_ADAPTIVE ||
        (st->cfg.failover && ops->confirm == NULL)) {
        free(st);
        return ICBC_ERR_INVALID;
    }
    st->ops = *ops;
    st->ctx = ctx;
    st->free_send = st->free_slot = st->free_flight = NONE;
    st->blocked_head = st->blocked_tail = NONE;
    *stripe_p = st;
    return ICBC_OK;
}

void icbc_stripe_destroy(icbc_stripe_t *st)
{
    if (st == NULL)
        return;
    for (int i = 0; i < st->nslots; i++)
        free(st->slots[i].seen_buf);
    for (int i = 0; i < st->nsends; i++)
        free(st->sends[i].where_buf);
    free(st->sends);
    free(st->slots);
    free(st->flights);
    free(st->seen);
    free(st);
}

/* ---- liveness ------------------------------------------------------------ */

void icbc_stripe_peer_seen(icbc_stripe_t *st, int peer, double now)
{
    if (peer < 0)
        return;
    if (peer >= st->nseen) {
        int n = peer + 1 > 2 * st->nseen ? peer + 1 : 2 * st->nseen;
        double *v = realloc(st->seen, n * sizeof(*v));
        if (v == NULL)
            return; /* only weakens stall detection towards a busy peer */
        for (int i = st->nseen; i < n; i++)
            v[i] = 0;
        st->seen = v;
        st->nseen = n;
    }
    st->seen[peer] = now;
}

/* A transfer is stalled only when nothing at all arrives from its peer: with
 * thousands of transfers queued behind each other (e.g. 100,000 MPI_Get
 * replies), one may wait far longer than the timeout for its turn while the
 * path is busy with the others. */
static double last_heard(const icbc_stripe_t *st, double t_last, int peer)
{
    return (peer < st->nseen && st->seen[peer] > t_last) ? st->seen[peer] : t_last;
}

/* ---- send side ----------------------------------------------------------- */

static uint64_t make_id(uint32_t gen, int index)
{
    return ((uint64_t) gen << 32) | (uint32_t) index;
}

static void send_finish(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];
    void *user = s->user;
    icbc_status_t status = s->error;
    const char *why = s->why;

    if (s->state == ICBC_STRIPE_SEND_BLOCKED)
        blocked_remove(st, i);
    send_free(st, i);
    st->ops.send_complete(st->ctx, user, status, why);
}

static void send_fail(send_t *s, icbc_status_t status, const char *why)
{
    if (s->error == ICBC_OK) {
        s->error = status;
        s->why = why;
    }
}

static int lane_down(const icbc_stripe_t *st, int lane)
{
    return lane < ICBC_STRIPE_LANES_MAX && (st->lanes_down >> lane) & 1;
}

static int send_has_work(const send_t *s)
{
    return s->error == ICBC_OK && !s->confirmed && (s->to_resend > 0 || s->next < s->size);
}

/* Ends the send once no lane holds a chunk of it and it needs nothing
 * more: every chunk handed out (and, with failover, confirmed), or failed. */
static void send_settle(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];

    if (s->outstanding > 0)
        return;
    if (s->confirmed) {
        s->error = ICBC_OK; /* the receiver has it, whatever a lane said */
        send_finish(st, i);
    } else if (s->error != ICBC_OK || (s->where == NULL && s->next >= s->size)) {
        send_finish(st, i);
    } else if (!send_has_work(s) && s->state != ICBC_STRIPE_SEND_WAIT_ACK) {
        if (s->state == ICBC_STRIPE_SEND_BLOCKED)
            blocked_remove(st, i);
        send_set_state(st, i, ICBC_STRIPE_SEND_WAIT_ACK);
    }
}

/* Failover: unit U goes again. */
static void mark_resend(send_t *s, uint32_t u)
{
    if (s->where[u] == UNIT_RESEND)
        return;
    s->where[u] = UNIT_RESEND;
    s->to_resend++;
    if (u < s->rescan)
        s->rescan = u;
}

/* Chunks to hand out again outside send_pump: progress does it. */
static void send_schedule(icbc_stripe_t *st, int i)
{
    send_t *s = &st->sends[i];

    if (s->state == ICBC_STRIPE_SEND_DRAINING || s->state == ICBC_STRIPE_SEND_WAIT_ACK)
        blocked_push(st, i);
    /* SENDING: the running send_pump takes them; BLOCKED: queued already */
}

static void lane_moved(icbc_stripe_t *st, lane_t *ln, uint64_t bytes, double now);

void icbc_stripe_chunk_sent(icbc_stripe_t *st, uint64_t token, int ok, double now)
{
    uint32_t fi = (uint32_t) token, fgen = (uint32_t) (token >> 32);
    flight_t *f;
    send_t *s;

    if (fi >= (uint32_t) st->nflights || (f = &st->flights[fi])->gen != fgen || f->send == NONE)
        return; /* a lane reporting twice; nothing of ours */
    int i = f->send, lane = f->lane;
    uint32_t sgen = f->send_gen, u = f->unit;
    lane_t *ln = &st->lanes[lane];
    ln->inflight -= f->len;
    if (ok) {
        ln->sent += f->len;
        if (!st->cfg.feedback)
            lane_moved(st, ln, f->len, now);
    }
    flight_free(st, (int) fi);
    s = &st->sends[i];
    if (s->gen != sgen || s->state == ICBC_STRIPE_SEND_FREE || s->outstanding == 0)
        return;
    s->outstanding--;
    s->t_last = now;
    if (s->where != NULL) {
        if (ok && !lane_down(st, lane)) {
            s->where[u] = (uint8_t) lane;
        } else if (!s->confirmed) {
            /* lost, or on a lane since lost: the chunk goes again */
            st->stats.chunks_lost++;
            mark_resend(s, u);
            send_schedule(st, i);
        }
    } else if (!ok) {
        send_fail(s, ICBC_ERR_PEER_FAILED, "a chunk was lost on its lane");
    }
    send_settle(st, i);
}

/* The next unit to hand out: one to send again, else the next new one.
 * Returns 0 when there is none. */
static int next_unit(send_t *s, uint32_t *u, int *again)
{
    if (s->to_resend > 0) {
        for (; s->rescan < s->nunits; s->rescan++) {
            if (s->where[s->rescan] == UNIT_RESEND) {
                *u = s->rescan;
                *again = 1;
                return 1;
            }
        }
    }
    if (s->next < s->size) {
        *u = (uint32_t) (s->next / s->chunk_size);
        *again = 0;
        return 1;
    }
    return 0;
}

/* ---- placement ------------------------------------------------------------ */

/* A lane's rate is measured while it has work: a window opens when an idle
 * lane is handed a chunk and closes after rate_window, or when the lane
 * runs dry; its rate is what the lane delivered in it (averaged with the
 * last). An idle lane keeps its rate (time without work says nothing of
 * its speed); a lane that holds chunks and delivers nothing goes towards 0. */
static uint64_t lane_load(const icbc_stripe_t *st, const lane_t *ln)
{
    return st->cfg.feedback ? ln->undelivered : ln->inflight;
}

/* Seconds LN had work in its current window, up to NOW. */
static double lane_busy(const lane_t *ln, double now)
{
    return ln->win_busy + (ln->win_start > 0 ? now - ln->win_start : 0);
}

/* The window is over: its rate goes into the lane's. */
static void lane_close(lane_t *ln, double now)
{
    double busy = lane_busy(ln, now);

    if (busy > 0) {
        double r = (double) ln->win_bytes / busy;
        ln->rate = ln->measured ? 0.5 * ln->rate + 0.5 * r : r;
        ln->measured = 1;
    }
    ln->win_bytes = 0;
    ln->win_busy = 0;
    if (ln->win_start > 0)
        ln->win_start = now;
}

/* BYTES went through LN (sent, or with feedback delivered). A lane that
 * runs dry stops its window's clock until it gets work again. */
static void lane_moved(icbc_stripe_t *st, lane_t *ln, uint64_t bytes, double now)
{
    ln->win_bytes += bytes;
    if (lane_load(st, ln) == 0 && ln->win_start > 0) {
        ln->win_busy += now - ln->win_start;
        ln->win_start = 0;
    }
    if (lane_busy(ln, now) >= st->cfg.rate_window)
        lane_close(ln, now);
}

/* Closes the windows that are over (a lane that stalls shows it here). */
static void lanes_measure(icbc_stripe_t *st, double now)
{
    for (int l = 0; l < st->nlanes_seen; l++) {
        lane_t *ln = &st->lanes[l];
        if (ln->win_start > 0 && lane_busy(ln, now) >= st->cfg.rate_window)
            lane_close(ln, now);
    }
}

/* The lanes to offer a chunk of LEN bytes of send S, best first, in
 * ORDER; returns how many. Adaptive placement offers it only to the lanes
 * that would deliver it about as soon as the best one (EST within 2%): when
 * those are busy, waiting for them finishes sooner than a slower lane would
 * (a slow lane's queue of chunks is the last part of a message to arrive). */
static int lanes_order(icbc_stripe_t *st, send_t *s, int nlanes, size_t len, int *order)
{
    int n = 0;

    if (st->ops.lane_for) {
        int only = st->ops.lane_for(st->ctx, s->peer);
        if (only >= 0) {
            if (only >= nlanes || lane_down(st, only))
                return 0;
            order[0] = only;
            return 1;
        }
    }
    if (st->ops.home_lane && s->size <= s->chunk_size) {
        int home = st->ops.home_lane(st->ctx, s->peer);
        if (home >= 0 && home < nlanes && !lane_down(st, home)) {
            order[0] = home;
            return 1;
        }
    }
    for (int k = 0; k < nlanes; k++) {
        int lane = (s->lane + k) % nlanes;
        if (!lane_down(st, lane))
            order[n++] = lane;
    }
    if (st->cfg.placement == ICBC_STRIPE_PLACE_ROUND_ROBIN)
        return n > 0 ? 1 : 0;
    if (st->cfg.placement != ICBC_STRIPE_PLACE_ADAPTIVE || n < 2)
        return n;
    /* expected time to deliver what the lane holds and this chunk; a lane
     * not measured yet counts at the mean rate of those that are (when none
     * is, the bytes held decide) */
    double est[ICBC_STRIPE_LANES_MAX], sum = 0;
    int known = 0;
    for (int k = 0; k < n; k++)
        if (st->lanes[order[k]].measured) {
            sum += st->lanes[order[k]].rate;
            known++;
        }
    double mean = known ? sum / known : 0;
    for (int k = 0; k < n; k++) {
        const lane_t *ln = &st->lanes[order[k]];
        double rate = ln->measured ? ln->rate : mean;
        double bytes = (double) ((st->cfg.feedback ? ln->undelivered : ln->inflight) + len);
        est[k] = known == 0 ? bytes : rate > 0 ? bytes / rate : 1e300;
    }
    /* stable: equal estimates keep the rotation's order */
    for (int k = 1; k < n; k++)
        for (int j = k; j > 0 && est[j] < est[j - 1]; j--) {
            double te = est[j];
            int tl = order[j];
            est[j] = est[j - 1];
            order[j] = order[j - 1];
            est[j - 1] = te;
            order[j - 1] = tl;
        }
    int good = 1;
    while (good < n && est[good] <= 1.02 * est[0])
        good++;
    return good;
}

void icbc_stripe_lane_stats(const icbc_stripe_t *st, int lane, icbc_stripe_lane_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (lane < 0 || lane >= ICBC_STRIPE_LANES_MAX)
        return;
    out->inflight = st->lanes[lane].inflight;
    out->undelivered = st->lanes[lane].undelivered;
    out->sent = st->lanes[lane].sent;
    out->rate = st->lanes[lane].measured ? st->lanes[lane].rate : 0;
    out->down = lane_down(st, lane);
}

/* Hands chunks to lanes until all are handed out or every lane is busy. */
static void send_pump(icbc_stripe_t *st, int i, double now)
{
    send_t *s = &st->sends[i];
    int nlanes = st->ops.nlanes(st->ctx, s->peer);
    uint32_t u;
    int again;

    if (nlanes < 1)
        nlanes = 1;
    if (nlanes > ICBC_STRIPE_LANES_MAX)
        nlanes = ICBC_STRIPE_LANES_MAX;
    if (nlanes > st->nlanes_seen)
        st->nlanes_seen = nlanes;
    if (st->cfg.placement == ICBC_STRIPE_PLACE_ADAPTIVE)
        lanes_measure(st, now);
    if (s->state == ICBC_STRIPE_SEND_BLOCKED)
        blocked_remove(st, i);
    send_set_state(st, i, ICBC_STRIPE_SEND_SENDING);
    /* A reference of our own, so that a chunk reported sent inside
     * send_chunk cannot finish the send while this loop runs. */
    s->outstanding++;
    while (send_has_work(s) && next_unit(s, &u, &again)) {
        uint64_t off = (uint64_t) u * s->chunk_size;
        icbc_stripe_chunk_t c = {
            .slot = s->slot,
            .gen = s->slot_gen,
            .offset = off,
            .len = s->size - off < s->chunk_size ? s->size - off : s->chunk_size,
        };
        const void *data = s->base + off;
        icbc_status_t rc = ICBC_ERR_BUSY;
        int tried = 0, refused = 0;

        /* counted when a lane takes it: a resend that waits for a busy lane
         * is tried again without having been lost again */
        if (again && s->resent > 4 * s->nunits + 16) {
            send_fail(s, ICBC_ERR_PEER_FAILED, "chunks were lost on every lane, again and again");
            break;
        }
        /* the lanes in the placement's order; a busy one passes the chunk on */
        int order[ICBC_STRIPE_LANES_MAX];
        int norder = lanes_order(st, s, nlanes, c.len, order);
        int lane = -1;
        for (int k = 0; k < norder && rc != ICBC_OK; k++) {
            lane = order[k];
            int fi = flight_alloc(st);
            if (fi == NONE) {
                rc = ICBC_ERR_NO_MEMORY;
                break;
            }
            flight_t *f = &st->flights[fi];
            f->send = i;
            f->send_gen = s->gen;
            f->unit = u;
            f->lane = lane;
            f->len = c.len;
            uint64_t token = make_id(f->gen, fi);
            tried++;
            s->outstanding++;
            if (st->lanes[lane].win_start == 0 && lane_load(st, &st->lanes[lane]) == 0)
                st->lanes[lane].win_start = now; /* it had nothing: its window opens */
            st->lanes[lane].inflight += c.len;
            if (s->where != NULL)
                s->where[u] = UNIT_FLYING;
            rc = st->ops.send_chunk(st->ctx, s->peer, lane, &c, data, token);
            /* completions inside the call may have grown (moved) the tables */
            s = &st->sends[i];
            if (rc == ICBC_OK)
                break;
            s->outstanding--;
            st->lanes[lane].inflight -= c.len;
            flight_free(st, fi);
            if (s->where != NULL)
                s->where[u] = again ? UNIT_RESEND : UNIT_NEW;
            if (rc != ICBC_ERR_BUSY) {
                refused++;
                if (s->where == NULL)
                    break; /* without failover a broken lane fails the send */
                rc = ICBC_ERR_BUSY;
            }
        }
        if (rc == ICBC_OK) {
            if (st->cfg.feedback)
                st->lanes[lane].undelivered += c.len;
            s->lane = (lane + 1) % nlanes; /* the next chunk starts after it */
            st->stats.chunks_sent++;
            if (again) {
                s->resent++;
                st->stats.chunks_resent++;
                s->to_resend--;
                if (s->rescan == u) /* unless a report inside the call marked one below */
                    s->rescan = u + 1;
            } else {
                s->next += c.len;
            }
            continue;
        }
        if (tried == 0 && rc == ICBC_ERR_BUSY) {
            send_fail(s, ICBC_ERR_PEER_FAILED, "every lane is lost");
            break;
        }
        if (rc == ICBC_ERR_BUSY && refused == tried) {
            send_fail(s, ICBC_ERR_PEER_FAILED, "every lane refused a chunk");
            break;
        }
        if (rc == ICBC_ERR_BUSY) {
            blocked_push(st, i);
            break;
        }
        send_fail(s, rc, rc == ICBC_ERR_NO_MEMORY ? "out of memory" : "a lane refused a chunk");
        break;
    }
    if (s->state == ICBC_STRIPE_SEND_SENDING)
        send_set_state(st, i, ICBC_STRIPE_SEND_DRAINING);
    s->outstanding--;
    s->t_last = now;
    send_settle(st, i);
}

icbc_status_t icbc_stripe_send_confirmed(icbc_stripe_t *st, int peer, uint64_t cookie, double now)
{
    uint32_t i = (uint32_t) cookie, gen = (uint32_t) (cookie >> 32);
    send_t *s;

    if (i >= (uint32_t) st->nsends || (s = &st->sends[i])->gen != gen || s->peer != peer ||
        s->where == NULL || s->confirmed)
        return ICBC_ERR_INVALID;
    s->confirmed = 1;
    s->t_last = now;
    if (s->state == ICBC_STRIPE_SEND_BLOCKED) {
        blocked_remove(st, (int) i);
        send_set_state(st, (int) i, ICBC_STRIPE_SEND_DRAINING);
    }
    /* chunks still with a lane report back; the last one finishes it */
    send_settle(st, (int) i);
    return ICBC_OK;
}

void icbc_stripe_lane_lost(icbc_stripe_t *st, int lane, double now)
{
    if (lane < 0 || lane >= ICBC_STRIPE_LANES_MAX || lane_down(st, lane))
        return;
    st->lanes_down |= (uint64_t) 1 << lane;
    st->stats.lanes_lost++;
    /* reports of what went by it, and some of the others' that travelled
     * with it, are lost: every lane's load starts again from what follows */
    for (int l = 0; l < ICBC_STRIPE_LANES_MAX; l++)
        st->lanes[l].undelivered = 0;
    for (int i = 0; i < st->nsends; i++) {
        send_t *s = &st->sends[i];
        uint32_t lost = 0;
        if (s->state == ICBC_STRIPE_SEND_FREE || s->where == NULL || s->confirmed ||
            s->error != ICBC_OK)
            continue;
        /* chunks the lane reported sent may have died with it; those it
         * still holds are marked when it reports them */
        for (uint32_t u = 0; u < s->nunits; u++) {
            if (s->where[u] == (uint8_t) lane) {
                mark_resend(s, u);
                lost++;
            }
        }
        st->stats.chunks_lost += lost;
        if (lost > 0) {
            s->t_last = now;
            send_schedule(st, i);
        }
    }
}

void icbc_stripe_lane_delivered(icbc_stripe_t *st, int lane, size_t bytes, double now)
{
    lane_t *ln;

    if (!st->cfg.feedback || lane < 0 || lane >= ICBC_STRIPE_LANES_MAX)
        return;
    ln = &st->lanes[lane];
    ln->undelivered -= bytes < ln->undelivered ? bytes : ln->undelivered;
    lane_moved(st, ln, bytes, now);
}

/* A lane back is a new one (a restarted router, a new registration):
 * what was measured of it before, often a rate of nothing while it held
 * chunks it could no longer deliver, says nothing of it. Adaptive
 * placement counts it at the others' mean until it is measured again;
 * kept, a rate of 0 would never offer it a chunk to measure. */
void icbc_stripe_lane_revived(icbc_stripe_t *st, int lane)
{
    lane_t *ln;

    if (lane < 0 || lane >= ICBC_STRIPE_LANES_MAX)
        return;
    st->lanes_down &= ~((uint64_t) 1 << lane);
    ln = &st->lanes[lane];
    ln->measured = 0;
    ln->rate = 0;
    ln->win_bytes = 0;
    ln->win_busy = 0;
    ln->win_start = 0;
}

icbc_status_t icbc_stripe_send_start(icbc_stripe_t *st, int peer, const void *base, size_t size,
                                     void *user, double now, uint64_t *cookie)
{
    int i;

    if (size == 0)
        return ICBC_ERR_INVALID; /* nothing to stripe: send it whole */
    if ((i = send_alloc(st)) == NONE)
        return ICBC_ERR_NO_MEMORY;
    send_t *s = &st->sends[i];
    s->peer = peer;
    s->base = base;
    s->size = size;
    s->user = user;
    s->t_last = now;
    s->blocked_prev = s->blocked_next = NONE;
    send_set_state(st, i, ICBC_STRIPE_SEND_WAIT_CTS);
    *cookie = make_id(s->gen, i);
    return ICBC_OK;
}

void icbc_stripe_send_cancel(icbc_stripe_t *st, uint64_t cookie)
{
    uint32_t i = (uint32_t) cookie, gen = (uint32_t) (cookie >> 32);

    if (i < (uint32_t) st->nsends && st->sends[i].gen == gen &&
        st->sends[i].state == ICBC_STRIPE_SEND_WAIT_CTS)
        send_free(st, (int) i);
}

icbc_status_t icbc_stripe_cts(icbc_stripe_t *st, int peer, uint64_t cookie,
                              const icbc_stripe_cts_t *cts, double now)
{
    uint32_t i = (uint32_t) cookie, sgen = (uint32_t) (cookie >> 32);
    send_t *s;

    if (i >= (uint32_t) st->nsends || (s = &st->sends[i])->gen != sgen ||
        s->state != ICBC_STRIPE_SEND_WAIT_CTS || s->peer != peer ||
        (cts->slot != ICBC_STRIPE_SLOT_DISCARD &&
         (cts->chunk_size < ICBC_STRIPE_CHUNK_MIN || cts->chunk_size > ICBC_STRIPE_CHUNK_MAX))) {
        st->stats.dropped_cts++;
        return ICBC_ERR_INVALID;
    }
    s->t_last = now;
    if (cts->slot == ICBC_STRIPE_SLOT_DISCARD) {
        s->next = s->size;
        send_finish(st, (int) i);
        return ICBC_OK;
    }
    s->slot = cts->slot;
    s->slot_gen = cts->gen;
    s->chunk_size = cts->chunk_size;
    if (st->cfg.failover) {
        s->nunits = (uint32_t) ((s->size + s->chunk_size - 1) / s->chunk_size);
        if (s->nunits > s->where_cap) { /* the entry's largest message so far */
            uint8_t *b = realloc(s->where_buf, s->nunits);
            if (b == NULL) {
                send_fail(s, ICBC_ERR_NO_MEMORY, "out of memory");
                send_finish(st, (int) i);
                return ICBC_OK;
            }
            s->where_buf = b;
            s->where_cap = s->nunits;
        }
        s->where = s->where_buf;
        memset(s->where, UNIT_NEW, s->nunits);
    }
    /* senders start on different lanes, so that many transfers at once
     * spread over the lanes from their first chunk */
    int nlanes = st->ops.nlanes(st->ctx, peer);
    s->lane = (int) ((i + (uint32_t) peer) % (uint32_t) (nlanes > 0 ? nlanes : 1));
    send_pump(st, (int) i, now);
    return ICBC_OK;
}

/* ---- receive side -------------------------------------------------------- */

icbc_status_t icbc_stripe_recv_start(icbc_stripe_t *st, int peer, uint64_t cookie, size_t size,
                                     void *dest, void *user, double now, icbc_stripe_cts_t *cts)
{
    size_t unit = st->cfg.chunk_size;
    size_t nunits = (size + unit - 1) / unit;
    size_t bytes = (nunits + 7) / 8 * (st->cfg.failover ? 2 : 1);
    uint8_t *seen;
    int i;

    if (size == 0)
        return ICBC_ERR_INVALID;
    if ((i = slot_alloc(st)) == NONE)
        return ICBC_ERR_NO_MEMORY;
    slot_t *s = &st->slots[i];
    if (bytes > s->seen_cap) { /* the slot's largest message so far */
        uint8_t *b = realloc(s->seen_buf, bytes);
        if (b == NULL) {
            slot_free(st, i);
            return ICBC_ERR_NO_MEMORY;
        }
        s->seen_buf = b;
        s->seen_cap = bytes;
    }
    seen = s->seen_buf;
    memset(seen, 0, bytes);
    s->unit = unit;
    s->seen = seen;
    s->arrived = st->cfg.failover ? seen + (nunits + 7) / 8 : NULL;
    s->peer = peer;
    s->size = size;
    s->dest = dest;
    s->user = user;
    s->t_last = now;
    s->cookie = cookie;
    slot_set_state(st, i, ICBC_STRIPE_SLOT_RECEIVING);
    cts->slot = (uint32_t) i;
    cts->gen = s->gen;
    cts->chunk_size = unit;
    return ICBC_OK;
}

static void slot_complete(icbc_stripe_t *st, int i, icbc_status_t status, const char *why)
{
    slot_t *s = &st->slots[i];
    void *user = s->user;

    if (st->cfg.failover && status == ICBC_OK) {
        done_t *d = &st->done[st->ndone++ % DONE_KEPT];
        d->peer = s->peer;
        d->slot = (uint32_t) i;
        d->gen = s->gen;
        d->cookie = s->cookie;
        st->stats.confirmations++;
        st->ops.confirm(st->ctx, s->peer, s->cookie);
        s = &st->slots[i];
    }
    slot_free(st, i);
    st->ops.recv_complete(st->ctx, user, status, why);
}

/* Every chunk of a message is one unit long (the receiver's chunk size,
 * sent in its CTS), but the last: a duplicate (e.g. a chunk sent again
 * through another router) is one bit to test, any other overlap is a
 * protocol error. */
static icbc_status_t chunk_claim(slot_t *s, const icbc_stripe_chunk_t *c)
{
    if (c->offset >= s->size || c->offset % s->unit != 0 ||
        c->len != (s->size - c->offset < s->unit ? s->size - c->offset : s->unit))
        return ICBC_ERR_INVALID;
    size_t u = c->offset / s->unit;
    uint8_t bit = (uint8_t) (1u << (u % 8));
    /* with failover, a copy may come while the first still streams (its
     * router dying under it): both may stream, the first whole one counts */
    if (s->arrived ? (s->arrived[u / 8] & bit) != 0 : (s->seen[u / 8] & bit) != 0)
        return ICBC_ERR_INVALID;
    s->seen[u / 8] |= bit;
    return ICBC_OK;
}

/* A chunk of a receive completed not long ago came again (sent once more
 * after its lane was lost): the confirmation may have been lost with the
 * lane, so it goes again. */
static void confirm_again(icbc_stripe_t *st, int peer, const icbc_stripe_chunk_t *c)
{
    if (!st->cfg.failover)
        return;
    for (unsigned k = 0; k < DONE_KEPT && k < st->ndone; k++) {
        const done_t *d = &st->done[(st->ndone - 1 - k) % DONE_KEPT];
        if (d->peer == peer && d->slot == c->slot && d->gen == c->gen) {
            st->stats.late_chunks++;
            st->stats.confirmations++;
            st->ops.confirm(st->ctx, peer, d->cookie);
            return;
        }
    }
}

icbc_status_t icbc_stripe_chunk_begin(icbc_stripe_t *st, int peer, const icbc_stripe_chunk_t *c,
                                      icbc_stripe_rx_t *rx, void **data_dest)
{
    slot_t *s = slot_lookup(st, c->slot, c->gen, peer);
    icbc_status_t rc;

    memset(rx, 0, sizeof(*rx));
    *data_dest = NULL;
    if (s == NULL) {
        st->stats.dropped_chunks++;
        confirm_again(st, peer, c);
        return ICBC_ERR_NOT_FOUND;
    }
    rc = chunk_claim(s, c);
    if (rc != ICBC_OK) {
        st->stats.duplicate_chunks++;
        return rc;
    }
    s->streaming++;
    rx->slot = c->slot;
    rx->gen = c->gen;
    rx->peer = peer;
    rx->offset = c->offset;
    rx->len = c->len;
    if (s->dest) {
        *data_dest = s->dest + c->offset;
    } else {
        rx->staging = malloc(c->len);
        if (rx->staging == NULL)
            return ICBC_ERR_NO_MEMORY;
        *data_dest = rx->staging;
    }
    return ICBC_OK;
}

/* Every byte of slot I is in place and no copy of a chunk still streams
 * into its buffer: the receive completes. */
static void slot_complete_if_whole(icbc_stripe_t *st, int i)
{
    slot_t *s = &st->slots[i];

    if (s->received == s->size && s->streaming == 0)
        slot_complete(st, i, ICBC_OK, NULL);
}

void icbc_stripe_chunk_end(icbc_stripe_t *st, icbc_stripe_rx_t *rx, int ok, double now)
{
    slot_t *s = slot_lookup(st, rx->slot, rx->gen, rx->peer);

    if (s == NULL) {
        /* the receive failed (timeout, dead peer) while this chunk streamed */
        free(rx->staging);
        rx->staging = NULL;
        return;
    }
    icbc_stripe_peer_seen(st, rx->peer, now);
    s->t_last = now;
    if (s->streaming > 0)
        s->streaming--;
    if (!ok) {
        free(rx->staging);
        rx->staging = NULL;
        if (st->cfg.failover) {
            /* its lane broke while it streamed: it comes again by another */
            size_t u = rx->offset / s->unit;
            s->seen[u / 8] &= (uint8_t) ~(1u << (u % 8));
            slot_complete_if_whole(st, (int) rx->slot); /* its copy was first */
            return;
        }
        slot_complete(st, (int) rx->slot, ICBC_ERR_PEER_FAILED, "a chunk was lost");
        return;
    }
    if (s->arrived) {
        size_t u = rx->offset / s->unit;
        uint8_t bit = (uint8_t) (1u << (u % 8));
        if (s->arrived[u / 8] & bit) { /* the other copy was first */
            st->stats.duplicate_chunks++;
            free(rx->staging);
            rx->staging = NULL;
            slot_complete_if_whole(st, (int) rx->slot);
            return;
        }
        s->arrived[u / 8] |= bit;
    }
    if (rx->staging) {
        st->ops.place(st->ctx, s->user, rx->offset, rx->staging, rx->len);
        free(rx->staging);
        rx->staging = NULL;
        s = &st->slots[rx->slot]; /* place may have started receives */
    }
    st->stats.chunks_received++;
    s->received += rx->len;
    slot_complete_if_whole(st, (int) rx->slot);
}

icbc_status_t icbc_stripe_chunk_data(icbc_stripe_t *st, int peer, const icbc_stripe_chunk_t *c,
                                     const void *data, double now)
{
    icbc_stripe_rx_t rx;
    void *dest;
    icbc_status_t rc = icbc_stripe_chunk_begin(st, peer, c, &rx, &dest);

    if (rc != ICBC_OK)
        return rc;
    memcpy(dest, data, c->len);
    icbc_stripe_chunk_end(st, &rx, 1, now);
    return ICBC_OK;
}

/* ---- progress and failures ----------------------------------------------- */

void icbc_stripe_progress(icbc_stripe_t *st, double now)
{
    /* retry each send that was blocked when this call began, once */
    for (int n = st->stats.blocked_sends; n > 0 && st->blocked_head != NONE; n--)
        send_pump(st, st->blocked_head, now);

    if (st->cfg.timeout <= 0 || (st->stats.active_sends == 0 && st->stats.active_slots == 0) ||
        now - st->last_scan < 1.0)
        return;
    st->last_scan = now;
    for (int i = 0; i < st->nslots; i++) {
        slot_t *s = &st->slots[i];
        double quiet;
        if (s->state != ICBC_STRIPE_SLOT_RECEIVING ||
            (quiet = now - last_heard(st, s->t_last, s->peer)) <= st->cfg.timeout)
            continue;
        if (s->received == s->size) {
            /* every byte is in place; a copy that still streams has said
             * nothing for the timeout: it is given up */
            slot_complete(st, i, ICBC_OK, NULL);
            continue;
        }
        icbc_warn("receive of %zu bytes from rank %d stalled for %.0f s (%zu bytes arrived, "
                  "nothing else from that rank); failing it",
                  s->size, s->peer, quiet, s->received);
        st->stats.stalled_recvs++;
        slot_complete(st, i, ICBC_ERR_TIMEOUT, "no chunk arrived in time");
    }
    for (int i = 0; i < st->nsends; i++) {
        send_t *s = &st->sends[i];
        double quiet;
        if ((s->state != ICBC_STRIPE_SEND_WAIT_CTS && s->state != ICBC_STRIPE_SEND_WAIT_ACK) ||
            (quiet = now - last_heard(st, s->t_last, s->peer)) <= st->cfg.timeout)
            continue;
        int cts = s->state == ICBC_STRIPE_SEND_WAIT_CTS;
        icbc_warn("striped send of %zu bytes to rank %d got no %s for %.0f s (nor anything else "
                  "from that rank); failing it",
                  s->size, s->peer, cts ? "clear-to-send" : "confirmation", quiet);
        st->stats.stalled_sends++;
        send_fail(s, ICBC_ERR_TIMEOUT,
                  cts ? "no clear-to-send arrived in time" : "no confirmation arrived in time");
        send_finish(st, i);
    }
}

void icbc_stripe_peer_failed(icbc_stripe_t *st, int peer, const char *why)
{
    for (int i = 0; i < st->nslots; i++)
        if (st->slots[i].state == ICBC_STRIPE_SLOT_RECEIVING && st->slots[i].peer == peer)
            slot_complete(st, i, ICBC_ERR_PEER_FAILED, why);
    for (int i = 0; i < st->nsends; i++) {
        send_t *s = &st->sends[i];
        if (s->state == ICBC_STRIPE_SEND_FREE || s->peer != peer || s->error != ICBC_OK)
            continue;
        send_fail(s, ICBC_ERR_PEER_FAILED, why);
        /* chunks still with a lane report back; the last one finishes it */
        send_settle(st, i);
    }
}

/* ---- introspection ------------------------------------------------------- */

void icbc_stripe_stats(const icbc_stripe_t *st, icbc_stripe_stats_t *stats)
{
    *stats = st->stats;
}

void icbc_stripe_dump(const icbc_stripe_t *st, FILE *f, double now)
{
    fprintf(f, "  striped sends: %d active, %d blocked on busy lanes\n", st->stats.active_sends,
            st->stats.blocked_sends);
    for (int i = 0; i < st->nsends; i++) {
        const send_t *s = &st->sends[i];
        if (s->state == ICBC_STRIPE_SEND_FREE)
            continue;
        fprintf(f,
                "    send %d.%u to rank %d: %s, %zu bytes, %zu handed to lanes, %d chunk(s) "
                "out, %u to send again%s%s, quiet for %.1f s\n",
                i, s->gen, s->peer, icbc_stripe_send_state_str(s->state), s->size, s->next,
                s->outstanding, s->to_resend, s->error ? ", failed: " : "", s->error ? s->why : "",
                now - s->t_last);
    }
    fprintf(f, "  striped receives: %d active\n", st->stats.active_slots);
    for (int i = 0; i < st->nslots; i++) {
        const slot_t *s = &st->slots[i];
        if (s->state == ICBC_STRIPE_SLOT_FREE)
            continue;
        fprintf(f, "    slot %d.%u from rank %d: %zu of %zu bytes, quiet for %.1f s\n", i, s->gen,
                s->peer, s->received, s->size, now - s->t_last);
    }
    fprintf(
        f,
        "  chunks sent %llu, received %llu; dropped: %llu CTS, %llu chunks for no "
        "receive, %llu duplicate or overlapping\n",
        (unsigned long long) st->stats.chunks_sent, (unsigned long long) st->stats.chunks_received,
        (unsigned long long) st->stats.dropped_cts, (unsigned long long) st->stats.dropped_chunks,
        (unsigned long long) st->stats.duplicate_chunks);
    if (st->cfg.failover)
        fprintf(f,
                "  failover: lanes down 0x%llx (%llu lost so far), chunks lost %llu, sent again "
                "%llu; confirmations %llu, %llu for late chunks\n",
                (unsigned long long) st->lanes_down, (unsigned long long) st->stats.lanes_lost,
                (unsigned long long) st->stats.chunks_lost,
                (unsigned long long) st->stats.chunks_resent,
                (unsigned long long) st->stats.confirmations,
                (unsigned long long) st->stats.late_chunks);
    fprintf(f, "  lanes (placement %s%s):", icbc_stripe_placement_str(st->cfg.placement),
            st->cfg.feedback ? ", feedback" : "");
    for (int l = 0; l < st->nlanes_seen; l++) {
        const lane_t *ln = &st->lanes[l];
        fprintf(f, " [%d] %llu in flight, %llu undelivered, %.1f MB/s%s", l,
                (unsigned long long) ln->inflight, (unsigned long long) ln->undelivered,
                ln->measured ? ln->rate / 1e6 : 0.0, lane_down(st, l) ? " (down)" : "");
    }
    fprintf(f, "\n");
#ifndef NDEBUG
    unsigned first = st->nlog > TRANSITIONS_KEPT ? st->nlog - TRANSITIONS_KEPT : 0;
    fprintf(f, "  last %u state transitions:\n", st->nlog - first);
    for (unsigned k = first; k < st->nlog; k++) {
        const transition_t *t = &st->log[k % TRANSITIONS_KEPT];
        fprintf(f, "    %s %d.%u %s -> %s\n", t->table == 's' ? "send" : "slot", t->index, t->gen,
                t->table == 's' ? icbc_stripe_send_state_str(t->from)
                                : icbc_stripe_slot_state_str(t->from),
                t->table == 's' ? icbc_stripe_send_state_str(t->to)
                                : icbc_stripe_slot_state_str(t->to));
    }
#endif
}
