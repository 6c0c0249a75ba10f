/*
 * IMPI start-up inside MPI_Init (icbc_impi.h): MPICH's hook
 * MPIR_pmi_world_join runs it once the process manager has told each
 * process its rank among this job's processes, and before MPICH sizes its
 * tables, so that MPI_COMM_WORLD is the IMPI world.
 *
 *   1. every process opens an IMPI host port (a TCP listener);
 *   2. the processes gather {address, port, pid} over PMI;
 *   3. PMI rank 0 gives them to impi-server as this client's hosts and
 *      processes and learns the job: every process a host of its own when
 *      every client is ICBC, else the processes of one address (a node)
 *      one host, whose port is its first process's (C_ICBC_HOSTS);
 *   4. it hands the job (or what went wrong) to the others over PMI;
 *   5. every process lays out MPIR_Process as the world.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "impi/impi_hostconn.h"
#include "impi/impi_proto.h"
#include "core/icbc_routerfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

MPIDI_ICBC_impi_t MPIDI_ICBC_impi = { .listen_fd = -1 };

/* What each process tells PMI rank 0 about its host. */
typedef struct {
    uint8_t addr[4];
    uint32_t port;
    int64_t pid;
    uint64_t machine; /* icbc_bcard_machine_id() */
} host_entry_t;

/* What PMI rank 0 hands the others: the packed layout, or an error text. */
typedef struct {
    int32_t ok;
    uint32_t len;
} startup_result_t;

#define IMPI_ERR(mpi_errno, ...)                                                                   \
    do {                                                                                           \
        char why_[768];                                                                            \
        snprintf(why_, sizeof(why_), __VA_ARGS__);                                                 \
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_impi", "**icbc_impi %s", why_);     \
    } while (0)

static int parse_server(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    char *end;
    long port;

    if (colon == NULL || colon == s || (size_t) (colon - s) >= sizeof(host))
        return -1;
    memcpy(host, s, (size_t) (colon - s));
    host[colon - s] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535)
        return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t) port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* The address this host reaches SERVER from: the kernel's choice for a
 * datagram socket connected there (nothing is sent). */
static int address_towards(const struct sockaddr_in *server, struct in_addr *addr)
{
    struct sockaddr_in self;
    socklen_t len = sizeof(self);
    int fd = socket(AF_INET, SOCK_DGRAM, 0), rc = -1;

    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *) server, sizeof(*server)) == 0 &&
        getsockname(fd, (struct sockaddr *) &self, &len) == 0) {
        *addr = self.sin_addr;
        rc = 0;
    }
    close(fd);
    return rc;
}

/* This process's IMPI host port on ADDR; its port in *PORT. */
static int open_port(struct in_addr addr, uint32_t *port, char *why, size_t whylen)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = addr };
    socklen_t len = sizeof(sa);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char a[INET_ADDRSTRLEN];

    inet_ntop(AF_INET, &addr, a, sizeof(a));
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *) &sa, &len) != 0) {
        snprintf(why, whylen, "cannot listen on %s for IMPI hosts: %s", a, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* The hosts of this client: the processes of one address (a node) are one
 * host, in the order of their first process; IMPI numbers a host's
 * processes together, so they must have consecutive PMI ranks (mpiexec's
 * block placement, its default). The host's port is its first process's,
 * which runs its agent. Returns the number of hosts, or -1 with WHY. */
static int group_hosts(const host_entry_t *entries, int n, impi_host_t *hosts, char *why,
                       size_t whylen)
{
    int nhosts = 0;

    for (int i = 0; i < n; i++) {
        if (nhosts > 0 && memcmp(hosts[nhosts - 1].addr + 12, entries[i].addr, 4) == 0) {
            hosts[nhosts - 1].nprocs++;
            continue;
        }
        for (int h = 0; h < nhosts; h++)
            if (memcmp(hosts[h].addr + 12, entries[i].addr, 4) == 0) {
                char a[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, entries[i].addr, a, sizeof(a));
                snprintf(why, whylen,
                         "the processes on %s do not have consecutive ranks (PMI rank %d comes "
                         "after another node's), and IMPI numbers a host's processes together "
                         "(mpiexec's block placement, its default, gives consecutive ranks)",
                         a, i);
                return -1;
            }
        memcpy(hosts[nhosts].addr + 12, entries[i].addr, 4);
        hosts[nhosts].port = entries[i].port;
        hosts[nhosts].nprocs = 1;
        nhosts++;
    }
    return nhosts;
}

/* PMI rank 0: start-up for the client, the job packed into *OUT (or the
 * reason it failed, with *OK = 0). */

/* The key file of the relay the router file names (impi-relay auth=key:FILE),
 * used when ICBC_IMPI_KEY is not set; "" for none. */
static char relay_key_path[PATH_MAX];

static void run_startup(const char *server, int client, const host_entry_t *entries, int n,
                        uint8_t **out, size_t *outlen, int *ok)
{
    impi_host_t *hosts = MPL_calloc(n, sizeof(*hosts), MPL_MEM_OTHER);
    impi_host_t *own = MPL_calloc(n, sizeof(*own), MPL_MEM_OTHER);
    impi_proc_t *procs = MPL_calloc(n, sizeof(*procs), MPL_MEM_OTHER);
    uint64_t *machines = MPL_calloc(n, sizeof(*machines), MPL_MEM_OTHER);
    impi_client_params_t params = { .server = server, .client = client };
    impi_layout_t layout;
    char err[512] = "";
    const char *key = getenv("ICBC_IMPI_KEY");
    icbc_status_t st;
    int nhosts;

    *ok = 0;
    if (hosts == NULL || own == NULL || procs == NULL || machines == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto done;
    }
    if (key && *key) {
        char *end;
        params.have_key = 1;
        params.key = strtoull(key, &end, 10);
        if (*end != '\0') {
            snprintf(err, sizeof(err), "ICBC_IMPI_KEY='%s' is not a decimal number", key);
            goto done;
        }
    } else if (relay_key_path[0]) {
        /* the key of the relay the router file named (impi-relay auth=) */
        if (impi_key_read(relay_key_path, &params.key, err, sizeof(err)) != ICBC_OK)
            goto done;
        params.have_key = 1;
    }
    params.timeout_ms = MPL_MAX(MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT, 1) * 1000;
    /* addresses "::a.b.c.d", as LAM writes its own */
    for (int i = 0; i < n; i++) {
        memcpy(procs[i].host + 12, entries[i].addr, 4);
        procs[i].pid = entries[i].pid;
        machines[i] = entries[i].machine;
        memcpy(own[i].addr + 12, entries[i].addr, 4);
        own[i].port = entries[i].port;
        own[i].nprocs = 1;
    }
    /* each process a host when every client is ICBC; else every node one */
    impi_local_t local_own = {
        .nhosts = (uint32_t) n,
        .nprocs = (uint32_t) n,
        .hosts = own,
        .procs = procs,
        .coll_xsize = -1,
        .coll_maxlinear = -1,
        .machines = machines,
    };
    impi_local_t local_nodes = local_own;
    nhosts = group_hosts(entries, n, hosts, err, sizeof(err));
    if (nhosts > 0) {
        local_nodes.nhosts = (uint32_t) nhosts;
        local_nodes.hosts = hosts;
    } else {
        /* a job whose nodes' ranks interleave: its processes stay hosts of
         * their own, which LAM/MPI refuses beyond one process per node */
        icbc_warn("IMPI start-up: %s; each process is an IMPI host of its own", err);
        err[0] = '\0';
    }
    params.local_own_hosts = &local_own;
    st = impi_client_startup(&params, &local_nodes, &MPIDI_ICBC_impi.conn, &layout, err,
                             sizeof(err));
    if (st == ICBC_OK) {
        st = impi_layout_pack(&layout, out, outlen);
        impi_layout_free(&layout);
        if (st == ICBC_OK) {
            *ok = 1;
            goto done_ok;
        }
        snprintf(err, sizeof(err), "out of memory");
    }
done:
    *out = (uint8_t *) MPL_strdup(err);
    *outlen = strlen(err) + 1;
done_ok:
    MPL_free(hosts);
    MPL_free(own);
    MPL_free(procs);
    MPL_free(machines);
}

/* PMI rank 0's result to every process of the job. */
static int share_result(uint8_t **buf, size_t *len, int *ok)
{
    int mpi_errno = MPI_SUCCESS;
    startup_result_t r = { *ok, (uint32_t) *len };

    mpi_errno = MPIR_pmi_bcast(&r, sizeof(r), MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    if (MPIDI_ICBC_impi.pmi_rank != 0) {
        *buf = MPL_malloc(r.len, MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(*buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        *len = r.len;
        *ok = r.ok;
    }
    mpi_errno = MPIR_pmi_bcast(*buf, (int) *len, MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
fn_fail:
    return mpi_errno;
}

void MPIDI_ICBC_impi_where(int r, int *client, int *host)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;

    *host = impi_layout_host_of(l, r);
    *client = l->hosts[*host].client;
}

/* The nodes of MPI_COMM_WORLD must be the same in every client, or MPICH's
 * node-aware collectives would build different communicators in each. A
 * client knows its own nodes from PMI and the others' only from start-up:
 * a node is the hosts of one client with one address. So this client's
 * processes must share an address exactly when PMI puts them on one node;
 * nodes are numbered in world-rank order, as every client numbers them. */
static int check_own_nodes(char *why, size_t whylen)
{
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    const impi_proc_t *own = l->procs + l->first_rank[MPIDI_ICBC_impi.client];

    for (int i = 0; i < MPIDI_ICBC_impi.pmi_size; i++)
        for (int j = 0; j < i; j++) {
            int same_node = MPIR_Process.node_map[i] == MPIR_Process.node_map[j];
            int same_addr = memcmp(own[i].host + 12, own[j].host + 12, 4) == 0;
            if (same_node != same_addr) {
                snprintf(why, whylen,
                         "processes %d and %d of this client are on %s node but advertise %s "
                         "address (MPIR_CVAR_CH4_ICBC_IMPI_HOST): the other clients would "
                         "see other nodes",
                         j, i, same_node ? "one" : "different", same_node ? "different" : "one");
                return -1;
            }
        }
    return 0;
}

/* MPIR_Process as the IMPI world: this job's processes from FIRST on, on
 * the nodes PMI gave them; the hosts of another client with one address a
 * node. */
static int lay_out_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    int first = MPIDI_ICBC_impi.first_rank, n = l->nprocs_total;
    int *node_map = MPL_malloc(sizeof(int) * n, MPL_MEM_ADDRESS);
    int *root_map = MPL_malloc(sizeof(int) * n, MPL_MEM_ADDRESS); /* at most n nodes */
    int *local_map = MPL_malloc(sizeof(int) * MPIR_Process.local_size, MPL_MEM_ADDRESS);
    int *rank_host = MPL_malloc(sizeof(int) * n, MPL_MEM_ADDRESS);
    int nodes = 0;

    MPIR_ERR_CHKANDJUMP(!node_map || !root_map || !local_map || !rank_host, mpi_errno,
                        MPI_ERR_OTHER, "**nomem");
    for (int h = 0; h < l->nhosts_total; h++)
        for (uint32_t k = 0; k < l->hosts[h].nprocs; k++)
            rank_host[l->hosts[h].first_rank + (int) k] = h;
    for (int r = 0; r < n; r++) {
        int own = r >= first && r < first + MPIDI_ICBC_impi.pmi_size, node = -1;
        const impi_host_t *hr = &l->hosts[rank_host[r]];
        for (int k = 0; k < nodes && node < 0; k++) {
            int q = root_map[k]; /* a node's first rank stands for it */
            const impi_host_t *hq = &l->hosts[rank_host[q]];
            int q_own = q >= first && q < first + MPIDI_ICBC_impi.pmi_size;
            if (own && q_own)
                node =
                    MPIR_Process.node_map[r - first] == MPIR_Process.node_map[q - first] ? k : -1;
            else if (!own && !q_own && hr->client == hq->client && impi_host_v4_equal(hr, hq))
                node = k;
        }
        if (node < 0) {
            node = nodes++;
            root_map[node] = r;
        }
        node_map[r] = node;
    }
    for (int i = 0; i < MPIR_Process.local_size; i++)
        local_map[i] = first + MPIR_Process.node_local_map[i];

    /* the process manager's arrays stay with MPICH's PMI layer */
    MPL_free(MPIR_Process.node_local_map);
    MPIR_Process.node_local_map = local_map;
    MPIR_Process.node_map = node_map;
    MPIR_Process.node_root_map = root_map;
    MPIR_Process.num_nodes = nodes;
    MPIR_Process.rank = first + MPIDI_ICBC_impi.pmi_rank;
    MPIR_Process.size = n;
    MPL_free(rank_host);
    return MPI_SUCCESS;
fn_fail:
    MPL_free(node_map);
    MPL_free(root_map);
    MPL_free(local_map);
    MPL_free(rank_host);
    return mpi_errno;
}

/* The IMPI job the router file names (ICBC_ROUTERFILE): its impi entries
 * are the foreign clients of one IMPI job, whose server they share; a job
 * of a cluster with an 'impi-relay' line reaches it through the relay.
 * Returns 1 with the address to start up at in SERVER, 0 when the file names none (or cannot be
 * read: the paths' set-up reports that with the file's own message), -1 with
 * WHY when its entries name different servers. */
static int routerfile_server(char *server, size_t len, char *why, size_t whylen)
{
    icbc_routerfile_t *rf = NULL;
    char err[ICBC_RF_ERR_LEN];
    const char *path = getenv("ICBC_ROUTERFILE");
    int found = 0;

    if (path == NULL || !*path || icbc_routerfile_load_env(&rf, err, sizeof(err)) != ICBC_OK)
        return 0;
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++) {
        const icbc_rf_impi_t *e = icbc_routerfile_impi(rf, i), *first = icbc_routerfile_impi(rf, 0);
        if (i > 0 && strcmp(e->server.text, first->server.text) != 0) {
            snprintf(why, whylen,
                     "%s: impi '%s' (line %d) and impi '%s' (line %d) name different servers; "
                     "a job is a client of one IMPI job",
                     path, first->name, first->line, e->name, e->line);
            found = -1;
            break;
        }
        snprintf(server, len, "%s", e->server.text);
        found = 1;
    }
    /* a private cluster ('impi-relay') reaches that server through the
     * relay its routers run: router 0's fabric address, the line's port */
    int cluster;
    const icbc_rf_cluster_t *cl;
    if (found == 1 &&
        icbc_routerfile_self_cluster(rf, &cluster, NULL, 0, err, sizeof(err)) == ICBC_OK &&
        (cl = icbc_routerfile_cluster(rf, (size_t) cluster))->relay_line) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) &cl->routers[0].fabric.sa;
        char a[INET_ADDRSTRLEN];
        if (strcmp(cl->relay_server.text, server) != 0) {
            snprintf(why, whylen,
                     "%s: the impi entries name server %s, but cluster '%s' reaches IMPI through "
                     "its routers' relay to %s (impi-relay, line %d)",
                     path, server, cl->name, cl->relay_server.text, cl->relay_line);
            found = -1;
        } else {
            inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
            snprintf(server, len, "%s:%u", a, cl->relay_port);
            snprintf(relay_key_path, sizeof(relay_key_path), "%s",
                     cl->relay_key_path ? cl->relay_key_path : "");
        }
    }
    icbc_routerfile_free(rf);
    return found;
}

int MPIR_pmi_world_join(void)
{
    int mpi_errno = MPI_SUCCESS;
    const char *server = getenv("ICBC_IMPI_SERVER");
    const char *client_s = getenv("ICBC_IMPI_CLIENT");
    struct sockaddr_in server_sa;
    struct in_addr host_addr;
    host_entry_t self, *entries = NULL;
    uint8_t *result = NULL;
    size_t result_len = 0;
    int ok = 0, client;
    char *end, why[512], err[512];

    char file_server[ICBC_RF_ADDR_TEXT_MAX];

    /* without ICBC_IMPI_SERVER, the router file's impi entries make this job
     * client 0 (or ICBC_IMPI_CLIENT) of their IMPI job */
    if (server == NULL || !*server) {
        int named = routerfile_server(file_server, sizeof(file_server), why, sizeof(why));
        if (named < 0)
            IMPI_ERR(mpi_errno, "%s", why);
        if (named > 0) {
            server = file_server;
            if (client_s == NULL || !*client_s)
                client_s = "0";
        }
    }
    if ((server == NULL || !*server) && (client_s == NULL || !*client_s))
        return MPI_SUCCESS;
    if (server == NULL || !*server || client_s == NULL || !*client_s)
        IMPI_ERR(mpi_errno, "ICBC_IMPI_SERVER and ICBC_IMPI_CLIENT go together (%s is not set)",
                 server && *server ? "ICBC_IMPI_CLIENT" : "ICBC_IMPI_SERVER");
    if (parse_server(server, &server_sa) != 0)
        IMPI_ERR(mpi_errno, "%s='%s' is not ADDR:PORT (an IPv4 address)",
                 server == file_server ? "the router file's impi server" : "ICBC_IMPI_SERVER",
                 server);
    client = (int) strtol(client_s, &end, 10);
    if (*end != '\0' || client < 0 || client >= IMPI_MAX_CLIENTS)
        IMPI_ERR(mpi_errno, "ICBC_IMPI_CLIENT='%s' is not a client rank 0..%d", client_s,
                 IMPI_MAX_CLIENTS - 1);

    MPIDI_ICBC_impi.client = client;
    MPIR_pmi_view(&MPIDI_ICBC_impi.pmi_rank, &MPIDI_ICBC_impi.pmi_size);

    /* 1. this process's IMPI host port */
    if (MPIR_CVAR_CH4_ICBC_IMPI_HOST && *MPIR_CVAR_CH4_ICBC_IMPI_HOST) {
        if (inet_pton(AF_INET, MPIR_CVAR_CH4_ICBC_IMPI_HOST, &host_addr) != 1)
            IMPI_ERR(mpi_errno, "MPIR_CVAR_CH4_ICBC_IMPI_HOST='%s' is not an IPv4 address",
                     MPIR_CVAR_CH4_ICBC_IMPI_HOST);
    } else if (address_towards(&server_sa, &host_addr) != 0) {
        IMPI_ERR(mpi_errno, "no route to impi-server %s: %s", server, strerror(errno));
    }
    memset(&self, 0, sizeof(self));
    memcpy(self.addr, &host_addr, 4);
    self.pid = (int64_t) getpid();
    self.machine = icbc_bcard_machine_id();
    MPIDI_ICBC_impi.listen_fd = open_port(host_addr, &self.port, why, sizeof(why));
    /* a process that cannot listen still takes part in the exchanges below,
     * so that the whole job fails with its reason instead of waiting */
    if (MPIDI_ICBC_impi.listen_fd < 0)
        self.port = 0;

    /* 2. every process's host */
    entries = MPL_malloc(sizeof(*entries) * MPIDI_ICBC_impi.pmi_size, MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP(entries == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno = MPIR_pmi_allgather(&self, sizeof(self), entries, sizeof(self), MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);

    /* 3, 4. start-up by PMI rank 0, its result to all */
    if (MPIDI_ICBC_impi.pmi_rank == 0) {
        int bad = -1;
        for (int i = 0; i < MPIDI_ICBC_impi.pmi_size && bad < 0; i++)
            if (entries[i].port == 0)
                bad = i;
        if (bad >= 0) {
            snprintf(err, sizeof(err), "process %d of this client has no IMPI host port", bad);
            result = (uint8_t *) MPL_strdup(err);
            result_len = strlen(err) + 1;
        } else {
            run_startup(server, client, entries, MPIDI_ICBC_impi.pmi_size, &result, &result_len,
                        &ok);
        }
    }
    mpi_errno = share_result(&result, &result_len, &ok);
    MPIR_ERR_CHECK(mpi_errno);
    if (MPIDI_ICBC_impi.listen_fd < 0)
        IMPI_ERR(mpi_errno, "%s", why);
    if (!ok) {
        result[result_len - 1] = '\0';
        IMPI_ERR(mpi_errno, "client %d through %s: %s", client, server, (char *) result);
    }

    /* 5. the world */
    if (impi_layout_unpack(result, result_len, &MPIDI_ICBC_impi.layout, err, sizeof(err)) !=
        ICBC_OK)
        IMPI_ERR(mpi_errno, "%s", err);
    if (MPIDI_ICBC_impi.layout.nprocs[client] != (uint32_t) MPIDI_ICBC_impi.pmi_size)
        IMPI_ERR(mpi_errno, "impi-server lists %u processes for client %d, which has %d",
                 MPIDI_ICBC_impi.layout.nprocs[client], client, MPIDI_ICBC_impi.pmi_size);
    MPIDI_ICBC_impi.first_rank = MPIDI_ICBC_impi.layout.first_rank[client];
    if (check_own_nodes(err, sizeof(err)) != 0)
        IMPI_ERR(mpi_errno, "%s", err);
    MPIDI_ICBC_impi.active = 1;
    mpi_errno = lay_out_world();
    MPIR_ERR_CHECK(mpi_errno);

fn_exit:
    MPL_free(entries);
    MPL_free(result);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

void MPIDI_ICBC_impi_finalize(void)
{
    if (MPIDI_ICBC_impi.conn) {
        impi_client_fini(MPIDI_ICBC_impi.conn);
        MPIDI_ICBC_impi.conn = NULL;
    }
    if (MPIDI_ICBC_impi.listen_fd >= 0) {
        close(MPIDI_ICBC_impi.listen_fd);
        MPIDI_ICBC_impi.listen_fd = -1;
    }
    impi_layout_free(&MPIDI_ICBC_impi.layout);
    MPIDI_ICBC_impi.active = 0;
}
