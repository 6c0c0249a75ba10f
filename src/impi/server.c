/*
 * The IMPI server's protocol, without sockets; see impi_server.h.
 *
 * A connection is a slot. Until it has authenticated it is nobody: a slot
 * that sends anything else than AUTH (and the key, when one is required)
 * is refused alone (ICBC_ERR_AUTH) and the server goes on, so that a port
 * scan cannot end a job's start-up. After that it is a client, and any
 * error ends the server.
 */
#include "impi_server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "impi_proto.h"

typedef enum {
    SLOT_FREE = 0,
    SLOT_AUTH, /* connected: AUTH expected */
    SLOT_KEY,  /* AUTH answered with KEY: the 8-byte key expected */
    SLOT_RANK, /* authenticated: IMPI (its client rank) expected */
    SLOT_COLL, /* ranked: COLL contributions, then DONE */
    SLOT_DONE, /* sent DONE: waits for everyone's */
    SLOT_FINI, /* sent FINI after start-up: may close */
} slot_state_t;

static const char *state_names[] = { "free",
                                     "authenticating",
                                     "sending its key",
                                     "naming its client rank",
                                     "exchanging COLL labels",
                                     "done, waiting for the others",
                                     "finished" };

typedef struct {
    slot_state_t state;
    char peer[64];
    int rank;            /* client rank, -1 before IMPI */
    uint32_t last_label; /* highest COLL label it gave */
    uint8_t *in;         /* bytes received, not yet a whole command */
    size_t in_len, in_cap;
    uint8_t *out; /* bytes for it, from out_off on */
    size_t out_off, out_len, out_cap;
} slot_t;

/* One COLL label being collected. */
typedef struct label {
    uint32_t label;
    uint32_t mask; /* bit r: client r gave its part */
    uint8_t *data[IMPI_MAX_CLIENTS];
    uint32_t len[IMPI_MAX_CLIENTS];
    struct label *next; /* ascending labels */
} label_t;

struct impi_srv {
    impi_srv_config_t cfg;
    slot_t *slots;
    int nslots;
    int by_rank[IMPI_MAX_CLIENTS]; /* slot of client r, -1: not yet */
    int ranked, done, fini;
    int sized;   /* the IMPI answer went out */
    int started; /* the DONE answer went out */
    label_t *labels;
};

/* ---- helpers ------------------------------------------------------------- */

/* "client 1 (10.1.0.2:40000)" or "connection 10.1.0.2:40000" */
static const char *who(const slot_t *s, char *buf, size_t len)
{
    if (s->rank >= 0)
        snprintf(buf, len, "client %d (%s)", s->rank, s->peer);
    else
        snprintf(buf, len, "connection %s", s->peer);
    return buf;
}

static int put_out(slot_t *s, const void *bytes, size_t len)
{
    if (s->out_off == s->out_len)
        s->out_off = s->out_len = 0;
    if (icbc_grow(&s->out, &s->out_cap, s->out_len + len) < 0)
        return -1;
    memcpy(s->out + s->out_len, bytes, len);
    s->out_len += len;
    return 0;
}

static int put_cmd(slot_t *s, uint32_t cmd, const void *payload, uint32_t len)
{
    uint8_t hdr[IMPI_CMD_HDR_SIZE];

    impi_cmd_hdr_pack(cmd, len, hdr);
    return put_out(s, hdr, sizeof(hdr)) || (len && put_out(s, payload, len)) ? -1 : 0;
}

/* ---- create / destroy ---------------------------------------------------- */

icbc_status_t impi_srv_create(const impi_srv_config_t *cfg, impi_srv_t **out)
{
    impi_srv_t *srv;

    if (cfg->nclients < 1 || cfg->nclients > IMPI_MAX_CLIENTS)
        return ICBC_ERR_INVALID;
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return ICBC_ERR_NO_MEMORY;
    srv->cfg = *cfg;
    /* room for every client plus as many strangers at once */
    srv->nslots = 2 * cfg->nclients;
    srv->slots = calloc((size_t) srv->nslots, sizeof(slot_t));
    if (srv->slots == NULL) {
        free(srv);
        return ICBC_ERR_NO_MEMORY;
    }
    for (int r = 0; r < IMPI_MAX_CLIENTS; r++)
        srv->by_rank[r] = -1;
    *out = srv;
    return ICBC_OK;
}

static void label_free(label_t *l)
{
    for (int r = 0; r < IMPI_MAX_CLIENTS; r++)
        free(l->data[r]);
    free(l);
}

static void slot_clear(slot_t *s)
{
    free(s->in);
    free(s->out);
    memset(s, 0, sizeof(*s));
}

void impi_srv_destroy(impi_srv_t *srv)
{
    if (srv == NULL)
        return;
    for (int i = 0; i < srv->nslots; i++)
        slot_clear(&srv->slots[i]);
    while (srv->labels) {
        label_t *l = srv->labels;
        srv->labels = l->next;
        label_free(l);
    }
    free(srv->slots);
    free(srv);
}

int impi_srv_accept(impi_srv_t *srv, const char *peer_text)
{
    for (int i = 0; i < srv->nslots; i++) {
        slot_t *s = &srv->slots[i];
        if (s->state != SLOT_FREE)
            continue;
        memset(s, 0, sizeof(*s));
        s->state = SLOT_AUTH;
        s->rank = -1;
        snprintf(s->peer, sizeof(s->peer), "%s", peer_text ? peer_text : "?");
        return i;
    }
    return -1;
}

/* ---- COLL ---------------------------------------------------------------- */

/* The lowest pending label is answered once every client not yet DONE gave
 * it, or gave a higher one (it skipped this label: clients give labels in
 * ascending order and wait for each answer). */
static int label_ready(const impi_srv_t *srv, const label_t *l)
{
    for (int r = 0; r < srv->cfg.nclients; r++) {
        const slot_t *s = &srv->slots[srv->by_rank[r]];
        if (s->state == SLOT_DONE || s->state == SLOT_FINI)
            continue;
        if (!(l->mask & (1u << r)) && s->last_label <= l->label)
            return 0;
    }
    return 1;
}

static icbc_status_t answer_labels(impi_srv_t *srv, char *err, size_t errlen)
{
    while (srv->sized && srv->labels && label_ready(srv, srv->labels)) {
        label_t *l = srv->labels;
        uint64_t total = 8;
        for (int r = 0; r < srv->cfg.nclients; r++)
            total += l->len[r];
        if (total > IMPI_CMD_LEN_MAX) {
            icbc_err(ICBC_ERR_INVALID, err, errlen,
                     "COLL label 0x%x: the contributions add up to %llu bytes, more "
                     "than %u",
                     l->label, (unsigned long long) total, IMPI_CMD_LEN_MAX);
            return ICBC_ERR_INVALID;
        }
        uint8_t head[8];
        icbc_put32(head, l->label);
        icbc_put32(head + 4, l->mask);
        for (int r = 0; r < srv->cfg.nclients; r++) {
            if (!(l->mask & (1u << r)))
                continue;
            slot_t *s = &srv->slots[srv->by_rank[r]];
            uint8_t hdr[IMPI_CMD_HDR_SIZE];
            impi_cmd_hdr_pack(IMPI_CMD_COLL, (uint32_t) total, hdr);
            int bad = put_out(s, hdr, sizeof(hdr)) || put_out(s, head, sizeof(head));
            for (int q = 0; q < srv->cfg.nclients && !bad; q++)
                if (l->len[q])
                    bad = put_out(s, l->data[q], l->len[q]);
            if (bad) {
                icbc_err(ICBC_ERR_INVALID, err, errlen, "out of memory answering COLL label 0x%x",
                         l->label);
                return ICBC_ERR_NO_MEMORY;
            }
        }
        srv->labels = l->next;
        label_free(l);
    }
    return ICBC_OK;
}

static icbc_status_t take_coll(impi_srv_t *srv, slot_t *s, const uint8_t *p, uint32_t len,
                               char *err, size_t errlen)
{
    char w[96];
    uint32_t label = icbc_get32(p);
    label_t **at = &srv->labels, *l;

    if (label == 0 || label <= s->last_label) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "%s gave COLL label 0x%x after 0x%x (labels must ascend)", who(s, w, sizeof(w)),
                 label, s->last_label);
        return ICBC_ERR_INVALID;
    }
    while (*at && (*at)->label < label)
        at = &(*at)->next;
    if (*at && (*at)->label == label) {
        l = *at;
    } else {
        l = calloc(1, sizeof(*l));
        if (l == NULL)
            return ICBC_ERR_NO_MEMORY;
        l->label = label;
        l->next = *at;
        *at = l;
    }
    s->last_label = label;
    l->mask |= 1u << s->rank;
    l->len[s->rank] = len - 4;
    if (len > 4) {
        l->data[s->rank] = malloc(len - 4);
        if (l->data[s->rank] == NULL)
            return ICBC_ERR_NO_MEMORY;
        memcpy(l->data[s->rank], p + 4, len - 4);
    }
    return answer_labels(srv, err, errlen);
}

/* ---- commands ------------------------------------------------------------ */

static icbc_status_t take_auth(impi_srv_t *srv, slot_t *s, const uint8_t *p, char *err,
                               size_t errlen)
{
    char w[96];
    uint32_t mask = icbc_get32(p);
    uint8_t reply[IMPI_AUTH_REPLY_SIZE];

    if (srv->cfg.require_key && !(mask & IMPI_AUTH_MASK_KEY)) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "%s offers authentication methods 0x%x, not the key this server "
                 "requires",
                 who(s, w, sizeof(w)), mask);
        return ICBC_ERR_AUTH;
    }
    if (!srv->cfg.require_key && !(mask & IMPI_AUTH_MASK_NONE)) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "%s offers authentication methods 0x%x, not none (this server has "
                 "no key)",
                 who(s, w, sizeof(w)), mask);
        return ICBC_ERR_AUTH;
    }
    icbc_put32(reply, srv->cfg.require_key ? IMPI_AUTH_KEY : IMPI_AUTH_NONE);
    icbc_put32(reply + 4, srv->cfg.require_key ? IMPI_AUTH_KEY_SIZE : 0);
    if (put_out(s, reply, sizeof(reply)))
        return ICBC_ERR_NO_MEMORY;
    s->state = srv->cfg.require_key ? SLOT_KEY : SLOT_RANK;
    return ICBC_OK;
}

static icbc_status_t take_rank(impi_srv_t *srv, slot_t *s, const uint8_t *p, char *err,
                               size_t errlen)
{
    char w[96];
    int32_t rank = (int32_t) icbc_get32(p);

    if (rank < 0 || rank >= srv->cfg.nclients) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "%s names client rank %d, outside 0..%d",
                 who(s, w, sizeof(w)), rank, srv->cfg.nclients - 1);
        return ICBC_ERR_INVALID;
    }
    if (srv->by_rank[rank] >= 0) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "%s names client rank %d, which %s already has",
                 who(s, w, sizeof(w)), rank, srv->slots[srv->by_rank[rank]].peer);
        return ICBC_ERR_INVALID;
    }
    s->rank = rank;
    srv->by_rank[rank] = (int) (s - srv->slots);
    s->state = SLOT_COLL;
    if (++srv->ranked == srv->cfg.nclients) {
        uint8_t n[4];
        icbc_put32(n, (uint32_t) srv->cfg.nclients);
        for (int r = 0; r < srv->cfg.nclients; r++)
            if (put_cmd(&srv->slots[srv->by_rank[r]], IMPI_CMD_IMPI, n, 4))
                return ICBC_ERR_NO_MEMORY;
        srv->sized = 1;
        return answer_labels(srv, err, errlen);
    }
    return ICBC_OK;
}

static icbc_status_t take_done(impi_srv_t *srv, slot_t *s, char *err, size_t errlen)
{
    s->state = SLOT_DONE;
    if (++srv->done == srv->cfg.nclients) {
        for (int r = 0; r < srv->cfg.nclients; r++)
            if (put_cmd(&srv->slots[srv->by_rank[r]], IMPI_CMD_DONE, NULL, 0))
                return ICBC_ERR_NO_MEMORY;
        srv->started = 1;
    }
    return answer_labels(srv, err, errlen);
}

/* One whole command (or key) at the head of S's input: its length, 0 when
 * more bytes are needed, or an error. */
static icbc_status_t take_one(impi_srv_t *srv, slot_t *s, size_t *used, char *err, size_t errlen)
{
    char w[96];
    impi_cmd_hdr_t h;

    *used = 0;
    if (s->state == SLOT_KEY) {
        if (s->in_len < IMPI_AUTH_KEY_SIZE)
            return ICBC_OK;
        if (icbc_get64(s->in) != srv->cfg.key) {
            icbc_err(ICBC_ERR_INVALID, err, errlen, "%s sent the wrong key", who(s, w, sizeof(w)));
            return ICBC_ERR_AUTH;
        }
        s->state = SLOT_RANK;
        *used = IMPI_AUTH_KEY_SIZE;
        return ICBC_OK;
    }
    if (s->in_len < IMPI_CMD_HDR_SIZE)
        return ICBC_OK;
    if (impi_cmd_hdr_parse(s->in, &h) != ICBC_OK) {
        icbc_err(ICBC_ERR_INVALID, err, errlen,
                 "%s sent a malformed command (0x%08x '%s', %u bytes) while %s",
                 who(s, w, sizeof(w)), h.cmd, impi_cmd_name(h.cmd), h.len, state_names[s->state]);
        return s->state == SLOT_AUTH ? ICBC_ERR_AUTH : ICBC_ERR_INVALID;
    }
    if (s->in_len < IMPI_CMD_HDR_SIZE + (size_t) h.len)
        return ICBC_OK;
    const uint8_t *p = s->in + IMPI_CMD_HDR_SIZE;
    icbc_status_t st;
    int expected = (h.cmd == IMPI_CMD_AUTH && s->state == SLOT_AUTH) ||
                   (h.cmd == IMPI_CMD_IMPI && s->state == SLOT_RANK) ||
                   ((h.cmd == IMPI_CMD_COLL || h.cmd == IMPI_CMD_DONE) && s->state == SLOT_COLL) ||
                   (h.cmd == IMPI_CMD_FINI && s->state == SLOT_DONE && srv->started);
    if (!expected) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "%s sent %s while %s%s", who(s, w, sizeof(w)),
                 impi_cmd_name(h.cmd), state_names[s->state],
                 h.cmd == IMPI_CMD_FINI && !srv->started ? " (before start-up ended)" : "");
        return s->state == SLOT_AUTH ? ICBC_ERR_AUTH : ICBC_ERR_INVALID;
    }
    switch (h.cmd) {
    case IMPI_CMD_AUTH: st = take_auth(srv, s, p, err, errlen); break;
    case IMPI_CMD_IMPI: st = take_rank(srv, s, p, err, errlen); break;
    case IMPI_CMD_COLL: st = take_coll(srv, s, p, h.len, err, errlen); break;
    case IMPI_CMD_DONE: st = take_done(srv, s, err, errlen); break;
    default:
        s->state = SLOT_FINI;
        srv->fini++;
        st = ICBC_OK;
        break;
    }
    *used = IMPI_CMD_HDR_SIZE + h.len;
    return st;
}

icbc_status_t impi_srv_input(impi_srv_t *srv, int slot, const void *bytes, size_t len, char *err,
                             size_t errlen)
{
    slot_t *s = &srv->slots[slot];
    icbc_status_t st = ICBC_OK;
    size_t used;

    if (s->state == SLOT_FREE || len == 0)
        return ICBC_OK;
    if (s->state == SLOT_FINI) {
        char w[96];
        icbc_err(ICBC_ERR_INVALID, err, errlen, "%s sent %zu bytes after FINI",
                 who(s, w, sizeof(w)), len);
        return ICBC_ERR_INVALID;
    }
    /* a command's bytes are kept until it is whole; its length was checked
     * (at most IMPI_CMD_LEN_MAX) as soon as its header was */
    if (icbc_grow(&s->in, &s->in_cap, s->in_len + len) < 0) {
        icbc_err(ICBC_ERR_INVALID, err, errlen, "out of memory for %zu bytes from %s", len,
                 s->peer);
        return ICBC_ERR_NO_MEMORY;
    }
    memcpy(s->in + s->in_len, bytes, len);
    s->in_len += len;
    while (st == ICBC_OK && s->in_len > 0) {
        st = take_one(srv, s, &used, err, errlen);
        if (used == 0)
            break;
        memmove(s->in, s->in + used, s->in_len - used);
        s->in_len -= used;
    }
    if (st == ICBC_ERR_AUTH) {
        /* a stranger: only this connection is refused */
        slot_clear(s);
    }
    return st;
}

icbc_status_t impi_srv_closed(impi_srv_t *srv, int slot, char *err, size_t errlen)
{
    slot_t *s = &srv->slots[slot];
    char w[96];

    if (s->state == SLOT_FREE)
        return ICBC_OK;
    if (s->state == SLOT_FINI || s->state == SLOT_AUTH || s->state == SLOT_KEY) {
        /* done, or a stranger that never authenticated */
        slot_clear(s);
        return ICBC_OK;
    }
    icbc_err(ICBC_ERR_INVALID, err, errlen, "%s closed its connection while %s, before FINI",
             who(s, w, sizeof(w)), state_names[s->state]);
    return ICBC_ERR_PEER_FAILED;
}

const void *impi_srv_output(impi_srv_t *srv, int slot, size_t *len)
{
    slot_t *s = &srv->slots[slot];

    *len = s->out_len - s->out_off;
    return s->out ? s->out + s->out_off : NULL;
}

void impi_srv_consume(impi_srv_t *srv, int slot, size_t n)
{
    slot_t *s = &srv->slots[slot];

    s->out_off += n;
    if (s->out_off >= s->out_len)
        s->out_off = s->out_len = 0;
}

int impi_srv_slot_done(const impi_srv_t *srv, int slot)
{
    const slot_t *s = &srv->slots[slot];
    return s->state == SLOT_FINI && s->out_off == s->out_len;
}

int impi_srv_started(const impi_srv_t *srv)
{
    return srv->started;
}

int impi_srv_finished(const impi_srv_t *srv)
{
    return srv->fini == srv->cfg.nclients;
}

/* What start-up waits for, for the message of a stalled server. */
void impi_srv_waiting_for(const impi_srv_t *srv, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    if (srv->ranked < srv->cfg.nclients) {
        n += (size_t) snprintf(buf + n, len - n,
                               "clients that have not connected and named "
                               "their rank:");
        for (int r = 0; r < srv->cfg.nclients && n < len; r++)
            if (srv->by_rank[r] < 0)
                n += (size_t) snprintf(buf + n, len - n, " %d", r);
        return;
    }
    if (srv->labels) {
        n += (size_t) snprintf(buf + n, len - n,
                               "COLL label 0x%x from client(s):", srv->labels->label);
        for (int r = 0; r < srv->cfg.nclients && n < len; r++) {
            const slot_t *s = &srv->slots[srv->by_rank[r]];
            if (s->state == SLOT_COLL && !(srv->labels->mask & (1u << r)) &&
                s->last_label <= srv->labels->label)
                n += (size_t) snprintf(buf + n, len - n, " %d", r);
        }
        return;
    }
    n += (size_t) snprintf(buf + n, len - n, "DONE from client(s):");
    for (int r = 0; r < srv->cfg.nclients && n < len; r++)
        if (srv->slots[srv->by_rank[r]].state == SLOT_COLL)
            n += (size_t) snprintf(buf + n, len - n, " %d", r);
}
