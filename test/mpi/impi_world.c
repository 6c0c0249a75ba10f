/*
 * One process of an ICBC job started as a client of an IMPI job
 * (test/pytest/test_impi_clients.py): MPI_COMM_WORLD spans every client.
 *
 *   mpiexec -n K -genv ICBC_IMPI_SERVER ADDR:PORT -genv ICBC_IMPI_CLIENT C \
 *       impi_world K0 K1 ...        (the process count of each client; "Kr":
 *                                    the client joins through an impi-relay,
 *                                    "KrT" through a trunk of T relays)
 *
 * (or with a router file whose impi entries make the job client 0).
 *
 * Checks, every result on every rank:
 *   - IMPI's attributes on MPI_COMM_WORLD (clients, this client, hosts and
 *     this host: between ICBC clients every process is a host of its own);
 *   - the world's size is the sum of the clients' counts, and this process's
 *     world rank is its client's first rank plus its rank in its own job
 *     (PMI_RANK);
 *   - a ring over the whole world (every neighbour pair, across clients too);
 *   - world rank 0 and the last rank (other clients when there are several)
 *     exchange messages of 0, 4, 1000, 65536, 65537, 100000 and 1 MiB bytes
 *     (IMPI's short and long protocol), standard and synchronous, and a
 *     strided vector; messages with MPI_ANY_SOURCE and MPI_ANY_TAG;
 *   - every other rank sends world rank 0, then the last rank, 192 KiB at
 *     once (several packets of several hosts for one host);
 *   - MPI_Barrier, MPI_Bcast from every root, MPI_Reduce from every root
 *     (also in place), MPI_Reduce with a non-commutative operation,
 *     MPI_Allreduce (also in place) on MPI_COMM_WORLD (IMPI's algorithms),
 *     and MPI_Comm_split with an Allreduce on the halves.
 * Prints "impi_world: rank R of N (client C): ok" and exits 0, or names
 * what was wrong and aborts.
 */
#include "icbc_test.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char *what)
{
    fprintf(stderr, "impi_world: rank %d: %s\n", rank, what);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static unsigned char pat(size_t i, int seed)
{
    return (unsigned char) (i * 131 + (size_t) seed * 7 + (i >> 9));
}

static void fill(unsigned char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(i, seed);
}

static void check(const unsigned char *b, size_t n, int seed, const char *what)
{
    char msg[256];

    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(i, seed)) {
            snprintf(msg, sizeof(msg), "%s: byte %zu of %zu is wrong", what, i, n);
            fail(msg);
        }
}

/* Rank A and rank B exchange every size, each way, standard and synchronous. */
static void pingpong(int a, int b)
{
    static const size_t sizes[] = { 0, 4, 1000, 65536, 65537, 100000, 1 << 20 };
    int peer = rank == a ? b : a;
    unsigned char *buf = malloc(1 << 20);
    char what[64];

    if (rank != a && rank != b)
        return;
    for (int sync = 0; sync < 2; sync++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t n = sizes[k];
            int seed = (int) k + 10 * sync;
            snprintf(what, sizeof(what), "%s %zu bytes", sync ? "MPI_Ssend" : "MPI_Send", n);
            if (rank == a) {
                fill(buf, n, seed);
                if (sync)
                    MPI_Ssend(buf, (int) n, MPI_BYTE, peer, 100 + (int) k, MPI_COMM_WORLD);
                else
                    MPI_Send(buf, (int) n, MPI_BYTE, peer, 100 + (int) k, MPI_COMM_WORLD);
                memset(buf, 0, n);
                MPI_Recv(buf, (int) n, MPI_BYTE, peer, 200 + (int) k, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                check(buf, n, seed + 1000, what);
            } else {
                MPI_Status st;
                int count;
                memset(buf, 0, n);
                MPI_Recv(buf, 1 << 20, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                if (st.MPI_SOURCE != peer || st.MPI_TAG != 100 + (int) k || count != (int) n)
                    fail("status of a message from another client");
                check(buf, n, seed, what);
                fill(buf, n, seed + 1000);
                MPI_Send(buf, (int) n, MPI_BYTE, peer, 200 + (int) k, MPI_COMM_WORLD);
            }
        }

    /* a strided vector: every other int of 40000 */
    MPI_Datatype vec;
    int *v = calloc(80000, sizeof(int));
    MPI_Type_vector(40000, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    if (rank == a) {
        for (int i = 0; i < 80000; i++)
            v[i] = i % 2 ? -1 : i;
        MPI_Send(v, 1, vec, peer, 300, MPI_COMM_WORLD);
    } else {
        for (int i = 0; i < 80000; i++)
            v[i] = -7;
        MPI_Recv(v, 1, vec, peer, 300, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < 80000; i++)
            if (v[i] != (i % 2 ? -7 : i))
                fail("strided vector from another client");
    }
    MPI_Type_free(&vec);
    free(v);
    free(buf);
}

/* Every other rank sends ROOT a message of several IMPI packets at once:
 * packets of several hosts for one host meet on the way (through a relay,
 * on its one connection toward ROOT's host), and each message must arrive
 * whole and unmixed. */
static void fan_in(int root)
{
    enum { FAN_BYTES = 3 * 65536 + 100 };
    char what[64];

    if (rank != root) {
        unsigned char *b = malloc(FAN_BYTES);
        fill(b, FAN_BYTES, 500 + rank);
        MPI_Send(b, FAN_BYTES, MPI_BYTE, root, 400, MPI_COMM_WORLD);
        free(b);
        return;
    }
    unsigned char *b = malloc((size_t) size * FAN_BYTES);
    MPI_Request *req = malloc((size_t) size * sizeof(*req));
    for (int r = 0; r < size; r++)
        req[r] = MPI_REQUEST_NULL;
    for (int r = 0; r < size; r++)
        if (r != root)
            MPI_Irecv(b + (size_t) r * FAN_BYTES, FAN_BYTES, MPI_BYTE, r, 400, MPI_COMM_WORLD,
                      &req[r]);
    MPI_Waitall(size, req, MPI_STATUSES_IGNORE);
    for (int r = 0; r < size; r++)
        if (r != root) {
            snprintf(what, sizeof(what), "fan-in: %d bytes from rank %d", FAN_BYTES, r);
            check(b + (size_t) r * FAN_BYTES, FAN_BYTES, 500 + r, what);
        }
    free(req);
    free(b);
}

static MPI_Datatype pair_type(void)
{
    static MPI_Datatype t = MPI_DATATYPE_NULL;
    if (t == MPI_DATATYPE_NULL) {
        MPI_Type_contiguous(2, MPI_LONG, &t);
        MPI_Type_commit(&t);
    }
    return t;
}

/* "Kr" or "KrT": the client's relays (T, 1 by default); "K": 0. */
static int relay_trunks(const char *count)
{
    const char *r = strchr(count, 'r');

    return r == NULL ? 0 : r[1] ? atoi(r + 1) : 1;
}

int main(int argc, char **argv)
{
    /* a job that joins through its router file's impi entries is client 0 */
    int client = atoi(getenv("ICBC_IMPI_CLIENT") ? getenv("ICBC_IMPI_CLIENT") : "0");
    int job_rank = atoi(getenv("PMI_RANK") ? getenv("PMI_RANK") : "-1");
    int total = 0, first = 0, mine = 0;
    char msg[256];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int c = 0; c + 1 < argc; c++) {
        int k = atoi(argv[c + 1]);
        if (c < client)
            first += k;
        if (c == client)
            mine = k;
        total += k;
    }
    if (client < 0 || job_rank < 0 || mine == 0)
        fail("ICBC_IMPI_CLIENT, PMI_RANK or the client counts are missing");
    if (size != total) {
        snprintf(msg, sizeof(msg), "MPI_COMM_WORLD has %d processes, the clients %d", size, total);
        fail(msg);
    }
    if (rank != first + job_rank) {
        snprintf(msg, sizeof(msg), "world rank %d, expected %d (client %d, job rank %d)", rank,
                 first + job_rank, client, job_rank);
        fail(msg);
    }

    /* IMPI's attributes: between ICBC clients every process is a host of
     * its own (C_ICBC_HOSTS); a relay stands in as one host for a client
     * behind it (seen from outside) and for every other client (seen from
     * behind it) */
    int my_trunks = 0, hosts = 0, my_host = 0;
    for (int c = 0; c + 1 < argc; c++)
        if (c == client)
            my_trunks = relay_trunks(argv[c + 1]);
    for (int c = 0; c + 1 < argc; c++) {
        /* another client as the relays make it: a client behind T relays is
         * min(T, its processes) hosts outside; from behind T relays, every
         * other client is min(T, its hosts outside) personas */
        int n = atoi(argv[c + 1]), t = relay_trunks(argv[c + 1]);
        int out_hosts = t ? (t < n ? t : n) : n;
        int seen = c == client ? n
                   : my_trunks ? (my_trunks < out_hosts ? my_trunks : out_hosts)
                               : out_hosts;
        if (c < client)
            my_host += seen;
        hosts += seen;
    }
    int want_attr[4] = { argc - 1, client, hosts, my_host + job_rank }, *attr, flag;
    int keys[4] = { IMPI_CLIENT_SIZE, IMPI_CLIENT_COLOR, IMPI_HOST_SIZE, IMPI_HOST_COLOR };
    const char *key_names[4] = { "IMPI_CLIENT_SIZE", "IMPI_CLIENT_COLOR", "IMPI_HOST_SIZE",
                                 "IMPI_HOST_COLOR" };
    for (int k = 0; k < 4; k++) {
        MPI_Comm_get_attr(MPI_COMM_WORLD, keys[k], &attr, &flag);
        if (!flag || *attr != want_attr[k]) {
            snprintf(msg, sizeof(msg), "%s is %d (flag %d), expected %d", key_names[k],
                     flag ? *attr : -1, flag, want_attr[k]);
            fail(msg);
        }
    }

    /* a ring over the whole world */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, out = rank * 1000 + 7, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, next, 5, &in, 1, MPI_INT, prev, 5, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (in != prev * 1000 + 7)
        fail("ring: wrong value from the previous rank");

    if (size > 1)
        pingpong(0, size - 1);
    fan_in(0);
    fan_in(size - 1);

    /* collectives on MPI_COMM_WORLD */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int root = 0; root < size; root++) {
        int b[3] = { -1, -1, -1 };
        if (rank == root)
            b[0] = root, b[1] = root * 3, b[2] = 42;
        MPI_Bcast(b, 3, MPI_INT, root, MPI_COMM_WORLD);
        if (b[0] != root || b[1] != root * 3 || b[2] != 42)
            fail("MPI_Bcast across clients");
    }
    long s = rank + 1, sum = 0;
    MPI_Allreduce(&s, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long) size * (size + 1) / 2)
        fail("MPI_Allreduce across clients");
    /* MPI_Reduce from every root, in place at the root too */
    for (int root = 0; root < size; root++) {
        long v[2] = { rank + 1, 2L * rank }, r[2] = { -1, -1 };
        if (rank == root && root % 2) {
            r[0] = v[0], r[1] = v[1];
            MPI_Reduce(MPI_IN_PLACE, r, 2, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
        } else {
            MPI_Reduce(v, r, 2, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
        }
        if (rank == root &&
            (r[0] != (long) size * (size + 1) / 2 || r[1] != (long) size * (size - 1)))
            fail("MPI_Reduce across clients");
    }
    /* a non-commutative operation: ranks' digits concatenated in rank order */
    MPI_Op concat;
    MPI_Op_create(icbc_test_concat_digits, 0, &concat);
    long d[2] = { rank + 1, 1 }, dr[2] = { 0, 0 }, want_d = 0;
    for (int r = 0; r < size; r++)
        want_d = want_d * 10 + r + 1;
    MPI_Reduce(d, dr, 1, pair_type(), concat, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1 && dr[0] != want_d)
        fail("MPI_Reduce with a non-commutative operation: not in rank order");
    MPI_Op_free(&concat);
    /* MPI_Allreduce in place */
    long ip = rank + 1;
    MPI_Allreduce(MPI_IN_PLACE, &ip, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (ip != (long) size * (size + 1) / 2)
        fail("MPI_Allreduce in place across clients");

    MPI_Comm half;
    int hrank, hsize;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    if (hsize != (size + 1 - rank % 2) / 2)
        fail("MPI_Comm_split across clients: size");
    long hs = rank, hsum = 0;
    MPI_Allreduce(&hs, &hsum, 1, MPI_LONG, MPI_SUM, half);
    long want = 0;
    for (int r = rank % 2; r < size; r += 2)
        want += r;
    if (hsum != want)
        fail("MPI_Allreduce on a split communicator");
    MPI_Comm_free(&half);

    printf("impi_world: rank %d of %d (client %d): ok\n", rank, size, client);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
