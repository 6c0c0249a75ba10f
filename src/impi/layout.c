/*
 * The job's layout from the server's COLL answers, and this client's parts
 * of them; see impi_client.h. Every answer is bytes from the network: each
 * size and value is checked before it is used.
 */
#include "impi_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"

static const uint32_t labels[] = {
    IMPI_C_VERSION,      IMPI_C_ICBC_HOSTS,   IMPI_C_NHOSTS,         IMPI_C_NPROCS, IMPI_C_DATALEN,
    IMPI_C_TAGUB,        IMPI_C_COLL_XSIZE,   IMPI_C_COLL_MAXLINEAR, IMPI_H_IPV6,   IMPI_H_PORT,
    IMPI_H_NPROCS,       IMPI_H_ACKMARK,      IMPI_H_HIWATER,        IMPI_P_IPV6,   IMPI_P_PID,
    IMPI_C_ICBC_DATAREP, IMPI_P_ICBC_MACHINE,
};
#define NLABELS ((int) (sizeof(labels) / sizeof(labels[0])))

const uint32_t *impi_layout_labels(int *n)
{
    *n = NLABELS;
    return labels;
}

static int label_index(uint32_t label)
{
    for (int i = 0; i < NLABELS; i++)
        if (labels[i] == label)
            return i;
    return -1;
}

/* Labels every client must give: the job cannot be laid out without them. */
static int label_required(uint32_t label)
{
    switch (label) {
    case IMPI_C_NHOSTS:
    case IMPI_C_NPROCS:
    case IMPI_H_IPV6:
    case IMPI_H_PORT:
    case IMPI_H_NPROCS:
    case IMPI_P_IPV6:
    case IMPI_P_PID: return 1;
    default: return 0;
    }
}

static int seen(const impi_layout_t *l, uint32_t label)
{
    return (l->labels_seen >> label_index(label)) & 1;
}

icbc_status_t impi_layout_init(impi_layout_t *l, int nclients)
{
    memset(l, 0, sizeof(*l));
    if (nclients < 1 || nclients > IMPI_MAX_CLIENTS)
        return ICBC_ERR_INVALID;
    l->nclients = nclients;
    l->datalen = UINT32_MAX;
    l->tagub = INT32_MAX;
    l->ackmark = l->hiwater = UINT32_MAX;
    return ICBC_OK;
}

void impi_layout_free(impi_layout_t *l)
{
    free(l->hosts);
    free(l->procs);
    free(l->machines);
    l->hosts = NULL;
    l->procs = NULL;
    l->machines = NULL;
}

/* Bytes one client's part of LABEL has, or 0 when it varies (versions). */
static size_t part_size(const impi_layout_t *l, uint32_t label, int c)
{
    switch (label) {
    case IMPI_C_VERSION: return 0;
    case IMPI_H_IPV6: return 16 * (size_t) l->nhosts[c];
    case IMPI_H_PORT:
    case IMPI_H_NPROCS:
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER: return 4 * (size_t) l->nhosts[c];
    case IMPI_P_IPV6: return 16 * (size_t) l->nprocs[c];
    case IMPI_P_PID: return 8 * (size_t) l->nprocs[c];
    case IMPI_C_ICBC_DATAREP: return IMPI_DATAREP_SIZE;
    case IMPI_P_ICBC_MACHINE: return 8 * (size_t) l->nprocs[c];
    default: return 4;
    }
}

/* ---- data representation ------------------------------------------------- */

static const char *const datarep_types[] = {
    "short",  "int",         "long",   "long long", "float",
    "double", "long double", "void *", "_Bool",     "wchar_t",
};
#define DATAREP_NTYPES ((int) (sizeof(datarep_types) / sizeof(datarep_types[0])))

void impi_datarep_local(uint8_t rep[IMPI_DATAREP_SIZE])
{
    const uint16_t one = 1;
    const uint8_t sizes[DATAREP_NTYPES] = {
        sizeof(short),  sizeof(int),         sizeof(long),   sizeof(long long), sizeof(float),
        sizeof(double), sizeof(long double), sizeof(void *), sizeof(_Bool),     sizeof(wchar_t),
    };

    memset(rep, 0, IMPI_DATAREP_SIZE);
    rep[0] = *(const uint8_t *) &one ? IMPI_DATAREP_LITTLE : IMPI_DATAREP_BIG;
    memcpy(rep + 1, sizes, sizeof(sizes));
}

static int datarep_valid(const uint8_t *rep)
{
    if (rep[0] != IMPI_DATAREP_LITTLE && rep[0] != IMPI_DATAREP_BIG)
        return 0;
    for (int i = 1; i <= DATAREP_NTYPES; i++)
        if (rep[i] < 1 || rep[i] > 32)
            return 0;
    for (int i = DATAREP_NTYPES + 1; i < IMPI_DATAREP_SIZE; i++)
        if (rep[i] != 0)
            return 0;
    return 1;
}

/* Where clients A and C differ, as "byte order: little-endian and big-endian;
 * long: 8 and 4 bytes". */
static void datarep_diff(const uint8_t *a, const uint8_t *c, char *out, size_t outlen)
{
    size_t n = 0;

    out[0] = '\0';
    if (a[0] != c[0])
        n += (size_t) snprintf(out, outlen, "byte order: %s and %s",
                               a[0] == IMPI_DATAREP_LITTLE ? "little-endian" : "big-endian",
                               c[0] == IMPI_DATAREP_LITTLE ? "little-endian" : "big-endian");
    for (int i = 0; i < DATAREP_NTYPES && n < outlen; i++)
        if (a[1 + i] != c[1 + i])
            n += (size_t) snprintf(out + n, outlen - n, "%s%s: %u and %u bytes", n ? "; " : "",
                                   datarep_types[i], a[1 + i], c[1 + i]);
}

/* C_VERSION: each part is an ascending array of {major, minor} that holds
 * 0.0, so each begins with 0.0; the highest version in every part wins. */
static icbc_status_t add_versions(impi_layout_t *l, uint32_t mask, const uint8_t *p, size_t len,
                                  char *err, size_t errlen)
{
    uint64_t common[64];
    int ncommon = 0, parts = 0;
    size_t i = 0;

    if (len % 8 != 0)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "C_VERSION: %zu bytes is not a list of version pairs", len);
    while (i < len) {
        uint64_t v[64];
        int n = 0;
        uint64_t prev = 0;
        do {
            uint64_t ver = (uint64_t) icbc_get32(p + i) << 32 | icbc_get32(p + i + 4);
            if (n == 64)
                return icbc_err(ICBC_ERR_INVALID, err, errlen,
                                "C_VERSION: more than 64 versions in a part");
            if (n > 0 && ver <= prev)
                return icbc_err(ICBC_ERR_INVALID, err, errlen,
                                "C_VERSION: versions not in ascending order");
            v[n++] = prev = ver;
            i += 8;
        } while (i < len && (icbc_get32(p + i) != 0 || icbc_get32(p + i + 4) != 0));
        if (v[0] != 0)
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_VERSION: a part without version 0.0");
        if (parts++ == 0) {
            memcpy(common, v, sizeof(v[0]) * (size_t) n);
            ncommon = n;
        } else {
            int k = 0;
            for (int a = 0; a < ncommon; a++)
                for (int b = 0; b < n; b++)
                    if (common[a] == v[b])
                        common[k++] = common[a];
            ncommon = k;
        }
    }
    if (parts != __builtin_popcount(mask))
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_VERSION: %d parts for %d clients", parts,
                        __builtin_popcount(mask));
    if (parts == 0)
        return ICBC_OK; /* nobody gave one: 0.0 */
    /* 0.0 is in every part, so in the intersection */
    l->version_major = (uint32_t) (common[ncommon - 1] >> 32);
    l->version_minor = (uint32_t) common[ncommon - 1];
    return ICBC_OK;
}

static icbc_status_t alloc_hosts(impi_layout_t *l, char *err, size_t errlen)
{
    uint64_t total = 0;

    for (int c = 0; c < l->nclients; c++) {
        l->first_host[c] = (int) total;
        total += l->nhosts[c];
    }
    if (total > IMPI_HOSTS_MAX)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_NHOSTS: %llu hosts in all (at most %u)",
                        (unsigned long long) total, IMPI_HOSTS_MAX);
    l->first_host[l->nclients] = (int) total;
    l->nhosts_total = (int) total;
    l->hosts = calloc(total, sizeof(*l->hosts));
    if (l->hosts == NULL)
        return ICBC_ERR_NO_MEMORY;
    for (int c = 0; c < l->nclients; c++)
        for (int h = l->first_host[c]; h < l->first_host[c + 1]; h++) {
            l->hosts[h].client = c;
            l->hosts[h].ackmark = IMPI_DEFAULT_ACKMARK;
            l->hosts[h].hiwater = IMPI_DEFAULT_HIWATER;
        }
    return ICBC_OK;
}

static icbc_status_t alloc_procs(impi_layout_t *l, char *err, size_t errlen)
{
    uint64_t total = 0;

    for (int c = 0; c < l->nclients; c++) {
        if (l->nprocs[c] < l->nhosts[c])
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "C_NPROCS: client %d has %u processes on %u hosts", c, l->nprocs[c],
                            l->nhosts[c]);
        l->first_rank[c] = (int) total;
        total += l->nprocs[c];
    }
    if (total > IMPI_PROCS_MAX)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "C_NPROCS: %llu processes in all (at most %u)", (unsigned long long) total,
                        IMPI_PROCS_MAX);
    l->first_rank[l->nclients] = (int) total;
    l->nprocs_total = (int) total;
    l->procs = calloc(total, sizeof(*l->procs));
    l->machines = calloc(total, sizeof(*l->machines));
    return l->procs && l->machines ? ICBC_OK : ICBC_ERR_NO_MEMORY;
}

/* One client's part of a per-client label (4 bytes). */
static icbc_status_t add_client_value(impi_layout_t *l, uint32_t label, int c, const uint8_t *p,
                                      char *err, size_t errlen)
{
    uint32_t v = icbc_get32(p);
    int32_t s = (int32_t) v;

    switch (label) {
    case IMPI_C_ICBC_HOSTS:
        if (v != 1)
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_ICBC_HOSTS: client %d gives %u (1)",
                            c, v);
        l->icbc_hosts_mask |= 1u << c;
        break;
    case IMPI_C_NHOSTS:
        if (v < 1 || v > IMPI_HOSTS_MAX)
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_NHOSTS: client %d gives %u hosts", c,
                            v);
        l->nhosts[c] = v;
        break;
    case IMPI_C_NPROCS:
        if (v < 1 || v > IMPI_PROCS_MAX)
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "C_NPROCS: client %d gives %u processes",
                            c, v);
        l->nprocs[c] = v;
        break;
    case IMPI_C_DATALEN:
        if (v < IMPI_DATALEN_MIN)
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "C_DATALEN: client %d gives %u (at least %u)", c, v, IMPI_DATALEN_MIN);
        if (v < l->datalen)
            l->datalen = v;
        break;
    case IMPI_C_TAGUB:
        if (s < IMPI_TAGUB_MIN)
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "C_TAGUB: client %d gives %d (at least %d)", c, s, IMPI_TAGUB_MIN);
        if (s < l->tagub)
            l->tagub = s;
        break;
    case IMPI_C_COLL_XSIZE:
    case IMPI_C_COLL_MAXLINEAR: {
        int xsize = label == IMPI_C_COLL_XSIZE;
        int32_t *dst = xsize ? &l->coll_xsize : &l->coll_maxlinear;
        if (s == -1)
            s = xsize ? IMPI_DEFAULT_COLL_XSIZE : IMPI_DEFAULT_COLL_MAXLINEAR;
        if (s < (xsize ? 0 : 1))
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "%s: client %d gives %d",
                            xsize ? "C_COLL_XSIZE" : "C_COLL_MAXLINEAR", c, s);
        if (*dst != 0 && *dst != s)
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "%s: the clients disagree (%d and %d)",
                            xsize ? "C_COLL_XSIZE" : "C_COLL_MAXLINEAR", *dst, s);
        *dst = s;
        break;
    }
    }
    return ICBC_OK;
}

/* One client's part of a per-host or per-process label. */
static icbc_status_t add_client_array(impi_layout_t *l, uint32_t label, int c, const uint8_t *p,
                                      char *err, size_t errlen)
{
    impi_host_t *h = l->hosts + l->first_host[c];
    impi_proc_t *pr = l->procs + l->first_rank[c];
    uint64_t sum = 0;

    switch (label) {
    case IMPI_H_IPV6:
        for (uint32_t k = 0; k < l->nhosts[c]; k++)
            memcpy(h[k].addr, p + 16 * k, 16);
        break;
    case IMPI_H_PORT:
        for (uint32_t k = 0; k < l->nhosts[c]; k++) {
            uint32_t port = icbc_get32(p + 4 * k);
            if (port < 1 || port > 65535)
                return icbc_err(ICBC_ERR_INVALID, err, errlen,
                                "H_PORT: host %u of client %d gives port %u", k, c, port);
            h[k].port = port;
        }
        break;
    case IMPI_H_NPROCS:
        /* the counts first: a host's first rank is only computed once they
         * add up to C_NPROCS (bounded), never from a count that overflows */
        for (uint32_t k = 0; k < l->nhosts[c]; k++) {
            uint32_t n = icbc_get32(p + 4 * k);
            if (n < 1)
                return icbc_err(ICBC_ERR_INVALID, err, errlen,
                                "H_NPROCS: host %u of client %d has no process", k, c);
            sum += n;
        }
        if (sum != l->nprocs[c])
            return icbc_err(
                ICBC_ERR_INVALID, err, errlen,
                "H_NPROCS: the hosts of client %d hold %llu processes, C_NPROCS said %u", c,
                (unsigned long long) sum, l->nprocs[c]);
        sum = 0;
        for (uint32_t k = 0; k < l->nhosts[c]; k++) {
            h[k].first_rank = l->first_rank[c] + (int) sum;
            h[k].nprocs = icbc_get32(p + 4 * k);
            sum += h[k].nprocs;
        }
        break;
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER:
        for (uint32_t k = 0; k < l->nhosts[c]; k++) {
            uint32_t v = icbc_get32(p + 4 * k);
            if (v < 1)
                return icbc_err(ICBC_ERR_INVALID, err, errlen, "%s: host %u of client %d gives 0",
                                label == IMPI_H_ACKMARK ? "H_ACKMARK" : "H_HIWATER", k, c);
            if (label == IMPI_H_ACKMARK)
                h[k].ackmark = v;
            else
                h[k].hiwater = v;
        }
        break;
    case IMPI_P_IPV6:
        for (uint32_t k = 0; k < l->nprocs[c]; k++)
            memcpy(pr[k].host, p + 16 * k, 16);
        break;
    case IMPI_P_PID:
        for (uint32_t k = 0; k < l->nprocs[c]; k++)
            pr[k].pid = (int64_t) icbc_get64(p + 8 * k);
        break;
    case IMPI_C_ICBC_DATAREP:
        if (!datarep_valid(p))
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "C_ICBC_DATAREP: client %d gives no data representation", c);
        /* Data travels in the sender's representation (docs/impi.md): two
         * ICBC clients that represent it differently would read each
         * other's numbers wrongly, so the job does not start. */
        for (int d = 0; d < c; d++)
            if ((l->datarep_mask >> d & 1) && memcmp(l->datarep[d], p, IMPI_DATAREP_SIZE) != 0) {
                char diff[256];
                datarep_diff(l->datarep[d], p, diff, sizeof(diff));
                return icbc_err(ICBC_ERR_INVALID, err, errlen,
                                "IMPI clients %d and %d represent data differently (%s); ICBC "
                                "does not convert between representations",
                                d, c, diff);
            }
        memcpy(l->datarep[c], p, IMPI_DATAREP_SIZE);
        l->datarep_mask |= 1u << c;
        break;
    case IMPI_P_ICBC_MACHINE:
        for (uint32_t k = 0; k < l->nprocs[c]; k++)
            l->machines[l->first_rank[c] + k] = icbc_get64(p + 8 * k);
        break;
    }
    return ICBC_OK;
}

static const char *label_name(uint32_t label)
{
    switch (label) {
    case IMPI_C_VERSION: return "C_VERSION";
    case IMPI_C_ICBC_HOSTS: return "C_ICBC_HOSTS";
    case IMPI_C_NHOSTS: return "C_NHOSTS";
    case IMPI_C_NPROCS: return "C_NPROCS";
    case IMPI_C_DATALEN: return "C_DATALEN";
    case IMPI_C_TAGUB: return "C_TAGUB";
    case IMPI_C_COLL_XSIZE: return "C_COLL_XSIZE";
    case IMPI_C_COLL_MAXLINEAR: return "C_COLL_MAXLINEAR";
    case IMPI_H_IPV6: return "H_IPV6";
    case IMPI_H_PORT: return "H_PORT";
    case IMPI_H_NPROCS: return "H_NPROCS";
    case IMPI_H_ACKMARK: return "H_ACKMARK";
    case IMPI_H_HIWATER: return "H_HIWATER";
    case IMPI_P_IPV6: return "P_IPV6";
    case IMPI_P_PID: return "P_PID";
    case IMPI_C_ICBC_DATAREP: return "C_ICBC_DATAREP";
    case IMPI_P_ICBC_MACHINE: return "P_ICBC_MACHINE";
    default: return "?";
    }
}

icbc_status_t impi_layout_add(impi_layout_t *l, uint32_t label, uint32_t mask, const void *bytes,
                              size_t len, char *err, size_t errlen)
{
    const uint8_t *p = bytes;
    uint32_t all = l->nclients == 32 ? UINT32_MAX : (1u << l->nclients) - 1;
    int idx = label_index(label);
    size_t off = 0;
    icbc_status_t rc;

    if (idx < 0)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "COLL label 0x%x is not an IMPI label",
                        label);
    if (l->labels_seen >> idx)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "COLL label %s came after a later label, or twice", label_name(label));
    if (mask & ~all)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "%s: parts of clients beyond the %d of the job", label_name(label),
                        l->nclients);
    if (label_required(label) && mask != all)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "%s: client(s) 0x%x gave no part; every client must", label_name(label),
                        all & ~mask);
    /* what earlier labels must have laid out */
    if (label >= IMPI_H_IPV6 && (!seen(l, IMPI_C_NHOSTS) || !seen(l, IMPI_C_NPROCS)))
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "%s before the host and process counts",
                        label_name(label));
    if (label == IMPI_C_VERSION) {
        rc = add_versions(l, mask, p, len, err, errlen);
        if (rc != ICBC_OK)
            return rc;
        l->labels_seen |= 1u << idx;
        return ICBC_OK;
    }
    size_t want = 0;
    for (int c = 0; c < l->nclients; c++)
        if (mask >> c & 1)
            want += part_size(l, label, c);
    if (want != len)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "%s: %zu bytes, the parts of clients 0x%x take %zu", label_name(label), len,
                        mask, want);
    for (int c = 0; c < l->nclients; c++) {
        if (!(mask >> c & 1))
            continue;
        size_t n = part_size(l, label, c);
        rc = label < IMPI_H_IPV6 ? add_client_value(l, label, c, p + off, err, errlen)
                                 : add_client_array(l, label, c, p + off, err, errlen);
        if (rc != ICBC_OK)
            return rc;
        off += n;
    }
    l->labels_seen |= 1u << idx;
    if (label == IMPI_C_NHOSTS)
        return alloc_hosts(l, err, errlen);
    if (label == IMPI_C_NPROCS)
        return alloc_procs(l, err, errlen);
    return ICBC_OK;
}

icbc_status_t impi_layout_check(impi_layout_t *l, char *err, size_t errlen)
{
    for (int i = 0; i < NLABELS; i++)
        if (label_required(labels[i]) && !(l->labels_seen >> i & 1))
            return icbc_err(ICBC_ERR_INVALID, err, errlen, "start-up ended without %s",
                            label_name(labels[i]));
    /* labels no client gave: their defaults */
    if (l->datalen == UINT32_MAX)
        l->datalen = IMPI_DEFAULT_DATALEN;
    if (l->datalen > IMPI_DATALEN_MAX)
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "C_DATALEN: the clients agree on packets of %u bytes; at most %u are "
                        "taken",
                        l->datalen, IMPI_DATALEN_MAX);
    if (l->coll_xsize == 0)
        l->coll_xsize = IMPI_DEFAULT_COLL_XSIZE;
    if (l->coll_maxlinear == 0)
        l->coll_maxlinear = IMPI_DEFAULT_COLL_MAXLINEAR;
    l->ackmark = l->hiwater = UINT32_MAX;
    for (int h = 0; h < l->nhosts_total; h++) {
        if (l->hosts[h].ackmark < l->ackmark)
            l->ackmark = l->hosts[h].ackmark;
        if (l->hosts[h].hiwater < l->hiwater)
            l->hiwater = l->hosts[h].hiwater;
    }
    return ICBC_OK;
}

/* ---- this client's parts ------------------------------------------------- */

icbc_status_t impi_local_part(const impi_local_t *local, uint32_t label, uint8_t **buf, size_t *len)
{
    uint64_t sum = 0;
    size_t n;
    uint8_t *p;

    for (uint32_t h = 0; h < local->nhosts; h++)
        sum += local->hosts[h].nprocs;
    if (local->nhosts < 1 || sum != local->nprocs)
        return ICBC_ERR_INVALID;
    switch (label) {
    case IMPI_C_VERSION: n = 8; break;
    case IMPI_H_IPV6: n = 16 * (size_t) local->nhosts; break;
    case IMPI_H_PORT:
    case IMPI_H_NPROCS:
    case IMPI_H_ACKMARK:
    case IMPI_H_HIWATER: n = 4 * (size_t) local->nhosts; break;
    case IMPI_P_IPV6: n = 16 * (size_t) local->nprocs; break;
    case IMPI_P_PID: n = 8 * (size_t) local->nprocs; break;
    case IMPI_C_ICBC_DATAREP: n = IMPI_DATAREP_SIZE; break;
    case IMPI_P_ICBC_MACHINE: n = 8 * (size_t) local->nprocs; break;
    default: n = label_index(label) >= 0 ? 4 : 0; break;
    }
    if (n == 0)
        return ICBC_ERR_INVALID;
    p = calloc(1, n);
    if (p == NULL)
        return ICBC_ERR_NO_MEMORY;
    switch (label) {
    case IMPI_C_VERSION: break; /* 0.0 */
    case IMPI_C_ICBC_HOSTS: icbc_put32(p, 1); break;
    case IMPI_C_NHOSTS: icbc_put32(p, local->nhosts); break;
    case IMPI_C_NPROCS: icbc_put32(p, local->nprocs); break;
    case IMPI_C_DATALEN:
        icbc_put32(p, local->datalen ? local->datalen : IMPI_DEFAULT_DATALEN);
        break;
    case IMPI_C_TAGUB:
        icbc_put32(p, (uint32_t) (local->tagub ? local->tagub : IMPI_DEFAULT_TAGUB));
        break;
    case IMPI_C_COLL_XSIZE: icbc_put32(p, (uint32_t) local->coll_xsize); break;
    case IMPI_C_COLL_MAXLINEAR: icbc_put32(p, (uint32_t) local->coll_maxlinear); break;
    case IMPI_C_ICBC_DATAREP: impi_datarep_local(p); break;
    case IMPI_P_ICBC_MACHINE:
        for (uint32_t k = 0; k < local->nprocs; k++)
            icbc_put64(p + 8 * k, local->machines ? local->machines[k] : 0);
        break;
    default:
        for (uint32_t k = 0; label < IMPI_P_IPV6 && k < local->nhosts; k++) {
            const impi_host_t *h = &local->hosts[k];
            switch (label) {
            case IMPI_H_IPV6: memcpy(p + 16 * k, h->addr, 16); break;
            case IMPI_H_PORT: icbc_put32(p + 4 * k, h->port); break;
            case IMPI_H_NPROCS: icbc_put32(p + 4 * k, h->nprocs); break;
            case IMPI_H_ACKMARK:
                icbc_put32(p + 4 * k, h->ackmark ? h->ackmark : IMPI_DEFAULT_ACKMARK);
                break;
            case IMPI_H_HIWATER:
                icbc_put32(p + 4 * k, h->hiwater ? h->hiwater : IMPI_DEFAULT_HIWATER);
                break;
            }
        }
        for (uint32_t k = 0; label >= IMPI_P_IPV6 && k < local->nprocs; k++) {
            if (label == IMPI_P_IPV6)
                memcpy(p + 16 * k, local->procs[k].host, 16);
            else
                icbc_put64(p + 8 * k, (uint64_t) local->procs[k].pid);
        }
    }
    *buf = p;
    *len = n;
    return ICBC_OK;
}

/* ---- the layout handed on inside a client -------------------------------- */

/* What impi_layout_pack writes before the hosts and processes. */
typedef struct {
    uint32_t magic;
    int32_t nclients, nhosts_total, nprocs_total;
    uint32_t nhosts[IMPI_MAX_CLIENTS], nprocs[IMPI_MAX_CLIENTS];
    uint32_t version_major, version_minor, datalen;
    int32_t tagub, coll_xsize, coll_maxlinear;
    uint32_t ackmark, hiwater, labels_seen, datarep_mask, icbc_hosts_mask;
    uint8_t datarep[IMPI_MAX_CLIENTS][IMPI_DATAREP_SIZE];
} packed_layout_t;
#define PACKED_LAYOUT_MAGIC 0x494c4159u /* "ILAY" */

icbc_status_t impi_layout_pack(const impi_layout_t *l, uint8_t **buf, size_t *len)
{
    packed_layout_t h;
    size_t hosts = sizeof(*l->hosts) * (size_t) l->nhosts_total;
    size_t procs = sizeof(*l->procs) * (size_t) l->nprocs_total;

    memset(&h, 0, sizeof(h));
    h.magic = PACKED_LAYOUT_MAGIC;
    h.nclients = l->nclients;
    h.nhosts_total = l->nhosts_total;
    h.nprocs_total = l->nprocs_total;
    memcpy(h.nhosts, l->nhosts, sizeof(h.nhosts));
    memcpy(h.nprocs, l->nprocs, sizeof(h.nprocs));
    h.version_major = l->version_major;
    h.version_minor = l->version_minor;
    h.datalen = l->datalen;
    h.tagub = l->tagub;
    h.coll_xsize = l->coll_xsize;
    h.coll_maxlinear = l->coll_maxlinear;
    h.ackmark = l->ackmark;
    h.hiwater = l->hiwater;
    h.labels_seen = l->labels_seen;
    h.datarep_mask = l->datarep_mask;
    h.icbc_hosts_mask = l->icbc_hosts_mask;
    memcpy(h.datarep, l->datarep, sizeof(h.datarep));

    size_t machines = sizeof(*l->machines) * (size_t) l->nprocs_total;
    *len = sizeof(h) + hosts + procs + machines;
    *buf = malloc(*len);
    if (*buf == NULL)
        return ICBC_ERR_NO_MEMORY;
    memcpy(*buf, &h, sizeof(h));
    memcpy(*buf + sizeof(h), l->hosts, hosts);
    memcpy(*buf + sizeof(h) + hosts, l->procs, procs);
    memcpy(*buf + sizeof(h) + hosts + procs, l->machines, machines);
    return ICBC_OK;
}

icbc_status_t impi_layout_unpack(const void *buf, size_t len, impi_layout_t *l, char *err,
                                 size_t errlen)
{
    packed_layout_t h;
    const uint8_t *p = buf;
    icbc_status_t st;

    memset(l, 0, sizeof(*l));
    if (len < sizeof(h))
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "packed layout: %zu bytes, shorter than its header", len);
    memcpy(&h, p, sizeof(h));
    if (h.magic != PACKED_LAYOUT_MAGIC)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "packed layout: bad magic 0x%08x", h.magic);
    st = impi_layout_init(l, h.nclients);
    if (st != ICBC_OK)
        return icbc_err(ICBC_ERR_INVALID, err, errlen, "packed layout: %d clients", h.nclients);
    memcpy(l->nhosts, h.nhosts, sizeof(l->nhosts));
    memcpy(l->nprocs, h.nprocs, sizeof(l->nprocs));
    for (int c = 0; c < l->nclients; c++)
        if (l->nhosts[c] < 1 || l->nhosts[c] > IMPI_HOSTS_MAX || l->nprocs[c] < 1 ||
            l->nprocs[c] > IMPI_PROCS_MAX)
            return icbc_err(ICBC_ERR_INVALID, err, errlen,
                            "packed layout: client %d has %u hosts, %u processes", c, l->nhosts[c],
                            l->nprocs[c]);
    if ((st = alloc_hosts(l, err, errlen)) != ICBC_OK ||
        (st = alloc_procs(l, err, errlen)) != ICBC_OK) {
        impi_layout_free(l);
        return st;
    }
    if (l->nhosts_total != h.nhosts_total || l->nprocs_total != h.nprocs_total ||
        len != sizeof(h) + sizeof(*l->hosts) * (size_t) l->nhosts_total +
                   (sizeof(*l->procs) + sizeof(*l->machines)) * (size_t) l->nprocs_total) {
        impi_layout_free(l);
        return icbc_err(ICBC_ERR_INVALID, err, errlen,
                        "packed layout: %zu bytes do not hold %d hosts and %d processes", len,
                        h.nhosts_total, h.nprocs_total);
    }
    memcpy(l->hosts, p + sizeof(h), sizeof(*l->hosts) * (size_t) l->nhosts_total);
    memcpy(l->procs, p + sizeof(h) + sizeof(*l->hosts) * (size_t) l->nhosts_total,
           sizeof(*l->procs) * (size_t) l->nprocs_total);
    memcpy(l->machines,
           p + sizeof(h) + sizeof(*l->hosts) * (size_t) l->nhosts_total +
               sizeof(*l->procs) * (size_t) l->nprocs_total,
           sizeof(*l->machines) * (size_t) l->nprocs_total);
    l->version_major = h.version_major;
    l->version_minor = h.version_minor;
    l->datalen = h.datalen;
    l->tagub = h.tagub;
    l->coll_xsize = h.coll_xsize;
    l->coll_maxlinear = h.coll_maxlinear;
    l->ackmark = h.ackmark;
    l->hiwater = h.hiwater;
    l->labels_seen = h.labels_seen;
    l->datarep_mask = h.datarep_mask;
    l->icbc_hosts_mask = h.icbc_hosts_mask;
    memcpy(l->datarep, h.datarep, sizeof(l->datarep));
    return ICBC_OK;
}

int impi_layout_host_of(const impi_layout_t *l, int rank)
{
    int lo = 0, hi = l->nhosts_total - 1;

    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (l->hosts[mid].first_rank <= rank)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
