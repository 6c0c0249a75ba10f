/*
 * The IMPI relay's start-up, without sockets; see impi_relay.h.
 *
 * Toward the inside client the relay is the server of AUTH (with its own
 * key, or none) and forwards the rest; toward impi-server it is the client
 * (it authenticates with the same key and names the inside client's rank).
 * Of the COLL labels it rewrites those that describe hosts and processes:
 *
 *   label       inside's part, sent out          another client's part, sent in
 *   C_NHOSTS    1                                1
 *   H_IPV6      the relay's outside address      the relay's inside address
 *   H_PORT      the relay's outside port         the persona's port
 *   H_NPROCS    the client's processes           the client's processes
 *   H_ACKMARK,  the smallest of the client's     the smallest of the client's
 *   H_HIWATER   hosts                            hosts
 *   P_IPV6      the relay's outside address      the relay's inside address
 *   P_PID       0, 1, ... (index in the client)  0, 1, ... (index in the client)
 *
 * and puts the inside client's own parts back into the answers it passes
 * in, so the inside client sees its hosts as it gave them. Every other
 * label goes by as it is. Both sides' answers are read into layouts
 * (impi_layout_add, which checks every field): they are what the relay
 * forwards packets by.
 */
#include "impi_relay.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "impi_rx.h"

typedef enum {
    IN_AUTH, /* AUTH expected */
    IN_KEY,  /* the 8-byte key expected */
    IN_RANK, /* IMPI expected */
    IN_WAIT, /* waits for the server's IMPI answer */
    IN_COLL, /* COLL labels, then DONE */
    IN_DONE, /* DONE sent: waits for start-up to end, then FINI */
    IN_FINI,
} in_state_t;

typedef enum {
    SRV_IDLE,    /* not connected yet: nothing to say before the inside's rank */
    SRV_AUTH,    /* the raw AUTH answer expected */
    SRV_SIZE,    /* the IMPI answer expected */
    SRV_COLL,    /* COLL answers, then DONE */
    SRV_STARTED, /* silence until the end */
} srv_state_t;

/* The labels whose parts the relay rewrites, and keeps the inside's of. */
static const uint32_t rewritten[] = {
    IMPI_C_NHOSTS,  IMPI_H_IPV6,    IMPI_H_PORT, IMPI_H_NPROCS,
    IMPI_H_ACKMARK, IMPI_H_HIWATER, IMPI_P_IPV6, IMPI_P_PID,
};
#define NREWRITTEN ((int) (sizeof(rewritten) / sizeof(rewritten[0])))

typedef struct {
    uint8_t *buf;
    size_t off, len, cap;
} queue_t;

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} inbuf_t;

struct impi_rly {
    impi_rly_config_t cfg;
    in_state_t in_state;
    srv_state_t srv_state;
    inbuf_t in, srv_in;
    queue_t to_in, to_srv;
    int client, nclients;
    uint32_t last_label;
    uint32_t in_nhosts, in_nprocs; /* the inside client's counts, 0 until given */
    uint32_t *in_host_nprocs;      /* per inside host, from its H_NPROCS */
    int ntrunks;
    struct {
        uint8_t *data;
        uint32_t len;
        int given;
    } kept[NREWRITTEN];                                         /* the inside's own parts */
    uint32_t ports[IMPI_RELAY_TRUNKS_MAX][IMPI_MAX_CLIENTS];    /* the personas' */
    uint8_t paddr[IMPI_RELAY_TRUNKS_MAX][IMPI_MAX_CLIENTS][16]; /* and their addresses */
    impi_layout_t inside, outside;
    int started, finished;
};

/* ---- bytes --------------------------------------------------------------- */

static int put(queue_t *q, const void *bytes, size_t len)
{
    if (q->off == q->len)
        q->off = q->len = 0;
    if (icbc_grow(&q->buf, &q->cap, q->len + len) < 0)
        return -1;
    if (len)
        memcpy(q->buf + q->len, bytes, len);
    q->len += len;
    return 0;
}

static int put32(queue_t *q, uint32_t v)
{
    uint8_t b[4];

    icbc_put32(b, v);
    return put(q, b, 4);
}

static int put_cmd(queue_t *q, uint32_t cmd, uint32_t len)
{
    uint8_t hdr[IMPI_CMD_HDR_SIZE];

    impi_cmd_hdr_pack(cmd, len, hdr);
    return put(q, hdr, sizeof(hdr));
}

static icbc_status_t fail(char *err, size_t errlen, const char *side, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static icbc_status_t fail(char *err, size_t errlen, const char *side, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    icbc_verr(ICBC_ERR_INVALID, err, errlen, side, fmt, ap);
    va_end(ap);
    return ICBC_ERR_INVALID;
}

#define INSIDE "the inside client: "
#define SERVER "impi-server: "

static int kept_index(uint32_t label)
{
    for (int i = 0; i < NREWRITTEN; i++)
        if (rewritten[i] == label)
            return i;
    return -1;
}

static int known_label(uint32_t label)
{
    int n;
    const uint32_t *labels = impi_layout_labels(&n);

    for (int i = 0; i < n; i++)
        if (labels[i] == label)
            return 1;
    return 0;
}

/* ---- create / destroy ---------------------------------------------------- */

icbc_status_t impi_rly_create(const impi_rly_config_t *cfg, impi_rly_t **out)
{
    impi_rly_t *r;

    int k = cfg->ntrunks ? cfg->ntrunks : 1;

    if (k < 1 || k > IMPI_RELAY_TRUNKS_MAX || !cfg->persona_port)
        return ICBC_ERR_INVALID;
    for (int j = 0; j < k; j++)
        if (cfg->trunk[j].outside_port < 1 || cfg->trunk[j].outside_port > 65535)
            return ICBC_ERR_INVALID;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ICBC_ERR_NO_MEMORY;
    r->cfg = *cfg;
    r->ntrunks = k;
    r->client = -1;
    *out = r;
    return ICBC_OK;
}

void impi_rly_destroy(impi_rly_t *r)
{
    if (r == NULL)
        return;
    free(r->in.buf);
    free(r->srv_in.buf);
    free(r->to_in.buf);
    free(r->to_srv.buf);
    for (int i = 0; i < NREWRITTEN; i++)
        free(r->kept[i].data);
    free(r->in_host_nprocs);
    if (r->nclients) {
        impi_layout_free(&r->inside);
        impi_layout_free(&r->outside);
    }
    free(r);
}

/* ---- the inside's parts, sent out ---------------------------------------- */

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* The relays outside: the inside hosts in min(trunks, hosts) blocks, one
 * relay host each. */
static uint32_t out_blocks(const impi_rly_t *r)
{
    return min_u32((uint32_t) r->ntrunks, r->in_nhosts);
}

/* The relay's part for LABEL from the inside's part P (N bytes), into Q:
 * block j of the inside hosts is relay j's outside host. */
static icbc_status_t outward_part(impi_rly_t *r, uint32_t label, const uint8_t *p, uint32_t n,
                                  queue_t *q, char *err, size_t errlen)
{
    uint32_t nh = r->in_nhosts, np = r->in_nprocs, unit = 0, count = 0, v, k;
    uint64_t sum = 0;
    int bad = 0;

    switch (label) {
    case IMPI_C_NHOSTS:
    case IMPI_C_NPROCS:
        if (n != 4)
            return fail(err, errlen, INSIDE, "COLL label 0x%x with %u bytes, not 4", label, n);
        v = icbc_get32(p);
        if (v < 1 || v > (label == IMPI_C_NHOSTS ? IMPI_HOSTS_MAX : IMPI_PROCS_MAX))
            return fail(err, errlen, INSIDE, "%s %u",
                        label == IMPI_C_NHOSTS ? "C_NHOSTS" : "C_NPROCS", v);
        if (label == IMPI_C_NHOSTS)
            r->in_nhosts = v;
        else
            r->in_nprocs = v;
        return put32(q, label == IMPI_C_NHOSTS ? out_blocks(r) : v) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
    case IMPI_H_IPV6: unit = 16, count = nh; break;
    case IMPI_H_PORT:
    case IMPI_H_NPROCS:
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER: unit = 4, count = nh; break;
    case IMPI_P_IPV6: unit = 16, count = np; break;
    case IMPI_P_PID: unit = 8, count = np; break;
    default: return put(q, p, n) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
    }
    if (nh == 0 || np == 0)
        return fail(err, errlen, INSIDE, "COLL label 0x%x before C_NHOSTS and C_NPROCS", label);
    if ((uint64_t) n != (uint64_t) unit * count)
        return fail(err, errlen, INSIDE, "COLL label 0x%x with %u bytes for %u %s, not %llu", label,
                    n, count, unit == 8 || label >= IMPI_P_IPV6 ? "processes" : "hosts",
                    (unsigned long long) unit * count);
    k = out_blocks(r);
    switch (label) {
    case IMPI_H_IPV6:
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put(q, r->cfg.trunk[j].outside_addr, 16);
        break;
    case IMPI_H_PORT:
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put32(q, r->cfg.trunk[j].outside_port);
        break;
    case IMPI_H_NPROCS:
        for (uint32_t h = 0; h < nh; h++) {
            v = icbc_get32(p + 4 * h);
            if (v < 1)
                return fail(err, errlen, INSIDE, "H_NPROCS: host %u has no process", h);
            sum += v;
        }
        if (sum != np)
            return fail(err, errlen, INSIDE,
                        "H_NPROCS: the hosts hold %llu processes, C_NPROCS said %u",
                        (unsigned long long) sum, np);
        free(r->in_host_nprocs);
        r->in_host_nprocs = malloc(sizeof(uint32_t) * nh);
        if (r->in_host_nprocs == NULL)
            return ICBC_ERR_NO_MEMORY;
        for (uint32_t h = 0; h < nh; h++)
            r->in_host_nprocs[h] = icbc_get32(p + 4 * h);
        for (uint32_t j = 0; j < k && !bad; j++) {
            uint32_t blk = 0;
            for (uint32_t h = impi_relay_block_first(nh, k, j);
                 h < impi_relay_block_first(nh, k, j + 1); h++)
                blk += r->in_host_nprocs[h];
            bad = put32(q, blk);
        }
        break;
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER:
        for (uint32_t j = 0; j < k && !bad; j++) {
            uint32_t best = UINT32_MAX;
            for (uint32_t h = impi_relay_block_first(nh, k, j);
                 h < impi_relay_block_first(nh, k, j + 1); h++) {
                v = icbc_get32(p + 4 * h);
                if (v < 1)
                    return fail(err, errlen, INSIDE, "COLL label 0x%x: host %u gives 0", label, h);
                best = min_u32(best, v);
            }
            bad = put32(q, best);
        }
        break;
    case IMPI_P_IPV6:
        if (r->in_host_nprocs == NULL)
            return fail(err, errlen, INSIDE, "P_IPV6 before H_NPROCS");
        for (uint32_t j = 0; j < k && !bad; j++)
            for (uint32_t h = impi_relay_block_first(nh, k, j);
                 h < impi_relay_block_first(nh, k, j + 1) && !bad; h++)
                for (uint32_t i = 0; i < r->in_host_nprocs[h] && !bad; i++)
                    bad = put(q, r->cfg.trunk[j].outside_addr, 16);
        break;
    case IMPI_P_PID:
        for (uint32_t i = 0; i < np && !bad; i++) {
            uint8_t b[8];
            icbc_put64(b, i);
            bad = put(q, b, 8);
        }
        break;
    }
    return bad ? ICBC_ERR_NO_MEMORY : ICBC_OK;
}

static icbc_status_t inside_coll(impi_rly_t *r, const uint8_t *p, uint32_t len, char *err,
                                 size_t errlen)
{
    uint32_t label = icbc_get32(p);
    int k = kept_index(label);
    queue_t part = { 0 };
    icbc_status_t st;

    if (label == 0 || label <= r->last_label)
        return fail(err, errlen, INSIDE, "COLL label 0x%x after 0x%x (labels must ascend)", label,
                    r->last_label);
    r->last_label = label;
    st = outward_part(r, label, p + 4, len - 4, &part, err, errlen);
    if (st == ICBC_OK && (put_cmd(&r->to_srv, IMPI_CMD_COLL, (uint32_t) (4 + part.len)) ||
                          put32(&r->to_srv, label) || put(&r->to_srv, part.buf, part.len)))
        st = ICBC_ERR_NO_MEMORY;
    free(part.buf);
    if (st != ICBC_OK)
        return st;
    if (k >= 0) {
        r->kept[k].data = malloc(len - 4 ? len - 4 : 1);
        if (r->kept[k].data == NULL)
            return ICBC_ERR_NO_MEMORY;
        memcpy(r->kept[k].data, p + 4, len - 4);
        r->kept[k].len = len - 4;
        r->kept[k].given = 1;
    }
    return ICBC_OK;
}

/* ---- the answers, passed in ---------------------------------------------- */

/* The part of outside client C for LABEL as the inside sees it: its
 * processes in min(trunks, its hosts) blocks (C_NHOSTS comes before
 * C_NPROCS, and a client has a process per host at least), block j one
 * host, the persona of relay j. */
static int persona_part(impi_rly_t *r, uint32_t label, int c, queue_t *q)
{
    const impi_layout_t *o = &r->outside;
    uint32_t np = o->nprocs[c], best = UINT32_MAX, k = min_u32((uint32_t) r->ntrunks, o->nhosts[c]);
    int bad = 0;

    switch (label) {
    case IMPI_C_NHOSTS: return put32(q, k);
    case IMPI_H_IPV6:
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put(q, r->paddr[j][c], 16);
        return bad;
    case IMPI_H_PORT:
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put32(q, r->ports[j][c]);
        return bad;
    case IMPI_H_NPROCS:
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put32(q, impi_relay_block_first(np, k, j + 1) - impi_relay_block_first(np, k, j));
        return bad;
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER:
        for (int h = o->first_host[c]; h < o->first_host[c] + (int) o->nhosts[c]; h++)
            best =
                min_u32(best, label == IMPI_H_ACKMARK ? o->hosts[h].ackmark : o->hosts[h].hiwater);
        for (uint32_t j = 0; j < k && !bad; j++)
            bad = put32(q, best);
        return bad;
    case IMPI_P_IPV6:
        for (uint32_t j = 0; j < k && !bad; j++)
            for (uint32_t i = impi_relay_block_first(np, k, j);
                 i < impi_relay_block_first(np, k, j + 1) && !bad; i++)
                bad = put(q, r->paddr[j][c], 16);
        return bad;
    case IMPI_P_PID:
        for (uint32_t i = 0; i < np && !bad; i++) {
            uint8_t b[8];
            icbc_put64(b, i);
            bad = put(q, b, 8);
        }
        return bad;
    }
    return -1;
}

static icbc_status_t server_coll(impi_rly_t *r, const uint8_t *p, uint32_t len, char *err,
                                 size_t errlen)
{
    uint32_t label, mask;
    int k;
    char why[256];
    queue_t parts = { 0 };
    icbc_status_t st = ICBC_OK;

    if (len < 8)
        return fail(err, errlen, SERVER, "a COLL answer of %u bytes", len);
    label = icbc_get32(p);
    mask = icbc_get32(p + 4);
    k = kept_index(label);
    if (known_label(label) &&
        impi_layout_add(&r->outside, label, mask, p + 8, len - 8, why, sizeof(why)) != ICBC_OK)
        return fail(err, errlen, SERVER, "%s", why);
    if (k < 0) { /* as it is */
        if (known_label(label) &&
            impi_layout_add(&r->inside, label, mask, p + 8, len - 8, why, sizeof(why)) != ICBC_OK)
            return fail(err, errlen, SERVER, "%s", why);
        return put_cmd(&r->to_in, IMPI_CMD_COLL, len) || put(&r->to_in, p, len) ? ICBC_ERR_NO_MEMORY
                                                                                : ICBC_OK;
    }
    if (((mask >> r->client) & 1) && !r->kept[k].given)
        return fail(err, errlen, SERVER,
                    "COLL label 0x%x answered with a part of client %d, "
                    "which gave none",
                    label, r->client);
    for (int c = 0; c < r->nclients; c++) {
        if (!((mask >> c) & 1))
            continue;
        int bad = c == r->client ? put(&parts, r->kept[k].data, r->kept[k].len)
                                 : persona_part(r, label, c, &parts);
        if (bad) {
            st = ICBC_ERR_NO_MEMORY;
            goto out;
        }
    }
    if (impi_layout_add(&r->inside, label, mask, parts.buf, parts.len, why, sizeof(why)) !=
        ICBC_OK) {
        st = fail(err, errlen, INSIDE, "%s", why);
        goto out;
    }
    if (put_cmd(&r->to_in, IMPI_CMD_COLL, (uint32_t) (8 + parts.len)) || put(&r->to_in, p, 8) ||
        put(&r->to_in, parts.buf, parts.len))
        st = ICBC_ERR_NO_MEMORY;
out:
    free(parts.buf);
    return st;
}

/* ---- commands ------------------------------------------------------------ */

/* A whole command in BUF (its header parsed into H), or 0 when more bytes
 * must come; -1: a header no command can have. */
static int whole_cmd(const inbuf_t *b, impi_cmd_hdr_t *h)
{
    if (b->len < IMPI_CMD_HDR_SIZE)
        return 0;
    if (impi_cmd_hdr_parse(b->buf, h) != ICBC_OK)
        return -1;
    return b->len >= IMPI_CMD_HDR_SIZE + (size_t) h->len;
}

static void drop(inbuf_t *b, size_t n)
{
    memmove(b->buf, b->buf + n, b->len - n);
    b->len -= n;
}

static int append(inbuf_t *b, const void *bytes, size_t len)
{
    if (len == 0)
        return 0;
    if (icbc_grow(&b->buf, &b->cap, b->len + len) < 0)
        return -1;
    memcpy(b->buf + b->len, bytes, len);
    b->len += len;
    return 0;
}

static icbc_status_t inside_cmd(impi_rly_t *r, const impi_cmd_hdr_t *h, const uint8_t *p, char *err,
                                size_t errlen)
{
    uint8_t reply[IMPI_AUTH_REPLY_SIZE];

    switch (r->in_state) {
    case IN_AUTH:
        if (h->cmd != IMPI_CMD_AUTH)
            break;
        if (r->cfg.require_key ? !(icbc_get32(p) & IMPI_AUTH_MASK_KEY)
                               : !(icbc_get32(p) & IMPI_AUTH_MASK_NONE))
            return icbc_err(ICBC_ERR_AUTH, err, errlen,
                            INSIDE "offers authentication methods 0x%x, not %s", icbc_get32(p),
                            r->cfg.require_key ? "the key this relay requires"
                                               : "none (this relay has no key)");
        icbc_put32(reply, r->cfg.require_key ? IMPI_AUTH_KEY : IMPI_AUTH_NONE);
        icbc_put32(reply + 4, r->cfg.require_key ? IMPI_AUTH_KEY_SIZE : 0);
        r->in_state = r->cfg.require_key ? IN_KEY : IN_RANK;
        return put(&r->to_in, reply, sizeof(reply)) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
    case IN_RANK: {
        if (h->cmd != IMPI_CMD_IMPI)
            break;
        int32_t rank = (int32_t) icbc_get32(p);
        if (rank < 0 || rank >= IMPI_MAX_CLIENTS)
            return fail(err, errlen, INSIDE, "names client rank %d", rank);
        r->client = rank;
        r->in_state = IN_WAIT;
        r->srv_state = SRV_AUTH;
        return put_cmd(&r->to_srv, IMPI_CMD_AUTH, 4) ||
                       put32(&r->to_srv,
                             r->cfg.require_key ? IMPI_AUTH_MASK_KEY : IMPI_AUTH_MASK_NONE)
                   ? ICBC_ERR_NO_MEMORY
                   : ICBC_OK;
    }
    case IN_COLL:
        if (h->cmd == IMPI_CMD_COLL)
            return inside_coll(r, p, h->len, err, errlen);
        if (h->cmd != IMPI_CMD_DONE)
            break;
        r->in_state = IN_DONE;
        return put_cmd(&r->to_srv, IMPI_CMD_DONE, 0) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
    case IN_DONE:
        if (h->cmd != IMPI_CMD_FINI || !r->started)
            break;
        r->in_state = IN_FINI;
        r->finished = 1;
        return put_cmd(&r->to_srv, IMPI_CMD_FINI, 0) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
    default: break;
    }
    return fail(err, errlen, INSIDE, "sent %s while %s", impi_cmd_name(h->cmd),
                r->in_state == IN_AUTH   ? "authentication was expected"
                : r->in_state == IN_RANK ? "its client rank (IMPI) was expected"
                : r->in_state == IN_WAIT ? "the server's IMPI answer was awaited"
                : r->in_state == IN_COLL ? "COLL labels or DONE were expected"
                : r->in_state == IN_DONE ? "start-up was ending (only FINI after it)"
                                         : "it had finished");
}

icbc_status_t impi_rly_inside_input(impi_rly_t *r, const void *bytes, size_t len, char *err,
                                    size_t errlen)
{
    impi_cmd_hdr_t h;
    int whole;

    if (append(&r->in, bytes, len) < 0)
        return ICBC_ERR_NO_MEMORY;
    for (;;) {
        if (r->in_state == IN_KEY) {
            if (r->in.len < IMPI_AUTH_KEY_SIZE)
                return ICBC_OK;
            if (icbc_get64(r->in.buf) != r->cfg.key)
                return icbc_err(ICBC_ERR_AUTH, err, errlen, INSIDE "sent the wrong key");
            drop(&r->in, IMPI_AUTH_KEY_SIZE);
            r->in_state = IN_RANK;
            continue;
        }
        whole = whole_cmd(&r->in, &h);
        if (whole < 0)
            return fail(err, errlen, INSIDE, "sent a malformed command (0x%08x, %u bytes)",
                        icbc_get32(r->in.buf), icbc_get32(r->in.buf + 4));
        if (!whole)
            return ICBC_OK;
        icbc_status_t st = inside_cmd(r, &h, r->in.buf + IMPI_CMD_HDR_SIZE, err, errlen);
        if (st != ICBC_OK)
            return st;
        drop(&r->in, IMPI_CMD_HDR_SIZE + h.len);
    }
}

static icbc_status_t server_sized(impi_rly_t *r, const uint8_t *p, char *err, size_t errlen)
{
    int32_t n = (int32_t) icbc_get32(p);

    if (n < 1 || n > IMPI_MAX_CLIENTS || r->client >= n)
        return fail(err, errlen, SERVER, "says the job has %d clients (this one is client %d)", n,
                    r->client);
    if (impi_layout_init(&r->inside, n) != ICBC_OK || impi_layout_init(&r->outside, n) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    r->nclients = n;
    for (int j = 0; j < r->ntrunks; j++)
        for (int c = 0; c < n; c++) {
            if (c == r->client)
                continue;
            memcpy(r->paddr[j][c], r->cfg.trunk[j].inside_addr, 16);
            r->ports[j][c] = r->cfg.persona_port(r->cfg.arg, j, c, r->paddr[j][c]);
            if (r->ports[j][c] < 1 || r->ports[j][c] > 65535)
                return icbc_err(ICBC_ERR_IO, err, errlen,
                                "relay %d could open no port for its inside host of client %d", j,
                                c);
        }
    r->in_state = IN_COLL;
    r->srv_state = SRV_COLL;
    return put_cmd(&r->to_in, IMPI_CMD_IMPI, 4) || put32(&r->to_in, (uint32_t) n)
               ? ICBC_ERR_NO_MEMORY
               : ICBC_OK;
}

/* The outside layout holds the relays as the private client's hosts, as
 * the relay gave them: the server passed its parts on unchanged. */
static int own_part_intact(const impi_rly_t *r)
{
    const impi_layout_t *o = &r->outside;
    int c = r->client;
    uint32_t k = out_blocks(r);

    if (o->nhosts[c] != k || o->nprocs[c] != r->in_nprocs)
        return 0;
    for (uint32_t j = 0; j < k; j++) {
        const impi_host_t *h = &o->hosts[o->first_host[c] + (int) j];
        if (memcmp(h->addr, r->cfg.trunk[j].outside_addr, 16) != 0 ||
            h->port != r->cfg.trunk[j].outside_port)
            return 0;
        for (int i = h->first_rank; i < h->first_rank + (int) h->nprocs; i++)
            if (memcmp(o->procs[i].host, h->addr, 16) != 0 ||
                o->procs[i].pid != (int64_t) (i - o->first_rank[c]))
                return 0;
    }
    return 1;
}

static icbc_status_t server_done(impi_rly_t *r, char *err, size_t errlen)
{
    char why[256];

    if (impi_layout_check(&r->outside, why, sizeof(why)) != ICBC_OK)
        return fail(err, errlen, SERVER, "%s", why);
    if (!own_part_intact(r))
        return fail(err, errlen, SERVER,
                    "its answers give client %d other hosts or processes than the relay gave",
                    r->client);
    if (impi_layout_check(&r->inside, why, sizeof(why)) != ICBC_OK)
        return fail(err, errlen, INSIDE, "%s", why);
    r->started = 1;
    r->srv_state = SRV_STARTED;
    return put_cmd(&r->to_in, IMPI_CMD_DONE, 0) ? ICBC_ERR_NO_MEMORY : ICBC_OK;
}

icbc_status_t impi_rly_server_input(impi_rly_t *r, const void *bytes, size_t len, char *err,
                                    size_t errlen)
{
    impi_cmd_hdr_t h;
    int whole;

    if (r->srv_state == SRV_IDLE || r->srv_state == SRV_STARTED)
        return fail(err, errlen, SERVER, "sent %zu bytes %s", len,
                    r->srv_state == SRV_IDLE ? "before the relay spoke"
                                             : "after start-up (the job ended?)");
    if (append(&r->srv_in, bytes, len) < 0)
        return ICBC_ERR_NO_MEMORY;
    while (r->srv_state != SRV_STARTED) {
        if (r->srv_state == SRV_AUTH) {
            if (r->srv_in.len < IMPI_AUTH_REPLY_SIZE)
                return ICBC_OK;
            uint32_t which = icbc_get32(r->srv_in.buf), klen = icbc_get32(r->srv_in.buf + 4);
            drop(&r->srv_in, IMPI_AUTH_REPLY_SIZE);
            if (which == IMPI_AUTH_KEY && klen == IMPI_AUTH_KEY_SIZE && r->cfg.require_key) {
                uint8_t key[8];
                icbc_put64(key, r->cfg.key);
                if (put(&r->to_srv, key, sizeof(key)))
                    return ICBC_ERR_NO_MEMORY;
            } else if (which != IMPI_AUTH_NONE || klen != 0) {
                return icbc_err(ICBC_ERR_AUTH, err, errlen,
                                SERVER "answers authentication with method %u (%u bytes); the "
                                       "relay offered %s",
                                which, klen, r->cfg.require_key ? "its key" : "none");
            }
            r->srv_state = SRV_SIZE;
            if (put_cmd(&r->to_srv, IMPI_CMD_IMPI, 4) || put32(&r->to_srv, (uint32_t) r->client))
                return ICBC_ERR_NO_MEMORY;
            continue;
        }
        whole = whole_cmd(&r->srv_in, &h);
        if (whole < 0)
            return fail(err, errlen, SERVER, "sent a malformed command (0x%08x)",
                        icbc_get32(r->srv_in.buf));
        if (!whole)
            return ICBC_OK;
        const uint8_t *p = r->srv_in.buf + IMPI_CMD_HDR_SIZE;
        icbc_status_t st;
        if (r->srv_state == SRV_SIZE && h.cmd == IMPI_CMD_IMPI)
            st = server_sized(r, p, err, errlen);
        else if (r->srv_state == SRV_COLL && h.cmd == IMPI_CMD_COLL)
            st = server_coll(r, p, h.len, err, errlen);
        else if (r->srv_state == SRV_COLL && h.cmd == IMPI_CMD_DONE && r->in_state == IN_DONE)
            st = server_done(r, err, errlen);
        else
            st = fail(err, errlen, SERVER, "sent %s out of order", impi_cmd_name(h.cmd));
        if (st != ICBC_OK)
            return st;
        drop(&r->srv_in, IMPI_CMD_HDR_SIZE + h.len);
    }
    if (r->srv_in.len)
        return fail(err, errlen, SERVER, "sent %zu bytes after start-up", r->srv_in.len);
    return ICBC_OK;
}

/* ---- what goes out ------------------------------------------------------- */

static const void *pending(queue_t *q, size_t *len)
{
    *len = q->len - q->off;
    return q->buf ? q->buf + q->off : NULL;
}

static void consume(queue_t *q, size_t n)
{
    q->off += n;
    if (q->off == q->len)
        q->off = q->len = 0;
}

const void *impi_rly_inside_output(impi_rly_t *r, size_t *len)
{
    return pending(&r->to_in, len);
}

void impi_rly_inside_consume(impi_rly_t *r, size_t n)
{
    consume(&r->to_in, n);
}

const void *impi_rly_server_output(impi_rly_t *r, size_t *len)
{
    return pending(&r->to_srv, len);
}

void impi_rly_server_consume(impi_rly_t *r, size_t n)
{
    consume(&r->to_srv, n);
}

int impi_rly_inside_known(const impi_rly_t *r)
{
    return r->in_state > IN_RANK;
}

void impi_rly_inside_reset(impi_rly_t *r)
{
    if (r->in_state > IN_RANK)
        return;
    r->in.len = 0;
    r->to_in.off = r->to_in.len = 0;
    r->in_state = IN_AUTH;
}

int impi_rly_started(const impi_rly_t *r)
{
    return r->started;
}

int impi_rly_finished(const impi_rly_t *r)
{
    return r->finished;
}

int impi_rly_client(const impi_rly_t *r)
{
    return r->client;
}

int impi_rly_nclients(const impi_rly_t *r)
{
    return r->nclients;
}

const impi_layout_t *impi_rly_inside(const impi_rly_t *r)
{
    return &r->inside;
}

const impi_layout_t *impi_rly_outside(const impi_rly_t *r)
{
    return &r->outside;
}

/* ---- packets ------------------------------------------------------------- */

void impi_relay_route(const impi_layout_t *in, const impi_layout_t *out, int client,
                      int from_inside, const impi_rx_pkt_t *pkt, impi_pkt_hdr_t *hdr, int *host,
                      int *relay)
{
    const impi_layout_t *to = from_inside ? out : in;
    int src_host;

    *hdr = *pkt->hdr;
    hdr->src = to->procs[pkt->src];
    hdr->dest = to->procs[pkt->dest];
    *host = impi_layout_host_of(to, pkt->dest);
    /* the connection is the one of the host that holds the source on the
     * next side: the relay whose block it is */
    src_host = impi_layout_host_of(to, pkt->src);
    *relay = src_host - to->first_host[to->hosts[src_host].client];
}
