/*
 * Pacing of this process's sending to other clusters (docs/pacing.md).
 *
 * The rate, MATB in bits/s, comes from
 *   - the ICBC_PACING_MATB attribute of the communicator a message is sent
 *     on (set by the application; 0 or none: off), or
 *   - inside a rate-managed MPI_Alltoall/MPI_Alltoallv
 *     (MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL), the WAN's rate divided by the
 *     communicator's processes in this cluster: they all send across it at
 *     once.
 * It holds on every path that carries messages to other clusters: chunks
 * wait in the striping engine while the bucket is in debt, whole messages
 * wait here in order, and the TCP path's sockets are paced by the kernel
 * as well (SO_MAX_PACING_RATE). Messages a router forwards leave it at the
 * rate they came in.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_pacing.h"
#include "icbc_path.h"
#include "core/icbc_clock.h"

/* The attribute's keyval, for C (icbc.h) and for Fortran (icbcf.h: the
 * common block /ICBC_PACING/). */
MPICH_API_PUBLIC int ICBC_PACING_MATB = MPI_KEYVAL_INVALID;
MPICH_API_PUBLIC int icbc_pacing_ = MPI_KEYVAL_INVALID;

static struct {
    icbc_pace_t bucket;
    uint64_t attr_rate; /* bits/s: the attribute of the communicator last sent on */
    uint64_t coll_rate; /* bits/s: inside a rate-managed collective */
    uint64_t wan_rate;  /* bits/s; 0: unknown */
    icbc_queue_t held;  /* MPIDI_ICBC_waiting_t: whole messages waiting for the bucket */
    size_t nheld;
    uint64_t held_total;
    MPII_Keyval *matb_kv;  /* ICBC_PACING_MATB's: every attribute holds a reference */
    uint64_t routers_told; /* bits/s the routers pace this process's traffic at */
    double off_since;      /* when the rate went to 0 while the routers still pace */
} pace;

/* Routers keep pacing this long after the process stopped: paced
 * collectives back to back, and the processes of a cluster that start and
 * end them at slightly different moments, do not make the routers' pace
 * go up and down at each one. */
#define ROUTERS_OFF_DELAY 0.2

/* Brings the bucket and the TCP sockets to the rate now in force. */
static void apply_rate(void)
{
    uint64_t rate = pace.coll_rate > 0 ? pace.coll_rate : pace.attr_rate;

    if (rate == icbc_pace_rate(&pace.bucket))
        return;
    icbc_pace_set_rate(&pace.bucket, rate, icbc_clock_now());
    MPIDI_ICBC_path_set_pacing(ICBC_PATH_TCP_DIRECT, rate);
    if (rate > 0) {
        pace.off_since = 0;
        if (rate != pace.routers_told) {
            MPIDI_ICBC_path_set_pacing(ICBC_PATH_ROUTED, rate);
            pace.routers_told = rate;
        }
    } else if (pace.routers_told > 0 && pace.off_since == 0) {
        pace.off_since = icbc_clock_now(); /* told in progress, unless paced again before */
    }
}

int MPIDI_ICBC_pace_init(void)
{
    int mpi_errno = MPI_SUCCESS;
    const char *text = MPIR_CVAR_CH4_ICBC_WAN_RATE;

    icbc_pace_init(&pace.bucket);
    if (text != NULL && text[0] != '\0') {
        if (icbc_pace_parse_rate(text, &pace.wan_rate) != ICBC_OK || pace.wan_rate == 0) {
            char why[160];
            snprintf(why, sizeof(why),
                     "MPIR_CVAR_CH4_ICBC_WAN_RATE='%.40s' is not a rate above 0 (e.g. 400mbit)",
                     text);
            return MPIDI_ICBC_path_cfg_error(why);
        }
    } else if (MPIDI_ICBC_paths.rf != NULL) {
        pace.wan_rate = icbc_routerfile_wan_rate(MPIDI_ICBC_paths.rf);
    }
    mpi_errno = MPIR_Comm_create_keyval_impl(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN,
                                             &ICBC_PACING_MATB, NULL);
    if (mpi_errno == MPI_SUCCESS)
        MPII_Keyval_get_ptr(ICBC_PACING_MATB, pace.matb_kv);
    icbc_pacing_ = ICBC_PACING_MATB;
    return mpi_errno;
}

/* Bytes the TCP path's paced sockets may hold unsent for the bucket to let
 * a send go. Each socket is paced at the whole rate (a process may send to
 * one peer only), so a message handed to one socket while another still
 * drains would leave the process at a multiple of the rate: IS's
 * Alltoallv, which sends to every peer at once, kept 65-75 % of its WAN
 * drops at the rate the sockets' share (benchmarks/results/apps/pacing). */
#define PACE_TCP_UNSENT_MAX (64 * 1024)

/* The bucket lets a send go now, and the TCP path has put (almost) all it
 * was given on the wire. */
static int may_send_now(void)
{
    return icbc_pace_may_send(&pace.bucket, icbc_clock_now()) &&
           MPIDI_ICBC_path_unsent(ICBC_PATH_TCP_DIRECT) <= PACE_TCP_UNSENT_MAX;
}

/* Sends the held messages, in order, while the bucket allows (all of them
 * when pacing is off). */
static void release_held(void)
{
    MPIDI_ICBC_waiting_t *h;

    while ((h = ICBC_QUEUE_OBJ(icbc_queue_pop(&pace.held), MPIDI_ICBC_waiting_t, qe)) != NULL) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, h->rank);
        int busy = 0;
        pace.nheld--;
        icbc_pace_charge(&pace.bucket, h->len + h->hdr_len);
        if (MPIDI_ICBC_path_send(peer, MPIDI_ICBC_LANE_ORDERED, h->hdr, h->hdr_len, h->payload,
                                 h->len, h->cb, h->arg, &busy) != MPI_SUCCESS)
            h->cb(h->arg, ICBC_ERR_PEER_FAILED);
        MPL_free(h);
        if (icbc_pace_on(&pace.bucket) && !may_send_now())
            return;
    }
}

static void routers_off(void)
{
    pace.off_since = 0;
    pace.routers_told = 0;
    MPIDI_ICBC_path_set_pacing(ICBC_PATH_ROUTED, 0);
}

void MPIDI_ICBC_pace_finalize(void)
{
    pace.coll_rate = pace.attr_rate = 0;
    apply_rate(); /* off: what is held goes at once */
    if (pace.routers_told > 0)
        routers_off();
    release_held();
    if (pace.matb_kv != NULL)
        MPIR_free_keyval(pace.matb_kv);
    pace.matb_kv = NULL;
    ICBC_PACING_MATB = icbc_pacing_ = MPI_KEYVAL_INVALID;
}

void MPIDI_ICBC_pace_progress(void)
{
    if (unlikely(pace.off_since > 0) && icbc_clock_now() - pace.off_since > ROUTERS_OFF_DELAY)
        routers_off();
    if (icbc_queue_empty(&pace.held))
        return;
    if (!icbc_pace_on(&pace.bucket) || may_send_now())
        release_held();
}

/* COMM's ICBC_PACING_MATB; 0 when it has none. */
static int comm_matb(MPIR_Comm *comm, uint64_t *rate)
{
    for (MPIR_Attribute *a = comm->attributes; a != NULL; a = a->next) {
        if (a->keyval->handle == ICBC_PACING_MATB) {
            /* C passes the rate as the pointer, Fortran as the address-sized
             * integer: either way the value itself */
            *rate = (uint64_t) (intptr_t) a->value;
            return 1;
        }
    }
    return 0;
}

void MPIDI_ICBC_pace_comm(MPIR_Comm *comm)
{
    uint64_t rate = 0;

    /* every inter-cluster send comes here: while no communicator holds the
     * attribute (the keyval's own reference only), nothing to look up */
    if (pace.attr_rate == 0 && pace.matb_kv != NULL && MPIR_Object_get_ref(pace.matb_kv) <= 1)
        return;
    /* a communicator without the attribute (one made by MPI_Comm_split,
     * which copies no attribute) takes MPI_COMM_WORLD's */
    if (!comm_matb(comm, &rate) && comm != MPIR_Process.comm_world)
        comm_matb(MPIR_Process.comm_world, &rate);
    if (rate != pace.attr_rate) {
        pace.attr_rate = rate;
        apply_rate();
    }
}

int MPIDI_ICBC_pace_paces(const icbc_peer_t *peer)
{
    return (icbc_pace_on(&pace.bucket) || !icbc_queue_empty(&pace.held)) &&
           peer->cluster != MPIDI_ICBC_paths.cluster;
}

int MPIDI_ICBC_pace_may_go(void)
{
    return may_send_now();
}

void MPIDI_ICBC_pace_charge(size_t len)
{
    icbc_pace_charge(&pace.bucket, len);
}

int MPIDI_ICBC_pace_ordered(icbc_peer_t *peer, const void *inner, size_t inner_len,
                            const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                            int *held)
{
    int busy = 0;

    *held = 0;
    if (icbc_queue_empty(&pace.held) && may_send_now()) {
        icbc_pace_charge(&pace.bucket, len + inner_len);
        return MPIDI_ICBC_path_send(peer, MPIDI_ICBC_LANE_ORDERED, inner, inner_len, payload, len,
                                    cb, arg, &busy);
    }
    /* behind the held ones, in order */
    int mpi_errno =
        MPIDI_ICBC_waiting_push(&pace.held, peer->rank, inner, inner_len, payload, len, cb, arg);
    if (mpi_errno)
        return mpi_errno;
    pace.nheld++;
    pace.held_total++;
    *held = 1;
    return MPI_SUCCESS;
}

/* ---- rate-managed collectives ------------------------------------------ */

int MPIDI_ICBC_pace_coll_begin(MPIR_Comm *comm, uint64_t *saved)
{
    int here = 0, there = 0;

    *saved = pace.coll_rate;
    if (!MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL || pace.wan_rate == 0 || pace.coll_rate > 0)
        return 0;
    for (int i = 0; i < comm->local_size; i++) {
        icbc_peer_t *peer = MPIDI_ICBC_comm_rank_to_peer(comm, i);
        if (peer == NULL || peer->cluster == MPIDI_ICBC_paths.cluster)
            here++;
        else
            there++;
    }
    if (there == 0)
        return 0; /* nothing crosses the WAN */
    pace.coll_rate = pace.wan_rate / (uint64_t) here;
    apply_rate();
    return 1;
}

void MPIDI_ICBC_pace_coll_end(uint64_t saved)
{
    pace.coll_rate = saved;
    apply_rate();
}

void MPIDI_ICBC_pace_dump(FILE *f)
{
    fprintf(f,
            "  pacing: %llu bit/s now (attribute %llu, collective %llu, WAN %llu); %llu bytes "
            "charged, %llu waits, %zu whole messages held now, %llu in all\n",
            (unsigned long long) icbc_pace_rate(&pace.bucket), (unsigned long long) pace.attr_rate,
            (unsigned long long) pace.coll_rate, (unsigned long long) pace.wan_rate,
            (unsigned long long) pace.bucket.bytes, (unsigned long long) pace.bucket.waits,
            pace.nheld, (unsigned long long) pace.held_total);
}
