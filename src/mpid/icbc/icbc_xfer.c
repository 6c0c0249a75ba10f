/*
 * Striping rendezvous and whole-message delivery on the routed and TCP paths;
 * the protocol is described in icbc_xfer.h.
 *
 * Sends in flight are entries of a table named by a cookie (index and
 * generation); receives waiting for chunks are slots of another table named
 * by index and generation. A message from the network can only name an
 * entry, never a pointer, so a stale, duplicated or forged CTS or chunk is
 * recognised and dropped.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"

#include <time.h>
#include <unistd.h>

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD
      category    : CH4_ICBC
      type        : int
      default     : 32768
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Messages to other clusters (and all TCP-path messages) whose MPI header
        plus payload are below this many bytes travel whole on the fixed path
        of the process pair; larger ones use the rendezvous and are striped in
        chunks over all routers of the cluster.

    - name        : MPIR_CVAR_CH4_ICBC_CHUNK_SIZE
      category    : CH4_ICBC
      type        : int
      default     : 262144
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Bytes per chunk of a striped message (at least 4096). Each chunk
        carries its offset in the receive buffer and may take any router.

    - name        : MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT
      category    : CH4_ICBC
      type        : int
      default     : 20
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Seconds a striped transfer may wait while nothing at all arrives
        from its peer (no CTS, no chunk, no other message) before it fails
        with an MPI error, e.g. when a router died with chunks in flight.
        Transfers queued behind others on a busy path do not count as
        stalled. Also how long a router of this cluster may say nothing
        (a live one speaks every second) before it counts as lost, with
        the same consequence as a router that died. 0 disables both
        checks.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

#define XFER_NONE 0
#define XFER_STRIPE 1           /* amreq->xkind of a receive matched through RTS */
#define SLOT_DISCARD UINT32_MAX /* CTS: nothing to send, the receiver dropped it */

typedef struct {
    MPIR_Request *sreq;         /* NULL: free entry */
    uint32_t gen;
    int dst;
    const char *base;
    size_t size;
    size_t next;                /* first byte not yet handed to a lane */
    uint32_t slot, slot_gen;
    int outstanding;            /* chunks handed to a lane, not yet complete */
    int cts;                    /* CTS received */
    int blocked;                /* a lane was busy: retried from progress */
    int failed;
    int lane;                   /* next lane to use */
    double t_last;
    int next_free;
} xsend_t;

typedef struct {
    MPIR_Request *rreq;         /* NULL: free slot */
    uint32_t gen;
    int src;
    char *dest;
    int bounce;
    size_t size;
    size_t received;
    double t_last;
    int next_free;
} xslot_t;

static struct {
    xsend_t *sends;
    int nsends, free_send;
    xslot_t *slots;
    int nslots, free_slot;
    int active_sends, active_slots, blocked;
    size_t chunk;
    MPI_Aint threshold;
    double timeout;
    double last_scan;
    double failed_at;           /* first path failure, 0: none */
    char failure[160];
    double *seen;               /* per rank: when anything last arrived from it */
    int nseen;
} X;

/* A receive whose payload came through this netmod completes (see
 * icbc_am_recv.c).
 */
static void recv_mark_remote(MPIR_Request * rreq)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    MPIDI_REQUEST(rreq, is_local) = 0;
#endif
}

/* MPIDIG's receive layout, trimmed to the message (icbc_am_recv.c). */
void MPIDI_ICBC_get_recv_layout(MPIR_Request * rreq, int *is_contig, int *is_gpu, void **p_data,
                                MPI_Aint * p_data_sz);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int MPIDI_ICBC_xfer_init(void)
{
    memset(&X, 0, sizeof(X));
    X.free_send = X.free_slot = -1;
    X.chunk = MPL_MAX(MPIR_CVAR_CH4_ICBC_CHUNK_SIZE, 4096);
    X.threshold = MPL_MAX(MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD, 0);
    X.timeout = MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT;
    return MPI_SUCCESS;
}

void MPIDI_ICBC_xfer_finalize(void)
{
    MPL_free(X.sends);
    MPL_free(X.slots);
    MPL_free(X.seen);
    memset(&X, 0, sizeof(X));
}

/* A transfer is stalled only when nothing at all arrives from its peer: with
 * thousands of transfers queued behind each other (e.g. 100,000 MPI_Get
 * replies), one may wait far longer than the timeout for its turn while the
 * path is busy with the others. */
static void peer_seen(int rank)
{
    if (unlikely(rank >= X.nseen)) {
        int n = MPL_MAX(MPIDI_ICBC_global.peers.size, rank + 1);
        double *v = MPL_realloc(X.seen, n * sizeof(*v), MPL_MEM_OTHER);
        if (v == NULL)
            return;
        for (int i = X.nseen; i < n; i++)
            v[i] = 0;
        X.seen = v;
        X.nseen = n;
    }
    X.seen[rank] = now();
}

static double last_activity(double t_last, int rank)
{
    return (rank < X.nseen && X.seen[rank] > t_last) ? X.seen[rank] : t_last;
}

static int xfer_error(int rank, const char *why)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**icbc_xfer", "**icbc_xfer %d %s", rank, why);
}

/* ---- tables ------------------------------------------------------------ */

static int send_alloc(void)
{
    if (X.free_send < 0) {
        int n = X.nsends ? 2 * X.nsends : 64;
        xsend_t *s = MPL_realloc(X.sends, n * sizeof(*s), MPL_MEM_OTHER);
        if (s == NULL)
            return -1;
        for (int i = n - 1; i >= X.nsends; i--) {
            memset(&s[i], 0, sizeof(s[i]));
            s[i].next_free = X.free_send;
            X.free_send = i;
        }
        X.sends = s;
        X.nsends = n;
    }
    int i = X.free_send;
    X.free_send = X.sends[i].next_free;
    X.active_sends++;
    return i;
}

static void send_free(int i)
{
    xsend_t *s = &X.sends[i];
    uint32_t gen = s->gen + 1;

    memset(s, 0, sizeof(*s));
    s->gen = gen;
    s->next_free = X.free_send;
    X.free_send = i;
    X.active_sends--;
}

static int slot_alloc(void)
{
    if (X.free_slot < 0) {
        int n = X.nslots ? 2 * X.nslots : 64;
        xslot_t *s = MPL_realloc(X.slots, n * sizeof(*s), MPL_MEM_OTHER);
        if (s == NULL)
            return -1;
        for (int i = n - 1; i >= X.nslots; i--) {
            memset(&s[i], 0, sizeof(s[i]));
            s[i].gen = 1;
            s[i].next_free = X.free_slot;
            X.free_slot = i;
        }
        X.slots = s;
        X.nslots = n;
    }
    int i = X.free_slot;
    X.free_slot = X.slots[i].next_free;
    X.active_slots++;
    return i;
}

static void slot_free(int i)
{
    xslot_t *s = &X.slots[i];
    uint32_t gen = s->gen + 1;

    memset(s, 0, sizeof(*s));
    s->gen = gen ? gen : 1;
    s->next_free = X.free_slot;
    X.free_slot = i;
    X.active_slots--;
}

static xslot_t *slot_lookup(uint32_t slot, uint32_t gen, int src)
{
    if (slot >= (uint32_t) X.nslots)
        return NULL;
    xslot_t *s = &X.slots[slot];
    return (s->rreq && s->gen == gen && s->src == src) ? s : NULL;
}

/* ---- send side --------------------------------------------------------- */

static void send_finish(int i)
{
    xsend_t *s = &X.sends[i];
    MPIR_Request *sreq = s->sreq;

    if (s->failed)
        sreq->status.MPI_ERROR = xfer_error(s->dst, "striped send did not complete");
    send_free(i);
    MPIDI_ICBC_am_isend_done_common(sreq);
}

static void chunk_done(void *arg, int ok)
{
    int i = (int) (intptr_t) arg;
    xsend_t *s = &X.sends[i];

    s->outstanding--;
    s->t_last = now();
    if (!ok)
        s->failed = 1;
    if (s->outstanding == 0 && (s->next >= s->size || s->failed))
        send_finish(i);
}

/* Hand chunks to lanes until all are handed out or a lane is busy. */
static void send_pump(int i)
{
    xsend_t *s = &X.sends[i];
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, s->dst);
    int nlanes = MPIDI_ICBC_xpath_nlanes(peer);
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_CHUNK)];

    if (s->blocked) {
        s->blocked = 0;
        X.blocked--;
    }
    /* One reference of our own, so that a chunk completing inside
     * xpath_send cannot finish the send while we still loop. */
    s->outstanding++;
    while (!s->failed && s->next < s->size) {
        size_t len = MPL_MIN(X.chunk, s->size - s->next);
        icbc_am_hdr_t wh = {
            .kind = ICBC_MSG_CHUNK,
            .src_rank = (uint32_t) MPIR_Process.rank,
            .data_sz = len,
            .slot = s->slot,
            .gen = s->slot_gen,
            .offset = s->next,
        };
        int busy = 0, tried = 0, rc = MPI_SUCCESS;

        icbc_am_hdr_pack(&wh, inner);
        /* the lanes in turn; a busy lane passes the chunk to the next one */
        do {
            int lane = s->lane;
            s->lane = (s->lane + 1) % nlanes;
            busy = 0;
            s->outstanding++;
            rc = MPIDI_ICBC_xpath_send(peer, lane, inner, sizeof(inner), s->base + s->next, len,
                                       chunk_done, (void *) (intptr_t) i, &busy);
            /* completions inside the call may have started sends that
             * grew (moved) the table */
            s = &X.sends[i];
            if (rc != MPI_SUCCESS || busy)
                s->outstanding--;
        } while (rc == MPI_SUCCESS && busy && ++tried < nlanes);
        if (rc != MPI_SUCCESS) {
            s->failed = 1;
            break;
        }
        if (busy) {
            s->blocked = 1;
            X.blocked++;
            break;
        }
        s->next += len;
    }
    chunk_done((void *) (intptr_t) i, 1);
}

static void recv_cts(int src, const icbc_am_hdr_t * wh)
{
    uint32_t i = (uint32_t) (wh->cookie & 0xffffffffu);
    uint32_t gen = (uint32_t) (wh->cookie >> 32);
    xsend_t *s;

    if (i >= (uint32_t) X.nsends || (s = &X.sends[i])->sreq == NULL || s->gen != gen ||
        s->dst != src || s->cts) {
        fprintf(stderr, "icbc: rank %d dropped a CTS from rank %d for an unknown send\n",
                MPIR_Process.rank, src);
        return;
    }
    s->cts = 1;
    s->t_last = now();
    if (wh->slot == SLOT_DISCARD) {
        s->next = s->size;
        send_finish((int) i);
        return;
    }
    s->slot = wh->slot;
    s->slot_gen = wh->gen;
    s->lane = (int) ((uint32_t) MPIR_Process.rank + i) % MPIDI_ICBC_xpath_nlanes(
        icbc_peer_get(&MPIDI_ICBC_global.peers, src));
    send_pump((int) i);
}

static void ordered_done(void *arg, int ok)
{
    MPL_free(arg);
}

/* Whole messages (and RTS/CTS) on the ordered lane. The payload must stay
 * valid until CB; header-only messages pass cb = NULL. */
static int send_ordered(icbc_peer_t * peer, const void *inner, size_t inner_len,
                        const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    int busy = 0;
    int mpi_errno;

    /* The ordered lane queues instead of refusing: order beats back-pressure. */
    mpi_errno = MPIDI_ICBC_xpath_send(peer, MPIDI_ICBC_LANE_ORDERED, inner, inner_len, payload,
                                      len, cb ? cb : ordered_done, arg, &busy);
    MPIR_Assert(!busy);
    return mpi_errno;
}

static void whole_done(void *arg, int ok)
{
    MPIR_Request *sreq = arg;

    if (!ok)
        sreq->status.MPI_ERROR = xfer_error(-1, "message lost on its path");
    MPIDI_ICBC_am_isend_done_common(sreq);
}

int MPIDI_ICBC_xfer_am_isend(icbc_peer_t * peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                             MPI_Datatype datatype, int src_vci, int dst_vci,
                             MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    const char *payload;
    int striped;
    uint64_t inner[(ICBC_WIRE_AM_HDR_SIZE + ICBC_WIRE_RNDV_EXT_SIZE) / 8 + 512];
    size_t inner_len;

    MPIR_ERR_CHKANDJUMP2(peer->state == ICBC_PEER_FAILED, mpi_errno, MPI_ERR_OTHER,
                         "**icbc_peer", "**icbc_peer %d %s", peer->rank, "failed earlier");
    MPIR_Assert(am_hdr_sz <= 4096);
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    amreq->handler_id = handler_id;

    MPL_pointer_attr_t attr;
    MPIR_GPU_query_pointer_attr(data, &attr);
    if (data_sz == 0) {
        payload = NULL;
    } else if (dt_contig && attr.type != MPL_GPU_POINTER_DEV) {
        payload = MPIR_get_contig_ptr(data, dt_true_lb);
    } else {
        MPI_Aint packed;
        amreq->pack_buf = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->pack_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, amreq->pack_buf, data_sz,
                                      &packed);
        MPIR_ERR_CHECK(mpi_errno);
        MPIR_Assert(packed == (MPI_Aint) data_sz);
        payload = amreq->pack_buf;
    }

    striped = data_sz > 0 && (MPI_Aint) (am_hdr_sz + data_sz) >= X.threshold;
    icbc_am_hdr_t wh = {
        .kind = striped ? ICBC_MSG_RTS : ICBC_MSG_AM,
        .handler_id = (uint16_t) handler_id,
        .src_vci = (uint8_t) src_vci,
        .dst_vci = (uint8_t) dst_vci,
        .am_hdr_sz = (uint16_t) am_hdr_sz,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .data_sz = data_sz,
    };
    inner_len = ICBC_WIRE_HDR_LEN(wh.kind) + am_hdr_sz;

    if (!striped) {
        icbc_am_hdr_pack(&wh, inner);
        memcpy((char *) inner + ICBC_WIRE_HDR_LEN(wh.kind), am_hdr, am_hdr_sz);
        mpi_errno = send_ordered(peer, inner, inner_len, payload, data_sz, whole_done, sreq);
        MPIR_ERR_CHECK(mpi_errno);
        goto fn_exit;
    }

    int i = send_alloc();
    MPIR_ERR_CHKANDJUMP(i < 0, mpi_errno, MPI_ERR_OTHER, "**nomem");
    xsend_t *s = &X.sends[i];
    s->sreq = sreq;
    s->dst = peer->rank;
    s->base = payload;
    s->size = data_sz;
    s->t_last = now();
    wh.cookie = ((uint64_t) s->gen << 32) | (uint32_t) i;
    icbc_am_hdr_pack(&wh, inner);
    memcpy((char *) inner + ICBC_WIRE_HDR_LEN(wh.kind), am_hdr, am_hdr_sz);
    mpi_errno = send_ordered(peer, inner, inner_len, NULL, 0, NULL, NULL);
    if (mpi_errno) {
        send_free(i);
        MPIR_ERR_CHECK(mpi_errno);
    }

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_ICBC_xfer_send_hdr(icbc_peer_t * peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t inner[ICBC_WIRE_AM_HDR_SIZE / 8 + 512];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_AM,
        .handler_id = (uint16_t) handler_id,
        .src_vci = (uint8_t) src_vci,
        .dst_vci = (uint8_t) dst_vci,
        .am_hdr_sz = (uint16_t) am_hdr_sz,
        .src_rank = (uint32_t) MPIR_Process.rank,
    };

    MPIR_ERR_CHKANDJUMP2(peer->state == ICBC_PEER_FAILED, mpi_errno, MPI_ERR_OTHER,
                         "**icbc_peer", "**icbc_peer %d %s", peer->rank, "failed earlier");
    MPIR_Assert(am_hdr_sz <= 4096);
    icbc_am_hdr_pack(&wh, inner);
    memcpy((char *) inner + ICBC_WIRE_AM_HDR_SIZE, am_hdr, am_hdr_sz);
    mpi_errno = send_ordered(peer, inner, ICBC_WIRE_AM_HDR_SIZE + am_hdr_sz, NULL, 0, NULL,
                             NULL);
  fn_fail:
    return mpi_errno;
}

/* ---- receive side ------------------------------------------------------ */

static void send_cts(int src, uint64_t cookie, uint32_t slot, uint32_t gen)
{
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_CTS)];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_CTS,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .cookie = cookie,
        .slot = slot,
        .gen = gen,
    };
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, src);

    icbc_am_hdr_pack(&wh, inner);
    if (send_ordered(peer, inner, sizeof(inner), NULL, 0, NULL, NULL) != MPI_SUCCESS && slot !=
        SLOT_DISCARD)
        MPIDI_ICBC_xfer_peer_failed(src, "cannot answer its request to send");
}

static void slot_complete(int i, int err)
{
    xslot_t *s = &X.slots[i];
    MPIR_Request *rreq = s->rreq;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);

    recv_mark_remote(rreq);
    MPIDIG_recv_setup(rreq);
    if (err) {
        rreq->status.MPI_ERROR = err;
    } else if (s->bounce) {
        MPIDIG_recv_copy_seg(s->dest, s->size, rreq);
    }
    if (s->bounce)
        MPL_free(s->dest);
    amreq->xkind = XFER_NONE;
    slot_free(i);
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
}

int MPIDI_ICBC_xfer_matched(MPIR_Request * rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;
    int i = slot_alloc();

    MPIR_ERR_CHKANDJUMP(i < 0, mpi_errno, MPI_ERR_OTHER, "**nomem");
    xslot_t *s = &X.slots[i];
    s->rreq = rreq;
    s->src = amreq->xpeer;
    s->size = amreq->rndv_size;
    s->t_last = now();
    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    if (is_contig && !is_gpu && (size_t) p_data_sz >= s->size) {
        s->dest = p_data;
    } else {
        s->dest = MPL_malloc(s->size, MPL_MEM_BUFFER);
        s->bounce = 1;
        if (s->dest == NULL) {
            slot_free(i);
            MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
        }
    }
    send_cts(s->src, amreq->xcookie, (uint32_t) i, s->gen);
  fn_fail:
    return mpi_errno;
}

static void recv_rts(int src, const icbc_am_hdr_t * wh, void *am_hdr)
{
    MPIR_Request *rreq = NULL;
    uint32_t attr = 0;

    MPIDIG_AM_ATTR_SET_VCIS(attr, wh->src_vci, wh->dst_vci);
    attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
    MPIDIG_global.target_msg_cbs[wh->handler_id] (am_hdr, NULL, wh->data_sz, attr, &rreq);
    if (rreq == NULL) {
        send_cts(src, wh->cookie, SLOT_DISCARD, 0);
        return;
    }
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    amreq->xkind = XFER_STRIPE;
    amreq->xpeer = src;
    amreq->xcookie = wh->cookie;
    amreq->rndv_size = wh->data_sz;
    if (MPIDIG_recv_initialized(rreq))
        MPIDI_ICBC_xfer_matched(rreq);
    /* else MPIDIG calls MPIDI_ICBC_rndv_pull -> MPIDI_ICBC_xfer_matched on match */
}

/* Parse and check an inner header from SRC; copies the MPI header aligned. */
static int parse_inner(int src, const void *inner, size_t inner_len, uint64_t payload_len,
                       icbc_am_hdr_t * wh, void *am_hdr, size_t am_hdr_cap)
{
    if (icbc_am_hdr_parse(inner, inner_len, MPIDI_AM_HANDLERS_MAX,
                          (uint32_t) MPIDI_ICBC_global.peers.size, wh) != ICBC_OK ||
        (int) wh->src_rank != src || wh->am_hdr_sz > am_hdr_cap)
        return -1;
    if ((wh->kind == ICBC_MSG_AM || wh->kind == ICBC_MSG_CHUNK) && wh->data_sz != payload_len)
        return -1;
    if ((wh->kind == ICBC_MSG_RTS || wh->kind == ICBC_MSG_CTS) && payload_len != 0)
        return -1;
    if ((wh->kind == ICBC_MSG_AM || wh->kind == ICBC_MSG_RTS) &&
        MPIDIG_global.target_msg_cbs[wh->handler_id] == NULL)
        return -1;
    memcpy(am_hdr, (const char *) inner + ICBC_WIRE_HDR_LEN(wh->kind), wh->am_hdr_sz);
    return 0;
}

static void dropped(int src, const char *what)
{
    fprintf(stderr, "icbc: rank %d dropped %s from rank %d\n", MPIR_Process.rank, what, src);
}

static void deliver_am(const icbc_am_hdr_t * wh, void *am_hdr, void *payload, size_t len)
{
    uint32_t attr = 0;

    MPIDIG_AM_ATTR_SET_VCIS(attr, wh->src_vci, wh->dst_vci);
    MPIDIG_global.target_msg_cbs[wh->handler_id] (am_hdr, payload, len, attr, NULL);
}

static void chunk_arrived(xslot_t * s, size_t len)
{
    s->received += len;
    s->t_last = now();
    if (s->received == s->size)
        slot_complete((int) (s - X.slots), 0);
}

static xslot_t *chunk_slot(int src, const icbc_am_hdr_t * wh)
{
    xslot_t *s = slot_lookup(wh->slot, wh->gen, src);

    if (s == NULL || wh->offset > s->size || wh->data_sz > s->size - wh->offset ||
        wh->data_sz > s->size - s->received)
        return NULL;
    return s;
}

void MPIDI_ICBC_xrecv_whole(int src_rank, const void *inner, size_t inner_len,
                            const void *payload, size_t len)
{
    icbc_am_hdr_t wh;
    uint64_t am_hdr[4096 / 8];
    xslot_t *s;

    if (parse_inner(src_rank, inner, inner_len, len, &wh, am_hdr, sizeof(am_hdr))) {
        dropped(src_rank, "a malformed message");
        return;
    }
    peer_seen(src_rank);
    switch (wh.kind) {
    case ICBC_MSG_AM:
        if (len && ((uintptr_t) payload & 7)) {
            void *copy = MPL_malloc(len, MPL_MEM_BUFFER);
            MPIR_Assert(copy);
            memcpy(copy, payload, len);
            deliver_am(&wh, am_hdr, copy, len);
            MPL_free(copy);
        } else {
            deliver_am(&wh, am_hdr, (void *) payload, len);
        }
        break;
    case ICBC_MSG_RTS:
        recv_rts(src_rank, &wh, am_hdr);
        break;
    case ICBC_MSG_CTS:
        recv_cts(src_rank, &wh);
        break;
    case ICBC_MSG_CHUNK:
        if ((s = chunk_slot(src_rank, &wh)) == NULL) {
            dropped(src_rank, "a chunk for an unknown receive");
            return;
        }
        memcpy(s->dest + wh.offset, payload, len);
        chunk_arrived(s, len);
        break;
    }
}

int MPIDI_ICBC_xrecv_begin(int src_rank, const void *inner, size_t inner_len,
                           uint64_t payload_len, MPIDI_ICBC_xrecv_t * x, void **dest)
{
    icbc_am_hdr_t wh;
    xslot_t *s;

    *dest = NULL;
    memset(x, 0, offsetof(MPIDI_ICBC_xrecv_t, am_hdr));
    if (parse_inner(src_rank, inner, inner_len, payload_len, &wh, x->am_hdr,
                    sizeof(x->am_hdr))) {
        dropped(src_rank, "a malformed message");
        return -1;
    }
    peer_seen(src_rank);
    x->kind = wh.kind;
    x->src_rank = src_rank;
    x->len = payload_len;
    switch (wh.kind) {
    case ICBC_MSG_AM:
        x->handler_id = wh.handler_id;
        x->src_vci = wh.src_vci;
        x->dst_vci = wh.dst_vci;
        x->am_hdr_sz = wh.am_hdr_sz;
        if (payload_len) {
            x->buf = MPL_malloc(payload_len, MPL_MEM_BUFFER);
            if (x->buf == NULL)
                return -1;
            *dest = x->buf;
        }
        return 0;
    case ICBC_MSG_RTS:
    case ICBC_MSG_CTS:
        /* no payload: handled now, end() has nothing left to do */
        MPIDI_ICBC_xrecv_whole(src_rank, inner, inner_len, NULL, 0);
        x->kind = 0;
        return 0;
    case ICBC_MSG_CHUNK:
        if ((s = chunk_slot(src_rank, &wh)) == NULL) {
            dropped(src_rank, "a chunk for an unknown receive");
            return 0;   /* late chunk of a failed transfer: drop, keep the path */
        }
        x->slot = wh.slot;
        x->gen = wh.gen;
        *dest = s->dest + wh.offset;
        return 0;
    }
    return -1;
}

void MPIDI_ICBC_xrecv_end(MPIDI_ICBC_xrecv_t * x, int ok)
{
    xslot_t *s;

    switch (x->kind) {
    case ICBC_MSG_AM:
        if (ok) {
            icbc_am_hdr_t wh = {
                .handler_id = x->handler_id,.src_vci = x->src_vci,.dst_vci = x->dst_vci
            };
            deliver_am(&wh, x->am_hdr, x->buf, x->len);
        }
        MPL_free(x->buf);
        x->buf = NULL;
        break;
    case ICBC_MSG_CHUNK:
        peer_seen(x->src_rank);
        s = slot_lookup(x->slot, x->gen, x->src_rank);
        if (s == NULL)
            break;
        if (ok)
            chunk_arrived(s, x->len);
        else
            slot_complete((int) (s - X.slots), xfer_error(x->src_rank, "chunk lost"));
        break;
    }
}

/* ---- UCX delivery from a router ---------------------------------------- */

typedef struct {
    MPIDI_ICBC_xrecv_t x;
} xpull_t;

static void chunk_pull_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    xpull_t *p = user_data;

    MPIDI_ICBC_xrecv_end(&p->x, status == UCS_OK);
    MPL_free(p);
    ucp_request_free(request);
}

ucs_status_t MPIDI_ICBC_xrecv_ucx(int src_rank, const void *inner, size_t inner_len, void *data,
                                  size_t len, int is_rndv)
{
    icbc_am_hdr_t wh;

    if (!is_rndv) {
        MPIDI_ICBC_xrecv_whole(src_rank, inner, inner_len, data, len);
        return UCS_OK;
    }
    if (icbc_am_hdr_parse(inner, inner_len, MPIDI_AM_HANDLERS_MAX,
                          (uint32_t) MPIDI_ICBC_global.peers.size, &wh) != ICBC_OK)
        goto drop;
    if (wh.kind == ICBC_MSG_AM) {
        /* a whole message the router sent with UCX's rendezvous: the same
         * in-place pull as on the direct path, and in order for MPIDIG */
        return MPIDI_ICBC_am_deliver(inner, inner_len, data, len, 1, src_rank);
    }
    if (wh.kind == ICBC_MSG_CHUNK) {
        xpull_t *p = MPL_malloc(sizeof(*p), MPL_MEM_BUFFER);
        void *dest;
        if (p == NULL)
            goto drop;
        if (MPIDI_ICBC_xrecv_begin(src_rank, inner, inner_len, len, &p->x, &dest) || !dest) {
            /* malformed (reported), or a late chunk of a failed receive */
            MPL_free(p);
            return UCS_OK;
        }
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb.recv_am = chunk_pull_done,
            .user_data = p,
        };
        ucs_status_ptr_t r = ucp_am_recv_data_nbx(MPIDI_ICBC_global.worker, data, dest, len,
                                                  &param);
        if (r == NULL || UCS_PTR_IS_ERR(r)) {
            MPIDI_ICBC_xrecv_end(&p->x, r == NULL);
            MPL_free(p);
        }
        return UCS_INPROGRESS;
    }
  drop:
    dropped(src_rank, "a malformed routed message");
    return UCS_OK;      /* UCX drops the descriptor */
}

/* ---- progress and failures --------------------------------------------- */

/* Receives already posted for a peer whose path died would wait forever:
 * MPIDIG cannot fail them. Transfers in flight have ended in MPI errors;
 * after a grace period that lets those errors reach the application, the
 * job ends with a message naming the cause (a routed path has no failover
 * yet). */
#define FAILURE_GRACE_SECONDS 5.0

static void abort_after_failure(double t)
{
    char msg[256];

    snprintf(msg, sizeof(msg), "icbc: rank %d: %s; ending the job (no failover of routed "
             "paths)", MPIR_Process.rank, X.failure);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    /* the process manager may drop output not yet forwarded when it tears
     * the job down: give this message a moment to get out */
    usleep(500000);
    MPID_Abort(NULL, MPI_ERR_OTHER, 1, msg);
}

void MPIDI_ICBC_xfer_progress(void)
{
    if (unlikely(X.failed_at > 0)) {
        double t = now();
        if (t - X.failed_at > FAILURE_GRACE_SECONDS && !MPIDI_ICBC_global.finalizing)
            abort_after_failure(t);
    }
    if (X.blocked) {
        for (int i = 0; i < X.nsends && X.blocked; i++)
            if (X.sends[i].sreq && X.sends[i].blocked)
                send_pump(i);
    }
    if ((X.active_sends || X.active_slots) && X.timeout > 0) {
        double t = now();
        if (t - X.last_scan < 1.0)
            return;
        X.last_scan = t;
        for (int i = 0; i < X.nslots; i++) {
            xslot_t *s = &X.slots[i];
            if (s->rreq && t - last_activity(s->t_last, s->src) > X.timeout) {
                fprintf(stderr, "icbc: rank %d: receive of %zu bytes from rank %d stalled "
                        "for %.0f s (%zu bytes arrived, nothing else from that rank); "
                        "failing it\n", MPIR_Process.rank, s->size, s->src,
                        t - last_activity(s->t_last, s->src), s->received);
                slot_complete(i, xfer_error(s->src, "no chunk arrived in time"));
            }
        }
        for (int i = 0; i < X.nsends; i++) {
            xsend_t *s = &X.sends[i];
            if (s->sreq && !s->cts && s->outstanding == 0 &&
                t - last_activity(s->t_last, s->dst) > X.timeout) {
                fprintf(stderr, "icbc: rank %d: striped send of %zu bytes to rank %d got no "
                        "clear-to-send for %.0f s (nor anything else from that rank); "
                        "failing it\n", MPIR_Process.rank, s->size, s->dst,
                        t - last_activity(s->t_last, s->dst));
                s->failed = 1;
                send_finish(i);
            }
        }
    }
}

void MPIDI_ICBC_xfer_peer_failed(int rank, const char *why)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);

    if (peer == NULL)
        return;
    if (peer->state != ICBC_PEER_FAILED && !MPIDI_ICBC_global.finalizing) {
        fprintf(stderr, "icbc: rank %d lost its path to rank %d (node %s): %s\n",
                MPIR_Process.rank, rank, peer->node, why);
        if (X.failed_at == 0) {
            X.failed_at = now();
            snprintf(X.failure, sizeof(X.failure), "lost the path to rank %d (node %s): %s",
                     rank, peer->node, why);
        }
    }
    peer->state = ICBC_PEER_FAILED;
    for (int i = 0; i < X.nslots; i++)
        if (X.slots[i].rreq && X.slots[i].src == rank)
            slot_complete(i, xfer_error(rank, why));
    for (int i = 0; i < X.nsends; i++) {
        xsend_t *s = &X.sends[i];
        if (s->sreq && s->dst == rank && !s->failed) {
            s->failed = 1;
            if (s->outstanding == 0)
                send_finish(i);
        }
    }
}

void MPIDI_ICBC_xfer_dump(FILE * f)
{
    double t = now();

    fprintf(f, "  striped sends: %d active, %d blocked on a busy lane\n", X.active_sends,
            X.blocked);
    for (int i = 0; i < X.nsends; i++) {
        const xsend_t *s = &X.sends[i];
        if (s->sreq == NULL)
            continue;
        fprintf(f, "    send %d.%u to rank %d: %zu bytes, %zu handed to lanes, %d chunk(s) "
                "out, %s%s%s, quiet for %.1f s\n", i, s->gen, s->dst, s->size, s->next,
                s->outstanding, s->cts ? "CTS received" : "waiting for CTS",
                s->blocked ? ", blocked" : "", s->failed ? ", failed" : "", t - s->t_last);
    }
    fprintf(f, "  striped receives: %d active\n", X.active_slots);
    for (int i = 0; i < X.nslots; i++) {
        const xslot_t *s = &X.slots[i];
        if (s->rreq == NULL)
            continue;
        fprintf(f, "    slot %d.%u from rank %d: %zu of %zu bytes, quiet for %.1f s\n", i,
                s->gen, s->src, s->received, s->size, t - s->t_last);
    }
}
