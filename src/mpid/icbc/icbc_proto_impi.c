/*
 * The IMPI protocol: MPI messages to and from the processes of other IMPI
 * clients (icbc_impi.h, docs/impi.md), as IMPI packets on the host
 * connections (icbc_path_impi.c). The packets' protocol per pair of
 * processes is libicbc's (src/impi/p2p.c); this file maps MPIDIG's messages
 * onto it:
 *
 *   MPIDIG_SEND, short     DATA; synchronous: DATASYNC, done at its SYNCACK
 *   MPIDIG_SEND, long      DATASYNC with the first DATALEN bytes, the rest as
 *                          DATA once the receiver's SYNCACK came
 *   MPIDIG_SSEND_ACK       the SYNCACK of the synchronous message it answers
 *   a short arrival        to MPIDIG as an eager MPIDIG_SEND
 *   a long head            to MPIDIG as a rendezvous; once matched, SYNCACK,
 *                          and the DATA packets land at their offsets
 *
 * Matching stays MPIDIG's. An MPI message carries MPICH's context id and
 * the sender's rank in the communicator (IMPI's cid and lsrank), so
 * MPI_COMM_WORLD's point-to-point and collective ids are 0 and 1, as LAM/MPI
 * puts them on the wire. Every other MPIDIG message (one-sided operations)
 * has no IMPI packet: between two ICBC clients it takes ICBC's own protocol
 * (MPIDI_ICBC_proto_icbc, on the host connections' lanes); to a client of
 * another MPI it is an MPI error.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_proto.h"
#include "icbc_recv.h"
#include "icbc_xfer.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"
#include "impi/impi_p2p.h"
#include "core/icbc_bytes.h"
#include "core/icbc_hmap.h"

/* Context ids with LAM/MPI 7.1.4 (docs/impi.md, LAM/MPI 7.1.4 as it
 * behaves). LAM runs the collectives it composes from point-to-point on
 * -(id) - 1 of a communicator's point-to-point id, and ends them by setting
 * the communicator's id back with the function meant for IMPI's collective
 * ids, which leaves a negative id alone: from the first such collective on,
 * LAM sends and expects everything on that communicator (point-to-point,
 * IMPI's Barrier, Bcast and Reduce, and its own collectives) on -(id) - 1.
 * Every rank of the communicator calls that collective, so each process
 * knows when it happened: the communicator's id is then marked here
 * (MPIDI_ICBC_impi_lam_degrade), and messages of that communicator to LAM
 * processes travel on -(id) - 1; those from LAM on it go to the context
 * their tag belongs to. */
#define CTX_BASE(c) ((c) & ~(MPIR_CONTEXT_SUBCOMM_MASK | MPIR_CONTEXT_SUFFIX_MASK))
static uint8_t lam_degraded[(1 << 16) / 8];

void MPIDI_ICBC_impi_lam_degrade(MPIR_Context_id_t c)
{
    c = CTX_BASE(c);
    lam_degraded[c / 8] |= (uint8_t) (1u << (c % 8));
}

static int is_lam_degraded(MPIR_Context_id_t c)
{
    c = CTX_BASE(c);
    return (lam_degraded[c / 8] >> (c % 8)) & 1;
}

/* Whether world rank R is a process of a LAM/MPI client (one that gave no
 * data representation of its own). */
static int is_lam_rank(int r)
{
    return !MPIDI_ICBC_impi_speaks_icbc(r);
}

/* IMPI's context id of MPICH's context C towards world rank DEST: LAM's
 * context, and after LAM switched to it every context of that
 * communicator, travel as -(id) - 1 to LAM's processes; every other
 * message carries C itself (between ICBC clients, LAM's context too). */
static uint64_t cid_to_wire(MPIR_Context_id_t c, int dest)
{
    int subcomm = c & MPIR_CONTEXT_SUBCOMM_MASK;

    if (!is_lam_rank(dest))
        return c;
    if (subcomm == ICBC_CTX_OFFSET_LAM || (subcomm == 0 && is_lam_degraded(c)))
        return (uint64_t) (-(int64_t) CTX_BASE(c) - 1);
    return c;
}

/* MPICH's context id of IMPI's W on a message with TAG; 0 when W names no
 * context MPICH has (its ids are 16 bits). A negative W comes from LAM. */
static int cid_from_wire(uint64_t w, int tag, MPIR_Context_id_t *c)
{
    int64_t v = (int64_t) w;

    if (v >= 0) {
        if (v > 0xffff)
            return 0;
        *c = (MPIR_Context_id_t) v;
        return 1;
    }
    v = -(v + 1);
    if (v > 0xffff || CTX_BASE(v) != v)
        return 0;
    switch (tag) {
    case IMPI_TAG_BARRIER:
    case IMPI_TAG_BCAST: *c = (MPIR_Context_id_t) (v + MPIR_CONTEXT_INTRA_COLL); break;
    case LAM_TAG_ALLTOALL:
    case LAM_TAG_ALLTOALLV:
    case LAM_TAG_GATHER:
    case LAM_TAG_GATHERV:
    case LAM_TAG_SCAN:
    case LAM_TAG_SCATTER:
    case LAM_TAG_SCATTERV:
    case LAM_TAG_EXSCAN: *c = (MPIR_Context_id_t) (v + ICBC_CTX_OFFSET_LAM); break;
    default: /* point-to-point, and IMPI's Reduce, which LAM sends there */
        *c = (MPIR_Context_id_t) v;
    }
    return 1;
}

/* A message that arrived and waits for MPIDIG: a synchronous short one
 * until its match is acknowledged, a long one until its last byte. */
typedef struct {
    int used;
    impi_msg_t msg;
    uint8_t *head;  /* a long head's bytes until matched */
    int head_owned; /* HEAD is a copy of this file's (else the packet's own bytes) */
    MPIR_Request *rreq;
    uint64_t drqid; /* a long one, once matched */
    int host;
} arrival_t;

/* Every lookup by id is O(1): a send by its request (which knows its
 * index), an arrival by its index (MPIDIG's token, the request's cookie) or
 * by the drqid its DATA packets carry. */
static struct {
    impi_p2p_t *p2p;
    arrival_t *arrivals;
    int narrivals;
    int *arrivals_free; /* indices of free arrivals: a stack */
    int nfree;
    icbc_hmap_t by_drqid; /* drqid -> index + 1 of a long arrival being received */
    MPIR_Request **sends; /* in flight */
    int nsends, sends_cap;
} msgs; /* this process's IMPI messages */

static int cur_host = -1; /* the host whose packet is being handled */

static int impi_matched(MPIR_Request *rreq);

/* ---- sends ------------------------------------------------------------- */

static void sends_remove(MPIR_Request *sreq)
{
    int i = MPIDI_ICBC_AMREQ(sreq).xslot;
    MPIR_Request *last = msgs.sends[--msgs.nsends];

    msgs.sends[i] = last;
    MPIDI_ICBC_AMREQ(last).xslot = i;
}

static void send_complete(MPIR_Request *sreq, int ok)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    int sync = amreq->xsync;
    MPIR_Request *ack_for = (MPIR_Request *) (uintptr_t) amreq->xcookie;

    sends_remove(sreq);
    amreq->xsync = 0;
    if (!ok)
        sreq->status.MPI_ERROR =
            MPIDI_ICBC_ERR_PEER(amreq->xpeer, "its IMPI host connection was lost");
    /* a synchronous send is matched once the receiver's SYNCACK came:
     * MPIDIG's own acknowledgement, delivered here (also when the send
     * failed: the request must complete, with its error) */
    if (sync) {
        MPIDIG_ssend_ack_msg_t ack = { .sreq_ptr = ack_for };
        uint32_t attr = 0;
        MPIDIG_AM_ATTR_SET_VCIS(attr, 0, 0);
        MPIDIG_global.target_msg_cbs[MPIDIG_SSEND_ACK](&ack, NULL, 0, attr, NULL);
    }
    MPIDI_ICBC_proto_send_done(sreq);
}

static void on_send_done(void *arg, uint64_t srqid)
{
    send_complete((MPIR_Request *) (uintptr_t) srqid, 1);
}

/* Whether MPIDIG's message is an MPI message IMPI carries (a send without
 * MPIDIG's own rendezvous). */
static int is_impi_message(int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz)
{
    const MPIDIG_hdr_t *h = am_hdr;

    return handler_id == MPIDIG_SEND && am_hdr_sz >= (MPI_Aint) sizeof(*h) &&
           !(h->flags & MPIDIG_AM_SEND_FLAGS_RTS);
}

static int impi_am_isend(icbc_peer_t *peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                         const void *data, MPI_Aint count, MPI_Datatype datatype, int src_vci,
                         int dst_vci, MPIR_Request *sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    const MPIDIG_hdr_t *h = am_hdr;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    const void *payload = NULL;

    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(peer->state == ICBC_PEER_FAILED, mpi_errno, peer->rank,
                                   "its IMPI host connection was lost");
    if (!is_impi_message(handler_id, am_hdr, am_hdr_sz)) {
        /* not an MPI message: ICBC's protocol, which only ICBC clients speak */
        MPIDI_ICBC_ERR_PEER_CHKANDJUMP(is_lam_rank(peer->rank), mpi_errno, peer->rank,
                                       MPIDI_ICBC_IMPI_NOT_ICBC_WHY);
        return MPIDI_ICBC_proto_icbc.am_isend(peer, handler_id, am_hdr, am_hdr_sz, data, count,
                                              datatype, src_vci, dst_vci, sreq);
    }
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    MPL_pointer_attr_t attr;
    MPIR_GPU_query_pointer_attr(data, &attr);
    if (data_sz > 0 && dt_contig && attr.type != MPL_GPU_POINTER_DEV) {
        payload = MPIR_get_contig_ptr(data, dt_true_lb);
    } else if (data_sz > 0) {
        MPI_Aint packed;
        amreq->pack_buf = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->pack_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, amreq->pack_buf, data_sz, &packed);
        MPIR_ERR_CHECK(mpi_errno);
        payload = amreq->pack_buf;
    }
    amreq->handler_id = handler_id;
    amreq->xpeer = peer->rank;
    amreq->xsync = (h->flags & MPIDIG_AM_SEND_FLAGS_SYNC) != 0;
    amreq->xcookie = (uint64_t) (uintptr_t) h->sreq_ptr;

    if (msgs.nsends == msgs.sends_cap) {
        int cap = MPL_MAX(64, 2 * msgs.sends_cap);
        MPIR_Request **p = MPL_realloc(msgs.sends, sizeof(*p) * cap, MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(p == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        msgs.sends = p;
        msgs.sends_cap = cap;
    }
    amreq->xslot = msgs.nsends;
    msgs.sends[msgs.nsends++] = sreq;

    impi_send_t s = {
        .src = MPIR_Process.rank,
        .dest = peer->rank,
        .lsrank = h->src_rank,
        .tag = h->tag,
        .cid = cid_to_wire(h->context_id, peer->rank),
        .srqid = (uint64_t) (uintptr_t) sreq,
        .buf = payload,
        .len = data_sz,
        .sync = (h->flags & MPIDIG_AM_SEND_FLAGS_SYNC) != 0,
    };
    if (impi_p2p_send(msgs.p2p, &s) != ICBC_OK) {
        sends_remove(sreq);
        amreq->xsync = 0;
        MPIDI_ICBC_ERR_PEER_SETANDJUMP(mpi_errno, peer->rank, "its IMPI host connection was lost");
    }
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* ---- arrivals ------------------------------------------------------------ */

static int arrival_new(const impi_msg_t *m, int host)
{
    if (msgs.nfree == 0) {
        int n = MPL_MAX(64, 2 * msgs.narrivals);
        arrival_t *p = MPL_realloc(msgs.arrivals, sizeof(*p) * n, MPL_MEM_OTHER);
        if (p == NULL)
            return -1;
        msgs.arrivals = p;
        int *f = MPL_realloc(msgs.arrivals_free, sizeof(*f) * n, MPL_MEM_OTHER);
        if (f == NULL)
            return -1;
        msgs.arrivals_free = f;
        memset(p + msgs.narrivals, 0, sizeof(*p) * (n - msgs.narrivals));
        for (int i = n; i > msgs.narrivals; i--)
            f[msgs.nfree++] = i - 1;
        msgs.narrivals = n;
    }
    int i = msgs.arrivals_free[--msgs.nfree];
    arrival_t *a = &msgs.arrivals[i];
    memset(a, 0, sizeof(*a));
    a->used = 1;
    a->msg = *m;
    a->msg.payload = NULL;
    a->host = host;
    return i;
}

static void arrival_free(int i)
{
    arrival_t *a = &msgs.arrivals[i];

    if (a->drqid)
        icbc_hmap_del(&msgs.by_drqid, a->drqid, 0);
    if (a->head_owned)
        MPL_free(a->head);
    a->head = NULL;
    a->head_owned = 0;
    a->drqid = 0;
    a->used = 0;
    msgs.arrivals_free[msgs.nfree++] = i;
}

/* A long arrival was matched: SYNCACK, and its DATA packets are found by
 * the drqid. */
static icbc_status_t arrival_matched(int i)
{
    arrival_t *a = &msgs.arrivals[i];
    icbc_status_t st = impi_p2p_matched(msgs.p2p, &a->msg, &a->drqid);

    if (st == ICBC_OK)
        st = icbc_hmap_put(&msgs.by_drqid, a->drqid, 0, (void *) (uintptr_t) (i + 1));
    return st;
}

static void on_arrived(void *arg, const impi_msg_t *m)
{
    MPIDIG_hdr_t hdr;
    uint32_t attr = 0;
    int slot;

    memset(&hdr, 0, sizeof(hdr));
    hdr.src_rank = m->lsrank;
    hdr.tag = m->tag;
    /* on_packet let only context ids MPICH has this far */
    cid_from_wire(m->cid, m->tag, &hdr.context_id);
    hdr.data_sz = (MPI_Aint) m->msglen;
    MPIDIG_AM_ATTR_SET_VCIS(attr, 0, 0);

    if (m->kind == IMPI_MSG_SHORT) {
        MPIDIG_global.target_msg_cbs[MPIDIG_SEND](&hdr, (void *) m->payload, m->len, attr, NULL);
        return;
    }
    slot = arrival_new(m, cur_host);
    if (slot < 0) {
        MPIDI_ICBC_impi_host_failed(cur_host, "out of memory for an arriving message");
        return;
    }
    if (m->kind == IMPI_MSG_SHORT_SYNC) {
        /* MPIDIG answers the match with MPIDIG_SSEND_ACK to this token */
        hdr.flags = MPIDIG_AM_SEND_FLAGS_SYNC;
        hdr.sreq_ptr = (MPIR_Request *) (uintptr_t) (slot + 1);
        MPIDIG_global.target_msg_cbs[MPIDIG_SEND](&hdr, (void *) m->payload, m->len, attr, NULL);
        return;
    }

    /* a long head: a rendezvous. Its bytes are read where the packet lies
     * while this runs: a receive posted already takes them from there, one
     * posted later from a copy kept until then */
    arrival_t *a = &msgs.arrivals[slot];
    MPIR_Request *rreq = NULL;
    a->head = (uint8_t *) m->payload;
    a->head_owned = 0;
    attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
    MPIDIG_global.target_msg_cbs[MPIDIG_SEND](&hdr, NULL, (MPI_Aint) m->msglen, attr, &rreq);
    a = &msgs.arrivals[slot]; /* the table may have grown meanwhile */
    if (rreq == NULL) {       /* nobody wants it: take it and drop its bytes */
        a->head = NULL;
        if (arrival_matched(slot) != ICBC_OK)
            MPIDI_ICBC_impi_host_failed(cur_host, "cannot answer its long message");
        return;
    }
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    amreq->xproto = &MPIDI_ICBC_proto_impi;
    amreq->xpeer = m->src;
    amreq->xcookie = (uint64_t) slot;
    amreq->rndv_size = m->msglen;
    if (MPIDIG_recv_initialized(rreq)) {
        impi_matched(rreq);
        return;
    }
    /* MPIDIG calls MPIDI_ICBC_rndv_pull -> impi_matched on match */
    uint8_t *copy = MPL_malloc(m->len ? m->len : 1, MPL_MEM_BUFFER);
    if (copy == NULL) {
        a->head = NULL;
        MPIDI_ICBC_impi_host_failed(cur_host, "out of memory for an arriving message");
        return;
    }
    memcpy(copy, m->payload, m->len);
    a->head = copy;
    a->head_owned = 1;
}

static int impi_matched(MPIR_Request *rreq)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    arrival_t *a = &msgs.arrivals[amreq->xcookie];
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;

    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    MPIDI_ICBC_recv_place(rreq, 0, a->head, a->msg.len);
    if (a->head_owned)
        MPL_free(a->head);
    a->head = NULL;
    a->head_owned = 0;
    a->rreq = rreq;
    if (arrival_matched((int) amreq->xcookie) != ICBC_OK)
        MPIDI_ICBC_impi_host_failed(a->host, "cannot answer its long message");
    return MPI_SUCCESS;
}

static void on_data(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *bytes, size_t len,
                    int last)
{
    uintptr_t v = (uintptr_t) icbc_hmap_get(&msgs.by_drqid, drqid, 0);
    int i = (int) v - 1;

    if (v == 0)
        return; /* impi_p2p checked it: a message dropped here (host lost) */
    arrival_t *a = &msgs.arrivals[i];
    if (a->rreq)
        MPIDI_ICBC_recv_place(a->rreq, offset, bytes, len);
    if (last) {
        if (a->rreq)
            MPIDI_ICBC_recv_done(a->rreq, MPI_SUCCESS);
        arrival_free(i);
    }
}

static int impi_send_hdr(icbc_peer_t *peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                         int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;

    if (handler_id != MPIDIG_SSEND_ACK) {
        MPIDI_ICBC_ERR_PEER_CHKANDJUMP(is_lam_rank(peer->rank), mpi_errno, peer->rank,
                                       MPIDI_ICBC_IMPI_NOT_ICBC_WHY);
        return MPIDI_ICBC_proto_icbc.send_hdr(peer, handler_id, am_hdr, am_hdr_sz, src_vci,
                                              dst_vci);
    }
    MPIR_Assert(am_hdr_sz >= (MPI_Aint) sizeof(MPIDIG_ssend_ack_msg_t));
    uintptr_t token = (uintptr_t) ((const MPIDIG_ssend_ack_msg_t *) am_hdr)->sreq_ptr;
    int slot = (int) token - 1;
    MPIR_Assert(slot >= 0 && slot < msgs.narrivals && msgs.arrivals[slot].used &&
                msgs.arrivals[slot].msg.src == peer->rank);
    if (impi_p2p_matched(msgs.p2p, &msgs.arrivals[slot].msg, NULL) != ICBC_OK)
        mpi_errno = MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    arrival_free(slot);
fn_fail:
    return mpi_errno;
}

/* ---- packets and lost hosts ----------------------------------------------- */

static icbc_status_t emit(void *arg, int host, const uint8_t *hdr, const void *payload, size_t len)
{
    uint32_t type = icbc_get32(hdr);

    /* data waits in its pair's order while the connection is full
     * (impi_p2p_progress in writable); answers never wait */
    return MPIDI_ICBC_impi_emit(
        host, hdr, IMPI_PKT_HDR_SIZE, payload, len,
        type == IMPI_PK_DATA || type == IMPI_PK_DATASYNC ? MPIDI_ICBC_IMPI_BACKLOG : 0);
}

/* An emit fails only towards a lost host, whose sends end in on_host_lost. */
static void on_writable(void)
{
    if (impi_p2p_held(msgs.p2p))
        (void) impi_p2p_progress(msgs.p2p);
}

static const impi_p2p_ops_t p2p_ops = {
    .emit = emit,
    .arrived = on_arrived,
    .data = on_data,
    .send_done = on_send_done,
    .cancel = NULL, /* MPIDIG cannot take an unmatched message back: CANCELNO */
    .fini = NULL,   /* FINI is the agent's: it ends the host, not a process */
};

static icbc_status_t on_packet(int host, const impi_rx_pkt_t *pkt, char *err, size_t errlen)
{
    MPIR_Context_id_t cid;
    icbc_status_t st;

    if ((pkt->hdr->type == IMPI_PK_DATA || pkt->hdr->type == IMPI_PK_DATASYNC) &&
        pkt->hdr->drqid == 0 && !cid_from_wire(pkt->hdr->cid, pkt->hdr->tag, &cid)) {
        snprintf(err, errlen, "a message for context %llu, which no communicator has",
                 (unsigned long long) pkt->hdr->cid);
        return ICBC_ERR_INVALID;
    }
    cur_host = host;
    st = impi_p2p_packet(msgs.p2p, host, pkt, err, errlen);
    cur_host = -1;
    return st;
}

/* HOST is lost: the sends to its processes end with an error, and so do
 * the long messages from them being received. */
static void on_host_lost(int host, const char *why)
{
    const impi_host_t *h = &MPIDI_ICBC_impi.layout.hosts[host];

    for (int i = 0; i < msgs.nsends;) {
        MPIR_Request *sreq = msgs.sends[i];
        int r = MPIDI_ICBC_AMREQ(sreq).xpeer;
        if (r >= h->first_rank && r < h->first_rank + (int) h->nprocs)
            send_complete(sreq, 0); /* removes it from msgs.sends */
        else
            i++;
    }
    for (int i = 0; i < msgs.narrivals; i++) {
        arrival_t *a = &msgs.arrivals[i];
        if (!a->used || a->host != host)
            continue;
        if (a->rreq)
            MPIDI_ICBC_recv_done(a->rreq, MPIDI_ICBC_xfer_error(a->msg.src, why));
        arrival_free(i);
    }
}

static void on_dump(FILE *f)
{
    fprintf(f,
            "  impi: %d send(s) in flight, %zu send(s) pending, %zu pair(s) held for a full "
            "connection\n",
            msgs.nsends, msgs.p2p ? impi_p2p_sends_pending(msgs.p2p) : (size_t) 0,
            msgs.p2p ? impi_p2p_held(msgs.p2p) : (size_t) 0);
    for (int i = 0; i < msgs.narrivals; i++)
        if (msgs.arrivals[i].used)
            fprintf(f, "  impi:   arrival from rank %d: %llu bytes, %s\n", msgs.arrivals[i].msg.src,
                    (unsigned long long) msgs.arrivals[i].msg.msglen,
                    msgs.arrivals[i].head ? "long, waiting for its match"
                    : msgs.arrivals[i].msg.kind == IMPI_MSG_LONG_HEAD ? "long, receiving"
                                                                      : "synchronous, not matched");
}

static const MPIDI_ICBC_impi_up_t impi_up = {
    .packet = on_packet,
    .host_lost = on_host_lost,
    .dump = on_dump,
    .writable = on_writable,
};

int MPIDI_ICBC_proto_impi_open(void)
{
    int client, self_host;

    MPIDI_ICBC_impi_where(MPIR_Process.rank, &client, &self_host);
    icbc_hmap_init(&msgs.by_drqid);
    if (impi_p2p_create(&MPIDI_ICBC_impi.layout, self_host, &p2p_ops, NULL, &msgs.p2p) != ICBC_OK)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                    "**nomem", 0);
    MPIDI_ICBC_impi_attach(&impi_up);
    return MPI_SUCCESS;
}

void MPIDI_ICBC_proto_impi_finalize(void)
{
    MPIDI_ICBC_impi_attach(NULL);
    impi_p2p_destroy(msgs.p2p);
    for (int i = 0; i < msgs.narrivals; i++)
        if (msgs.arrivals[i].head_owned)
            MPL_free(msgs.arrivals[i].head);
    MPL_free(msgs.arrivals);
    MPL_free(msgs.arrivals_free);
    icbc_hmap_free(&msgs.by_drqid);
    MPL_free(msgs.sends);
    memset(&msgs, 0, sizeof(msgs));
}

const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_impi = {
    .name = "impi",
    .am_isend = impi_am_isend,
    .send_hdr = impi_send_hdr,
    .matched = impi_matched,
};
