/*
 * Fuzzes icbc_routerfile_parse (icbc_routerfile.h) with the input as the
 * text of a router file. Key paths are relative to a private directory made
 * at start-up that holds routers.key (mode 0600, valid), open.key (0644),
 * empty.key and big.key (4097 bytes), so files with routers can parse and
 * the key file errors are reached. Checks:
 *   - the status is ICBC_OK or ICBC_ERR_INVALID; on failure nothing is
 *     returned and the message is one non-empty line "NAME:LINE: what" with
 *     the name as given and LINE a line of the input (1 for an empty one);
 *     on success the error buffer stays empty;
 *   - an accepted file is consistent: 1..64 clusters, each with a valid name
 *     and 1 or more hosts, every host and router found in its own cluster by
 *     the lookups, entry lines within the input and in file order,
 *     addresses of the family their text says and never unspecified,
 *     multicast or broadcast, wan and server addresses unique and no fabric
 *     address, fabric addresses unique within a cluster, fabric networks
 *     without host bits, a key path when there are routers, the policy
 *     accepted by icbc_routerfile_check_policy, a wan-rate of 0 (none) or
 *     at most 10^15 bits/s;
 *   - round trip: the file printed back in canonical form parses, and
 *     prints again to the same text with the same socket addresses.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "icbc_routerfile.h"
#include "fuzz_check.h"

static char dir[PATH_MAX];
static char name[PATH_MAX];

/* ---- set-up ------------------------------------------------------------ */

static void put_file(const char *file, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    f = fopen(path, "w");
    FUZZ_CHECK(f != NULL);
    fputs(text, f);
    FUZZ_CHECK(fclose(f) == 0);
    FUZZ_CHECK(chmod(path, mode) == 0);
}

static void remove_dir(void)
{
    static const char *const files[] = { "routers.key", "open.key", "empty.key", "big.key" };
    char path[PATH_MAX];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char big[ICBC_RF_KEY_MAX + 2];
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/icbc-rf-fuzz.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir) != NULL);
    put_file("routers.key", "0123456789abcdef-fuzz-key", 0600);
    put_file("open.key", "secret", 0644);
    put_file("empty.key", "", 0600);
    memset(big, 'k', ICBC_RF_KEY_MAX + 1);
    put_file("big.key", big, 0600);
    atexit(remove_dir);
    /* Messages name the file as given; its directory is the key base. */
    snprintf(name, sizeof(name), "%s/routers.conf", dir);
    return 0;
}

/* ---- printing a parsed file back -------------------------------------- */

struct text {
    char *s;
    size_t len, cap;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    FUZZ_CHECK(n >= 0);
    if (t->len + (size_t) n + 1 > t->cap) {
        t->cap = (t->len + (size_t) n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        FUZZ_CHECK(t->s != NULL);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t) n;
}

/* One entry per line, clusters' hosts before their routers, impi last. The
 * key path is written relative to the key directory when it is inside it,
 * so that it fits the line length the original did. */
static void print_file(const icbc_routerfile_t *rf, struct text *t)
{
    const char *key = icbc_routerfile_key_path(rf);
    size_t dlen = strlen(dir);

    t->len = 0;
    text_add(t, "policy %s\n", icbc_rf_policy_name(icbc_routerfile_policy(rf)));
    if (icbc_routerfile_wan_rate(rf) > 0)
        text_add(t, "wan-rate %llu\n", (unsigned long long) icbc_routerfile_wan_rate(rf));
    if (key != NULL) {
        if (strncmp(key, dir, dlen) == 0 && key[dlen] == '/')
            text_add(t, "key %s\n", key + dlen + 1);
        else
            text_add(t, "key %s\n", key);
    }
    for (size_t i = 0; i < icbc_routerfile_num_clusters(rf); i++) {
        const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf, i);
        text_add(t, "cluster %s\n", c->name);
        for (size_t h = 0; h < c->nhosts; h++)
            text_add(t, "  hosts %s\n", c->hosts[h]);
        if (c->fabric_line) {
            char net[INET6_ADDRSTRLEN];
            const void *a =
                c->fabric_net.ss_family == AF_INET
                    ? (const void *) &((const struct sockaddr_in *) &c->fabric_net)->sin_addr
                    : (const void *) &((const struct sockaddr_in6 *) &c->fabric_net)->sin6_addr;
            FUZZ_CHECK(inet_ntop(c->fabric_net.ss_family, a, net, sizeof(net)) != NULL);
            text_add(t, "  fabric %s/%d\n", net, c->fabric_prefix);
        }
        for (size_t r = 0; r < c->nrouters; r++)
            text_add(t, "  router %s fabric=%s wan=%s\n", c->routers[r].host,
                     c->routers[r].fabric.text, c->routers[r].wan.text);
    }
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++) {
        const icbc_rf_impi_t *m = icbc_routerfile_impi(rf, i);
        text_add(t, "impi %s server=%s\n", m->name, m->server.text);
    }
}

/* ---- checks ------------------------------------------------------------- */

static int valid_name(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > ICBC_RF_NAME_MAX)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

static int valid_host(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > ICBC_RF_HOST_MAX)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
           s[0] != '.' && s[0] != '_' && s[0] != '-';
}

/* An address as docs/routerfile.md allows it: numeric, with a port, not
 * unspecified, multicast or broadcast; the text says the family. */
static void check_addr(const icbc_rf_addr_t *a)
{
    size_t n = strnlen(a->text, sizeof(a->text));

    FUZZ_CHECK(n > 0 && n < sizeof(a->text));
    if (a->text[0] == '[') {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) &a->sa;
        FUZZ_CHECK(a->sa.ss_family == AF_INET6 && a->salen == sizeof(*sin6));
        FUZZ_CHECK(sin6->sin6_port != 0);
        FUZZ_CHECK(!IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr));
        FUZZ_CHECK(!IN6_IS_ADDR_MULTICAST(&sin6->sin6_addr));
    } else {
        const struct sockaddr_in *sin = (const struct sockaddr_in *) &a->sa;
        uint32_t h = ntohl(sin->sin_addr.s_addr);
        FUZZ_CHECK(a->sa.ss_family == AF_INET && a->salen == sizeof(*sin));
        FUZZ_CHECK(sin->sin_port != 0);
        FUZZ_CHECK(h != 0 && (h >> 28) != 0xe && h != 0xffffffffu);
    }
}

static int same_addr(const icbc_rf_addr_t *a, const icbc_rf_addr_t *b)
{
    return a->salen == b->salen && memcmp(&a->sa, &b->sa, a->salen) == 0;
}

/* Wan and server addresses are unique in the file and no fabric address,
 * except that impi entries may share a server (the foreign clients of one
 * IMPI job); fabric addresses are unique within their cluster. */
static void check_unique(const icbc_routerfile_t *rf)
{
    struct use {
        const icbc_rf_addr_t *a;
        int fabric, server;
        size_t cluster;
    } * u;
    size_t n = 0, cap = 2 * ICBC_RF_MAX_CLUSTERS * ICBC_RF_MAX_ROUTERS + ICBC_RF_MAX_IMPI;

    u = malloc(cap * sizeof(*u));
    FUZZ_CHECK(u != NULL);
    for (size_t i = 0; i < icbc_routerfile_num_clusters(rf); i++) {
        const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf, i);
        for (size_t r = 0; r < c->nrouters; r++) {
            u[n++] = (struct use){ &c->routers[r].fabric, 1, 0, i };
            u[n++] = (struct use){ &c->routers[r].wan, 0, 0, i };
        }
    }
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++)
        u[n++] = (struct use){ &icbc_routerfile_impi(rf, i)->server, 0, 1, (size_t) -1 };
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (same_addr(u[i].a, u[j].a))
                FUZZ_CHECK((u[i].fabric && u[j].fabric && u[i].cluster != u[j].cluster) ||
                           (u[i].server && u[j].server));
    free(u);
}

static void check_file(const icbc_routerfile_t *rf, int nlines)
{
    size_t nc = icbc_routerfile_num_clusters(rf), nhosts = 0, nrouters = 0;
    char err[ICBC_RF_ERR_LEN];
    int prev_line = 0;

    FUZZ_CHECK(strcmp(icbc_routerfile_name(rf), name) == 0);
    FUZZ_CHECK(icbc_routerfile_wan_rate(rf) <= 1000000000000000ull);
    FUZZ_CHECK(nc >= 1 && nc <= ICBC_RF_MAX_CLUSTERS);
    FUZZ_CHECK(icbc_routerfile_cluster(rf, nc) == NULL);
    for (size_t i = 0; i < nc; i++) {
        const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf, i);
        FUZZ_CHECK(valid_name(c->name));
        FUZZ_CHECK(icbc_routerfile_find_cluster(rf, c->name) == (int) i);
        FUZZ_CHECK(icbc_routerfile_find_impi(rf, c->name) == -1);
        FUZZ_CHECK(c->line > prev_line && c->line <= nlines);
        prev_line = c->line;
        FUZZ_CHECK(c->nhosts >= 1 && c->nhosts <= ICBC_RF_MAX_HOSTS);
        FUZZ_CHECK(c->nrouters <= ICBC_RF_MAX_ROUTERS);
        for (size_t h = 0; h < c->nhosts; h++) {
            FUZZ_CHECK(valid_host(c->hosts[h]));
            FUZZ_CHECK(icbc_routerfile_find_host(rf, c->hosts[h]) == (int) i);
        }
        for (size_t r = 0; r < c->nrouters; r++) {
            const icbc_rf_router_t *rt = &c->routers[r];
            int ci = -1;
            FUZZ_CHECK(icbc_routerfile_find_host(rf, rt->host) == (int) i);
            FUZZ_CHECK(icbc_routerfile_find_router(rf, rt->host, &ci) == rt && ci == (int) i);
            FUZZ_CHECK(rt->line > c->line && rt->line <= nlines);
            check_addr(&rt->fabric);
            check_addr(&rt->wan);
        }
        /* a relay line: its routers run it, from router 0's IPv4 fabric
         * address on a port of its own, for an IPv4 server */
        if (c->relay_line) {
            FUZZ_CHECK(c->relay_line > c->line && c->relay_line <= nlines);
            FUZZ_CHECK(c->nrouters >= 1 && c->relay_port != 0);
            check_addr(&c->relay_server);
            FUZZ_CHECK(c->relay_server.sa.ss_family == AF_INET);
            FUZZ_CHECK(c->routers[0].fabric.sa.ss_family == AF_INET);
            FUZZ_CHECK(ntohs(((const struct sockaddr_in *) &c->routers[0].fabric.sa)->sin_port) !=
                       c->relay_port);
            FUZZ_CHECK(c->relay_key_path == NULL || c->relay_key_path[0] == '/');
        } else {
            FUZZ_CHECK(c->relay_port == 0 && c->relay_key_path == NULL);
        }
        if (c->fabric_line) {
            int max = c->fabric_net.ss_family == AF_INET ? 32 : 128;
            FUZZ_CHECK(c->fabric_net.ss_family == AF_INET || c->fabric_net.ss_family == AF_INET6);
            const uint8_t *b =
                c->fabric_net.ss_family == AF_INET
                    ? (const uint8_t *) &((const struct sockaddr_in *) &c->fabric_net)->sin_addr
                    : (const uint8_t *) &((const struct sockaddr_in6 *) &c->fabric_net)->sin6_addr;
            FUZZ_CHECK(c->fabric_prefix >= 0 && c->fabric_prefix <= max);
            for (int bit = c->fabric_prefix; bit < max; bit++)
                FUZZ_CHECK(!(b[bit / 8] & (0x80 >> (bit % 8))));
            FUZZ_CHECK(c->fabric_line > c->line && c->fabric_line <= nlines);
        }
        nhosts += c->nhosts;
        nrouters += c->nrouters;
    }
    FUZZ_CHECK(icbc_routerfile_num_hosts(rf) == nhosts);
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++) {
        const icbc_rf_impi_t *m = icbc_routerfile_impi(rf, i);
        FUZZ_CHECK(valid_name(m->name));
        FUZZ_CHECK(icbc_routerfile_find_impi(rf, m->name) == (int) i);
        FUZZ_CHECK(icbc_routerfile_find_cluster(rf, m->name) == -1);
        FUZZ_CHECK(m->line >= 1 && m->line <= nlines);
        check_addr(&m->server);
    }
    FUZZ_CHECK(icbc_routerfile_impi(rf, icbc_routerfile_num_impi(rf)) == NULL);
    check_unique(rf);
    if (nrouters > 0)
        FUZZ_CHECK(icbc_routerfile_key_path(rf) != NULL);
    FUZZ_CHECK(icbc_routerfile_check_policy(rf, icbc_routerfile_policy(rf), err, sizeof(err)) ==
               ICBC_OK);
}

/* "NAME:LINE: what" with 1 <= LINE <= max(1, NLINES), one line. */
static void check_error(const char *err, size_t errlen, int nlines)
{
    size_t n = strlen(name);
    const char *p;
    char *end;
    long line;

    FUZZ_CHECK(memchr(err, '\0', errlen) != NULL);
    FUZZ_CHECK(strchr(err, '\n') == NULL);
    FUZZ_CHECK(strncmp(err, name, n) == 0 && err[n] == ':');
    p = err + n + 1;
    FUZZ_CHECK(*p >= '1' && *p <= '9');
    line = strtol(p, &end, 10);
    FUZZ_CHECK(line >= 1 && line <= (nlines > 0 ? nlines : 1));
    FUZZ_CHECK(end[0] == ':' && end[1] == ' ' && end[2] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    icbc_routerfile_t *rf = (icbc_routerfile_t *) 1, *rf2 = NULL, *rf3 = NULL;
    struct text t1 = { 0 }, t2 = { 0 };
    char *err;
    int nlines = 0;
    icbc_status_t st;

    for (size_t i = 0; i < size; i++)
        nlines += data[i] == '\n';
    if (size > 0 && data[size - 1] != '\n')
        nlines++;

    /* Exactly ICBC_RF_ERR_LEN bytes, so that a write past it is caught. */
    err = malloc(ICBC_RF_ERR_LEN);
    FUZZ_CHECK(err != NULL);
    memset(err, 'x', ICBC_RF_ERR_LEN);
    st = icbc_routerfile_parse((const char *) data, size, name, NULL, &rf, err, ICBC_RF_ERR_LEN);
    FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_INVALID);
    if (st != ICBC_OK) {
        FUZZ_CHECK(rf == NULL);
        check_error(err, ICBC_RF_ERR_LEN, nlines);
        free(err);
        return 0;
    }
    FUZZ_CHECK(rf != NULL);
    FUZZ_CHECK(err[0] == '\0');
    check_file(rf, nlines);

    /* Round trip through the canonical text. */
    print_file(rf, &t1);
    st = icbc_routerfile_parse(t1.s, t1.len, name, NULL, &rf2, err, ICBC_RF_ERR_LEN);
    if (st != ICBC_OK)
        fprintf(stderr, "re-parse of the printed file failed: %s\n--- printed:\n%s---\n", err,
                t1.s);
    FUZZ_CHECK(st == ICBC_OK);
    print_file(rf2, &t2);
    if (t1.len != t2.len || memcmp(t1.s, t2.s, t1.len) != 0)
        fprintf(stderr, "--- printed:\n%s--- printed again:\n%s---\n", t1.s, t2.s);
    FUZZ_CHECK(t1.len == t2.len && memcmp(t1.s, t2.s, t1.len) == 0);
    FUZZ_CHECK(icbc_routerfile_policy(rf2) == icbc_routerfile_policy(rf));
    FUZZ_CHECK(icbc_routerfile_wan_rate(rf2) == icbc_routerfile_wan_rate(rf));
    FUZZ_CHECK((icbc_routerfile_key_path(rf) == NULL) == (icbc_routerfile_key_path(rf2) == NULL));
    if (icbc_routerfile_key_path(rf) != NULL)
        FUZZ_CHECK(strcmp(icbc_routerfile_key_path(rf), icbc_routerfile_key_path(rf2)) == 0);
    for (size_t i = 0; i < icbc_routerfile_num_clusters(rf); i++) {
        const icbc_rf_cluster_t *a = icbc_routerfile_cluster(rf, i);
        const icbc_rf_cluster_t *b = icbc_routerfile_cluster(rf2, i);
        FUZZ_CHECK(b != NULL && a->nrouters == b->nrouters);
        for (size_t r = 0; r < a->nrouters; r++) {
            FUZZ_CHECK(same_addr(&a->routers[r].fabric, &b->routers[r].fabric));
            FUZZ_CHECK(same_addr(&a->routers[r].wan, &b->routers[r].wan));
        }
        FUZZ_CHECK(a->fabric_prefix == b->fabric_prefix &&
                   memcmp(&a->fabric_net, &b->fabric_net, sizeof(a->fabric_net)) == 0);
    }
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++)
        FUZZ_CHECK(
            same_addr(&icbc_routerfile_impi(rf, i)->server, &icbc_routerfile_impi(rf2, i)->server));

    /* A parse into a NULL error buffer gives the same result. */
    FUZZ_CHECK(icbc_routerfile_parse((const char *) data, size, name, NULL, &rf3, NULL, 0) ==
               ICBC_OK);
    icbc_routerfile_free(rf3);
    icbc_routerfile_free(rf2);
    icbc_routerfile_free(rf);
    free(t1.s);
    free(t2.s);
    free(err);
    return 0;
}
