/*
 * The IMPI path: peers that are processes of another IMPI client
 * (icbc_impi.h, docs/impi.md). Every node of this job is one IMPI host
 * with one TCP connection to every host of the other clients, held by the
 * host's agent (src/impi/impi_agent.h) in a thread of the node's first
 * process; every process of the node reaches it over a local link, on
 * which its packets travel whole. At MPI_Init the first process connects
 * to the lower hosts, from the address the host advertised, and names the
 * host; an accepted connection is held to the job's layout before it
 * carries anything (impi_host_accept_check). MPI messages become IMPI
 * packets, whose protocol per pair of processes each process keeps with
 * libicbc (src/impi/p2p.c):
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
 * has no IMPI packet: between two ICBC clients it travels in ICBC's own
 * protocol (icbc_xfer.h) as IMPI_PK_ICBC packets on the same connections;
 * to a client of another MPI it is an MPI error. The port faces the WAN: a packet the layout or the
 * protocol does not allow closes the connection with a message naming the
 * host, and its processes fail like a lost peer.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"
#include "impi/impi_agent.h"
#include "impi/impi_hostconn.h"
#include "impi/impi_p2p.h"
#include "impi/impi_rx.h"
#include "core/icbc_bytes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
    int client, host;

    MPIDI_ICBC_impi_where(r, &client, &host);
    return !(MPIDI_ICBC_impi.layout.datarep_mask & (1u << client));
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

/* What this process has with one host of another client: the packets
 * from it (impi_rx, holding them to the layout once more) and whether it is
 * lost. Every host is reached through this node's IMPI host (the agent). */
typedef struct {
    impi_rx_t rx;
    int failed;
} conn_t;

/* A message that arrived and waits for MPIDIG: a synchronous short one
 * until its match is acknowledged, a long one until its last byte. */
typedef struct {
    int used;
    impi_msg_t msg;
    uint8_t *head; /* a long head's bytes until matched */
    MPIR_Request *rreq;
    uint64_t drqid; /* a long one, once matched */
    int host;
} arrival_t;

static struct {
    int open;
    int self_host; /* this node's IMPI host */
    conn_t *conns; /* per host of the job */
    int link;      /* to the agent: frames (impi_agent.h) */
    uint8_t *out;  /* bytes not yet written: out[out_off .. out_len) */
    size_t out_off, out_len, out_cap;
    impi_frames_t frames;
    /* the node's first process: the agent, which its progress and a thread
     * of its own both run (under AGENT_LOCK) */
    impi_agent_t *agent;
    pthread_t agent_thread;
    int has_thread; /* the host has other processes, which the thread serves */
    pthread_mutex_t agent_lock;
    uint8_t *in; /* frames from the agent, swapped out of it whole */
    size_t in_cap;
    int in_walk;
    impi_p2p_t *p2p;
    arrival_t *arrivals;
    int narrivals;
    MPIR_Request **sends; /* in flight */
    int nsends, sends_cap;
    /* ICBC messages (icbc_xfer.h) between ICBC clients */
    struct icbc_in **icbc_in;      /* per world rank: its message arriving in pieces */
    MPIDI_ICBC_path_done_t *dones; /* lane sends copied out, to complete in progress */
    int ndones, dones_cap;
} IH; /* this process's side of its node's IMPI host */

/* ---- connections --------------------------------------------------------- */

static void host_failed(int host, const char *why);
static void link_lost(const char *why);

/* Writes what the link takes now; -1: it broke. */
static int flush_out(void)
{
    return impi_send_pending(IH.link, IH.out, &IH.out_off, &IH.out_len);
}

/* A frame to the agent: its header, then A and B (either may be empty). */
static icbc_status_t link_put(uint32_t kind, uint32_t host, const void *a, size_t alen,
                              const void *b, size_t blen)
{
    size_t need = IH.out_len + IMPI_FRAME_HDR_SIZE + alen + blen;

    if (IH.link < 0 && !IH.agent)
        return ICBC_ERR_PEER_FAILED;
    if (need > IH.out_cap) {
        size_t cap = MPL_MAX(2 * IH.out_cap, need);
        uint8_t *p = MPL_realloc(IH.out, cap, MPL_MEM_BUFFER);
        if (p == NULL)
            return ICBC_ERR_NO_MEMORY;
        IH.out = p;
        IH.out_cap = cap;
    }
    uint8_t *w = IH.out + IH.out_len;
    impi_frame_hdr_pack(kind, host, (uint32_t) (alen + blen), w);
    if (alen)
        memcpy(w + IMPI_FRAME_HDR_SIZE, a, alen);
    if (blen)
        memcpy(w + IMPI_FRAME_HDR_SIZE + alen, b, blen);
    IH.out_len = need;
    if (IH.agent) { /* this process is the node's first: straight to the agent */
        pthread_mutex_lock(&IH.agent_lock);
        impi_agent_local_input(IH.agent, 0, IH.out, IH.out_len);
        pthread_mutex_unlock(&IH.agent_lock);
        IH.out_len = 0;
        return ICBC_OK;
    }
    if (flush_out() != 0) {
        link_lost("writing to it failed");
        return ICBC_ERR_PEER_FAILED;
    }
    return ICBC_OK;
}

/* A packet for HOST: HEAD (its header, maybe more) and PAYLOAD. */
static icbc_status_t emit_head(int host, const uint8_t *head, size_t head_len, const void *payload,
                               size_t len)
{
    icbc_status_t st;

    if (host < 0 || host >= MPIDI_ICBC_impi.layout.nhosts_total || IH.conns[host].failed)
        return ICBC_ERR_PEER_FAILED;
    if (!IH.agent)
        return link_put(IMPI_FRAME_PACKET, (uint32_t) host, head, head_len, payload, len);
    /* this process is its host's first: straight onto the host connection */
    pthread_mutex_lock(&IH.agent_lock);
    st = impi_agent_local_packet(IH.agent, host, head, head_len, payload, len);
    pthread_mutex_unlock(&IH.agent_lock);
    return st;
}

static icbc_status_t emit(void *arg, int host, const uint8_t *hdr, const void *payload, size_t len)
{
    return emit_head(host, hdr, IMPI_PKT_HDR_SIZE, payload, len);
}

/* ---- sends ------------------------------------------------------------- */

static void sends_remove(MPIR_Request *sreq)
{
    for (int i = 0; i < IH.nsends; i++)
        if (IH.sends[i] == sreq) {
            IH.sends[i] = IH.sends[--IH.nsends];
            return;
        }
}

static void send_complete(MPIR_Request *sreq, int ok)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    int sync = amreq->xkind == MPIDI_ICBC_XKIND_IMPI_SSEND;
    MPIR_Request *ack_for = (MPIR_Request *) (uintptr_t) amreq->xcookie;

    sends_remove(sreq);
    amreq->xkind = MPIDI_ICBC_XKIND_NONE;
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
    MPIDI_ICBC_am_isend_done_common(sreq);
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

#define NOT_IMPI_WHY                                                                               \
    "it is a process of an IMPI client of another MPI, and IMPI carries point-to-point messages "  \
    "only (no one-sided operations)"

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
                                       NOT_IMPI_WHY);
        return MPIDI_ICBC_xfer_am_isend(peer, handler_id, am_hdr, am_hdr_sz, data, count, datatype,
                                        src_vci, dst_vci, sreq);
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
    amreq->xkind = (h->flags & MPIDIG_AM_SEND_FLAGS_SYNC) ? MPIDI_ICBC_XKIND_IMPI_SSEND
                                                          : MPIDI_ICBC_XKIND_IMPI_SEND;
    amreq->xcookie = (uint64_t) (uintptr_t) h->sreq_ptr;

    if (IH.nsends == IH.sends_cap) {
        int cap = MPL_MAX(64, 2 * IH.sends_cap);
        MPIR_Request **p = MPL_realloc(IH.sends, sizeof(*p) * cap, MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(p == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        IH.sends = p;
        IH.sends_cap = cap;
    }
    IH.sends[IH.nsends++] = sreq;

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
    if (impi_p2p_send(IH.p2p, &s) != ICBC_OK) {
        sends_remove(sreq);
        amreq->xkind = MPIDI_ICBC_XKIND_NONE;
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
    for (int i = 0; i < IH.narrivals; i++)
        if (!IH.arrivals[i].used) {
            memset(&IH.arrivals[i], 0, sizeof(IH.arrivals[i]));
            IH.arrivals[i].used = 1;
            IH.arrivals[i].msg = *m;
            IH.arrivals[i].msg.payload = NULL;
            IH.arrivals[i].host = host;
            return i;
        }
    int n = MPL_MAX(64, 2 * IH.narrivals);
    arrival_t *p = MPL_realloc(IH.arrivals, sizeof(*p) * n, MPL_MEM_OTHER);
    if (p == NULL)
        return -1;
    memset(p + IH.narrivals, 0, sizeof(*p) * (n - IH.narrivals));
    IH.arrivals = p;
    IH.narrivals = n;
    return arrival_new(m, host);
}

static void arrival_free(int i)
{
    MPL_free(IH.arrivals[i].head);
    IH.arrivals[i].head = NULL;
    IH.arrivals[i].used = 0;
}

static int cur_host = -1; /* the host whose packet is being handled */

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
        host_failed(cur_host, "out of memory for an arriving message");
        return;
    }
    if (m->kind == IMPI_MSG_SHORT_SYNC) {
        /* MPIDIG answers the match with MPIDIG_SSEND_ACK to this token */
        hdr.flags = MPIDIG_AM_SEND_FLAGS_SYNC;
        hdr.sreq_ptr = (MPIR_Request *) (uintptr_t) (slot + 1);
        MPIDIG_global.target_msg_cbs[MPIDIG_SEND](&hdr, (void *) m->payload, m->len, attr, NULL);
        return;
    }

    /* a long head: a rendezvous; its bytes wait for the match */
    arrival_t *a = &IH.arrivals[slot];
    MPIR_Request *rreq = NULL;
    a->head = MPL_malloc(m->len ? m->len : 1, MPL_MEM_BUFFER);
    if (a->head == NULL) {
        arrival_free(slot);
        host_failed(cur_host, "out of memory for an arriving message");
        return;
    }
    memcpy(a->head, m->payload, m->len);
    attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
    MPIDIG_global.target_msg_cbs[MPIDIG_SEND](&hdr, NULL, (MPI_Aint) m->msglen, attr, &rreq);
    if (rreq == NULL) { /* nobody wants it: take it and drop its bytes */
        impi_p2p_matched(IH.p2p, &a->msg, &a->drqid);
        MPL_free(a->head);
        a->head = NULL;
        return;
    }
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    amreq->xkind = MPIDI_ICBC_XKIND_IMPI;
    amreq->xpeer = m->src;
    amreq->xcookie = (uint64_t) slot;
    amreq->rndv_size = m->msglen;
    if (MPIDIG_recv_initialized(rreq))
        MPIDI_ICBC_impi_matched(rreq);
    /* else MPIDIG calls MPIDI_ICBC_rndv_pull -> MPIDI_ICBC_impi_matched on match */
}

int MPIDI_ICBC_impi_matched(MPIR_Request *rreq)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    arrival_t *a = &IH.arrivals[amreq->xcookie];
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;

    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    amreq->xplace_iov = 0;
    amreq->xplace_off = 0;
    MPIDI_ICBC_xrecv_striped_place(NULL, rreq, 0, a->head, a->msg.len);
    MPL_free(a->head);
    a->head = NULL;
    a->rreq = rreq;
    if (impi_p2p_matched(IH.p2p, &a->msg, &a->drqid) != ICBC_OK)
        host_failed(a->host, "cannot answer its long message");
    return MPI_SUCCESS;
}

static void on_data(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *bytes, size_t len,
                    int last)
{
    for (int i = 0; i < IH.narrivals; i++) {
        arrival_t *a = &IH.arrivals[i];
        if (!a->used || a->head != NULL || a->msg.kind != IMPI_MSG_LONG_HEAD || a->drqid != drqid)
            continue;
        if (a->rreq)
            MPIDI_ICBC_xrecv_striped_place(NULL, a->rreq, offset, bytes, len);
        if (last) {
            if (a->rreq)
                MPIDI_ICBC_xrecv_striped_complete(NULL, a->rreq, ICBC_OK, NULL);
            arrival_free(i);
        }
        return;
    }
}

static int impi_send_hdr(icbc_peer_t *peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                         int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;

    if (handler_id != MPIDIG_SSEND_ACK) {
        MPIDI_ICBC_ERR_PEER_CHKANDJUMP(is_lam_rank(peer->rank), mpi_errno, peer->rank,
                                       NOT_IMPI_WHY);
        return MPIDI_ICBC_xfer_send_hdr(peer, handler_id, am_hdr, am_hdr_sz, src_vci, dst_vci);
    }
    MPIR_Assert(am_hdr_sz >= (MPI_Aint) sizeof(MPIDIG_ssend_ack_msg_t));
    uintptr_t token = (uintptr_t) ((const MPIDIG_ssend_ack_msg_t *) am_hdr)->sreq_ptr;
    int slot = (int) token - 1;
    MPIR_Assert(slot >= 0 && slot < IH.narrivals && IH.arrivals[slot].used &&
                IH.arrivals[slot].msg.src == peer->rank);
    if (impi_p2p_matched(IH.p2p, &IH.arrivals[slot].msg, NULL) != ICBC_OK)
        mpi_errno = MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    arrival_free(slot);
fn_fail:
    return mpi_errno;
}

/* ---- ICBC messages between ICBC clients ---------------------------------- */

/* Where both clients are ICBC, the netmod's own protocol (icbc_xfer.h:
 * whole active messages, the striping rendezvous on one lane, SYNC) travels
 * between their processes as IMPI_PK_ICBC packets on the host connections
 * that carry IMPI's, so one-sided operations and whatever else MPIDIG builds
 * on active messages work across the clients. A message is one packet of at
 * most DATALEN bytes or several: the first carries its ICBC header and the
 * first payload bytes, the others the rest at their offsets. A pair's
 * packets travel in order (one local link, one agent, one connection), so a
 * process reassembles at most one message per source at a time. */

/* Bytes of chunks a process lets wait for a host connection before the
 * striping engine holds the rest back (the ordered lane never waits). */
#define ICBC_CHUNK_BACKLOG (4u << 20)

typedef struct icbc_in {
    int active;
    int host;
    uint64_t got, total;
    uint8_t *dest; /* where the payload goes; NULL: dropped */
    MPIDI_ICBC_xrecv_t x;
} icbc_in_t;

static size_t host_backlog(int host)
{
    size_t n;

    if (!IH.agent)
        return IH.out_len - IH.out_off; /* to the agent, for every host */
    pthread_mutex_lock(&IH.agent_lock);
    n = impi_agent_host_backlog(IH.agent, host);
    pthread_mutex_unlock(&IH.agent_lock);
    return n;
}

/* The packets are copied out when sent: the sends complete in the next
 * progress, not inside the caller's send. */
static int done_later(MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    if (IH.ndones == IH.dones_cap) {
        int cap = MPL_MAX(64, 2 * IH.dones_cap);
        MPIDI_ICBC_path_done_t *p = MPL_realloc(IH.dones, sizeof(*p) * cap, MPL_MEM_OTHER);
        if (p == NULL)
            return -1;
        IH.dones = p;
        IH.dones_cap = cap;
    }
    IH.dones[IH.ndones].cb = cb;
    IH.dones[IH.ndones].arg = arg;
    IH.ndones++;
    return 0;
}

static int fire_dones(void)
{
    int n = IH.ndones;

    /* a completion may send again and queue more: they wait for the next round */
    for (int i = 0; i < n; i++)
        IH.dones[i].cb(IH.dones[i].arg, 1);
    memmove(IH.dones, IH.dones + n, sizeof(*IH.dones) * (IH.ndones - n));
    IH.ndones -= n;
    return n;
}

static int impi_lane_send(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                          const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                          int *busy)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    uint8_t head[IMPI_PKT_HDR_SIZE + 4096 + 256];
    int client, host;
    size_t room = l->datalen, n;

    *busy = 0;
    if (is_lam_rank(peer->rank))
        return MPIDI_ICBC_ERR_PEER(peer->rank, NOT_IMPI_WHY);
    if (peer->state == ICBC_PEER_FAILED)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    MPIR_Assert(inner_len > 0 && inner_len <= sizeof(head) - IMPI_PKT_HDR_SIZE);
    if (inner_len >= room)
        return MPIDI_ICBC_ERR_PEER(peer->rank,
                                   "the IMPI job's DATALEN is too small for ICBC's messages");
    MPIDI_ICBC_impi_where(peer->rank, &client, &host);
    if (lane != MPIDI_ICBC_LANE_ORDERED && host_backlog(host) > ICBC_CHUNK_BACKLOG) {
        *busy = 1;
        return MPI_SUCCESS;
    }
    impi_pkt_hdr_t h = {
        .type = IMPI_PK_ICBC,
        .src = l->procs[MPIR_Process.rank],
        .dest = l->procs[peer->rank],
        .msglen = len,
        .count = (int64_t) inner_len,
    };
    n = MPL_MIN(len, room - inner_len);
    h.len = (uint32_t) (inner_len + n);
    impi_pkt_hdr_pack(&h, head);
    memcpy(head + IMPI_PKT_HDR_SIZE, inner, inner_len);
    if (emit_head(host, head, IMPI_PKT_HDR_SIZE + inner_len, payload, n) != ICBC_OK)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    h.count = 0;
    for (size_t off = n; off < len; off += n) {
        n = MPL_MIN(len - off, room);
        h.len = (uint32_t) n;
        h.seqnum = off;
        impi_pkt_hdr_pack(&h, head);
        if (emit_head(host, head, IMPI_PKT_HDR_SIZE, (const uint8_t *) payload + off, n) != ICBC_OK)
            return MPIDI_ICBC_ERR_PEER(peer->rank, "its IMPI host connection was lost");
    }
    if (done_later(cb, arg) != 0)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "out of memory");
    return MPI_SUCCESS;
}

static void icbc_in_end(icbc_in_t *in, int ok)
{
    in->active = 0;
    MPIDI_ICBC_xrecv_end(&in->x, ok);
}

/* An ICBC packet from world rank SRC of HOST (impi_pkt_hdr_parse checked
 * its pieces against its message, impi_rx that both clients are ICBC). */
static void on_icbc_packet(int host, const impi_rx_pkt_t *pkt)
{
    const impi_pkt_hdr_t *h = pkt->hdr;
    icbc_in_t *in = IH.icbc_in ? IH.icbc_in[pkt->src] : NULL;
    size_t count = (size_t) h->count, part = pkt->len - count;
    void *dest;

    if (in && in->active) { /* the next piece of SRC's message */
        if (count != 0 || h->seqnum != in->got || h->msglen != in->total) {
            host_failed(host, "an ICBC packet out of its message's order");
            return;
        }
        if (in->dest)
            memcpy(in->dest + in->got, pkt->payload, pkt->len);
        in->got += pkt->len;
        if (in->got == in->total)
            icbc_in_end(in, 1);
        return;
    }
    if (count == 0) {
        host_failed(host, "an ICBC packet continuing no message");
        return;
    }
    if (part == h->msglen) { /* whole */
        MPIDI_ICBC_xrecv_t x;
        if (MPIDI_ICBC_xrecv_begin(pkt->src, pkt->payload, count, part, pkt->payload + count, &x,
                                   &dest) != 0) {
            host_failed(host, "a malformed ICBC message");
            return;
        }
        if (dest)
            memcpy(dest, pkt->payload + count, part);
        MPIDI_ICBC_xrecv_end(&x, 1);
        return;
    }
    if (IH.icbc_in == NULL) {
        IH.icbc_in = MPL_calloc(MPIR_Process.size, sizeof(*IH.icbc_in), MPL_MEM_OTHER);
        if (IH.icbc_in == NULL) {
            host_failed(host, "out of memory for an arriving message");
            return;
        }
    }
    if (in == NULL &&
        (in = IH.icbc_in[pkt->src] = MPL_calloc(1, sizeof(*in), MPL_MEM_OTHER)) == NULL) {
        host_failed(host, "out of memory for an arriving message");
        return;
    }
    if (MPIDI_ICBC_xrecv_begin(pkt->src, pkt->payload, count, h->msglen, NULL, &in->x, &dest) !=
        0) {
        host_failed(host, "a malformed ICBC message");
        return;
    }
    in->active = 1;
    in->host = host;
    in->total = h->msglen;
    in->got = part;
    in->dest = dest;
    if (dest)
        memcpy(in->dest, pkt->payload + count, part);
}

/* ---- packets in and failures ---------------------------------------------- */

static const impi_p2p_ops_t p2p_ops = {
    .emit = emit,
    .arrived = on_arrived,
    .data = on_data,
    .send_done = on_send_done,
    .cancel = NULL, /* MPIDIG cannot take an unmatched message back: CANCELNO */
    .fini = NULL,   /* FINI is the agent's: it ends the host, not a process */
};

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    int host = (int) (intptr_t) arg;
    char err[256];

    if (IH.conns[host].failed)
        return;
    MPIR_Context_id_t cid;
    if ((pkt->hdr->type == IMPI_PK_DATA || pkt->hdr->type == IMPI_PK_DATASYNC) &&
        pkt->hdr->drqid == 0 && !cid_from_wire(pkt->hdr->cid, pkt->hdr->tag, &cid)) {
        snprintf(err, sizeof(err), "a message for context %llu, which no communicator has",
                 (unsigned long long) pkt->hdr->cid);
        host_failed(host, err);
        return;
    }
    if (pkt->hdr->type == IMPI_PK_ICBC) {
        on_icbc_packet(host, pkt);
        return;
    }
    cur_host = host;
    if (impi_p2p_packet(IH.p2p, host, pkt, err, sizeof(err)) != ICBC_OK)
        host_failed(host, err);
    cur_host = -1;
}

/* Host HOST is gone or broke the protocol (the agent closed its
 * connection and said why, or this process found a packet it does not
 * allow): its processes fail like lost peers (operations with them end in MPI errors),
 * and the sends to them in flight end with an error. */
static void host_failed(int host, const char *why)
{
    conn_t *c = &IH.conns[host];
    const impi_host_t *h = &MPIDI_ICBC_impi.layout.hosts[host];

    if (c->failed)
        return;
    c->failed = 1;
    if (!MPIDI_ICBC_global.finalizing) {
        char a[INET_ADDRSTRLEN];
        uint32_t v4 = impi_host_v4(h);
        inet_ntop(AF_INET, &v4, a, sizeof(a));
        icbc_error("IMPI host %d (client %d, %s:%u): %s; its connection is closed", host, h->client,
                   a, h->port, why);
    }
    for (uint32_t k = 0; k < h->nprocs; k++)
        MPIDI_ICBC_xfer_peer_failed(h->first_rank + (int) k, why);
    for (int i = 0; i < IH.nsends;) {
        MPIR_Request *sreq = IH.sends[i];
        int r = MPIDI_ICBC_AMREQ(sreq).xpeer;
        if (r >= h->first_rank && r < h->first_rank + (int) h->nprocs)
            send_complete(sreq, 0); /* removes it from IH.sends */
        else
            i++;
    }
    for (uint32_t k = 0; IH.icbc_in && k < h->nprocs; k++) {
        icbc_in_t *in = IH.icbc_in[h->first_rank + (int) k];
        if (in && in->active)
            icbc_in_end(in, 0);
    }
    for (int i = 0; i < IH.narrivals; i++) {
        arrival_t *a = &IH.arrivals[i];
        if (!a->used || a->host != host)
            continue;
        if (a->rreq)
            MPIDI_ICBC_xrecv_striped_complete(NULL, a->rreq, ICBC_ERR_PEER_FAILED,
                                              "its IMPI host connection was lost");
        arrival_free(i);
    }
}

/* PMI rank 0 holds the client's connection to impi-server until FINI. The
 * server closes it when the IMPI job ends early (another client's job
 * died: LAM's mpirun closes its server connection when one of its
 * processes is killed, while its impid keeps the host connections open
 * and silent), so its closing fails every host of the other clients here;
 * the job then ends after the grace period of lost peers. Checked every
 * 100 ms. */
static void server_check(void)
{
    static double next;
    double now = icbc_clock_coarse();
    char err[256];

    if (MPIDI_ICBC_impi.conn == NULL || MPIDI_ICBC_global.finalizing || now < next)
        return;
    next = now + 0.1;
    if (impi_client_check(MPIDI_ICBC_impi.conn, err, sizeof(err)) == ICBC_OK)
        return;
    impi_client_destroy(MPIDI_ICBC_impi.conn);
    MPIDI_ICBC_impi.conn = NULL;
    for (int host = 0; host < MPIDI_ICBC_impi.layout.nhosts_total; host++)
        if (MPIDI_ICBC_impi.layout.hosts[host].client != MPIDI_ICBC_impi.client)
            host_failed(host, err);
}

/* The link to the agent broke: the node's IMPI host is gone (its first
 * process ended), and with it every host of the other clients. */
static void link_lost(const char *why)
{
    char err[256];

    if (IH.link < 0)
        return;
    close(IH.link);
    IH.link = -1;
    snprintf(err, sizeof(err), "the link to this node's IMPI host (world rank %d) broke: %s",
             MPIDI_ICBC_impi.layout.hosts[IH.self_host].first_rank, why);
    for (int host = 0; host < MPIDI_ICBC_impi.layout.nhosts_total; host++)
        if (MPIDI_ICBC_impi.layout.hosts[host].client != MPIDI_ICBC_impi.client)
            host_failed(host, err);
}

static void on_frame(void *arg, uint32_t kind, uint32_t host, const uint8_t *body, size_t len)
{
    char err[256];

    /* the agent checked HOST when it read the packet from the WAN */
    if (host >= (uint32_t) MPIDI_ICBC_impi.layout.nhosts_total || host == (uint32_t) IH.self_host)
        return;
    if (kind == IMPI_FRAME_LOST) {
        snprintf(err, sizeof(err), "%.*s", (int) len, (const char *) body);
        host_failed((int) host, err);
    } else if (kind == IMPI_FRAME_PACKET && !IH.conns[host].failed &&
               impi_rx_feed(&IH.conns[host].rx, body, len, on_packet, (void *) (intptr_t) host, err,
                            sizeof(err)) != ICBC_OK) {
        host_failed((int) host, err);
    }
}

/* The node's first process runs its agent itself while it is in MPI: no
 * thread hand-off for its own packets, and the other processes' packets
 * move as fast as it polls. */
static int agent_progress(void)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    char err[256];
    size_t n;

    if (IH.in_walk)
        return 0; /* a callback of the frames below made progress */
    pthread_mutex_lock(&IH.agent_lock);
    impi_agent_poll(IH.agent, 0);
    n = impi_agent_local_swap(IH.agent, 0, &IH.in, &IH.in_cap);
    pthread_mutex_unlock(&IH.agent_lock);
    /* whole frames, whose packets the agent held to the layout: read in
     * place */
    IH.in_walk = 1;
    for (size_t off = 0; off + IMPI_FRAME_HDR_SIZE <= n;) {
        uint32_t kind = icbc_get32(IH.in + off), host = icbc_get32(IH.in + off + 4);
        uint32_t len = icbc_get32(IH.in + off + 8);
        const uint8_t *body = IH.in + off + IMPI_FRAME_HDR_SIZE;
        impi_pkt_hdr_t hdr;
        off += IMPI_FRAME_HDR_SIZE + len;
        if (host >= (uint32_t) l->nhosts_total || kind != IMPI_FRAME_PACKET ||
            len < IMPI_PKT_HDR_SIZE) {
            on_frame(NULL, kind, host, body, len);
            continue;
        }
        if (IH.conns[host].failed)
            continue;
        impi_rx_pkt_t pkt = { &hdr, -1, -1, body + IMPI_PKT_HDR_SIZE, len - IMPI_PKT_HDR_SIZE };
        if (impi_pkt_hdr_parse(body, l->datalen, &hdr) == ICBC_OK) {
            pkt.src = impi_layout_proc_rank(l, (int) host, &hdr.src);
            pkt.dest = impi_layout_proc_rank(l, IH.self_host, &hdr.dest);
        }
        if (pkt.src < 0 || pkt.dest != MPIR_Process.rank || pkt.len != hdr.len) {
            snprintf(err, sizeof(err),
                     "its agent handed on a packet of type %u that is not "
                     "this process's",
                     hdr.type);
            host_failed((int) host, err);
            continue;
        }
        on_packet((void *) (intptr_t) host, &pkt);
    }
    IH.in_walk = 0;
    return n > 0;
}

static int impi_progress(void)
{
    static uint8_t buf[1 << 16];
    char err[256];
    int events = 0;

    if (IH.ndones)
        events = fire_dones();
    if (IH.open && IH.agent) {
        events += agent_progress();
        server_check();
        return events;
    }
    if (!IH.open || IH.link < 0)
        return events;
    struct pollfd p = { IH.link, (short) (POLLIN | (IH.out_len > IH.out_off ? POLLOUT : 0)), 0 };
    if (poll(&p, 1, 0) > 0) {
        events++;
        if ((p.revents & POLLOUT) && flush_out() != 0) {
            link_lost("writing to it failed");
            return 1;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(IH.link, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
                link_lost(r == 0 ? "it closed" : strerror(errno));
            else if (r > 0 && impi_frames_feed(&IH.frames, buf, (size_t) r, on_frame, NULL, err,
                                               sizeof(err)) != ICBC_OK)
                link_lost(err);
        }
    }
    /* after the link: what the agent already said about a host (why it
     * was lost) comes before the server's closing, which follows it */
    server_check();
    return events;
}

/* ---- set-up --------------------------------------------------------------- */

static int connect_host(int host, struct in_addr self_addr, double deadline, char *why,
                        size_t whylen)
{
    const impi_host_t *h = &MPIDI_ICBC_impi.layout.hosts[host];
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = self_addr };
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t) h->port) };
    uint32_t v4 = impi_host_v4(h);
    uint8_t rank[IMPI_HOST_RANK_SIZE];
    int one = 1;

    memcpy(&to.sin_addr, &v4, 4);
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            return -1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* from the address this host advertised: LAM knows a host by it */
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)) == 0 &&
            connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0) {
            icbc_put32(rank, (uint32_t) IH.self_host);
            if (send(fd, rank, sizeof(rank), MSG_NOSIGNAL) == (ssize_t) sizeof(rank))
                return fd;
        }
        snprintf(why, whylen, "connecting to IMPI host %d (client %d): %s", host, h->client,
                 strerror(errno));
        close(fd);
        if (icbc_clock_coarse() > deadline || (errno != ECONNREFUSED && errno != EINTR))
            return -1;
        usleep(100000); /* its host may not listen yet */
    }
}

/* Reads exactly N bytes from FD before DEADLINE; -1: not in time. */
static int read_exact(int fd, uint8_t *b, size_t n, double deadline)
{
    size_t have = 0;

    while (have < n) {
        struct pollfd p = { fd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0 || poll(&p, 1, MPL_MIN(ms, 1000)) < 0)
            return -1;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = recv(fd, b + have, n - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t) r;
    }
    return 0;
}

static int accept_hosts(int *fds, int want, double deadline, char *why, size_t whylen)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    uint8_t *connected = MPL_calloc(l->nhosts_total, 1, MPL_MEM_OTHER);

    if (connected == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    while (want > 0) {
        struct pollfd p = { MPIDI_ICBC_impi.listen_fd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0) {
            snprintf(why, whylen, "%d IMPI host(s) of other clients did not connect in %d s", want,
                     MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT);
            MPL_free(connected);
            return -1;
        }
        if (poll(&p, 1, MPL_MIN(ms, 1000)) <= 0)
            continue;
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        int fd = accept(MPIDI_ICBC_impi.listen_fd, (struct sockaddr *) &from, &fl);
        if (fd < 0)
            continue;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        uint8_t rank[IMPI_HOST_RANK_SIZE];
        char err[256], a[INET_ADDRSTRLEN];
        int host, one = 1;
        inet_ntop(AF_INET, &from.sin_addr, a, sizeof(a));
        if (read_exact(fd, rank, sizeof(rank), MPL_MIN(deadline, icbc_clock_coarse() + 10)) != 0) {
            icbc_warn("refused an IMPI connection from %s: it did not name its host", a);
            close(fd);
            continue;
        }
        if (impi_host_accept_check(l, IH.self_host, rank, from.sin_addr.s_addr, connected, &host,
                                   err, sizeof(err)) != ICBC_OK ||
            l->hosts[host].client == MPIDI_ICBC_impi.client) {
            icbc_warn("refused an IMPI connection from %s: %s", a,
                      err[0] ? err : "a host of this client");
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fds[host] = fd;
        connected[host] = 1;
        want--;
    }
    MPL_free(connected);
    return 0;
}

/* The local links of a node's IMPI host: a Unix socket in the abstract
 * namespace of the node's network namespace, named by the host's address
 * and port (unique on the node, even for several clients' hosts of one
 * address). */
static socklen_t link_address(const impi_host_t *h, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "icbc-impi-%08x-%u",
                     (unsigned) ntohl(impi_host_v4(h)), (unsigned) h->port);
    return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* A process of the node but its first: the link to the agent, which the
 * first process opens (it may not listen yet), named by its HELLO. */
static int link_connect(const impi_host_t *h, double deadline, char *why, size_t whylen)
{
    struct sockaddr_un sa;
    socklen_t len = link_address(h, &sa);
    uint8_t hello[IMPI_FRAME_HDR_SIZE];

    impi_frame_hdr_pack(IMPI_FRAME_HELLO, (uint32_t) MPIR_Process.rank, 0, hello);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            return -1;
        }
        if (connect(fd, (struct sockaddr *) &sa, len) == 0 &&
            send(fd, hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t) sizeof(hello))
            return fd;
        snprintf(why, whylen, "connecting to this node's IMPI host (world rank %d): %s",
                 h->first_rank, strerror(errno));
        close(fd);
        if (icbc_clock_coarse() > deadline || (errno != ECONNREFUSED && errno != ENOENT))
            return -1;
        usleep(10000); /* the node's first process opens it */
    }
}

/* The node's first process: the links of the others, each named by its
 * HELLO, into FDS (index: world rank - the host's first rank). */
static int link_accept(int lfd, const impi_host_t *h, int *fds, double deadline, char *why,
                       size_t whylen)
{
    for (int want = (int) h->nprocs - 1; want > 0;) {
        struct pollfd p = { lfd, POLLIN, 0 };
        int ms = (int) ((deadline - icbc_clock_coarse()) * 1000);
        if (ms <= 0) {
            snprintf(why, whylen, "%d process(es) of this node did not reach its IMPI host in %d s",
                     want, MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT);
            return -1;
        }
        if (poll(&p, 1, MPL_MIN(ms, 1000)) <= 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        uint8_t hello[IMPI_FRAME_HDR_SIZE];
        int k = -1;
        if (read_exact(fd, hello, sizeof(hello), MPL_MIN(deadline, icbc_clock_coarse() + 10)) ==
                0 &&
            icbc_get32(hello) == IMPI_FRAME_HELLO)
            k = (int) icbc_get32(hello + 4) - h->first_rank;
        if (k <= 0 || k >= (int) h->nprocs || fds[k] >= 0) {
            icbc_warn("refused a local link to the IMPI host: not a process of this node");
            close(fd);
            continue;
        }
        fds[k] = fd;
        want--;
    }
    return 0;
}

/* The agent's thread: it waits for the connections without the lock, so
 * that the process is never held up by it, and moves what arrived at once,
 * whether the process computes, sleeps between polls while idle
 * (MPIR_CVAR_CH4_ICBC_IDLE_SLEEP) or polls itself (then whichever takes
 * the lock first moves it, and the other finds nothing). */
static void *agent_thread(void *arg)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    int max = l->nhosts_total + (int) l->hosts[IH.self_host].nprocs, n, done = 0;
    struct pollfd *pfd = MPL_malloc(sizeof(*pfd) * max, MPL_MEM_OTHER);

    while (!done) {
        pthread_mutex_lock(&IH.agent_lock);
        n = pfd ? impi_agent_fds(IH.agent, pfd, max) : 0;
        pthread_mutex_unlock(&IH.agent_lock);
        if (pfd)
            poll(pfd, (nfds_t) n, 100);
        else
            usleep(1000);
        pthread_mutex_lock(&IH.agent_lock);
        done = impi_agent_poll(IH.agent, 0);
        pthread_mutex_unlock(&IH.agent_lock);
    }
    MPL_free(pfd);
    return NULL;
}

/* The node's first process is its IMPI host: it connects to (or accepts)
 * every host of the other clients, takes the links of the node's other
 * processes, and runs the agent in a thread of its own, so that the host
 * moves packets while this process computes. */
static int host_open(struct in_addr self_addr, double deadline)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    const impi_host_t *self = &l->hosts[IH.self_host];
    int n = l->nhosts_total, want = 0, lfd = -1;
    int *host_fds = MPL_malloc(sizeof(int) * n, MPL_MEM_OTHER);
    int *local_fds = MPL_malloc(sizeof(int) * self->nprocs, MPL_MEM_OTHER);
    struct sockaddr_un sa;
    socklen_t salen = link_address(self, &sa);
    char why[512];

    MPIR_ERR_CHKANDJUMP(!host_fds || !local_fds, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int h = 0; h < n; h++)
        host_fds[h] = -1;
    for (uint32_t k = 0; k < self->nprocs; k++)
        local_fds[k] = -1;
    /* the node's other processes wait in the backlog meanwhile */
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, salen) != 0 || listen(lfd, SOMAXCONN) != 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s",
                             "cannot open the local links of this node's IMPI host");

    /* the higher host connects; a connection completes in the peer's
     * backlog, so connecting to every lower host first cannot deadlock */
    for (int h = 0; h < n; h++) {
        if (l->hosts[h].client == MPIDI_ICBC_impi.client)
            continue;
        if (!impi_host_connects(IH.self_host, h)) {
            want++;
            continue;
        }
        host_fds[h] = connect_host(h, self_addr, deadline, why, sizeof(why));
        if (host_fds[h] < 0)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    }
    if (accept_hosts(host_fds, want, deadline, why, sizeof(why)) != 0 ||
        link_accept(lfd, self, local_fds, deadline, why, sizeof(why)) != 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    for (int h = 0; h < n; h++)
        if (host_fds[h] >= 0) {
            int one = 1;
            setsockopt(host_fds[h], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
    local_fds[0] = IMPI_AGENT_INPROC; /* this process */
    /* the agent owns the descriptors from here on, also when it fails */
    if (impi_agent_create(l, IH.self_host, host_fds, local_fds,
                          MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1) * 1000,
                          &IH.agent) != ICBC_OK) {
        for (int h = 0; h < n; h++)
            if (host_fds[h] >= 0)
                close(host_fds[h]);
        for (uint32_t k = 0; k < self->nprocs; k++)
            if (local_fds[k] >= 0)
                close(local_fds[k]);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    pthread_mutex_init(&IH.agent_lock, NULL);
    /* a host of one process (every process of a job of ICBC clients) needs
     * no thread: what it receives waits in the sockets for its progress, as
     * on every other path */
    IH.has_thread = self->nprocs > 1;
    MPIR_ERR_CHKANDJUMP(IH.has_thread &&
                            pthread_create(&IH.agent_thread, NULL, agent_thread, NULL) != 0,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
fn_exit:
    if (lfd >= 0)
        close(lfd);
    MPL_free(host_fds);
    MPL_free(local_fds);
    return mpi_errno;
fn_fail:
    if (IH.agent == NULL) {
        for (int h = 0; host_fds && h < n; h++)
            if (host_fds[h] >= 0)
                close(host_fds[h]);
        for (uint32_t k = 0; local_fds && k < self->nprocs; k++)
            if (local_fds[k] >= 0)
                close(local_fds[k]);
    } else {
        impi_agent_destroy(IH.agent);
        IH.agent = NULL;
    }
    goto fn_exit;
}

int MPIDI_ICBC_path_impi_open(void)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    double deadline = icbc_clock_coarse() + MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1);
    int client;
    char why[512];

    IH.link = -1;
    MPIDI_ICBC_impi_where(MPIR_Process.rank, &client, &IH.self_host);
    const impi_host_t *self = &l->hosts[IH.self_host];
    IH.conns = MPL_calloc(l->nhosts_total, sizeof(*IH.conns), MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP(IH.conns == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_ERR_CHKANDJUMP(impi_frames_init(&IH.frames, l->datalen) != ICBC_OK, mpi_errno,
                        MPI_ERR_OTHER, "**nomem");
    for (int h = 0; h < l->nhosts_total; h++)
        if (l->hosts[h].client != MPIDI_ICBC_impi.client)
            MPIR_ERR_CHKANDJUMP(impi_rx_init(&IH.conns[h].rx, l, IH.self_host, h) != ICBC_OK,
                                mpi_errno, MPI_ERR_OTHER, "**nomem");

    if (MPIR_Process.rank == self->first_rank) {
        struct in_addr self_addr;
        uint32_t v4 = impi_host_v4(self);
        memcpy(&self_addr, &v4, 4);
        mpi_errno = host_open(self_addr, deadline);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        IH.link = link_connect(self, deadline, why, sizeof(why));
        if (IH.link < 0)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why);
    }
    /* every host this one talks to is connected (or it is the first
     * process's to reach): the port closes, nothing listens on the WAN while
     * the job runs */
    close(MPIDI_ICBC_impi.listen_fd);
    MPIDI_ICBC_impi.listen_fd = -1;
    if (IH.link >= 0)
        fcntl(IH.link, F_SETFL, O_NONBLOCK);
    MPIR_ERR_CHKANDJUMP(impi_p2p_create(l, IH.self_host, &p2p_ops, NULL, &IH.p2p) != ICBC_OK,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
    IH.open = 1;
fn_fail:
    return mpi_errno;
}

/* At MPI_Finalize, every process of this client past its last message:
 * what this process still has for the agent is written, then DONE; the
 * node's first process waits for its agent, which ends the host (FINI to
 * every host and theirs awaited, bounded; impi_agent.h). */
static void impi_finalize(void)
{
    double deadline = icbc_clock_coarse() + MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1);

    if (!IH.open)
        return;
    if (link_put(IMPI_FRAME_DONE, 0, NULL, 0, NULL, 0) == ICBC_OK)
        while (IH.link >= 0 && IH.out_len > IH.out_off && icbc_clock_coarse() < deadline) {
            impi_progress();
            usleep(1000);
        }
    if (IH.agent) {
        if (IH.has_thread) {
            pthread_join(IH.agent_thread, NULL);
        } else { /* FINI to every host, and theirs (bounded by the agent) */
            while (!impi_agent_poll(IH.agent, 10))
                ;
        }
        impi_agent_destroy(IH.agent);
        pthread_mutex_destroy(&IH.agent_lock);
    }
    if (IH.link >= 0)
        close(IH.link);
    for (int h = 0; h < MPIDI_ICBC_impi.layout.nhosts_total; h++)
        impi_rx_free(&IH.conns[h].rx);
    impi_frames_free(&IH.frames);
    impi_p2p_destroy(IH.p2p);
    for (int i = 0; i < IH.narrivals; i++)
        MPL_free(IH.arrivals[i].head);
    MPL_free(IH.arrivals);
    for (int r = 0; IH.icbc_in && r < MPIR_Process.size; r++) {
        if (IH.icbc_in[r] && IH.icbc_in[r]->active)
            icbc_in_end(IH.icbc_in[r], 0);
        MPL_free(IH.icbc_in[r]);
    }
    MPL_free(IH.icbc_in);
    MPL_free(IH.dones);
    MPL_free(IH.sends);
    MPL_free(IH.conns);
    MPL_free(IH.out);
    free(IH.in); /* grown by the agent (realloc) */
    memset(&IH, 0, sizeof(IH));
    IH.link = -1;
}

static int impi_active(void)
{
    return IH.open;
}

static int impi_nlanes(icbc_peer_t *peer)
{
    return 1;
}

static void impi_dump(FILE *f)
{
    fprintf(f,
            "  impi: host %d%s, %d send(s) in flight, %zu send(s) pending, %zu byte(s) to the "
            "host%s\n",
            IH.self_host, IH.agent ? " (its agent runs here)" : "", IH.nsends,
            IH.p2p ? impi_p2p_sends_pending(IH.p2p) : (size_t) 0, IH.out_len - IH.out_off,
            IH.link < 0 ? ", link closed" : "");
    for (int h = 0; h < MPIDI_ICBC_impi.layout.nhosts_total; h++)
        if (IH.conns[h].failed)
            fprintf(f, "  impi:   host %d: lost\n", h);
    for (int r = 0; IH.icbc_in && r < MPIR_Process.size; r++)
        if (IH.icbc_in[r] && IH.icbc_in[r]->active)
            fprintf(f, "  impi:   ICBC message from rank %d: %llu of %llu bytes\n", r,
                    (unsigned long long) IH.icbc_in[r]->got,
                    (unsigned long long) IH.icbc_in[r]->total);
    for (int i = 0; i < IH.narrivals; i++)
        if (IH.arrivals[i].used)
            fprintf(f, "  impi:   arrival from rank %d: %llu bytes, %s\n", IH.arrivals[i].msg.src,
                    (unsigned long long) IH.arrivals[i].msg.msglen,
                    IH.arrivals[i].head                             ? "long, waiting for its match"
                    : IH.arrivals[i].msg.kind == IMPI_MSG_LONG_HEAD ? "long, receiving"
                                                                    : "synchronous, not matched");
}

const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_impi_ops = {
    .name = "impi",
    .send = impi_lane_send,
    .nlanes = impi_nlanes,
    .active = impi_active,
    .progress = impi_progress,
    .dump = impi_dump,
    .finalize = impi_finalize,
    .am_isend = impi_am_isend,
    .send_hdr = impi_send_hdr,
};
