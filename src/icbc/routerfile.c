/*
 * Router file parser (icbc_routerfile.h; format in docs/routerfile.md).
 *
 * One pass over the lines; the first mistake stops the parse with a message
 * "NAME:LINE: what". Checks that need the whole cluster section (every
 * router's host is a host of the cluster, the cluster has hosts) run when the
 * section closes; checks that need the whole file (a cluster exists, the key
 * file, the policy) run at the end. Memory: strings live in an arena owned
 * by the icbc_routerfile_t, host and address lookups use open-addressing
 * indexes, and every table is capped (ICBC_RF_MAX_*).
 */
#include "icbc_routerfile.h"
#include "icbc_bind.h"
#include "icbc_log.h"
#include "icbc_pace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RF_SHOW 48     /* longest token quoted in full in a message */
#define RF_CHUNK 65536 /* arena chunk size */
#define RF_MAX_TOKENS (ICBC_RF_LINE_MAX / 2 + 1)

/* printf helper: "'%.*s%s'" quotes a token, cut at RF_SHOW characters. */
#define RF_Q(s) RF_SHOW, (s), (strlen(s) > RF_SHOW ? "..." : "")

struct rf_chunk {
    struct rf_chunk *next;
    size_t used, cap;
    char data[];
};

/* Open-addressing index over entries of some table, keyed by a string the
 * table provides. Slots hold entry + 1; 0 is empty. */
struct rf_index {
    uint32_t *slot;
    size_t cap; /* 0 or a power of two */
    size_t count;
};

enum rf_role { RF_FABRIC, RF_WAN, RF_SERVER };

/* One use of an address, for the duplicate check. */
struct rf_addr_use {
    const char *canon; /* normalised "a.b.c.d:p" / "[v6]:p", in the arena */
    enum rf_role role;
    int cluster;       /* owning cluster (fabric and wan) or -1 (impi) */
    const char *owner; /* router host or impi name */
    int line;
    int32_t next_same; /* next use with the same canon, or -1 */
};

struct rf_cluster {
    icbc_rf_cluster_t pub; /* pub.hosts / pub.routers alias the arrays below */
    const char **hosts;
    uint32_t *host_lines;
    size_t hosts_cap;
    icbc_rf_router_t *routers;
    size_t routers_cap;
};

struct icbc_routerfile {
    char *name;
    icbc_rf_policy_t policy;
    int policy_line; /* 0: default */
    char *key_path;  /* resolved; NULL: no 'key' line */
    int key_line;
    uint64_t wan_rate; /* bits/s; 0: no 'wan-rate' line */
    int wan_rate_line;
    struct rf_cluster clusters[ICBC_RF_MAX_CLUSTERS];
    size_t nclusters;
    icbc_rf_impi_t impi[ICBC_RF_MAX_IMPI];
    size_t nimpi;
    size_t nhosts;
    size_t nrouters;
    struct rf_index host_ix; /* entry = cluster << 16 | host index */
    struct rf_addr_use *addrs;
    size_t naddrs, addrs_cap;
    struct rf_index addr_ix; /* entry = first use of a canon in addrs */
    struct rf_chunk *arena;
};

struct rf_parser {
    icbc_routerfile_t *rf;
    const char *basedir;
    int line;
    char *err;
    size_t errlen;
    int cur;                   /* cluster of the open section, or -1 */
    const char *ended_cluster; /* last closed section: its cluster ... */
    const char *ended_by;      /* ... the keyword that closed it ... */
    int ended_line;            /* ... and on which line (0: none closed) */
};

/* ---- messages ---------------------------------------------------------- */

static void rf_vmsg(char *err, size_t errlen, const char *name, int line, const char *fmt,
                    va_list ap)
{
    char where[4096 + 32]; /* a path, a line number */

    if (line > 0)
        snprintf(where, sizeof(where), "%s:%d: ", name, line);
    else
        snprintf(where, sizeof(where), "%s: ", name);
    icbc_verr(ICBC_ERR_INVALID, err, errlen, where, fmt, ap);
}

static void rf_msg(char *err, size_t errlen, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void rf_msg(char *err, size_t errlen, const char *name, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rf_vmsg(err, errlen, name, line, fmt, ap);
    va_end(ap);
}

/* An error at LINE of the file being parsed; returns ICBC_ERR_INVALID. */
static icbc_status_t rf_fail_at(struct rf_parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static icbc_status_t rf_fail_at(struct rf_parser *p, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rf_vmsg(p->err, p->errlen, p->rf->name, line, fmt, ap);
    va_end(ap);
    return ICBC_ERR_INVALID;
}

static icbc_status_t rf_no_memory(struct rf_parser *p)
{
    rf_msg(p->err, p->errlen, p->rf->name, p->line, "out of memory");
    return ICBC_ERR_NO_MEMORY;
}

/* ---- arena and index --------------------------------------------------- */

static char *rf_strdup(icbc_routerfile_t *rf, const char *s)
{
    size_t n = strlen(s) + 1;
    struct rf_chunk *c = rf->arena;
    char *d;

    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > RF_CHUNK ? n : RF_CHUNK;
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = rf->arena;
        rf->arena = c;
    }
    d = c->data + c->used;
    memcpy(d, s, n);
    c->used += n;
    return d;
}

static uint64_t rf_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char) *s) * 1099511628211ull;
    return h;
}

typedef const char *(*rf_key_fn)(const icbc_routerfile_t *rf, uint32_t entry);

static long rf_index_find(const icbc_routerfile_t *rf, const struct rf_index *ix, rf_key_fn key,
                          const char *s)
{
    size_t mask, i;

    if (ix->cap == 0)
        return -1;
    mask = ix->cap - 1;
    for (i = rf_hash(s) & mask;; i = (i + 1) & mask) {
        uint32_t e = ix->slot[i];
        if (e == 0)
            return -1;
        if (strcmp(key(rf, e - 1), s) == 0)
            return (long) (e - 1);
    }
}

static void rf_index_put(uint32_t *slot, size_t cap, uint64_t h, uint32_t entry)
{
    size_t i;
    for (i = h & (cap - 1); slot[i] != 0; i = (i + 1) & (cap - 1)) {
    }
    slot[i] = entry + 1;
}

static icbc_status_t rf_index_add(icbc_routerfile_t *rf, struct rf_index *ix, rf_key_fn key,
                                  uint32_t entry)
{
    if ((ix->count + 1) * 2 > ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 64, i;
        uint32_t *slot = calloc(cap, sizeof(*slot));
        if (slot == NULL)
            return ICBC_ERR_NO_MEMORY;
        for (i = 0; i < ix->cap; i++)
            if (ix->slot[i] != 0)
                rf_index_put(slot, cap, rf_hash(key(rf, ix->slot[i] - 1)), ix->slot[i] - 1);
        free(ix->slot);
        ix->slot = slot;
        ix->cap = cap;
    }
    rf_index_put(ix->slot, ix->cap, rf_hash(key(rf, entry)), entry);
    ix->count++;
    return ICBC_OK;
}

static const char *rf_host_key(const icbc_routerfile_t *rf, uint32_t e)
{
    return rf->clusters[e >> 16].hosts[e & 0xffff];
}

static const char *rf_addr_key(const icbc_routerfile_t *rf, uint32_t e)
{
    return rf->addrs[e].canon;
}

/* ---- lexical rules ----------------------------------------------------- */

static int rf_is_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Cluster and impi names: [A-Za-z0-9_-]{1,31}. */
static int rf_valid_name(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!rf_is_alnum(s[n]) && s[n] != '_' && s[n] != '-')
            return 0;
    return n >= 1 && n <= ICBC_RF_NAME_MAX;
}

/* Host names: [A-Za-z0-9._-]{1,255}, starting with a letter or digit. */
static int rf_valid_host(const char *s)
{
    size_t n = 0;
    if (!rf_is_alnum(s[0]))
        return 0;
    for (; s[n]; n++)
        if (!rf_is_alnum(s[n]) && s[n] != '_' && s[n] != '-' && s[n] != '.')
            return 0;
    return n <= ICBC_RF_HOST_MAX;
}

static const char *const rf_policy_names[] = { "aggregate", "static", "alltoall", "tcp" };

const char *icbc_rf_policy_name(icbc_rf_policy_t policy)
{
    if ((unsigned) policy < sizeof(rf_policy_names) / sizeof(rf_policy_names[0]))
        return rf_policy_names[policy];
    return "unknown";
}

icbc_status_t icbc_rf_policy_from_string(const char *s, icbc_rf_policy_t *policy)
{
    size_t i;
    for (i = 0; i < sizeof(rf_policy_names) / sizeof(rf_policy_names[0]); i++) {
        if (strcmp(s, rf_policy_names[i]) == 0) {
            *policy = (icbc_rf_policy_t) i;
            return ICBC_OK;
        }
    }
    return ICBC_ERR_INVALID;
}

/* Port: decimal 1-65535 without sign or leading zero. */
static int rf_parse_port(const char *s, unsigned *port)
{
    unsigned v = 0;
    size_t n = 0;

    if (*s < '1' || *s > '9')
        return -1;
    for (; *s; s++, n++) {
        if (*s < '0' || *s > '9' || n >= 5)
            return -1;
        v = v * 10 + (unsigned) (*s - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* "a.b.c.d:port" or "[v6]:port" -> A (sockaddr, text) and CANON (normalised
 * text, ICBC_RF_ADDR_TEXT_MAX bytes). On error WHY says what is wrong. */
static int rf_parse_addr(const char *s, icbc_rf_addr_t *a, char *canon, const char **why)
{
    char host[ICBC_RF_ADDR_TEXT_MAX], ntop[INET6_ADDRSTRLEN];
    const char *port_s;
    size_t n = strlen(s), hlen;
    unsigned port;
    int v6;

    memset(a, 0, sizeof(*a));
    if (n == 0) {
        *why = "empty";
        return -1;
    }
    if (n >= ICBC_RF_ADDR_TEXT_MAX) {
        *why = "too long";
        return -1;
    }
    v6 = s[0] == '[';
    if (v6) {
        const char *close = strchr(s, ']');
        if (close == NULL) {
            *why = "missing ']'";
            return -1;
        }
        if (close[1] != ':') {
            *why = "missing ':PORT' after ']'";
            return -1;
        }
        hlen = (size_t) (close - s - 1);
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        port_s = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL) {
            *why = "missing ':PORT'";
            return -1;
        }
        if (memchr(s, ':', (size_t) (colon - s)) != NULL) {
            *why = "an IPv6 address must be written as [ADDR]:PORT";
            return -1;
        }
        hlen = (size_t) (colon - s);
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        port_s = colon + 1;
    }
    if (v6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &a->sa;
        if (strchr(host, '%') != NULL) {
            *why = "IPv6 zone indexes are not supported";
            return -1;
        }
        if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) {
            *why = "not a numeric IPv6 address";
            return -1;
        }
        sin6->sin6_family = AF_INET6;
        a->salen = sizeof(*sin6);
        if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr)) {
            *why = "the unspecified address cannot be connected to";
            return -1;
        }
        if (IN6_IS_ADDR_MULTICAST(&sin6->sin6_addr)) {
            *why = "multicast addresses are not allowed";
            return -1;
        }
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *) &a->sa;
        uint32_t h;
        if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
            *why = "not a numeric IPv4 address (host names are not resolved)";
            return -1;
        }
        sin->sin_family = AF_INET;
        a->salen = sizeof(*sin);
        h = ntohl(sin->sin_addr.s_addr);
        if (h == 0) {
            *why = "the unspecified address cannot be connected to";
            return -1;
        }
        if ((h >> 28) == 0xe || h == 0xffffffffu) {
            *why = "multicast and broadcast addresses are not allowed";
            return -1;
        }
    }
    if (rf_parse_port(port_s, &port) != 0) {
        *why = "the port must be a number from 1 to 65535";
        return -1;
    }
    if (v6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &a->sa;
        sin6->sin6_port = htons((uint16_t) port);
        inet_ntop(AF_INET6, &sin6->sin6_addr, ntop, sizeof(ntop));
        snprintf(canon, ICBC_RF_ADDR_TEXT_MAX, "[%s]:%u", ntop, port);
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *) &a->sa;
        sin->sin_port = htons((uint16_t) port);
        inet_ntop(AF_INET, &sin->sin_addr, ntop, sizeof(ntop));
        snprintf(canon, ICBC_RF_ADDR_TEXT_MAX, "%s:%u", ntop, port);
    }
    memcpy(a->text, s, n + 1);
    return 0;
}

/* ---- key file ------------------------------------------------------------ */

/* Opens, checks and reads the key file PATH into BUF (at least
 * ICBC_RF_KEY_MAX bytes). On error WHY (static text or strerror) says why. */
static icbc_status_t rf_key_read(const char *path, unsigned char *buf, size_t *keylen,
                                 const char **why, char *mode_buf, size_t mode_len)
{
    struct stat st;
    size_t n = 0;
    int fd;

    /* O_NONBLOCK: a FIFO must not hang the open; it is refused below. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        *why = strerror(errno);
        return ICBC_ERR_INVALID;
    }
    if (fstat(fd, &st) != 0) {
        *why = strerror(errno);
        close(fd);
        return ICBC_ERR_INVALID;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        close(fd);
        return ICBC_ERR_INVALID;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(mode_buf, mode_len,
                 "accessible by group or others (mode %04o); make it private with chmod 600",
                 (unsigned) (st.st_mode & 07777));
        *why = mode_buf;
        close(fd);
        return ICBC_ERR_INVALID;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, ICBC_RF_KEY_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *why = strerror(errno);
            close(fd);
            return ICBC_ERR_INVALID;
        }
        if (r == 0)
            break;
        n += (size_t) r;
        if (n > ICBC_RF_KEY_MAX)
            break;
    }
    close(fd);
    if (n == 0) {
        *why = "empty";
        return ICBC_ERR_INVALID;
    }
    if (n > ICBC_RF_KEY_MAX) {
        memset(buf, 0, ICBC_RF_KEY_MAX + 1);
        *why = "larger than 4096 bytes";
        return ICBC_ERR_INVALID;
    }
    *keylen = n;
    return ICBC_OK;
}

/* ---- entries ------------------------------------------------------------- */

static icbc_status_t rf_outside(struct rf_parser *p, const char *kw)
{
    if (p->ended_line == 0)
        return rf_fail_at(p, p->line,
                          "'%s' outside a cluster section (no 'cluster' line before it)", kw);
    return rf_fail_at(p, p->line,
                      "'%s' outside a cluster section (cluster '%s' ended at the '%s' entry "
                      "on line %d)",
                      kw, p->ended_cluster, p->ended_by, p->ended_line);
}

/* Ends the open cluster section: the cluster has hosts and every router's
 * host is one of them. KW is the keyword that ends it (NULL: end of file). */
static icbc_status_t rf_close_section(struct rf_parser *p, const char *kw)
{
    icbc_routerfile_t *rf = p->rf;
    struct rf_cluster *c;
    size_t i;

    if (p->cur < 0)
        return ICBC_OK;
    c = &rf->clusters[p->cur];
    if (c->pub.nhosts == 0)
        return rf_fail_at(p, c->pub.line, "cluster '%s' has no hosts", c->pub.name);
    for (i = 0; i < c->pub.nrouters; i++) {
        long e = rf_index_find(rf, &rf->host_ix, rf_host_key, c->routers[i].host);
        if (e < 0 || (e >> 16) != p->cur)
            return rf_fail_at(p, c->routers[i].line, "router '%.*s%s': host is not in cluster '%s'",
                              RF_Q(c->routers[i].host), c->pub.name);
    }
    p->ended_cluster = c->pub.name;
    p->ended_by = kw;
    p->ended_line = p->line;
    p->cur = -1;
    return ICBC_OK;
}

/* Is NAME already a cluster or impi name? Returns the line of its entry or 0. */
static int rf_name_line(const icbc_routerfile_t *rf, const char *name)
{
    size_t i;
    for (i = 0; i < rf->nclusters; i++)
        if (strcmp(rf->clusters[i].pub.name, name) == 0)
            return rf->clusters[i].pub.line;
    for (i = 0; i < rf->nimpi; i++)
        if (strcmp(rf->impi[i].name, name) == 0)
            return rf->impi[i].line;
    return 0;
}

static const char *rf_role_name(enum rf_role r)
{
    return r == RF_FABRIC ? "fabric" : r == RF_WAN ? "wan" : "server";
}

/* Records the use of an address and refuses duplicates: wan addresses are
 * unique in the file and differ from every fabric and server address;
 * fabric addresses are unique within their cluster (clusters may reuse
 * private address ranges); impi entries may share a server (the foreign
 * clients of one IMPI job). WHAT is "router 'a0'" or "impi 'c'". */
static icbc_status_t rf_add_addr(struct rf_parser *p, const char *what, const char *owner,
                                 enum rf_role role, int cluster, const icbc_rf_addr_t *a,
                                 const char *canon)
{
    icbc_routerfile_t *rf = p->rf;
    struct rf_addr_use *u;
    long first = rf_index_find(rf, &rf->addr_ix, rf_addr_key, canon);
    int32_t e;

    for (e = (int32_t) first; e >= 0; e = rf->addrs[e].next_same) {
        const struct rf_addr_use *o = &rf->addrs[e];
        if (role == RF_SERVER && o->role == RF_SERVER)
            continue;
        if (role != RF_FABRIC || o->role != RF_FABRIC || o->cluster == cluster)
            return rf_fail_at(p, p->line,
                              "%s: %s address '%s' is already the %s address of %s '%.*s%s' "
                              "(line %d)",
                              what, rf_role_name(role), a->text, rf_role_name(o->role),
                              o->role == RF_SERVER ? "impi" : "router", RF_Q(o->owner), o->line);
    }
    if (rf->naddrs == rf->addrs_cap) {
        size_t cap = rf->addrs_cap ? rf->addrs_cap * 2 : 32;
        struct rf_addr_use *n = realloc(rf->addrs, cap * sizeof(*n));
        if (n == NULL)
            return rf_no_memory(p);
        rf->addrs = n;
        rf->addrs_cap = cap;
    }
    u = &rf->addrs[rf->naddrs];
    u->canon = rf_strdup(rf, canon);
    if (u->canon == NULL)
        return rf_no_memory(p);
    u->role = role;
    u->cluster = cluster;
    u->owner = owner;
    u->line = p->line;
    u->next_same = -1;
    if (first < 0) {
        if (rf_index_add(rf, &rf->addr_ix, rf_addr_key, (uint32_t) rf->naddrs) != ICBC_OK)
            return rf_no_memory(p);
    } else {
        for (e = (int32_t) first; rf->addrs[e].next_same >= 0; e = rf->addrs[e].next_same) {
        }
        rf->addrs[e].next_same = (int32_t) rf->naddrs;
    }
    rf->naddrs++;
    return ICBC_OK;
}

/* Parses ATTR=VALUE tokens against the NAMES list (NATTR of them): every
 * attribute known, none twice, all present. VALUES[i] gets the value of NAMES[i]. */
/* ATTR=VALUE tokens of the NAMES; the first NREQUIRED must be given, the
 * others may be (VALUES NULL then). */
static icbc_status_t rf_attrs_opt(struct rf_parser *p, const char *what, char **tok, int ntok,
                                  const char *const *names, int nattr, int nrequired,
                                  const char **values)
{
    int i, k;

    for (k = 0; k < nattr; k++)
        values[k] = NULL;
    for (i = 0; i < ntok; i++) {
        char *eq = strchr(tok[i], '=');
        if (eq == NULL || eq == tok[i])
            return rf_fail_at(p, p->line, "%s: expected ATTRIBUTE=VALUE, got '%.*s%s'", what,
                              RF_Q(tok[i]));
        *eq = '\0';
        for (k = 0; k < nattr; k++)
            if (strcmp(tok[i], names[k]) == 0)
                break;
        if (k == nattr)
            return rf_fail_at(p, p->line, "%s: unknown attribute '%.*s%s'", what, RF_Q(tok[i]));
        if (values[k] != NULL)
            return rf_fail_at(p, p->line, "%s: duplicate attribute '%s'", what, names[k]);
        values[k] = eq + 1;
    }
    for (k = 0; k < nrequired; k++)
        if (values[k] == NULL)
            return rf_fail_at(p, p->line, "%s: missing attribute '%s='", what, names[k]);
    return ICBC_OK;
}

static icbc_status_t rf_attrs(struct rf_parser *p, const char *what, char **tok, int ntok,
                              const char *const *names, int nattr, const char **values)
{
    return rf_attrs_opt(p, what, tok, ntok, names, nattr, nattr, values);
}

static icbc_status_t rf_addr_attr(struct rf_parser *p, const char *what, const char *attr,
                                  const char *value, icbc_rf_addr_t *a, char *canon)
{
    const char *why = NULL;
    if (rf_parse_addr(value, a, canon, &why) != 0)
        return rf_fail_at(p, p->line, "%s: bad %s address '%.*s%s': %s", what, attr, RF_Q(value),
                          why);
    return ICBC_OK;
}

static icbc_status_t kw_policy(struct rf_parser *p, char **tok, int ntok)
{
    icbc_routerfile_t *rf = p->rf;
    if (ntok != 2)
        return rf_fail_at(p, p->line,
                          "'policy' takes one value (aggregate, static, alltoall or tcp)");
    if (rf->policy_line)
        return rf_fail_at(p, p->line, "duplicate 'policy' (first on line %d)", rf->policy_line);
    if (icbc_rf_policy_from_string(tok[1], &rf->policy) != ICBC_OK)
        return rf_fail_at(p, p->line,
                          "unknown policy '%.*s%s' (use aggregate, static, alltoall or tcp)",
                          RF_Q(tok[1]));
    rf->policy_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_wan_rate(struct rf_parser *p, char **tok, int ntok)
{
    icbc_routerfile_t *rf = p->rf;
    if (ntok != 2)
        return rf_fail_at(p, p->line, "'wan-rate' takes one rate (bits/s, e.g. 400mbit)");
    if (rf->wan_rate_line)
        return rf_fail_at(p, p->line, "duplicate 'wan-rate' (first on line %d)", rf->wan_rate_line);
    if (icbc_pace_parse_rate(tok[1], &rf->wan_rate) != ICBC_OK || rf->wan_rate == 0)
        return rf_fail_at(p, p->line,
                          "bad wan-rate '%.*s%s' (a rate above 0 in bit, kbit, mbit or gbit, "
                          "e.g. 400mbit)",
                          RF_Q(tok[1]));
    rf->wan_rate_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_key(struct rf_parser *p, char **tok, int ntok)
{
    icbc_routerfile_t *rf = p->rf;
    char path[PATH_MAX];
    int n;

    if (ntok != 2)
        return rf_fail_at(p, p->line, "'key' takes one path");
    if (rf->key_line)
        return rf_fail_at(p, p->line, "duplicate 'key' (first on line %d)", rf->key_line);
    if (tok[1][0] == '/')
        n = snprintf(path, sizeof(path), "%s", tok[1]);
    else
        n = snprintf(path, sizeof(path), "%s/%s", p->basedir, tok[1]);
    if (n < 0 || (size_t) n >= sizeof(path))
        return rf_fail_at(p, p->line, "key path '%.*s%s' is too long", RF_Q(tok[1]));
    rf->key_path = rf_strdup(rf, path);
    if (rf->key_path == NULL)
        return rf_no_memory(p);
    rf->key_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_cluster(struct rf_parser *p, char **tok, int ntok)
{
    icbc_routerfile_t *rf = p->rf;
    struct rf_cluster *c;
    icbc_status_t st;
    int first;

    if (ntok != 2)
        return rf_fail_at(p, p->line, "'cluster' takes one name");
    st = rf_close_section(p, "cluster");
    if (st != ICBC_OK)
        return st;
    if (!rf_valid_name(tok[1]))
        return rf_fail_at(p, p->line,
                          "bad cluster name '%.*s%s' (use 1-31 letters, digits, '_' or '-')",
                          RF_Q(tok[1]));
    first = rf_name_line(rf, tok[1]);
    if (first)
        return rf_fail_at(p, p->line, "duplicate cluster name '%s' (first on line %d)", tok[1],
                          first);
    if (rf->nclusters == ICBC_RF_MAX_CLUSTERS)
        return rf_fail_at(p, p->line, "too many clusters (at most %d)", ICBC_RF_MAX_CLUSTERS);
    c = &rf->clusters[rf->nclusters];
    c->pub.name = rf_strdup(rf, tok[1]);
    if (c->pub.name == NULL)
        return rf_no_memory(p);
    c->pub.line = p->line;
    p->cur = (int) rf->nclusters++;
    return ICBC_OK;
}

static icbc_status_t kw_hosts(struct rf_parser *p, char **tok, int ntok)
{
    icbc_routerfile_t *rf = p->rf;
    struct rf_cluster *c;
    int i;

    if (p->cur < 0)
        return rf_outside(p, "hosts");
    if (ntok < 2)
        return rf_fail_at(p, p->line, "'hosts' needs at least one host name");
    c = &rf->clusters[p->cur];
    for (i = 1; i < ntok; i++) {
        long e;
        if (!rf_valid_host(tok[i]))
            return rf_fail_at(p, p->line,
                              "bad host name '%.*s%s' (use up to 255 letters, digits, '.', '_' or "
                              "'-', starting with a letter or digit)",
                              RF_Q(tok[i]));
        e = rf_index_find(rf, &rf->host_ix, rf_host_key, tok[i]);
        if (e >= 0) {
            const struct rf_cluster *o = &rf->clusters[e >> 16];
            unsigned line = o->host_lines[e & 0xffff];
            if (o == c)
                return rf_fail_at(p, p->line,
                                  "host '%s' is listed twice in cluster '%s' (first on line %u)",
                                  tok[i], c->pub.name, line);
            return rf_fail_at(p, p->line, "host '%s' already belongs to cluster '%s' (line %u)",
                              tok[i], o->pub.name, line);
        }
        if (c->pub.nhosts == ICBC_RF_MAX_HOSTS)
            return rf_fail_at(p, p->line, "cluster '%s': too many hosts (at most %d)", c->pub.name,
                              ICBC_RF_MAX_HOSTS);
        if (c->pub.nhosts == c->hosts_cap) {
            size_t cap = c->hosts_cap ? c->hosts_cap * 2 : 16;
            const char **h = realloc(c->hosts, cap * sizeof(*h));
            uint32_t *l;
            if (h == NULL)
                return rf_no_memory(p);
            c->hosts = h;
            l = realloc(c->host_lines, cap * sizeof(*l));
            if (l == NULL)
                return rf_no_memory(p);
            c->host_lines = l;
            c->hosts_cap = cap;
        }
        c->hosts[c->pub.nhosts] = rf_strdup(rf, tok[i]);
        if (c->hosts[c->pub.nhosts] == NULL)
            return rf_no_memory(p);
        c->host_lines[c->pub.nhosts] = (uint32_t) p->line;
        if (rf_index_add(rf, &rf->host_ix, rf_host_key,
                         (uint32_t) p->cur << 16 | (uint32_t) c->pub.nhosts) != ICBC_OK)
            return rf_no_memory(p);
        c->pub.nhosts++;
        rf->nhosts++;
    }
    return ICBC_OK;
}

static icbc_status_t kw_fabric(struct rf_parser *p, char **tok, int ntok)
{
    struct rf_cluster *c;
    char addr[INET6_ADDRSTRLEN + 1], *slash, *end;
    unsigned char bytes[16];
    long prefix;
    int family, nbytes;

    if (p->cur < 0)
        return rf_outside(p, "fabric");
    if (ntok != 2)
        return rf_fail_at(p, p->line, "'fabric' takes one network, e.g. 10.11.0.0/24");
    c = &p->rf->clusters[p->cur];
    if (c->pub.fabric_line)
        return rf_fail_at(p, p->line, "cluster '%s' has a 'fabric' line already (line %d)",
                          c->pub.name, c->pub.fabric_line);
    slash = strchr(tok[1], '/');
    if (slash == NULL || (size_t) (slash - tok[1]) >= sizeof(addr))
        return rf_fail_at(p, p->line,
                          "bad fabric network '%.*s%s' (want ADDRESS/PREFIX, e.g. "
                          "10.11.0.0/24)",
                          RF_Q(tok[1]));
    memcpy(addr, tok[1], (size_t) (slash - tok[1]));
    addr[slash - tok[1]] = '\0';
    if (inet_pton(AF_INET, addr, bytes) == 1) {
        family = AF_INET;
        nbytes = 4;
    } else if (inet_pton(AF_INET6, addr, bytes) == 1) {
        family = AF_INET6;
        nbytes = 16;
    } else {
        return rf_fail_at(p, p->line,
                          "bad fabric network '%.*s%s': '%.*s%s' is not an IPv4 or "
                          "IPv6 address",
                          RF_Q(tok[1]), RF_Q(addr));
    }
    errno = 0;
    prefix = strtol(slash + 1, &end, 10);
    if (slash[1] < '0' || slash[1] > '9' || *end != '\0' || errno || prefix < 0 ||
        prefix > nbytes * 8)
        return rf_fail_at(p, p->line, "bad fabric network '%.*s%s': prefix must be 0..%d",
                          RF_Q(tok[1]), nbytes * 8);
    for (int bit = (int) prefix; bit < nbytes * 8; bit++)
        if (bytes[bit / 8] & (0x80 >> (bit % 8)))
            return rf_fail_at(p, p->line,
                              "bad fabric network '%.*s%s': host bits are set "
                              "beyond /%ld",
                              RF_Q(tok[1]), prefix);
    memset(&c->pub.fabric_net, 0, sizeof(c->pub.fabric_net));
    c->pub.fabric_net.ss_family = (sa_family_t) family;
    if (family == AF_INET)
        memcpy(&((struct sockaddr_in *) &c->pub.fabric_net)->sin_addr, bytes, 4);
    else
        memcpy(&((struct sockaddr_in6 *) &c->pub.fabric_net)->sin6_addr, bytes, 16);
    c->pub.fabric_prefix = (int) prefix;
    c->pub.fabric_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_router_bind(struct rf_parser *p, char **tok, int ntok)
{
    struct rf_cluster *c;
    char why[160];

    if (p->cur < 0)
        return rf_outside(p, "router-bind");
    if (ntok != 2)
        return rf_fail_at(p, p->line, "'router-bind' takes auto, none or a CPU list (e.g. 3)");
    c = &p->rf->clusters[p->cur];
    if (c->pub.router_bind_line)
        return rf_fail_at(p, p->line, "cluster '%s' has a 'router-bind' line already (line %d)",
                          c->pub.name, c->pub.router_bind_line);
    if (strlen(tok[1]) >= sizeof(c->pub.router_bind) ||
        icbc_bind_check(tok[1], why, sizeof(why)) != ICBC_OK)
        return rf_fail_at(p, p->line,
                          "'router-bind' takes auto, none or a CPU list (e.g. 3), "
                          "not '%s'",
                          tok[1]);
    snprintf(c->pub.router_bind, sizeof(c->pub.router_bind), "%s", tok[1]);
    c->pub.router_bind_line = p->line;
    return ICBC_OK;
}

/* impi-relay server=ADDR:PORT port=PORT: the cluster's routers are the IMPI
 * relays of the jobs inside it (docs/impi-relay.md). */
static icbc_status_t kw_impi_relay(struct rf_parser *p, char **tok, int ntok)
{
    static const char *const names[] = { "server", "port", "auth" };
    struct rf_cluster *c;
    const char *val[3];
    char path[PATH_MAX];
    char canon[ICBC_RF_ADDR_TEXT_MAX], *end;
    icbc_status_t st;
    unsigned long port;

    if (p->cur < 0)
        return rf_outside(p, "impi-relay");
    c = &p->rf->clusters[p->cur];
    if (c->pub.relay_line)
        return rf_fail_at(p, p->line, "cluster '%s' has an 'impi-relay' line already (line %d)",
                          c->pub.name, c->pub.relay_line);
    st = rf_attrs_opt(p, "impi-relay", tok + 1, ntok - 1, names, 3, 2, val);
    if (st != ICBC_OK)
        return st;
    st = rf_addr_attr(p, "impi-relay", "server", val[0], &c->pub.relay_server, canon);
    if (st != ICBC_OK)
        return st;
    if (c->pub.relay_server.sa.ss_family != AF_INET)
        return rf_fail_at(p, p->line,
                          "impi-relay: server '%s' is not an IPv4 address (IMPI's "
                          "are)",
                          c->pub.relay_server.text);
    port = val[1] ? strtoul(val[1], &end, 10) : 0;
    if (val[1] == NULL || *val[1] == '\0' || *end != '\0' || port == 0 || port > 65535)
        return rf_fail_at(p, p->line,
                          "impi-relay: port= takes the start-up port inside, 1-65535, "
                          "not '%.*s%s'",
                          RF_Q(val[1] ? val[1] : ""));
    c->pub.relay_port = (uint16_t) port;
    /* auth=none (the default) or key:FILE, as impi-relay's -auth; the file
     * is read where the relay starts */
    if (val[2] && strcmp(val[2], "none") != 0) {
        const char *f = val[2] + 4;
        int n;
        if (strncmp(val[2], "key:", 4) != 0 || *f == '\0')
            return rf_fail_at(p, p->line, "impi-relay: auth= takes none or key:FILE, not '%.*s%s'",
                              RF_Q(val[2]));
        n = f[0] == '/' ? snprintf(path, sizeof(path), "%s", f)
                        : snprintf(path, sizeof(path), "%s/%s", p->basedir, f);
        if (n < 0 || (size_t) n >= sizeof(path))
            return rf_fail_at(p, p->line, "impi-relay: key path '%.*s%s' is too long", RF_Q(f));
        c->pub.relay_key_path = rf_strdup(p->rf, path);
        if (c->pub.relay_key_path == NULL)
            return rf_no_memory(p);
    }
    c->pub.relay_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_fabric_api(struct rf_parser *p, char **tok, int ntok)
{
    struct rf_cluster *c;

    if (p->cur < 0)
        return rf_outside(p, "fabric-api");
    if (ntok != 2 || (strcmp(tok[1], "ucx") != 0 && strcmp(tok[1], "ofi") != 0))
        return rf_fail_at(p, p->line, "'fabric-api' takes ucx or ofi");
    c = &p->rf->clusters[p->cur];
    if (c->pub.fabric_api_line)
        return rf_fail_at(p, p->line, "cluster '%s' has a 'fabric-api' line already (line %d)",
                          c->pub.name, c->pub.fabric_api_line);
    c->pub.fabric_api = strcmp(tok[1], "ofi") == 0 ? ICBC_RF_FABRIC_OFI : ICBC_RF_FABRIC_UCX;
    c->pub.fabric_api_line = p->line;
    return ICBC_OK;
}

static icbc_status_t kw_router(struct rf_parser *p, char **tok, int ntok)
{
    static const char *const names[] = { "fabric", "wan" };
    icbc_routerfile_t *rf = p->rf;
    struct rf_cluster *c;
    icbc_rf_router_t r;
    char what[RF_SHOW + 16], canon_f[ICBC_RF_ADDR_TEXT_MAX], canon_w[ICBC_RF_ADDR_TEXT_MAX];
    const char *val[2];
    icbc_status_t st;
    long e;
    size_t i;

    if (p->cur < 0)
        return rf_outside(p, "router");
    if (ntok < 2)
        return rf_fail_at(p, p->line, "'router' needs a host name, fabric=ADDR and wan=ADDR");
    c = &rf->clusters[p->cur];
    if (!rf_valid_host(tok[1]))
        return rf_fail_at(p, p->line, "router: bad host name '%.*s%s'", RF_Q(tok[1]));
    snprintf(what, sizeof(what), "router '%.*s%s'", RF_Q(tok[1]));
    st = rf_attrs(p, what, tok + 2, ntok - 2, names, 2, val);
    if (st != ICBC_OK)
        return st;
    memset(&r, 0, sizeof(r));
    st = rf_addr_attr(p, what, "fabric", val[0], &r.fabric, canon_f);
    if (st != ICBC_OK)
        return st;
    st = rf_addr_attr(p, what, "wan", val[1], &r.wan, canon_w);
    if (st != ICBC_OK)
        return st;
    /* A host of another cluster is an error now; a host not listed yet may
     * still come on a later 'hosts' line of this section (rf_close_section). */
    e = rf_index_find(rf, &rf->host_ix, rf_host_key, tok[1]);
    if (e >= 0 && (e >> 16) != p->cur)
        return rf_fail_at(p, p->line,
                          "%s: host is not in cluster '%s' (it belongs to cluster '%s')", what,
                          c->pub.name, rf->clusters[e >> 16].pub.name);
    for (i = 0; i < c->pub.nrouters; i++)
        if (strcmp(c->routers[i].host, tok[1]) == 0)
            return rf_fail_at(p, p->line, "%s: host already has a router (line %d)", what,
                              c->routers[i].line);
    if (c->pub.nrouters == ICBC_RF_MAX_ROUTERS)
        return rf_fail_at(p, p->line, "cluster '%s': too many routers (at most %d)", c->pub.name,
                          ICBC_RF_MAX_ROUTERS);
    r.host = rf_strdup(rf, tok[1]);
    if (r.host == NULL)
        return rf_no_memory(p);
    r.line = p->line;
    st = rf_add_addr(p, what, r.host, RF_FABRIC, p->cur, &r.fabric, canon_f);
    if (st != ICBC_OK)
        return st;
    st = rf_add_addr(p, what, r.host, RF_WAN, p->cur, &r.wan, canon_w);
    if (st != ICBC_OK)
        return st;
    if (c->pub.nrouters == c->routers_cap) {
        size_t cap = c->routers_cap ? c->routers_cap * 2 : 4;
        icbc_rf_router_t *n = realloc(c->routers, cap * sizeof(*n));
        if (n == NULL)
            return rf_no_memory(p);
        c->routers = n;
        c->routers_cap = cap;
    }
    c->routers[c->pub.nrouters++] = r;
    rf->nrouters++;
    return ICBC_OK;
}

static icbc_status_t kw_impi(struct rf_parser *p, char **tok, int ntok)
{
    static const char *const names[] = { "server" };
    icbc_routerfile_t *rf = p->rf;
    icbc_rf_impi_t m;
    char what[RF_SHOW + 16], canon[ICBC_RF_ADDR_TEXT_MAX];
    const char *val[1];
    icbc_status_t st;
    int first;

    if (ntok < 2)
        return rf_fail_at(p, p->line, "'impi' needs a name and server=ADDR");
    st = rf_close_section(p, "impi");
    if (st != ICBC_OK)
        return st;
    if (!rf_valid_name(tok[1]))
        return rf_fail_at(p, p->line,
                          "bad impi name '%.*s%s' (use 1-31 letters, digits, '_' or '-')",
                          RF_Q(tok[1]));
    first = rf_name_line(rf, tok[1]);
    if (first)
        return rf_fail_at(p, p->line, "duplicate cluster name '%s' (first on line %d)", tok[1],
                          first);
    snprintf(what, sizeof(what), "impi '%s'", tok[1]);
    st = rf_attrs(p, what, tok + 2, ntok - 2, names, 1, val);
    if (st != ICBC_OK)
        return st;
    memset(&m, 0, sizeof(m));
    st = rf_addr_attr(p, what, "server", val[0], &m.server, canon);
    if (st != ICBC_OK)
        return st;
    if (rf->nimpi == ICBC_RF_MAX_IMPI)
        return rf_fail_at(p, p->line, "too many impi entries (at most %d)", ICBC_RF_MAX_IMPI);
    m.name = rf_strdup(rf, tok[1]);
    if (m.name == NULL)
        return rf_no_memory(p);
    m.line = p->line;
    st = rf_add_addr(p, what, m.name, RF_SERVER, -1, &m.server, canon);
    if (st != ICBC_OK)
        return st;
    rf->impi[rf->nimpi++] = m;
    return ICBC_OK;
}

/* ---- lines and the file -------------------------------------------------- */

/* Checks the bytes of one line (without its newline): printable ASCII and
 * tabs; a comment may also hold non-ASCII text such as UTF-8. */
static icbc_status_t rf_check_bytes(struct rf_parser *p, const char *s, size_t n)
{
    int comment = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '\0')
            return rf_fail_at(p, p->line, "NUL byte at column %zu", i + 1);
        if (c == '#')
            comment = 1;
        if (c == '\t' || (c >= 0x20 && c < 0x7f))
            continue;
        if (c >= 0x80) {
            if (comment)
                continue;
            return rf_fail_at(p, p->line,
                              "non-ASCII byte 0x%02x at column %zu (only comments may hold it)", c,
                              i + 1);
        }
        return rf_fail_at(p, p->line, "non-printable byte 0x%02x at column %zu", c, i + 1);
    }
    return ICBC_OK;
}

static icbc_status_t rf_line(struct rf_parser *p, const char *s, size_t n)
{
    char buf[ICBC_RF_LINE_MAX + 1], *tok[RF_MAX_TOKENS], *q;
    int ntok = 0;
    icbc_status_t st;

    if (n > ICBC_RF_LINE_MAX)
        return rf_fail_at(p, p->line, "line longer than %d bytes", ICBC_RF_LINE_MAX);
    st = rf_check_bytes(p, s, n);
    if (st != ICBC_OK)
        return st;
    memcpy(buf, s, n);
    buf[n] = '\0';
    q = strchr(buf, '#');
    if (q != NULL)
        *q = '\0';
    for (q = buf;;) {
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0')
            break;
        tok[ntok++] = q;
        while (*q != '\0' && *q != ' ' && *q != '\t')
            q++;
        if (*q != '\0')
            *q++ = '\0';
    }
    if (ntok == 0)
        return ICBC_OK;
    if (strcmp(tok[0], "policy") == 0)
        return kw_policy(p, tok, ntok);
    if (strcmp(tok[0], "key") == 0)
        return kw_key(p, tok, ntok);
    if (strcmp(tok[0], "wan-rate") == 0)
        return kw_wan_rate(p, tok, ntok);
    if (strcmp(tok[0], "cluster") == 0)
        return kw_cluster(p, tok, ntok);
    if (strcmp(tok[0], "hosts") == 0)
        return kw_hosts(p, tok, ntok);
    if (strcmp(tok[0], "router") == 0)
        return kw_router(p, tok, ntok);
    if (strcmp(tok[0], "fabric") == 0)
        return kw_fabric(p, tok, ntok);
    if (strcmp(tok[0], "fabric-api") == 0)
        return kw_fabric_api(p, tok, ntok);
    if (strcmp(tok[0], "router-bind") == 0)
        return kw_router_bind(p, tok, ntok);
    if (strcmp(tok[0], "impi-relay") == 0)
        return kw_impi_relay(p, tok, ntok);
    if (strcmp(tok[0], "impi") == 0)
        return kw_impi(p, tok, ntok);
    return rf_fail_at(p, p->line, "unknown keyword '%.*s%s'", RF_Q(tok[0]));
}

/* Whole-file checks after the last line. */
static icbc_status_t rf_finish(struct rf_parser *p)
{
    icbc_routerfile_t *rf = p->rf;
    icbc_status_t st;
    size_t i;

    st = rf_close_section(p, NULL);
    if (st != ICBC_OK)
        return st;
    if (rf->nclusters == 0)
        return rf_fail_at(p, p->line > 0 ? p->line : 1, "no 'cluster' section in the file");
    for (i = 0; i < rf->nclusters; i++) {
        struct rf_cluster *c = &rf->clusters[i];
        c->pub.hosts = c->hosts;
        c->pub.routers = c->routers;
        if (c->pub.relay_line && c->pub.nrouters == 0)
            return rf_fail_at(p, c->pub.relay_line,
                              "impi-relay: cluster '%s' has no router to run it", c->pub.name);
        if (c->pub.relay_line && c->routers[0].fabric.sa.ss_family != AF_INET)
            return rf_fail_at(p, c->pub.relay_line,
                              "impi-relay: router '%s' of cluster '%s' has no IPv4 fabric "
                              "address to listen on",
                              c->routers[0].host, c->pub.name);
        if (c->pub.relay_line &&
            ntohs(((const struct sockaddr_in *) &c->routers[0].fabric.sa)->sin_port) ==
                c->pub.relay_port)
            return rf_fail_at(p, c->pub.relay_line,
                              "impi-relay: port %u is the fabric port of router '%s' already",
                              c->pub.relay_port, c->routers[0].host);
    }
    if (rf->nrouters > 0) {
        unsigned char key[ICBC_RF_KEY_MAX + 1];
        char mode[128];
        const char *why = NULL;
        size_t len;
        if (rf->key_path == NULL) {
            /* Clusters are in file order: the first with routers holds the first router. */
            for (i = 0; rf->clusters[i].pub.nrouters == 0; i++) {
            }
            return rf_fail_at(p, rf->clusters[i].routers[0].line,
                              "router '%.*s%s': no 'key' line in the file; routers need a key file",
                              RF_Q(rf->clusters[i].routers[0].host));
        }
        st = rf_key_read(rf->key_path, key, &len, &why, mode, sizeof(mode));
        memset(key, 0, sizeof(key));
        if (st != ICBC_OK)
            return rf_fail_at(p, rf->key_line, "key file '%s': %s", rf->key_path, why);
    }
    return icbc_routerfile_check_policy(rf, rf->policy, p->err, p->errlen);
}

icbc_status_t icbc_routerfile_parse(const char *buf, size_t len, const char *name,
                                    const char *basedir, icbc_routerfile_t **out, char *err,
                                    size_t errlen)
{
    struct rf_parser p;
    icbc_routerfile_t *rf;
    char dir[PATH_MAX], cwd[PATH_MAX], absdir[PATH_MAX];
    size_t pos = 0;
    icbc_status_t st = ICBC_OK;

    *out = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (name == NULL)
        name = "(router file)";
    if (len > ICBC_RF_FILE_MAX) {
        rf_msg(err, errlen, name, 0, "larger than %u bytes", ICBC_RF_FILE_MAX);
        return ICBC_ERR_INVALID;
    }
    if (basedir == NULL) {
        const char *slash = strrchr(name, '/');
        if (slash == NULL)
            snprintf(dir, sizeof(dir), ".");
        else if (slash == name)
            snprintf(dir, sizeof(dir), "/");
        else
            snprintf(dir, sizeof(dir), "%.*s", (int) (slash - name), name);
        basedir = dir;
    }
    /* The key path is kept absolute so that a later chdir() does not move it. */
    if (basedir[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL) {
        int n;
        if (strcmp(basedir, ".") == 0)
            n = snprintf(absdir, sizeof(absdir), "%s", cwd);
        else
            n = snprintf(absdir, sizeof(absdir), "%s/%s", cwd, basedir);
        if (n > 0 && (size_t) n < sizeof(absdir))
            basedir = absdir;
    }
    rf = calloc(1, sizeof(*rf));
    if (rf == NULL || (rf->name = strdup(name)) == NULL) {
        free(rf);
        rf_msg(err, errlen, name, 0, "out of memory");
        return ICBC_ERR_NO_MEMORY;
    }
    rf->policy = ICBC_RF_POLICY_AGGREGATE;
    memset(&p, 0, sizeof(p));
    p.rf = rf;
    p.basedir = basedir;
    p.err = err;
    p.errlen = errlen;
    p.cur = -1;

    while (pos < len) {
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t) (nl - s) : len - pos;
        pos += n + (nl != NULL);
        p.line++;
        if (n > 0 && s[n - 1] == '\r')
            n--; /* CRLF line ends */
        st = rf_line(&p, s, n);
        if (st != ICBC_OK)
            break;
    }
    if (st == ICBC_OK)
        st = rf_finish(&p);
    if (st != ICBC_OK) {
        icbc_routerfile_free(rf);
        return st;
    }
    *out = rf;
    return ICBC_OK;
}

icbc_status_t icbc_routerfile_load(const char *path, icbc_routerfile_t **out, char *err,
                                   size_t errlen)
{
    struct stat st;
    char *buf;
    size_t n = 0;
    icbc_status_t s;
    int fd;

    *out = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        rf_msg(err, errlen, path, 0, "cannot open: %s", strerror(errno));
        return ICBC_ERR_IO;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rf_msg(err, errlen, path, 0, "not a regular file");
        close(fd);
        return ICBC_ERR_IO;
    }
    if ((uint64_t) st.st_size > ICBC_RF_FILE_MAX) {
        rf_msg(err, errlen, path, 0, "larger than %u bytes", ICBC_RF_FILE_MAX);
        close(fd);
        return ICBC_ERR_INVALID;
    }
    /* One byte more than the cap, to see a file that grew meanwhile. */
    buf = malloc((size_t) st.st_size + 1);
    if (buf == NULL) {
        rf_msg(err, errlen, path, 0, "out of memory");
        close(fd);
        return ICBC_ERR_NO_MEMORY;
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, (size_t) st.st_size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rf_msg(err, errlen, path, 0, "cannot read: %s", strerror(errno));
            free(buf);
            close(fd);
            return ICBC_ERR_IO;
        }
        if (r == 0)
            break;
        n += (size_t) r;
        if (n > (size_t) st.st_size) {
            rf_msg(err, errlen, path, 0, "changed while being read");
            free(buf);
            close(fd);
            return ICBC_ERR_IO;
        }
    }
    close(fd);
    s = icbc_routerfile_parse(buf, n, path, NULL, out, err, errlen);
    free(buf);
    return s;
}

icbc_status_t icbc_routerfile_load_env(icbc_routerfile_t **out, char *err, size_t errlen)
{
    const char *path = getenv("ICBC_ROUTERFILE");
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "ICBC_ROUTERFILE is not set (it names the router file)");
        return ICBC_ERR_NOT_FOUND;
    }
    return icbc_routerfile_load(path, out, err, errlen);
}

void icbc_routerfile_free(icbc_routerfile_t *rf)
{
    size_t i;

    if (rf == NULL)
        return;
    for (i = 0; i < rf->nclusters; i++) {
        free(rf->clusters[i].hosts);
        free(rf->clusters[i].host_lines);
        free(rf->clusters[i].routers);
    }
    while (rf->arena != NULL) {
        struct rf_chunk *c = rf->arena;
        rf->arena = c->next;
        free(c);
    }
    free(rf->host_ix.slot);
    free(rf->addr_ix.slot);
    free(rf->addrs);
    free(rf->name);
    free(rf);
}

/* ---- accessors ------------------------------------------------------------ */

const char *icbc_routerfile_name(const icbc_routerfile_t *rf)
{
    return rf->name;
}

icbc_rf_policy_t icbc_routerfile_policy(const icbc_routerfile_t *rf)
{
    return rf->policy;
}

uint64_t icbc_routerfile_wan_rate(const icbc_routerfile_t *rf)
{
    return rf->wan_rate;
}

const char *icbc_routerfile_key_path(const icbc_routerfile_t *rf)
{
    return rf->key_path;
}

size_t icbc_routerfile_num_clusters(const icbc_routerfile_t *rf)
{
    return rf->nclusters;
}

const icbc_rf_cluster_t *icbc_routerfile_cluster(const icbc_routerfile_t *rf, size_t i)
{
    return i < rf->nclusters ? &rf->clusters[i].pub : NULL;
}

size_t icbc_routerfile_num_hosts(const icbc_routerfile_t *rf)
{
    return rf->nhosts;
}

size_t icbc_routerfile_num_impi(const icbc_routerfile_t *rf)
{
    return rf->nimpi;
}

const icbc_rf_impi_t *icbc_routerfile_impi(const icbc_routerfile_t *rf, size_t i)
{
    return i < rf->nimpi ? &rf->impi[i] : NULL;
}

int icbc_routerfile_find_host(const icbc_routerfile_t *rf, const char *host)
{
    long e;
    if (host == NULL)
        return -1;
    e = rf_index_find(rf, &rf->host_ix, rf_host_key, host);
    return e < 0 ? -1 : (int) (e >> 16);
}

int icbc_routerfile_find_cluster(const icbc_routerfile_t *rf, const char *name)
{
    size_t i;
    for (i = 0; name != NULL && i < rf->nclusters; i++)
        if (strcmp(rf->clusters[i].pub.name, name) == 0)
            return (int) i;
    return -1;
}

int icbc_routerfile_find_impi(const icbc_routerfile_t *rf, const char *name)
{
    size_t i;
    for (i = 0; name != NULL && i < rf->nimpi; i++)
        if (strcmp(rf->impi[i].name, name) == 0)
            return (int) i;
    return -1;
}

const icbc_rf_router_t *icbc_routerfile_find_router(const icbc_routerfile_t *rf, const char *host,
                                                    int *cluster)
{
    const struct rf_cluster *c;
    int ci;
    size_t i;

    if (host == NULL)
        return NULL;
    ci = icbc_routerfile_find_host(rf, host);
    if (ci < 0)
        return NULL;
    c = &rf->clusters[ci];
    for (i = 0; i < c->pub.nrouters; i++) {
        if (strcmp(c->routers[i].host, host) == 0) {
            if (cluster != NULL)
                *cluster = ci;
            return &c->routers[i];
        }
    }
    return NULL;
}

icbc_status_t icbc_routerfile_read_key(const icbc_routerfile_t *rf, unsigned char *buf,
                                       size_t buflen, size_t *keylen, char *err, size_t errlen)
{
    unsigned char key[ICBC_RF_KEY_MAX + 1];
    char mode[128];
    const char *why = NULL;
    size_t len = 0;
    icbc_status_t st;

    if (rf->key_path == NULL) {
        rf_msg(err, errlen, rf->name, 0, "no 'key' line in the file");
        return ICBC_ERR_NOT_FOUND;
    }
    st = rf_key_read(rf->key_path, key, &len, &why, mode, sizeof(mode));
    if (st != ICBC_OK) {
        rf_msg(err, errlen, rf->name, rf->key_line, "key file '%s': %s", rf->key_path, why);
        return st;
    }
    if (len > buflen) {
        memset(key, 0, sizeof(key));
        rf_msg(err, errlen, rf->name, rf->key_line, "key file '%s': %zu bytes, buffer holds %zu",
               rf->key_path, len, buflen);
        return ICBC_ERR_TRUNCATED;
    }
    memcpy(buf, key, len);
    memset(key, 0, sizeof(key));
    *keylen = len;
    return ICBC_OK;
}

icbc_status_t icbc_routerfile_check_policy(const icbc_routerfile_t *rf, icbc_rf_policy_t policy,
                                           char *err, size_t errlen)
{
    size_t i;

    if (policy != ICBC_RF_POLICY_AGGREGATE && policy != ICBC_RF_POLICY_STATIC)
        return ICBC_OK;
    if (rf->nclusters < 2)
        return ICBC_OK;
    for (i = 0; i < rf->nclusters; i++) {
        const icbc_rf_cluster_t *c = &rf->clusters[i].pub;
        if (c->nrouters == 0) {
            rf_msg(err, errlen, rf->name, c->line,
                   "cluster '%s' has no router, but policy '%s' routes between clusters through "
                   "routers (add a 'router' line or use policy alltoall or tcp)",
                   c->name, icbc_rf_policy_name(policy));
            return ICBC_ERR_INVALID;
        }
    }
    return ICBC_OK;
}

/* ---- this host -------------------------------------------------------------- */

icbc_status_t icbc_routerfile_self_host(char *buf, size_t len)
{
    const char *env = getenv("ICBC_NODE");
    char name[HOST_NAME_MAX + 2];
    const char *src;

    if (env != NULL && env[0] != '\0') {
        src = env;
    } else {
        if (gethostname(name, sizeof(name)) != 0) {
            icbc_error("gethostname: %s", strerror(errno));
            return ICBC_ERR_IO;
        }
        name[sizeof(name) - 1] = '\0';
        src = name;
    }
    if (!rf_valid_host(src)) {
        icbc_error("%s '%.*s%s' is not a valid host name", src == env ? "ICBC_NODE" : "host name",
                   RF_Q(src));
        return ICBC_ERR_INVALID;
    }
    if (strlen(src) >= len) {
        icbc_error("host name '%.*s%s' is longer than %zu bytes", RF_Q(src), len ? len - 1 : 0);
        return ICBC_ERR_INVALID;
    }
    memcpy(buf, src, strlen(src) + 1);
    return ICBC_OK;
}

icbc_status_t icbc_routerfile_self_cluster(const icbc_routerfile_t *rf, int *cluster, char *host,
                                           size_t hostlen, char *err, size_t errlen)
{
    char self[ICBC_RF_HOST_MAX + 1];
    const char *env = getenv("ICBC_NODE");
    int from_env = env != NULL && env[0] != '\0';
    icbc_status_t st;
    int ci;

    st = icbc_routerfile_self_host(self, sizeof(self));
    if (st != ICBC_OK) {
        rf_msg(err, errlen, rf->name, 0, "cannot tell the name of this host (%s)",
               from_env ? "ICBC_NODE is not a valid host name" : "gethostname failed");
        return st;
    }
    ci = icbc_routerfile_find_host(rf, self);
    if (ci < 0 && !from_env) {
        char *dot = strchr(self, '.');
        if (dot != NULL) {
            *dot = '\0';
            ci = icbc_routerfile_find_host(rf, self);
            if (ci < 0)
                *dot = '.';
        }
    }
    if (ci < 0) {
        rf_msg(err, errlen, rf->name, 0, "this host '%s' (%s) is not listed in any cluster", self,
               from_env ? "from ICBC_NODE" : "from gethostname; set ICBC_NODE to override");
        return ICBC_ERR_NOT_FOUND;
    }
    if (host != NULL && hostlen > 0)
        snprintf(host, hostlen, "%s", self);
    *cluster = ci;
    return ICBC_OK;
}
