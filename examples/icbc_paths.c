/*
 * Cross-cluster demo job: where every rank runs, which path icbc takes to each peer, and
 * what that path gives. Rank 0 exchanges an 8-byte ping-pong and a 1 MiB transfer with
 * the first rank of every other node and prints one line per peer: node, cluster, path,
 * one-way latency, bandwidth, payload check.
 *
 * The path is the one the netmod assigns (docs/architecture.md, Paths): same node -> shm,
 * same cluster -> direct, other cluster -> routed (policies aggregate, static), tcp-direct
 * (alltoall) or tcp (policy tcp, also inside a cluster). The policy is MPIR_CVAR_CH4_ICBC_POLICY from the
 * environment, else the router file's policy line ($ICBC_ROUTERFILE), else aggregate (the
 * netmod's order). The icbc control variables the library exposes through MPI_T are listed
 * too; they also tell an icbc library from another MPI. (MPICH 4.0.2's MPI_T reads string
 * variables as their defaults, so the policy is not taken from there.)
 *
 * Clusters come from ICBC_CLUSTER (set by icbc-testbed's launcher), else the node name's
 * leading letters (a0 -> a). Ends with "paths succeeded" or "paths FAILED".
 */
#include <mpi.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_LEN 64
#define BIG (1 << 20)
#define PING_ITERS 50
#define BIG_ITERS 4

struct where {
    char node[NAME_LEN];
    char cluster[NAME_LEN];
};

static void whereami(struct where *w)
{
    const char *n = getenv("ICBC_NODE"), *c = getenv("ICBC_CLUSTER");
    memset(w, 0, sizeof(*w));
    if (n && *n)
        snprintf(w->node, NAME_LEN, "%s", n);
    else
        gethostname(w->node, NAME_LEN - 1);
    if (c && *c) {
        snprintf(w->cluster, NAME_LEN, "%s", c);
    } else {
        size_t k = 0;
        while (w->node[k] && isalpha((unsigned char) w->node[k]) && k < NAME_LEN - 1)
            k++;
        memcpy(w->cluster, w->node, k ? k : strlen(w->node));
    }
}

/* Prints the icbc control variables the library has. Returns how many there are (0: the
 * library has no icbc netmod). */
static int icbc_cvars(void)
{
    int provided, num;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return 0;
    MPI_T_cvar_get_num(&num);
    int listed = 0;
    for (int i = 0; i < num; i++) {
        char name[256], desc[8];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) !=
                MPI_SUCCESS ||
            strncmp(name, "MPIR_CVAR_CH4_ICBC_", 19) != 0 || bind != MPI_T_BIND_NO_OBJECT)
            continue;
        MPI_T_cvar_handle h;
        int count;
        char value[64] = "?", *text = NULL;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS)
            continue;
        if (dt == MPI_CHAR && count > 0 && (text = calloc((size_t) count + 1, 1)) != NULL) {
            MPI_T_cvar_read(h, text);
        } else if (dt == MPI_INT && count == 1) {
            int v;
            MPI_T_cvar_read(h, &v);
            snprintf(value, sizeof(value), "%d", v);
        } else if (dt == MPI_UNSIGNED && count == 1) {
            unsigned v;
            MPI_T_cvar_read(h, &v);
            snprintf(value, sizeof(value), "%u", v);
        }
        MPI_T_cvar_handle_free(&h);
        printf("%s %s=%s", listed++ ? "," : "icbc control variables (MPI_T):", name + 19,
               text ? text : value);
        free(text);
    }
    if (listed)
        printf("\n");
    MPI_T_finalize();
    return listed;
}

/* The policy line of the router file, if any. */
static int routerfile_policy(char *policy, int len)
{
    const char *path = getenv("ICBC_ROUTERFILE");
    char line[512], word[64];
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f))
        if (sscanf(line, " policy %63s", word) == 1) {
            snprintf(policy, len, "%s", word);
            found = 1;
        }
    if (f)
        fclose(f);
    return found;
}

static const char *path_to(const struct where *me, const struct where *peer, const char *policy)
{
    if (!strcmp(policy, "-"))
        return "- (not icbc)";
    if (!strcmp(me->node, peer->node))
        return "shm";
    if (!strcmp(policy, "tcp"))
        return "tcp";
    if (!strcmp(me->cluster, peer->cluster))
        return "direct";
    if (!strcmp(policy, "alltoall"))
        return "tcp-direct";
    if (!strcmp(policy, "static"))
        return "routed (one router)";
    return "routed (striped)";
}

static void fill(unsigned char *b, int n, int seed)
{
    for (int i = 0; i < n; i++)
        b[i] = (unsigned char) (i * 31 + seed * 7 + (i >> 9));
}

static int check(const unsigned char *b, int n, int seed)
{
    for (int i = 0; i < n; i++)
        if (b[i] != (unsigned char) (i * 31 + seed * 7 + (i >> 9)))
            return 1;
    return 0;
}

/* Ping-pong and bulk transfer between rank 0 and `peer`; both call it. Returns the number
 * of corrupt payloads seen by this rank; rank 0 gets the timings. */
static int measure(int rank, int peer, unsigned char *buf, double *lat_us, double *mbs)
{
    int other = rank == 0 ? peer : 0, bad = 0;
    double t0;
    fill(buf, 8, peer);
    t0 = MPI_Wtime();
    for (int i = 0; i < PING_ITERS; i++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, other, 1, MPI_COMM_WORLD);
        }
    }
    *lat_us = (MPI_Wtime() - t0) / PING_ITERS / 2 * 1e6;
    bad += check(buf, 8, peer);
    /* bulk: rank 0 sends BIG_ITERS messages, the peer acknowledges the last */
    t0 = MPI_Wtime();
    for (int i = 0; i < BIG_ITERS; i++) {
        if (rank == 0) {
            fill(buf, BIG, peer + i);
            MPI_Send(buf, BIG, MPI_BYTE, other, 2, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, BIG, MPI_BYTE, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += check(buf, BIG, peer + i);
        }
    }
    if (rank == 0)
        MPI_Recv(NULL, 0, MPI_BYTE, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(NULL, 0, MPI_BYTE, other, 3, MPI_COMM_WORLD);
    *mbs = (double) BIG * BIG_ITERS / (MPI_Wtime() - t0) / 1e6;
    return bad;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    struct where me, *all;
    char policy[64] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    whereami(&me);
    all = malloc(sizeof(*all) * size);
    MPI_Allgather(&me, sizeof(me), MPI_BYTE, all, sizeof(me), MPI_BYTE, MPI_COMM_WORLD);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl)
            *nl = '\0';
        printf("%s\n", lib);
        const char *env = getenv("MPIR_CVAR_CH4_ICBC_POLICY");
        if (!icbc_cvars()) {
            snprintf(policy, sizeof(policy), "-");
            printf("no icbc control variables: not an icbc library, no paths to show\n");
        } else if (env && *env) {
            printf("policy %s (MPIR_CVAR_CH4_ICBC_POLICY)\n",
                   strncpy(policy, env, sizeof(policy) - 1));
        } else if (routerfile_policy(policy, sizeof(policy))) {
            printf("policy %s (the router file's)\n", policy);
        } else {
            printf("policy %s (default)\n", strcpy(policy, "aggregate"));
        }
        printf("%d ranks:", size);
        for (int r = 0; r < size; r++)
            printf(" %d@%s/%s", r, all[r].node, all[r].cluster);
        printf("\n%-5s %-6s %-8s %-22s %12s %10s  %s\n", "peer", "node", "cluster", "path",
               "8 B one-way", "1 MiB", "payload");
    }
    MPI_Bcast(policy, sizeof(policy), MPI_CHAR, 0, MPI_COMM_WORLD);

    unsigned char *buf = malloc(BIG);
    for (int peer = 1; peer < size; peer++) {
        int first_on_node = 1;
        for (int q = 0; q < peer; q++)
            if (!strcmp(all[q].node, all[peer].node))
                first_on_node = 0;
        if (!first_on_node)
            continue;
        double lat = 0, mbs = 0;
        int b = 0;
        if (rank == 0 || rank == peer)
            b = measure(rank, peer, buf, &lat, &mbs);
        bad += b;
        int peer_bad = 0;
        MPI_Reduce(&b, &peer_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-5d %-6s %-8s %-22s %9.1f us %5.1f MB/s  %s\n", peer, all[peer].node,
                   all[peer].cluster, path_to(&me, &all[peer], policy), lat, mbs,
                   peer_bad ? "CORRUPT" : "verified");
    }
    free(buf);
    int total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("paths %s\n", total == 0 ? "succeeded" : "FAILED");
    free(all);
    MPI_Finalize();
    return total != 0;
}
