/*
 * Router file: the one text file that tells every ICBC process and router
 * which clusters exist, which hosts belong to each, the routers of each
 * cluster (fabric-side and WAN-side addresses), the foreign IMPI clusters,
 * the policy and the key file. Format and rules: docs/routerfile.md.
 *
 * Parsing is all-or-nothing: on success the caller owns an immutable
 * icbc_routerfile_t (free it with icbc_routerfile_free); on failure nothing is
 * allocated and the error buffer holds one line naming file and line, e.g.
 *     routers.conf:12: router 'a5': host is not in cluster 'a'
 * The parser does not log; the caller reports the message once. A loaded
 * file is never modified, so several threads may read it at once.
 *
 * Status codes: ICBC_ERR_INVALID for any mistake in the file's content
 * (including a missing, empty or too open key file), ICBC_ERR_IO when the
 * router file itself cannot be opened or read, ICBC_ERR_NOT_FOUND when
 * ICBC_ROUTERFILE is unset, ICBC_ERR_NO_MEMORY.
 */
#ifndef ICBC_ROUTERFILE_H
#define ICBC_ROUTERFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps; exceeding one is an error naming file and line. */
#define ICBC_RF_MAX_CLUSTERS 64      /* ICBC clusters per file */
#define ICBC_RF_MAX_HOSTS 65536      /* hosts per cluster */
#define ICBC_RF_MAX_ROUTERS 64       /* routers per cluster */
#define ICBC_RF_MAX_IMPI 64          /* impi entries per file */
#define ICBC_RF_LINE_MAX 1023        /* bytes per line, without the newline */
#define ICBC_RF_FILE_MAX (64u << 20) /* bytes per router file */
#define ICBC_RF_KEY_MAX 4096         /* bytes per key file */
#define ICBC_RF_NAME_MAX 31          /* cluster and impi names */
#define ICBC_RF_HOST_MAX 255         /* host names */
#define ICBC_RF_ADDR_TEXT_MAX 64     /* "a.b.c.d:port" / "[v6]:port" incl. NUL */
#define ICBC_RF_ERR_LEN 512          /* a sufficient error buffer */

typedef enum {
    ICBC_RF_POLICY_AGGREGATE = 0, /* stripe large messages over all routers (default) */
    ICBC_RF_POLICY_STATIC = 1,    /* one fixed router per process, no striping */
    ICBC_RF_POLICY_ALLTOALL = 2,  /* direct TCP between processes of different clusters */
    ICBC_RF_POLICY_TCP = 3,       /* every inter-node message over TCP */
} icbc_rf_policy_t;

/* A socket address as parsed from "a.b.c.d:port" or "[v6]:port". */
typedef struct {
    struct sockaddr_storage sa; /* AF_INET or AF_INET6, port in network order */
    socklen_t salen;
    char text[ICBC_RF_ADDR_TEXT_MAX]; /* the text as written in the file */
} icbc_rf_addr_t;

typedef struct {
    const char *host;      /* a host of the router's own cluster */
    int line;              /* line of the 'router' entry */
    icbc_rf_addr_t fabric; /* where compute processes of the cluster reach it */
    icbc_rf_addr_t wan;    /* where routers of other clusters reach it */
} icbc_rf_router_t;

typedef struct {
    const char *name;
    int line; /* line of the 'cluster' entry */
    size_t nhosts;
    const char *const *hosts; /* in file order */
    size_t nrouters;
    const icbc_rf_router_t *routers;    /* in file order */
    int fabric_line;                    /* line of the 'fabric' entry; 0: none */
    struct sockaddr_storage fabric_net; /* its network address (port 0, host bits 0) */
    int fabric_prefix;                  /* its prefix length */
    int fabric_api;                     /* ICBC_RF_FABRIC_UCX (default) or _OFI */
    int fabric_api_line;                /* line of the 'fabric-api' entry; 0: none */
    char router_bind[64];               /* 'router-bind': auto, none or a CPU list; "": none */
    int router_bind_line;               /* its line; 0: none */
    icbc_rf_addr_t relay_server;        /* 'impi-relay server=': the IMPI server (IPv4) */
    uint16_t relay_port;                /* 'impi-relay port=': its start-up port inside */
    const char *relay_key_path;         /* 'impi-relay auth=key:FILE', resolved; NULL: none */
    int relay_line;                     /* line of the 'impi-relay' entry; 0: none */
} icbc_rf_cluster_t;

/* The fabric API a cluster's processes and routers speak ('fabric-api'). */
#define ICBC_RF_FABRIC_UCX 0
#define ICBC_RF_FABRIC_OFI 1

typedef struct {
    const char *name;
    int line;
    icbc_rf_addr_t server; /* the IMPI server of the foreign cluster */
} icbc_rf_impi_t;

typedef struct icbc_routerfile icbc_routerfile_t;

/* Loads and checks the file at PATH; messages name it as given. A relative
 * key path is taken relative to the directory of PATH. */
icbc_status_t icbc_routerfile_load(const char *path, icbc_routerfile_t **out, char *err,
                                   size_t errlen);

/* Loads the file named by the environment variable ICBC_ROUTERFILE. */
icbc_status_t icbc_routerfile_load_env(icbc_routerfile_t **out, char *err, size_t errlen);

/* Parses LEN bytes at BUF; NAME is used in messages. A relative key path is
 * taken relative to BASEDIR, or to the directory of NAME if BASEDIR is NULL. */
icbc_status_t icbc_routerfile_parse(const char *buf, size_t len, const char *name,
                                    const char *basedir, icbc_routerfile_t **out, char *err,
                                    size_t errlen);

void icbc_routerfile_free(icbc_routerfile_t *rf);

/* Read-only accessors; pointers stay valid until icbc_routerfile_free. */
const char *icbc_routerfile_name(const icbc_routerfile_t *rf);
icbc_rf_policy_t icbc_routerfile_policy(const icbc_routerfile_t *rf);
const char *icbc_routerfile_key_path(const icbc_routerfile_t *rf); /* NULL: no 'key' line */
/* The WAN's rate in bits/s ('wan-rate'), 0: not given. */
uint64_t icbc_routerfile_wan_rate(const icbc_routerfile_t *rf);
size_t icbc_routerfile_num_clusters(const icbc_routerfile_t *rf);
const icbc_rf_cluster_t *icbc_routerfile_cluster(const icbc_routerfile_t *rf, size_t i);
size_t icbc_routerfile_num_hosts(const icbc_routerfile_t *rf); /* over all clusters */
size_t icbc_routerfile_num_impi(const icbc_routerfile_t *rf);
const icbc_rf_impi_t *icbc_routerfile_impi(const icbc_routerfile_t *rf, size_t i);

/* Lookups by exact name; return an index or -1. */
int icbc_routerfile_find_host(const icbc_routerfile_t *rf, const char *host); /* its cluster */
int icbc_routerfile_find_cluster(const icbc_routerfile_t *rf, const char *name);
int icbc_routerfile_find_impi(const icbc_routerfile_t *rf, const char *name);

/* The router running on HOST, or NULL; *cluster (if not NULL) gets its cluster. */
const icbc_rf_router_t *icbc_routerfile_find_router(const icbc_routerfile_t *rf, const char *host,
                                                    int *cluster);

/* Reads the key bytes (the whole key file, byte for byte) into BUF and
 * re-checks the file as the parser did. ICBC_ERR_NOT_FOUND if the router file
 * has no 'key' line, ICBC_ERR_TRUNCATED if BUFLEN is too small. */
icbc_status_t icbc_routerfile_read_key(const icbc_routerfile_t *rf, unsigned char *buf,
                                       size_t buflen, size_t *keylen, char *err, size_t errlen);

/* Checks that POLICY can run on this file's clusters: aggregate and static
 * need a router in every cluster when there are two or more clusters. The
 * parser applies it to the file's own policy; call it again when a CVAR
 * overrides the policy. */
icbc_status_t icbc_routerfile_check_policy(const icbc_routerfile_t *rf, icbc_rf_policy_t policy,
                                           char *err, size_t errlen);

const char *icbc_rf_policy_name(icbc_rf_policy_t policy);
/* "aggregate", "static", "alltoall", "tcp" -> ICBC_OK; else ICBC_ERR_INVALID. */
icbc_status_t icbc_rf_policy_from_string(const char *s, icbc_rf_policy_t *policy);

/* The name of this host as used in router files: env ICBC_NODE if set and
 * not empty, else gethostname(). ICBC_ERR_INVALID if it is not a valid host
 * name or does not fit in LEN bytes (logged), ICBC_ERR_IO if gethostname fails. */
icbc_status_t icbc_routerfile_self_host(char *buf, size_t len);

/* The cluster of this host (icbc_routerfile_self_host); when the name comes
 * from gethostname() and is not listed, its first label ("n1" of
 * "n1.example.org") is tried too. ICBC_ERR_NOT_FOUND with a message if the
 * host is in no cluster. HOST (if not NULL, HOSTLEN bytes) gets the name matched. */
icbc_status_t icbc_routerfile_self_cluster(const icbc_routerfile_t *rf, int *cluster, char *host,
                                           size_t hostlen, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_ROUTERFILE_H */
