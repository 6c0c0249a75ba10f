/*
 * The fabric transport over libfabric: one FI_EP_RDM endpoint with an
 * address vector and one completion queue, messages sent in order (FI_ORDER_SAS).
 *
 * RDM endpoints are connectionless, so the endpoints of mx_fabric.h are
 * made here: an endpoint's first message is a HELLO with its name and its
 * slot; the peer answers HELLO_ACK with its own slot and a random token;
 * every later message names the receiver's slot and token, so a message is
 * matched to its endpoint in O(1) and a stale or forged one is dropped.
 * Sends wait in the endpoint until HELLO_ACK arrives. A closed endpoint
 * sends BYE; a send that fails (the peer's process gone) fails the
 * endpoint.
 *
 * Headers and eager payloads travel in one message, copied into a
 * registered send buffer (a payload of 4 to 16 KiB is sent from where it
 * is, behind them: OFI_SEND_ZCOPY_MIN); receive buffers are posted in a
 * ring of registered buffers, kept by the owner as long as it wants (then
 * reposted). Messages are tagged sends with one tag (OFI_TAG_MSG) rather
 * than untagged ones: rxm over tcp hands tagged operations to tcp's own
 * tagged path, without rxm's protocol header and bounce buffers (136
 * instead of 192 bytes on the wire for a message of 8 bytes).
 *
 * Rendezvous: RTS carries the payload's registered address and
 * key and the receiver reads it (FI_RMA read) and answers FIN; without
 * FI_RMA the receiver posts a tagged receive and answers CTS, and the
 * sender sends the payload with the RTS's cookie as tag.
 *
 * Messages are numbered per endpoint and direction (HELLO and HELLO_ACK
 * are number 0) and handed to the owner in that order. FI_ORDER_SAS
 * orders the matching of messages to receive buffers, not their
 * completions: rxm sends a message larger than its own eager buffer (16 KiB
 * by default) by its rendezvous or segmentation protocol, and a small
 * message sent after it completes first. One that arrives early waits, in
 * its receive buffer, for those before it.
 */
#include "mx_fabric_impl.h"

#ifdef ICBC_HAVE_OFI /* compiled into libmpi whether or not libfabric is there */

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "icbc_bytes.h"
#include "ofi_lib.h"
#include "icbc_clock.h"
#include "icbc_hmap.h"
#include "icbc_list.h"
#include "icbc_log.h"

/* One receive or send buffer. Large enough for the biggest message sent
 * eagerly with its headers: the routed path keeps whole messages up to the
 * stripe threshold (64 KiB) plus 4 KiB eager so that none overtakes
 * another, and counts them in the router's eager window; a message this
 * fabric turned into a rendezvous would never be credited back. */
#define OFI_BUF_SIZE (80 << 10)
#define OFI_RECV_BUFS 64 /* posted at a time */
#define OFI_SEND_SLAB 64 /* send buffers added at a time */
#define OFI_MAX_HDR (4096 + 128)
#define OFI_NAME_MAX 64
#define OFI_CQ_BATCH 16

/* An eager payload of 4 to 16 KiB whose owner waits for the send's
 * completion goes from the owner's buffer (a second element of the send)
 * instead of being copied behind the headers. On two nodes of the testbed
 * (tcp;ofi_rxm, 10,000 round trips, medians of four runs each way) that
 * took 0.5, 1.2 and 1.6 us off 4, 8 and 16 KiB one way, and added 6 us to
 * 32 KiB (59.5 -> 65.9 us), which is copied. A smaller payload is copied
 * too: its owner is done at once. */
#define OFI_SEND_ZCOPY_MIN 4096
#define OFI_SEND_ZCOPY_MAX 16384
#define OFI_TAG_MSG (1ULL << 63) /* every message; a rendezvous payload's tag is its cookie */

enum { K_HELLO = 1, K_HELLO_ACK, K_AM, K_RTS, K_CTS, K_FIN, K_BYE, K_PING };

/* An endpoint with rendezvous under way hears from its peer, or sends it a
 * PING, this often: libfabric fails the send to a dead peer, which fails
 * the endpoint and what waits on it (a pull from a dead process would
 * otherwise wait for ever). */
#define OFI_PROBE_MS 1000

/* tcp;ofi_rxm fails neither the PING nor a read to a killed process: it
 * connects again, is refused, and keeps the operation. Where a peer's name
 * is the address its provider listens on (rxm over tcp or net), an
 * endpoint with rendezvous under way whose peer was silent for
 * OFI_PROBE_MS is checked by a TCP connect to that address: the kernel
 * answers for a live process even while it computes, and a refusal means
 * the process is gone. A connect that is not answered within OFI_CHECK_MS
 * proves nothing (a full accept queue drops it) and is tried again later.
 * Each check of a silent live peer leaves one connection in its accept
 * queue until its provider runs again, so the checks of one silence are
 * spaced ever wider, up to OFI_CHECK_MAX_MS apart. */
#define OFI_CHECK_MS 5000
#define OFI_CHECK_MAX_MS 64000
#define OFI_GONE "nothing listens at its address any more: its process is gone"

/* Unless the user set it, rxm posts 4096 receive buffers of 16 KiB on the
 * receive context its connections share: a tcp;ofi_rxm router idled at
 * 78 MB resident and peaked at 100-109 MB striping 8 MiB messages. With
 * 1024 it peaked at 48-58 MB at the same rate (4 routers: 0.899 of line
 * rate, 0.903 before); with 128 the 4 routers ran at 0.74-0.85. */
#define OFI_RXM_MSG_RX_SIZE "1024"

/* Unless the user set it, rxm's eager buffers hold 16 KiB, so a message of
 * 16 KiB of payload and our headers went by rxm's rendezvous: 62 us one
 * way against 27 us with 16 + 4 KiB, and 0.68 x the windowed bandwidth,
 * other sizes unchanged (benchmarks/results/ofi-direct/rxm-buffer); the
 * 1024 shared receive buffers take 20 MB instead of 16. (16 + 1 KiB gave
 * the same at 16 KiB but 0.64-0.79 x the bandwidth at 32-256 KiB.) */
#define OFI_RXM_BUFFER_SIZE "20480"

/* Every message starts with this (host order: a fabric joins one cluster's
 * nodes, all of one architecture). */
typedef struct {
    uint8_t kind;
    uint8_t am_id;
    uint16_t hdr_len;  /* AM header bytes after this header (and the RTS part) */
    uint32_t dst_slot; /* the receiver's slot of the sender; 0 in HELLO */
    uint32_t token;    /* that slot's token */
    uint32_t aux;      /* HELLO/HELLO_ACK: sender's slot; FIN: status */
    uint64_t len;      /* AM/RTS: payload bytes; HELLO/ACK: sender's token; CTS/FIN: cookie */
    uint32_t seq;      /* this message's number on its endpoint, in its direction */
    uint32_t zero;
} ofi_hdr_t;

typedef struct {
    uint64_t raddr, rkey, cookie;
} ofi_rts_t;

typedef enum {
    OP_RECV,  /* a posted receive buffer */
    OP_SEND,  /* a message from a send buffer; AM completes with it */
    OP_RTS,   /* a rendezvous send: waits for FIN (or CTS, then the payload) */
    OP_READ,  /* a rendezvous pull by RMA read */
    OP_TRECV, /* a rendezvous pull by tagged receive */
    OP_TSEND, /* the payload of a rendezvous by tagged send */
} op_kind_t;

typedef struct ofi_ep ofi_ep_t;
typedef struct ofi_fabric ofi_fabric_t;

typedef struct ofi_op {
    struct fi_context2 ctx; /* first: libfabric hands it back */
    op_kind_t kind;
    int hello; /* the HELLO: the one message before HELLO_ACK */
    ofi_ep_t *ep;
    mx_fabric_done_cb_t on_done;
    void *arg;
    char *buf;             /* OP_RECV, OP_SEND, OP_RTS: the buffer */
    struct fid_mr *buf_mr; /* its registration (FI_MR_LOCAL) */
    struct fid_mr *mr;     /* OP_RTS: payload; OP_READ, OP_TRECV: target */
    const void *payload;   /* OP_RTS; OP_SEND: the owner's payload, sent in place */
    char *target;          /* OP_READ, OP_TRECV */
    struct ofi_desc *desc; /* OP_READ, OP_TRECV: the descriptor pulled */
    size_t len, msg_len;   /* payload; OP_SEND, OP_RTS: bytes of the message */
    uint64_t cookie;       /* OP_RTS, OP_TSEND */
    int kept;              /* OP_RECV: the owner holds the buffer, or it waits its turn */
    int pending;           /* OP_RTS: its message's completion and the FIN (or payload) */
    int aborted;           /* OP_READ, OP_TRECV: failed with its endpoint, still libfabric's */
    icbc_list_t link; /* ep->waiting, ep->rts, ep->early, fabric->recv_retry or the free list */
} ofi_op_t;

/* A rendezvous announced to us: the descriptor of on_am. */
typedef struct ofi_desc {
    ofi_ep_t *ep;
    ofi_rts_t rts;
    size_t len;
} ofi_desc_t;

typedef enum { EP_HELLO, EP_OPEN, EP_FAILED, EP_CLOSED } ofi_ep_state_t;

struct ofi_ep {
    mx_fabric_ep_t base;
    ofi_ep_state_t state;
    int announced;                  /* the owner knows it (connected, or accepted and told) */
    uint32_t slot, token;           /* ours */
    uint32_t peer_slot, peer_token; /* the peer's, from HELLO or HELLO_ACK */
    fi_addr_t addr;
    size_t inflight;     /* operations libfabric holds, descriptors the owner holds */
    size_t sends_posted; /* of them, messages (OP_SEND, OP_RTS, OP_TSEND) */
    uint32_t tx_seq;     /* the number of our next message */
    uint32_t rx_seq;     /* the number of the peer's message due next */
    icbc_list_t early;   /* receive operations of later messages, by number */
    icbc_list_t waiting; /* operations not posted yet, in order */
    icbc_list_t rts;     /* rendezvous sends waiting for FIN or CTS */
    icbc_list_t pulls;   /* rendezvous pulls libfabric holds */
    icbc_list_t zsends;  /* eager sends libfabric holds that read the owner's payload */
    int close_flush;     /* closed by the owner before HELLO_ACK: BYE after the sends */
    double heard_ms;     /* when the peer's last message came */
    int check_fd;        /* the connect checking the peer's address (OFI_CHECK_MS), or -1 */
    double check_ms;     /* when it started */
    double check_gap_ms; /* from this check to the next of the same silence */
    icbc_list_t link;    /* in fabric->eps */
    icbc_list_t backlog; /* in fabric->backlog while operations wait for libfabric */
};

struct ofi_fabric {
    mx_fabric_t base;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    int efd;
    int listen;        /* accepted endpoints are announced to the owner */
    int rma;           /* rendezvous by RMA read, else by tagged messages */
    int mr_local;      /* local buffers must be registered */
    int send_in_place; /* eager payloads may go from the owner's buffer (OFI_SEND_ZCOPY_MIN) */
    int virt_addr;     /* RMA addresses are virtual, not offsets */
    int prov_key;      /* the provider chooses keys */
    int names_listen;  /* a peer's name is the TCP address its provider listens on */
    unsigned checks;   /* endpoints with a check_fd */
    uint64_t next_key, next_cookie;
    char name[OFI_NAME_MAX];
    size_t namelen;
    char *recv_bufs;
    struct fid_mr *recv_mr;
    ofi_op_t recv_ops[OFI_RECV_BUFS];
    icbc_list_t recv_retry; /* receive buffers libfabric did not take yet */
    icbc_list_t free_ops;   /* send operations with a buffer */
    icbc_list_t slabs;      /* send buffer slabs */
    ofi_ep_t **slots;       /* slot -> endpoint; 0 unused */
    uint32_t nslots;
    icbc_list_t eps;     /* endpoints kept until their operations return */
    icbc_list_t backlog; /* endpoints with operations waiting for libfabric */
    icbc_hmap_t rts_by_cookie;
    double next_probe_ms;
};

typedef struct {
    icbc_list_t link;
    struct fid_mr *mr;
    char *bufs;
    ofi_op_t ops[OFI_SEND_SLAB];
} send_slab_t;

static void ep_fail(ofi_ep_t *e, const char *why);
static void early_drop(ofi_ep_t *e);
static void check_end(ofi_ep_t *e);
static void ep_maybe_free(ofi_ep_t *e);

static ofi_fabric_t *fab_of(const ofi_ep_t *e)
{
    return (ofi_fabric_t *) e->base.fabric;
}

static uint32_t random_u32(void)
{
    uint32_t v = 0;

    while (v == 0)
        if (getrandom(&v, sizeof(v), 0) != sizeof(v))
            v = (uint32_t) (uintptr_t) &v ^ 0x9e3779b9u;
    return v;
}

static icbc_status_t mr_reg(ofi_fabric_t *f, const void *buf, size_t len, uint64_t access,
                            struct fid_mr **mr)
{
    int rc =
        fi_mr_reg(f->domain, buf, len, access, 0, f->prov_key ? 0 : f->next_key++, 0, mr, NULL);

    if (rc != 0) {
        icbc_debug("fabric: fi_mr_reg of %zu bytes: %s", len, ofi_lib.strerror(-rc));
        return ICBC_ERR_IO;
    }
    return ICBC_OK;
}

static void *mr_desc(struct fid_mr *mr)
{
    return mr ? fi_mr_desc(mr) : NULL;
}

/* ---- send buffers ---- */

static ofi_op_t *send_op_get(ofi_fabric_t *f)
{
    ofi_op_t *op;

    if (icbc_list_empty(&f->free_ops)) {
        send_slab_t *s = calloc(1, sizeof(*s));
        if (s == NULL || (s->bufs = calloc(OFI_SEND_SLAB, OFI_BUF_SIZE)) == NULL) {
            free(s);
            return NULL;
        }
        if (f->mr_local &&
            mr_reg(f, s->bufs, (size_t) OFI_SEND_SLAB * OFI_BUF_SIZE, FI_SEND, &s->mr) != ICBC_OK) {
            free(s->bufs);
            free(s);
            return NULL;
        }
        icbc_list_push(&f->slabs, &s->link);
        for (int i = 0; i < OFI_SEND_SLAB; i++) {
            s->ops[i].buf = s->bufs + (size_t) i * OFI_BUF_SIZE;
            s->ops[i].buf_mr = s->mr;
            icbc_list_push(&f->free_ops, &s->ops[i].link);
        }
    }
    op = ICBC_CONTAINER(f->free_ops.next, ofi_op_t, link);
    icbc_list_del(&op->link);
    op->hello = 0;
    op->mr = NULL;
    op->payload = NULL;
    op->len = 0;
    op->on_done = NULL;
    op->arg = NULL;
    return op;
}

static void send_op_put(ofi_fabric_t *f, ofi_op_t *op)
{
    icbc_list_del(&op->link);
    op->ep = NULL;
    icbc_list_push(&f->free_ops, &op->link);
}

/* A message of KIND to E: header, EXTRA, then HDR and PAYLOAD copied. */
static ofi_op_t *msg_build(ofi_ep_t *e, op_kind_t kind, const ofi_hdr_t *h, const void *extra,
                           size_t extra_len, const void *hdr, size_t hdr_len, const void *payload,
                           size_t len)
{
    ofi_op_t *op = send_op_get(fab_of(e));
    char *p;

    if (op == NULL)
        return NULL;
    op->kind = kind;
    op->ep = e;
    p = op->buf;
    memcpy(p, h, sizeof(*h));
    p += sizeof(*h);
    if (extra_len)
        memcpy(p, extra, extra_len);
    p += extra_len;
    if (hdr_len)
        memcpy(p, hdr, hdr_len);
    p += hdr_len;
    if (len)
        memcpy(p, payload, len);
    op->msg_len = sizeof(*h) + extra_len + hdr_len + len;
    return op;
}

static void hdr_to(ofi_hdr_t *h, const ofi_ep_t *e, int kind)
{
    memset(h, 0, sizeof(*h));
    h->kind = (uint8_t) kind;
    h->dst_slot = e->peer_slot;
    h->token = e->peer_token;
}

/* ---- posting: libfabric may refuse for now (-FI_EAGAIN, for example while
 * it connects to the peer); such operations wait in their endpoint, in
 * order, and are posted again from progress. ---- */

static icbc_status_t op_post(ofi_ep_t *e, ofi_op_t *op)
{
    ofi_fabric_t *f = fab_of(e);
    ofi_hdr_t *h;
    ofi_op_t *rts;
    ssize_t rc;

    switch (op->kind) {
    case OP_SEND:
    case OP_RTS:
        h = (ofi_hdr_t *) op->buf;
        if (!op->hello) {
            h->dst_slot = e->peer_slot;
            h->token = e->peer_token;
        }
        h->seq = e->tx_seq;
        if (op->kind == OP_SEND && op->payload != NULL) {
            struct iovec iov[2] = { { op->buf, op->msg_len }, { (void *) op->payload, op->len } };
            void *desc[2] = { mr_desc(op->buf_mr), NULL };
            rc = fi_tsendv(f->ep, iov, desc, 2, e->addr, OFI_TAG_MSG, &op->ctx);
        } else {
            rc = fi_tsend(f->ep, op->buf, op->msg_len, mr_desc(op->buf_mr), e->addr, OFI_TAG_MSG,
                          &op->ctx);
        }
        if (rc == 0)
            e->tx_seq++;
        break;
    case OP_READ:
        rc = fi_read(f->ep, op->target, op->len, mr_desc(op->mr), e->addr, op->desc->rts.raddr,
                     op->desc->rts.rkey, &op->ctx);
        break;
    case OP_TRECV:
        rc = fi_trecv(f->ep, op->target, op->len, mr_desc(op->mr), e->addr, op->desc->rts.cookie, 0,
                      &op->ctx);
        break;
    case OP_TSEND:
        rts = icbc_hmap_get(&f->rts_by_cookie, op->cookie, 0);
        if (rts == NULL)
            return ICBC_ERR_PEER_FAILED;
        rc = fi_tsend(f->ep, rts->payload, rts->len, mr_desc(rts->mr), e->addr, op->cookie,
                      &op->ctx);
        break;
    default: return ICBC_ERR_INVALID;
    }
    if (rc == -FI_EAGAIN)
        return ICBC_ERR_BUSY;
    if (rc != 0) {
        icbc_debug("fabric peer %s: posting failed: %s", e->base.peer, ofi_lib.strerror((int) -rc));
        return ICBC_ERR_PEER_FAILED;
    }
    e->inflight++;
    if (op->kind == OP_SEND || op->kind == OP_RTS || op->kind == OP_TSEND)
        e->sends_posted++;
    if (op->kind == OP_RTS)
        icbc_list_push(&e->rts, &op->link);
    else if (op->kind == OP_SEND && op->payload != NULL)
        icbc_list_push(&e->zsends, &op->link);
    else if (op->kind == OP_READ || op->kind == OP_TRECV)
        icbc_list_push(&e->pulls, &op->link);
    return ICBC_OK;
}

static void backlog_add(ofi_ep_t *e)
{
    if (!icbc_list_linked(&e->backlog))
        icbc_list_push(&fab_of(e)->backlog, &e->backlog);
}

/* Posts OP now or after the operations waiting before it. An error means
 * libfabric refused it for good; OP is the caller's again. */
static icbc_status_t ep_submit(ofi_ep_t *e, ofi_op_t *op)
{
    if (icbc_list_empty(&e->waiting) && (e->state == EP_OPEN || op->hello)) {
        icbc_status_t st = op_post(e, op);
        if (st != ICBC_ERR_BUSY)
            return st;
    }
    icbc_list_push(&e->waiting, &op->link);
    backlog_add(e);
    return ICBC_OK;
}

/* Posts what waits in E, in order, as far as libfabric takes it. */
static void ep_flush(ofi_ep_t *e)
{
    while (!icbc_list_empty(&e->waiting)) {
        ofi_op_t *op = ICBC_CONTAINER(e->waiting.next, ofi_op_t, link);
        icbc_status_t st;

        if (e->state == EP_FAILED || e->state == EP_CLOSED || (e->state == EP_HELLO && !op->hello))
            break;
        icbc_list_del(&op->link);
        st = op_post(e, op);
        if (st != ICBC_OK) {
            icbc_list_push(e->waiting.next, &op->link); /* back at the head */
            if (st != ICBC_ERR_BUSY)
                ep_fail(e, "posting failed");
            return;
        }
    }
    if (icbc_list_empty(&e->waiting) || e->state != EP_OPEN)
        icbc_list_del(&e->backlog);
}

/* A control message (no completion for the owner); failures fail E. */
static void send_ctrl(ofi_ep_t *e, const ofi_hdr_t *h)
{
    ofi_op_t *op = msg_build(e, OP_SEND, h, NULL, 0, NULL, 0, NULL, 0);

    if (op == NULL) {
        ep_fail(e, "out of send buffers");
        return;
    }
    if (ep_submit(e, op) != ICBC_OK) {
        send_op_put(fab_of(e), op);
        ep_fail(e, "send failed");
    }
}

static void post_recv(ofi_fabric_t *f, ofi_op_t *op)
{
    ssize_t rc;

    op->kept = 0;
    rc = fi_trecv(f->ep, op->buf, OFI_BUF_SIZE, mr_desc(f->recv_mr), FI_ADDR_UNSPEC, OFI_TAG_MSG, 0,
                  &op->ctx);
    if (rc == 0)
        return;
    if (rc != -FI_EAGAIN)
        icbc_error("fabric: fi_recv: %s", ofi_lib.strerror((int) -rc));
    icbc_list_push(&f->recv_retry, &op->link);
}

/* ---- endpoints ---- */

static ofi_ep_t *ep_new(ofi_fabric_t *f, fi_addr_t addr)
{
    ofi_ep_t *e = calloc(1, sizeof(*e));
    uint32_t slot = 0;

    if (e == NULL)
        return NULL;
    for (uint32_t i = 1; i < f->nslots; i++)
        if (f->slots[i] == NULL) {
            slot = i;
            break;
        }
    if (slot == 0) {
        uint32_t n = f->nslots ? 2 * f->nslots : 64;
        ofi_ep_t **s = realloc(f->slots, n * sizeof(*s));
        if (s == NULL) {
            free(e);
            return NULL;
        }
        memset(s + f->nslots, 0, (n - f->nslots) * sizeof(*s));
        slot = f->nslots ? f->nslots : 1;
        f->slots = s;
        f->nslots = n;
    }
    f->slots[slot] = e;
    e->base.fabric = &f->base;
    e->slot = slot;
    e->token = random_u32();
    e->addr = addr;
    e->heard_ms = icbc_clock_coarse_ms();
    e->check_fd = -1;
    e->check_gap_ms = OFI_PROBE_MS;
    icbc_list_init(&e->waiting);
    icbc_list_init(&e->rts);
    icbc_list_init(&e->pulls);
    icbc_list_init(&e->zsends);
    icbc_list_init(&e->backlog);
    icbc_list_init(&e->early);
    icbc_list_push(&f->eps, &e->link);
    return e;
}

static ofi_ep_t *ep_lookup(ofi_fabric_t *f, const ofi_hdr_t *h)
{
    ofi_ep_t *e = h->dst_slot < f->nslots ? f->slots[h->dst_slot] : NULL;

    return e != NULL && e->token == h->token ? e : NULL;
}

/* Ends a rendezvous send: its payload released, its owner told. */
static void rts_finish(ofi_fabric_t *f, ofi_op_t *op, icbc_status_t st)
{
    mx_fabric_done_cb_t on_done = op->on_done;

    icbc_hmap_del(&f->rts_by_cookie, op->cookie, 0);
    icbc_list_del(&op->link);
    if (op->mr)
        fi_close(&op->mr->fid);
    op->mr = NULL;
    op->on_done = NULL;
    if (on_done)
        on_done(op->arg, st);
    if (--op->pending == 0) {
        ofi_ep_t *e = op->ep;
        send_op_put(f, op);
        ep_maybe_free(e);
    }
}

/* A pull ends: its descriptor freed (the owner's hold on E with it). */
static void pull_finish(ofi_fabric_t *f, ofi_op_t *op, icbc_status_t st)
{
    ofi_ep_t *e = op->ep;

    (void) f;
    icbc_list_del(&op->link);
    if (op->mr)
        fi_close(&op->mr->fid);
    free(op->desc);
    e->inflight--;
    op->on_done(op->arg, st);
    free(op);
}

/* An operation that never reached libfabric fails. */
static void op_abort(ofi_fabric_t *f, ofi_op_t *op, icbc_status_t st)
{
    switch (op->kind) {
    case OP_RTS:
        op->pending = 1; /* its message never went */
        rts_finish(f, op, st);
        return;
    case OP_READ:
    case OP_TRECV: pull_finish(f, op, st); return;
    case OP_TSEND: {
        ofi_op_t *rts = icbc_hmap_get(&f->rts_by_cookie, op->cookie, 0);
        icbc_list_del(&op->link);
        free(op);
        if (rts != NULL)
            rts_finish(f, rts, st);
        return;
    }
    default: {
        mx_fabric_done_cb_t on_done = op->on_done;
        void *arg = op->arg;
        send_op_put(f, op);
        if (on_done)
            on_done(arg, st);
    }
    }
}

/* The operations of E not yet complete fail (those libfabric holds return
 * through the completion queue). */
static void ep_fail_sends(ofi_ep_t *e, icbc_status_t st)
{
    ofi_fabric_t *f = fab_of(e);

    while (!icbc_list_empty(&e->waiting))
        op_abort(f, ICBC_CONTAINER(e->waiting.next, ofi_op_t, link), st);
    icbc_list_del(&e->backlog);
    while (!icbc_list_empty(&e->rts))
        rts_finish(f, ICBC_CONTAINER(e->rts.next, ofi_op_t, link), st);
    /* Sends in place end for their owner now, for the same reason. */
    while (!icbc_list_empty(&e->zsends)) {
        ofi_op_t *op = ICBC_CONTAINER(e->zsends.next, ofi_op_t, link);
        mx_fabric_done_cb_t on_done = op->on_done;
        icbc_list_del(&op->link);
        op->on_done = NULL; /* its completion, if libfabric returns it, recycles it */
        if (on_done)
            on_done(op->arg, st);
    }
    /* Pulls fail now; libfabric returns their operations later, or never
     * (a dead peer's connection), and keeps their buffers registered. */
    while (!icbc_list_empty(&e->pulls)) {
        ofi_op_t *op = ICBC_CONTAINER(e->pulls.next, ofi_op_t, link);
        icbc_list_del(&op->link);
        op->aborted = 1;
        free(op->desc);
        op->desc = NULL;
        e->inflight--; /* the descriptor's hold */
        op->on_done(op->arg, st);
    }
}

static void ep_fail(ofi_ep_t *e, const char *why)
{
    if (e->state == EP_FAILED || e->state == EP_CLOSED)
        return;
    e->state = EP_FAILED;
    icbc_debug("fabric peer %s: %s", e->base.peer, why);
    check_end(e);
    early_drop(e);
    ep_fail_sends(e, ICBC_ERR_PEER_FAILED);
    if (e->announced)
        mx_fabric_ep_failed(&e->base, ICBC_ERR_PEER_FAILED, why);
}

/* Frees a closed endpoint once libfabric and the owner hold nothing of it. */
static void ep_maybe_free(ofi_ep_t *e)
{
    ofi_fabric_t *f;

    if (e == NULL || e->state != EP_CLOSED || e->inflight > 0 || !icbc_list_empty(&e->rts) ||
        !icbc_list_empty(&e->waiting))
        return;
    f = fab_of(e);
    check_end(e);
    f->slots[e->slot] = NULL;
    icbc_list_del(&e->link);
    icbc_list_del(&e->backlog);
    fi_av_remove(f->av, &e->addr, 1, 0);
    free(e);
}

static void ep_send_bye(ofi_ep_t *e)
{
    ofi_hdr_t h;

    hdr_to(&h, e, K_BYE);
    send_ctrl(e, &h);
}

/* ---- receiving ---- */

static void on_hello(ofi_fabric_t *f, const ofi_hdr_t *h, const char *name, size_t n)
{
    fi_addr_t addr;
    ofi_ep_t *e;
    ofi_hdr_t ack;

    if (h->hdr_len == 0 || h->hdr_len > OFI_NAME_MAX || h->hdr_len != n) {
        icbc_debug("fabric: malformed HELLO dropped");
        return;
    }
    if (fi_av_insert(f->av, name, 1, &addr, 0, NULL) != 1) {
        icbc_debug("fabric: HELLO with an unusable endpoint name dropped");
        return;
    }
    e = ep_new(f, addr);
    if (e == NULL) {
        fi_av_remove(f->av, &addr, 1, 0);
        return;
    }
    mx_fabric_ep_set_peer(&e->base, name, h->hdr_len);
    e->peer_slot = h->aux;
    e->peer_token = (uint32_t) h->len;
    e->rx_seq = 1; /* the HELLO was number 0 */
    e->state = EP_OPEN;
    hdr_to(&ack, e, K_HELLO_ACK);
    ack.aux = e->slot;
    ack.len = e->token;
    send_ctrl(e, &ack);
    /* A listener's peers are the owner's; the endpoints made for peers
     * that reached a worker by its address serve rendezvous only. */
    if (f->listen && f->base.cbs.on_accept && e->state == EP_OPEN) {
        e->announced = 1;
        f->base.cbs.on_accept(&f->base, &e->base, f->base.arg);
    }
}

static void deliver_am(ofi_fabric_t *f, ofi_ep_t *e, const ofi_hdr_t *h, const char *body, size_t n,
                       ofi_op_t *recv_op)
{
    mx_fabric_am_t am = {
        .id = h->am_id,
        .hdr = body,
        .hdr_len = h->hdr_len,
        .ep = e->announced ? &e->base : NULL,
    };
    ofi_desc_t *d;

    if (h->am_id >= MX_FABRIC_AM_IDS)
        return;
    if (h->kind == K_AM) {
        if (h->hdr_len > n || h->len != n - h->hdr_len)
            return;
        am.data = (char *) body + h->hdr_len;
        am.len = h->len;
        if (mx_fabric_deliver(&f->base, &am))
            recv_op->kept = 1;
        return;
    }
    /* K_RTS: the rendezvous part sits before the header. */
    if (h->hdr_len + sizeof(ofi_rts_t) != n || (d = malloc(sizeof(*d))) == NULL)
        return;
    memcpy(&d->rts, body, sizeof(d->rts));
    d->ep = e;
    d->len = h->len;
    e->inflight++; /* the descriptor holds E */
    am.hdr = body + sizeof(ofi_rts_t);
    am.data = d;
    am.len = h->len;
    am.rndv = 1;
    if (!mx_fabric_deliver(&f->base, &am))
        mx_fabric_release(&f->base, d);
}

static void on_fin(ofi_fabric_t *f, ofi_ep_t *e, const ofi_hdr_t *h, int cts)
{
    ofi_op_t *op = icbc_hmap_get(&f->rts_by_cookie, h->len, 0);
    ofi_op_t *t;

    if (op == NULL || op->ep != e) {
        icbc_debug("fabric peer %s: %s for no rendezvous dropped", e->base.peer,
                   cts ? "CTS" : "FIN");
        return;
    }
    if (!cts) {
        rts_finish(f, op, h->aux == 0 ? ICBC_OK : ICBC_ERR_PEER_FAILED);
        return;
    }
    /* The receiver posted its tagged receive: the payload goes now. */
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        rts_finish(f, op, ICBC_ERR_NO_MEMORY);
        return;
    }
    t->kind = OP_TSEND;
    t->ep = e;
    t->cookie = op->cookie;
    icbc_list_init(&t->link);
    if (ep_submit(e, t) != ICBC_OK) {
        free(t);
        rts_finish(f, op, ICBC_ERR_PEER_FAILED);
        ep_fail(e, "payload send failed");
    }
}

/* The message in OP (N bytes after its header), in its turn on E. */
static void on_message(ofi_fabric_t *f, ofi_ep_t *e, ofi_op_t *op, size_t n)
{
    const ofi_hdr_t *h = (const ofi_hdr_t *) op->buf;
    const char *body = op->buf + sizeof(*h);

    switch (h->kind) {
    case K_HELLO_ACK:
        if (e->state != EP_HELLO)
            break;
        e->peer_slot = h->aux;
        e->peer_token = (uint32_t) h->len;
        e->state = EP_OPEN;
        ep_flush(e);
        if (e->close_flush && e->state == EP_OPEN) {
            ep_send_bye(e);
            e->state = EP_CLOSED;
        }
        break;
    case K_AM:
    case K_RTS: deliver_am(f, e, h, body, n, op); break;
    case K_FIN:
    case K_CTS: on_fin(f, e, h, h->kind == K_CTS); break;
    case K_BYE: ep_fail(e, "closed by the peer"); break;
    case K_PING: break;
    default:
        icbc_debug("fabric peer %s: message of unknown kind %u dropped", e->base.peer, h->kind);
    }
}

/* Gives the receive buffers of messages that arrived early on E back. */
static void early_drop(ofi_ep_t *e)
{
    ofi_fabric_t *f = fab_of(e);

    while (!icbc_list_empty(&e->early)) {
        ofi_op_t *op = ICBC_CONTAINER(e->early.next, ofi_op_t, link);
        icbc_list_del(&op->link);
        if (f->ep != NULL)
            post_recv(f, op);
    }
}

static int ep_live(const ofi_ep_t *e)
{
    return e->state == EP_HELLO || e->state == EP_OPEN;
}

/* A message in OP: handled now with those that waited for it, or kept in
 * its endpoint until those before it arrived. 1: OP stays ours. */
static int on_recv(ofi_fabric_t *f, ofi_op_t *op, size_t n)
{
    const ofi_hdr_t *h = (const ofi_hdr_t *) op->buf;
    ofi_ep_t *e;
    int32_t ahead;

    if (n < sizeof(*h) || n > OFI_BUF_SIZE) {
        icbc_debug("fabric: runt message of %zu bytes dropped", n);
        return 0;
    }
    n -= sizeof(*h);
    if (h->kind == K_HELLO) {
        on_hello(f, h, op->buf + sizeof(*h), n);
        return 0;
    }
    e = ep_lookup(f, h);
    if (e == NULL || !ep_live(e)) {
        icbc_debug("fabric: message of kind %u for no endpoint dropped", h->kind);
        return 0;
    }
    e->heard_ms = icbc_clock_coarse_ms();
    e->check_gap_ms = OFI_PROBE_MS;
    ahead = (int32_t) (h->seq - e->rx_seq);
    if (ahead < 0) {
        icbc_debug("fabric peer %s: message %u again, dropped", e->base.peer, h->seq);
        return 0;
    }
    if (ahead > 0) { /* in number order among those that wait */
        icbc_list_t *at = e->early.next;
        while (at != &e->early &&
               (int32_t) (((ofi_hdr_t *) ICBC_CONTAINER(at, ofi_op_t, link)->buf)->seq - h->seq) <
                   0)
            at = at->next;
        op->len = n;
        op->kept = 1;
        icbc_list_push(at, &op->link); /* before AT */
        return 1;
    }
    e->inflight++; /* the owner may close E from a handler */
    e->rx_seq++;
    on_message(f, e, op, n);
    while (ep_live(e) && !icbc_list_empty(&e->early)) {
        ofi_op_t *next = ICBC_CONTAINER(e->early.next, ofi_op_t, link);
        if (((const ofi_hdr_t *) next->buf)->seq != e->rx_seq)
            break;
        icbc_list_del(&next->link);
        next->kept = 0;
        e->rx_seq++;
        on_message(f, e, next, next->len);
        if (!next->kept && f->ep != NULL)
            post_recv(f, next);
    }
    if (!ep_live(e))
        early_drop(e);
    e->inflight--;
    ep_maybe_free(e);
    return 0;
}

/* ---- completions ---- */

static void op_completed(ofi_fabric_t *f, ofi_op_t *op, size_t n, icbc_status_t st, const char *why)
{
    ofi_ep_t *e = op->ep;

    if (op->kind == OP_RECV) {
        if (st == ICBC_OK && on_recv(f, op, n))
            return; /* early: it waits in its endpoint */
        if (!op->kept && f->ep != NULL)
            post_recv(f, op);
        return;
    }
    e->inflight--;
    if (op->kind == OP_SEND || op->kind == OP_RTS || op->kind == OP_TSEND)
        e->sends_posted--;
    switch (op->kind) {
    case OP_SEND: {
        mx_fabric_done_cb_t on_done = op->on_done; /* NULL once failed with E */
        void *arg = op->arg;
        send_op_put(f, op); /* out of e->zsends too */
        if (st != ICBC_OK)
            ep_fail(e, why);
        if (on_done)
            on_done(arg, st);
        break;
    }
    case OP_RTS:
        if (st != ICBC_OK)
            ep_fail(e, why); /* finishes it */
        if (--op->pending == 0)
            send_op_put(f, op);
        break;
    case OP_READ:
    case OP_TRECV:
        if (op->aborted) {
            if (op->mr)
                fi_close(&op->mr->fid);
            free(op);
            break;
        }
        icbc_list_del(&op->link); /* out of e->pulls before the endpoint may fail */
        if (op->kind == OP_READ && e->state == EP_OPEN) {
            ofi_hdr_t h;
            hdr_to(&h, e, K_FIN);
            h.len = op->desc->rts.cookie;
            h.aux = st == ICBC_OK ? 0 : 1;
            send_ctrl(e, &h);
        }
        if (st != ICBC_OK)
            ep_fail(e, why);
        pull_finish(f, op, st);
        break;
    case OP_TSEND: {
        ofi_op_t *rts = icbc_hmap_get(&f->rts_by_cookie, op->cookie, 0);
        free(op);
        if (rts != NULL)
            rts_finish(f, rts, st);
        if (st != ICBC_OK)
            ep_fail(e, why);
        break;
    }
    default: break;
    }
    ep_maybe_free(e);
}

/* ---- liveness ---- */

static void check_end(ofi_ep_t *e)
{
    if (e->check_fd < 0)
        return;
    close(e->check_fd);
    e->check_fd = -1;
    fab_of(e)->checks--;
}

/* A non-blocking TCP connect to the address E's peer listens on
 * (OFI_CHECK_MS); its outcome is read by check_poll. */
static void check_start(ofi_fabric_t *f, ofi_ep_t *e)
{
    struct sockaddr_storage sa;
    size_t len = sizeof(sa);
    int fd;

    memset(&sa, 0, sizeof(sa));
    if (fi_av_lookup(f->av, e->addr, &sa, &len) != 0 || len > sizeof(sa) ||
        (sa.ss_family != AF_INET && sa.ss_family != AF_INET6))
        return;
    fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (connect(fd, (struct sockaddr *) &sa, (socklen_t) len) != 0 && errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        if (err == ECONNREFUSED)
            ep_fail(e, OFI_GONE);
        return;
    }
    e->check_fd = fd;
    e->check_ms = icbc_clock_coarse_ms();
    f->checks++;
}

/* Whether E's peer is due a check: silent for OFI_PROBE_MS, and the last
 * check of this silence CHECK_GAP_MS ago. */
static int check_due(const ofi_ep_t *e, double now)
{
    return e->check_fd < 0 && now - e->heard_ms > OFI_PROBE_MS &&
           now - e->check_ms >= e->check_gap_ms;
}

/* The checks under way: an accepted connect is closed at once (the next
 * check of this silence waits twice as long), a refused one fails its
 * endpoint, an unanswered one is given up. */
static void check_poll(ofi_fabric_t *f, double now)
{
    for (icbc_list_t *l = f->eps.next, *next; l != &f->eps && f->checks > 0; l = next) {
        ofi_ep_t *e = ICBC_CONTAINER(l, ofi_ep_t, link);
        struct pollfd p;
        int err = 0;
        socklen_t elen = sizeof(err);

        next = l->next;
        if (e->check_fd < 0)
            continue;
        p.fd = e->check_fd;
        p.events = POLLOUT;
        p.revents = 0;
        if (poll(&p, 1, 0) == 1) {
            if (getsockopt(e->check_fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
                err = errno;
            check_end(e);
            if (err == ECONNREFUSED) {
                ep_fail(e, OFI_GONE);
            } else {
                if (err != 0)
                    icbc_debug("fabric peer %s: check of its address: %s", e->base.peer,
                               strerror(err));
                e->check_gap_ms =
                    e->check_gap_ms * 2 > OFI_CHECK_MAX_MS ? OFI_CHECK_MAX_MS : e->check_gap_ms * 2;
            }
        } else if (now - e->check_ms > OFI_CHECK_MS) {
            icbc_debug("fabric peer %s: check of its address not answered", e->base.peer);
            check_end(e);
        }
    }
}

/* PINGs to the peers of endpoints that wait on them (OFI_PROBE_MS): a
 * rendezvous under way, or operations libfabric refused for now (rxm
 * refuses them with -FI_EAGAIN for ever while it connects again to a dead
 * process); and a check of the peer's address where it was silent that
 * long. */
static void probe(ofi_fabric_t *f)
{
    double now = icbc_clock_coarse_ms();

    if (f->checks > 0)
        check_poll(f, now);
    if (now < f->next_probe_ms)
        return;
    f->next_probe_ms = now + OFI_PROBE_MS;
    for (icbc_list_t *l = f->eps.next, *next; l != &f->eps; l = next) {
        ofi_ep_t *e = ICBC_CONTAINER(l, ofi_ep_t, link);
        next = l->next;
        if (e->state == EP_OPEN &&
            (!icbc_list_empty(&e->pulls) || !icbc_list_empty(&e->rts) ||
             !icbc_list_empty(&e->zsends) || !icbc_list_empty(&e->waiting))) {
            ofi_hdr_t h;
            hdr_to(&h, e, K_PING);
            send_ctrl(e, &h);
            if (f->names_listen && e->state == EP_OPEN && check_due(e, now))
                check_start(f, e);
        }
    }
}

static unsigned ofi_progress(mx_fabric_t *base)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;
    struct fi_cq_msg_entry ev[OFI_CQ_BATCH];
    unsigned n = 0;

    for (;;) {
        ssize_t k = fi_cq_read(f->cq, ev, OFI_CQ_BATCH);
        if (k == -FI_EAGAIN)
            break;
        if (k == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            char why[128];
            memset(&err, 0, sizeof(err));
            if (fi_cq_readerr(f->cq, &err, 0) != 1)
                break;
            snprintf(why, sizeof(why), "%s",
                     fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
            if (err.op_context != NULL)
                op_completed(f, err.op_context, 0, ICBC_ERR_PEER_FAILED, why);
            n++;
            continue;
        }
        if (k < 0) {
            icbc_error("fabric: fi_cq_read: %s", ofi_lib.strerror((int) -k));
            break;
        }
        for (ssize_t i = 0; i < k; i++)
            op_completed(f, ev[i].op_context, ev[i].len, ICBC_OK, NULL);
        n += (unsigned) k;
        if (k < OFI_CQ_BATCH)
            break; /* drained: another read would only run the provider's progress again */
    }
    probe(f);
    /* What libfabric refused before, in order; an endpoint may leave the
     * list while it is flushed. */
    for (icbc_list_t *l = f->backlog.next, *next; l != &f->backlog; l = next) {
        next = l->next;
        ep_flush(ICBC_CONTAINER(l, ofi_ep_t, backlog));
    }
    while (!icbc_list_empty(&f->recv_retry)) {
        ofi_op_t *op = ICBC_CONTAINER(f->recv_retry.next, ofi_op_t, link);
        icbc_list_del(&op->link);
        if (fi_trecv(f->ep, op->buf, OFI_BUF_SIZE, mr_desc(f->recv_mr), FI_ADDR_UNSPEC, OFI_TAG_MSG,
                     0, &op->ctx) != 0) {
            icbc_list_push(f->recv_retry.next, &op->link);
            break;
        }
    }
    return n;
}

/* ---- operations ---- */

static icbc_status_t ofi_am_send(mx_fabric_ep_t *base, unsigned id, const void *hdr, size_t hdr_len,
                                 const void *payload, size_t len, unsigned flags,
                                 mx_fabric_done_cb_t on_done, void *arg)
{
    ofi_ep_t *e = (ofi_ep_t *) base;
    ofi_fabric_t *f = fab_of(e);
    int rndv = (flags & MX_FABRIC_SEND_RNDV) != 0, in_place = 0;
    ofi_hdr_t h;
    ofi_op_t *op;

    if (e->state != EP_OPEN && e->state != EP_HELLO)
        return ICBC_ERR_PEER_FAILED;
    if (!rndv && sizeof(h) + hdr_len + len > OFI_BUF_SIZE)
        rndv = 1;
    if (len == 0)
        rndv = 0;
    memset(&h, 0, sizeof(h));
    h.am_id = (uint8_t) id;
    h.hdr_len = (uint16_t) hdr_len;
    h.len = len;
    if (!rndv) {
        in_place = f->send_in_place && on_done != NULL && len >= OFI_SEND_ZCOPY_MIN &&
                   len <= OFI_SEND_ZCOPY_MAX;
        h.kind = K_AM;
        op = msg_build(e, OP_SEND, &h, NULL, 0, hdr, hdr_len, in_place ? NULL : payload,
                       in_place ? 0 : len);
        if (op == NULL)
            return ICBC_ERR_NO_MEMORY;
        if (in_place) {
            op->payload = payload;
            op->len = len;
        }
    } else {
        ofi_rts_t rts = { 0 };
        struct fid_mr *mr = NULL;
        uint64_t access = f->rma ? FI_REMOTE_READ : FI_SEND;
        if ((f->rma || f->mr_local) && mr_reg(f, payload, len, access, &mr) != ICBC_OK)
            return ICBC_ERR_IO;
        rts.raddr = f->virt_addr ? (uint64_t) (uintptr_t) payload : 0;
        rts.rkey = mr ? fi_mr_key(mr) : 0;
        rts.cookie = f->next_cookie++ & ~OFI_TAG_MSG; /* never a message's tag */
        h.kind = K_RTS;
        op = msg_build(e, OP_RTS, &h, &rts, sizeof(rts), hdr, hdr_len, NULL, 0);
        if (op == NULL || icbc_hmap_put(&f->rts_by_cookie, rts.cookie, 0, op) != ICBC_OK) {
            if (op)
                send_op_put(f, op);
            if (mr)
                fi_close(&mr->fid);
            return ICBC_ERR_NO_MEMORY;
        }
        op->mr = mr;
        op->payload = payload;
        op->len = len;
        op->cookie = rts.cookie;
        op->pending = 2;
    }
    /* An eager message copied is done for the sender at once. */
    op->on_done = rndv || in_place ? on_done : NULL;
    op->arg = arg;
    if (ep_submit(e, op) != ICBC_OK) {
        op->on_done = NULL; /* an error return: no completion */
        op_abort(f, op, ICBC_ERR_PEER_FAILED);
        ep_fail(e, "send failed");
        return ICBC_ERR_PEER_FAILED;
    }
    if (!rndv && !in_place && on_done)
        on_done(arg, ICBC_OK);
    return ICBC_OK;
}

static icbc_status_t ofi_am_recv(mx_fabric_t *base, void *desc, void *buf, size_t len,
                                 mx_fabric_done_cb_t on_done, void *arg)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;
    ofi_desc_t *d = desc;
    ofi_ep_t *e = d->ep;
    ofi_op_t *op;

    if (e->state != EP_OPEN || len > d->len || (op = calloc(1, sizeof(*op))) == NULL) {
        icbc_status_t st = e->state != EP_OPEN ? ICBC_ERR_PEER_FAILED : ICBC_ERR_INVALID;
        mx_fabric_release(base, desc);
        return st;
    }
    op->kind = f->rma ? OP_READ : OP_TRECV;
    op->ep = e;
    op->on_done = on_done;
    op->arg = arg;
    op->desc = d;
    op->target = buf;
    op->len = len;
    icbc_list_init(&op->link);
    if (f->mr_local && len > 0 &&
        mr_reg(f, buf, len, f->rma ? FI_READ : FI_RECV, &op->mr) != ICBC_OK) {
        free(op);
        mx_fabric_release(base, desc);
        return ICBC_ERR_IO;
    }
    if (ep_submit(e, op) != ICBC_OK) {
        op->on_done = NULL;
        if (op->mr)
            fi_close(&op->mr->fid);
        free(op);
        mx_fabric_release(base, desc);
        return ICBC_ERR_PEER_FAILED;
    }
    if (!f->rma) {
        ofi_hdr_t h;
        hdr_to(&h, e, K_CTS);
        h.len = d->rts.cookie;
        send_ctrl(e, &h);
    }
    return ICBC_OK;
}

static void ofi_release(mx_fabric_t *base, void *data)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;
    char *p = data;
    ofi_desc_t *d;
    ofi_ep_t *e;

    if (p >= f->recv_bufs && p < f->recv_bufs + (size_t) OFI_RECV_BUFS * OFI_BUF_SIZE) {
        ofi_op_t *op = &f->recv_ops[(size_t) (p - f->recv_bufs) / OFI_BUF_SIZE];
        if (op->kept)
            post_recv(f, op);
        return;
    }
    /* A dropped rendezvous: the sender's send completes. */
    d = data;
    e = d->ep;
    if (e->state == EP_OPEN) {
        ofi_hdr_t h;
        hdr_to(&h, e, K_FIN);
        h.len = d->rts.cookie;
        send_ctrl(e, &h);
    }
    free(d);
    e->inflight--;
    ep_maybe_free(e);
}

/* ---- endpoints of the owner ---- */

static icbc_status_t ep_start(ofi_fabric_t *f, const void *name, size_t namelen,
                              mx_fabric_ep_t **out)
{
    fi_addr_t addr;
    ofi_ep_t *e;
    ofi_hdr_t h;
    ofi_op_t *op;

    if (fi_av_insert(f->av, name, 1, &addr, 0, NULL) != 1)
        return ICBC_ERR_UNREACHABLE;
    e = ep_new(f, addr);
    if (e == NULL) {
        fi_av_remove(f->av, &addr, 1, 0);
        return ICBC_ERR_NO_MEMORY;
    }
    e->announced = 1;
    e->state = EP_HELLO;
    mx_fabric_ep_set_peer(&e->base, name, namelen);
    memset(&h, 0, sizeof(h));
    h.kind = K_HELLO;
    h.hdr_len = (uint16_t) f->namelen;
    h.aux = e->slot;
    h.len = e->token;
    op = msg_build(e, OP_SEND, &h, f->name, f->namelen, NULL, 0, NULL, 0);
    if (op != NULL)
        op->hello = 1;
    if (op == NULL || ep_submit(e, op) != ICBC_OK) {
        if (op)
            send_op_put(f, op);
        e->state = EP_CLOSED;
        ep_maybe_free(e);
        return ICBC_ERR_UNREACHABLE;
    }
    *out = &e->base;
    return ICBC_OK;
}

static icbc_status_t ofi_connect(mx_fabric_t *base, const struct sockaddr *sa, socklen_t salen,
                                 mx_fabric_ep_t **out)
{
    return ep_start((ofi_fabric_t *) base, sa, salen, out);
}

static icbc_status_t ofi_connect_address(mx_fabric_t *base, const void *address, size_t len,
                                         mx_fabric_ep_t **out)
{
    if (len == 0 || len > OFI_NAME_MAX)
        return ICBC_ERR_INVALID;
    return ep_start((ofi_fabric_t *) base, address, len, out);
}

static void ofi_ep_close(mx_fabric_ep_t *base, int flush)
{
    ofi_ep_t *e = (ofi_ep_t *) base;

    if (e->state == EP_CLOSED)
        return;
    e->announced = 0;
    if (e->state == EP_HELLO && flush) {
        e->close_flush = 1;
        return;
    }
    if (e->state == EP_OPEN) {
        if (!flush)
            ep_fail_sends(e, ICBC_ERR_PEER_FAILED);
        ep_send_bye(e);
    } else {
        ep_fail_sends(e, ICBC_ERR_PEER_FAILED);
    }
    e->state = EP_CLOSED;
    check_end(e);
    early_drop(e);
    ep_maybe_free(e);
}

/* ---- the fabric ---- */

static int efd_of(ofi_fabric_t *f)
{
    int fd = -1;

    return fi_control(&f->cq->fid, FI_GETWAIT, &fd) == 0 ? fd : -1;
}

static void ofi_destroy(mx_fabric_t *base)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;

    /* Peers learn at once that this side is gone. */
    if (f->ep != NULL) {
        for (icbc_list_t *l = f->eps.next; l != &f->eps; l = l->next) {
            ofi_ep_t *e = ICBC_CONTAINER(l, ofi_ep_t, link);
            e->announced = 0;
            if (e->state == EP_OPEN)
                ep_send_bye(e);
        }
        /* their BYEs out, for up to a second: an endpoint closed with them
         * queued drops them, and a peer that misses one learns only from
         * its silence */
        for (double end = icbc_clock_ms() + 1000; icbc_clock_ms() < end;) {
            size_t busy = 0;
            ofi_progress(base);
            for (icbc_list_t *l = f->eps.next; l != &f->eps; l = l->next)
                busy += ICBC_CONTAINER(l, ofi_ep_t, link)->inflight;
            if (busy == 0)
                break;
        }
        fi_close(&f->ep->fid);
        f->ep = NULL;
    }
    while (!icbc_list_empty(&f->eps)) {
        ofi_ep_t *e = ICBC_CONTAINER(f->eps.next, ofi_ep_t, link);
        icbc_list_del(&e->link);
        while (!icbc_list_empty(&e->waiting)) {
            ofi_op_t *op = ICBC_CONTAINER(e->waiting.next, ofi_op_t, link);
            icbc_list_del(&op->link);
            if (op->kind == OP_READ || op->kind == OP_TRECV || op->kind == OP_TSEND) {
                if (op->mr)
                    fi_close(&op->mr->fid);
                if (op->kind != OP_TSEND)
                    free(op->desc);
                free(op);
            } else if (op->kind == OP_RTS && op->mr) {
                fi_close(&op->mr->fid);
            }
        }
        while (!icbc_list_empty(&e->rts)) {
            ofi_op_t *op = ICBC_CONTAINER(e->rts.next, ofi_op_t, link);
            icbc_list_del(&op->link);
            if (op->mr)
                fi_close(&op->mr->fid);
        }
        check_end(e);
        free(e);
    }
    if (f->recv_mr)
        fi_close(&f->recv_mr->fid);
    while (!icbc_list_empty(&f->slabs)) {
        send_slab_t *s = ICBC_CONTAINER(f->slabs.next, send_slab_t, link);
        icbc_list_del(&s->link);
        if (s->mr)
            fi_close(&s->mr->fid);
        free(s->bufs);
        free(s);
    }
    if (f->cq)
        fi_close(&f->cq->fid);
    if (f->av)
        fi_close(&f->av->fid);
    if (f->domain)
        fi_close(&f->domain->fid);
    if (f->fabric)
        fi_close(&f->fabric->fid);
    if (f->info)
        ofi_lib.freeinfo(f->info);
    icbc_hmap_free(&f->rts_by_cookie);
    free(f->recv_bufs);
    free(f->slots);
    free(f);
}

static struct fi_info *find_info(const char *prov, const char *node, const char *service,
                                 int family, uint64_t caps, char *why, size_t whylen)
{
    struct fi_info *hints = ofi_lib.dupinfo(NULL), *info = NULL;
    int rc;

    if (hints == NULL)
        return NULL;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    if (family == AF_INET)
        hints->addr_format = FI_SOCKADDR_IN;
    else if (family == AF_INET6)
        hints->addr_format = FI_SOCKADDR_IN6;
    hints->fabric_attr->prov_name = strdup(prov);
    rc = ofi_lib.getinfo(FI_VERSION(1, 17), node, service, node ? FI_SOURCE : 0, hints, &info);
    ofi_lib.freeinfo(hints);
    if (rc != 0) {
        snprintf(why, whylen, "%s", ofi_lib.strerror(-rc));
        return NULL;
    }
    return info;
}

/* The first IPv4 address of interface IFACE as text; 0 if it has none. */
static int iface_address(const char *iface, char *buf, size_t len)
{
    struct ifaddrs *all, *i;
    int found = 0;

    if (getifaddrs(&all) != 0)
        return 0;
    for (i = all; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp(i->ifa_name, iface) == 0)
            found = inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, buf,
                              (socklen_t) len) != NULL;
    freeifaddrs(all);
    return found;
}

static icbc_status_t ofi_create(const mx_fabric_params_t *params, mx_fabric_t **out, char *err,
                                size_t errlen)
{
    ofi_fabric_t *f = calloc(1, sizeof(*f));
    const char *prov = getenv("FI_PROVIDER");
    char node[64] = "", service[16] = "0", where[80] = "any address", why[128] = "";
    const char *what = "fi_getinfo";
    struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG,
                                  .wait_obj = params->wakeup ? FI_WAIT_FD : FI_WAIT_NONE };
    struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
    int family = 0, rc = 0;
    icbc_status_t st;

    if ((st = ofi_lib_open(err, errlen)) != ICBC_OK) {
        free(f);
        return st;
    }
    if (f == NULL)
        return icbc_err(ICBC_ERR_NO_MEMORY, err, errlen, "fabric: out of memory");
    icbc_list_init(&f->free_ops);
    icbc_list_init(&f->slabs);
    icbc_list_init(&f->eps);
    icbc_list_init(&f->backlog);
    icbc_list_init(&f->recv_retry);
    icbc_hmap_init(&f->rts_by_cookie);
    f->efd = -1;
    f->listen = params->listen;
    f->next_key = 1;
    f->next_cookie = ((uint64_t) random_u32() << 32) | random_u32();
    if (prov == NULL || *prov == '\0')
        prov = params->ofi_provider ? params->ofi_provider : "tcp;ofi_rxm";
    setenv("FI_OFI_RXM_MSG_RX_SIZE", OFI_RXM_MSG_RX_SIZE, 0); /* read at libfabric's start */
    setenv("FI_OFI_RXM_BUFFER_SIZE", OFI_RXM_BUFFER_SIZE, 0);
    if (params->addr) {
        char text[80];
        bt_sock_addr_text(params->addr, text, sizeof(text));
        snprintf(where, sizeof(where), "%s", text);
        family = params->addr->sa_family;
        if (family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *) params->addr;
            inet_ntop(AF_INET, &in->sin_addr, node, sizeof(node));
            snprintf(service, sizeof(service), "%u", params->listen ? ntohs(in->sin_port) : 0);
        } else if (family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) params->addr;
            inet_ntop(AF_INET6, &in6->sin6_addr, node, sizeof(node));
            snprintf(service, sizeof(service), "%u", params->listen ? ntohs(in6->sin6_port) : 0);
        }
    }
    if (!params->addr && params->ofi_iface &&
        iface_address(params->ofi_iface, node, sizeof(node))) {
        snprintf(where, sizeof(where), "%s (%s)", node, params->ofi_iface);
        family = AF_INET;
    }
    f->info = find_info(prov, node[0] ? node : NULL, node[0] ? service : NULL, family,
                        FI_TAGGED | FI_RMA | FI_READ | FI_REMOTE_READ, why, sizeof(why));
    if (f->info != NULL)
        f->rma = 1;
    else
        f->info = find_info(prov, node[0] ? node : NULL, node[0] ? service : NULL, family,
                            FI_TAGGED, why, sizeof(why));
    if (f->info == NULL)
        goto fail;
    f->mr_local = (f->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
    f->send_in_place = !f->mr_local && f->info->tx_attr->iov_limit >= 2;
    f->virt_addr = (f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    f->prov_key = (f->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    f->names_listen = (strcmp(f->info->fabric_attr->prov_name, "tcp;ofi_rxm") == 0 ||
                       strcmp(f->info->fabric_attr->prov_name, "net;ofi_rxm") == 0);

    what = "fi_fabric";
    if ((rc = ofi_lib.fabric(f->info->fabric_attr, &f->fabric, NULL)) != 0)
        goto fail_rc;
    what = "fi_domain";
    if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL)) != 0)
        goto fail_rc;
    what = "fi_av_open";
    if ((rc = fi_av_open(f->domain, &av_attr, &f->av, NULL)) != 0)
        goto fail_rc;
    what = "fi_cq_open";
    rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
    if (rc != 0) { /* a provider without wait descriptors: the owner polls */
        cq_attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
    }
    if (rc != 0)
        goto fail_rc;
    what = "fi_endpoint";
    if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)) != 0)
        goto fail_rc;
    what = "fi_ep_bind";
    if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
        goto fail_rc;
    what = "fi_enable";
    if ((rc = fi_enable(f->ep)) != 0)
        goto fail_rc;
    what = "fi_getname";
    f->namelen = sizeof(f->name);
    if ((rc = fi_getname(&f->ep->fid, f->name, &f->namelen)) != 0)
        goto fail_rc;
    if (cq_attr.wait_obj == FI_WAIT_FD)
        f->efd = efd_of(f);

    what = "receive buffers";
    f->recv_bufs = malloc((size_t) OFI_RECV_BUFS * OFI_BUF_SIZE);
    if (f->recv_bufs == NULL ||
        (f->mr_local && mr_reg(f, f->recv_bufs, (size_t) OFI_RECV_BUFS * OFI_BUF_SIZE, FI_RECV,
                               &f->recv_mr) != ICBC_OK))
        goto fail;
    for (int i = 0; i < OFI_RECV_BUFS; i++) {
        f->recv_ops[i].kind = OP_RECV;
        f->recv_ops[i].buf = f->recv_bufs + (size_t) i * OFI_BUF_SIZE;
        post_recv(f, &f->recv_ops[i]);
    }

    f->base.rndv_thresh = params->rndv_thresh ? params->rndv_thresh : MX_FABRIC_RNDV_THRESH_DEFAULT;
    if (f->base.rndv_thresh > OFI_BUF_SIZE - sizeof(ofi_hdr_t) - OFI_MAX_HDR)
        f->base.rndv_thresh = OFI_BUF_SIZE - sizeof(ofi_hdr_t) - OFI_MAX_HDR;
    if (f->namelen >= sizeof(struct sockaddr_in) && f->namelen <= sizeof(struct sockaddr_in6))
        bt_sock_addr_text((const struct sockaddr *) f->name, where, sizeof(where));
    snprintf(f->base.describe, sizeof(f->base.describe), "%s %s on %s (%s rendezvous)",
             params->listen ? "ofi-listener" : "ofi", f->info->fabric_attr->prov_name, where,
             f->rma ? "RMA read" : "tagged");
    *out = &f->base;
    return ICBC_OK;

fail_rc:
    snprintf(why, sizeof(why), "%s", ofi_lib.strerror(-rc));
fail:
    ofi_destroy(&f->base);
    return icbc_err(ICBC_ERR_UNREACHABLE, err, errlen,
                    "fabric: libfabric provider '%s' on %s: %s failed: %s", prov, where, what,
                    why[0] ? why : "out of memory");
}

static int ofi_efd(mx_fabric_t *base)
{
    return ((ofi_fabric_t *) base)->efd;
}

static icbc_status_t ofi_arm(mx_fabric_t *base)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;
    struct fid *fids[1] = { &f->cq->fid };
    int rc;

    /* Operations libfabric refused wait for progress, not for an event. */
    if (f->efd < 0 || !icbc_list_empty(&f->backlog) || !icbc_list_empty(&f->recv_retry))
        return ICBC_ERR_BUSY;
    rc = fi_trywait(f->fabric, fids, 1);
    if (rc == 0)
        return ICBC_OK;
    if (rc == -FI_EAGAIN)
        return ICBC_ERR_BUSY;
    icbc_error("fabric: fi_trywait: %s", ofi_lib.strerror(-rc));
    return ICBC_ERR_IO;
}

static icbc_status_t ofi_address(mx_fabric_t *base, void *buf, size_t *len)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;

    if (f->namelen > *len)
        return ICBC_ERR_TRUNCATED;
    memcpy(buf, f->name, f->namelen);
    *len = f->namelen;
    return ICBC_OK;
}

static size_t ofi_address_max(const mx_fabric_t *base)
{
    (void) base;
    return OFI_NAME_MAX;
}

/* No endpoint that may still send has a message posted and not completed
 * or waiting to be posted (failed and closed endpoints have given theirs
 * up: libfabric may never return what it holds for a dead peer). */
static int ofi_sends_done(mx_fabric_t *base)
{
    ofi_fabric_t *f = (ofi_fabric_t *) base;

    for (icbc_list_t *l = f->eps.next; l != &f->eps; l = l->next) {
        ofi_ep_t *e = ICBC_CONTAINER(l, ofi_ep_t, link);
        if ((e->state == EP_OPEN || e->state == EP_HELLO) &&
            (e->sends_posted || !icbc_list_empty(&e->waiting)))
            return 0;
    }
    return 1;
}

static size_t ofi_max_hdr(const mx_fabric_t *base)
{
    (void) base;
    return OFI_MAX_HDR;
}

const mx_fabric_ops_t mx_fabric_ofi_ops = {
    .create = ofi_create,
    .destroy = ofi_destroy,
    .efd = ofi_efd,
    .progress = ofi_progress,
    .arm = ofi_arm,
    .address = ofi_address,
    .address_max = ofi_address_max,
    .connect = ofi_connect,
    .connect_address = ofi_connect_address,
    .ep_close = ofi_ep_close,
    .am_send = ofi_am_send,
    .am_recv = ofi_am_recv,
    .release = ofi_release,
    .max_hdr = ofi_max_hdr,
    .sends_done = ofi_sends_done,
};

#endif /* ICBC_HAVE_OFI */
