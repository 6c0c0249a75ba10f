/*
 * Sending to another cluster at a paced rate (docs/pacing.md).
 *
 *   pacing_rate [--matb BITS] [--bytes N] [--size S] [--alltoall]
 *
 * Without --alltoall, rank r sends N bytes in messages of S bytes to rank
 * r ^ 1 (in the other cluster with the testbed's alternating hosts) and
 * receives as much from it, every byte checked. With --matb the attribute
 * ICBC_PACING_MATB is set on MPI_COMM_WORLD and the messages go on a
 * duplicate of it (the attribute must follow the duplicate).
 *
 * With --alltoall, MPI_Alltoall of S bytes per pair is repeated until each
 * process has sent N bytes to processes of other clusters (half the ranks,
 * with alternating hosts), every block checked; rate management is the
 * CVARs' (MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL).
 *
 * Rank 0 prints, for each rank, the bytes it sent to the other cluster, then
 * "seconds T" (the slowest rank's time) and "No Errors" when every byte
 * checked.
 */
#include "icbc_test.h"

#include <icbc.h>

static int setup_comm(long long matb, MPI_Comm *comm)
{
    if (matb >= 0) {
        int rc = MPI_Comm_set_attr(MPI_COMM_WORLD, ICBC_PACING_MATB, (void *) (MPI_Aint) matb);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_Comm_dup(MPI_COMM_WORLD, comm);
}

/* Up to WINDOW messages each way at once, so that small messages are not
 * held back by the round trip. */
#define WINDOW 64

static double exchange(MPI_Comm comm, int rank, size_t bytes, size_t size, size_t *remote)
{
    int peer = rank ^ 1;
    size_t n = (bytes + size - 1) / size;
    unsigned char *sbuf = malloc(size * WINDOW), *rbuf = malloc(size * WINDOW);
    MPI_Request rq[2 * WINDOW];
    MPI_Status st[2 * WINDOW];
    double t;

    CHECK(sbuf && rbuf, "out of memory");
    MPI_Barrier(comm);
    t = MPI_Wtime();
    for (size_t i = 0; i < n; i += WINDOW) {
        size_t w = n - i < WINDOW ? n - i : WINDOW;
        for (size_t k = 0; k < w; k++) {
            fill_pattern(sbuf + k * size, size, (int) (rank * 1000003 + i + k));
            MPI_Irecv(rbuf + k * size, (int) size, MPI_BYTE, peer, 0, comm, &rq[2 * k]);
            MPI_Isend(sbuf + k * size, (int) size, MPI_BYTE, peer, 0, comm, &rq[2 * k + 1]);
        }
        MPI_Waitall((int) (2 * w), rq, st);
        for (size_t k = 0; k < w; k++)
            CHECK(check_pattern(rbuf + k * size, size, (int) (peer * 1000003 + i + k)) ==
                      (size_t) -1,
                  "message %zu wrong", i + k);
    }
    t = MPI_Wtime() - t;
    *remote = n * size;
    free(sbuf);
    free(rbuf);
    return t;
}

static double alltoall(MPI_Comm comm, int rank, int np, size_t bytes, size_t size, size_t *remote)
{
    unsigned char *sbuf = malloc(size * np), *rbuf = malloc(size * np);
    int nremote = np / 2; /* alternating hosts: the ranks of the other parity */
    size_t rounds = (bytes + size * nremote - 1) / (size * nremote);
    double t;

    CHECK(sbuf && rbuf && nremote > 0, "out of memory or one rank");
    MPI_Barrier(comm);
    t = MPI_Wtime();
    for (size_t i = 0; i < rounds; i++) {
        for (int p = 0; p < np; p++)
            fill_pattern(sbuf + p * size, size, (int) ((rank * 131 + p) * 1009 + i));
        MPI_Alltoall(sbuf, (int) size, MPI_BYTE, rbuf, (int) size, MPI_BYTE, comm);
        for (int p = 0; p < np; p++)
            CHECK(check_pattern(rbuf + p * size, size, (int) ((p * 131 + rank) * 1009 + i)) ==
                      (size_t) -1,
                  "round %zu block from %d wrong", i, p);
    }
    t = MPI_Wtime() - t;
    *remote = rounds * size * nremote;
    free(sbuf);
    free(rbuf);
    return t;
}

int main(int argc, char **argv)
{
    long long matb = -1;
    size_t bytes = 8 << 20, size = 1 << 20, remote = 0;
    int all = 0, rank, np, errs;
    double t, tmax;
    MPI_Comm comm;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--matb") && i + 1 < argc)
            matb = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = (size_t) atoll(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = (size_t) atoll(argv[++i]);
        else if (!strcmp(argv[i], "--alltoall"))
            all = 1;
    }
    if (np % 2 != 0 || size == 0) {
        if (rank == 0)
            fprintf(stderr, "pacing_rate: an even number of ranks and --size > 0\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CHECK(setup_comm(matb, &comm) == MPI_SUCCESS, "setting the attribute failed");
    if (matb >= 0) {
        void *v;
        int flag = 0;
        MPI_Comm_get_attr(comm, ICBC_PACING_MATB, &v, &flag);
        CHECK(flag && (MPI_Aint) v == (MPI_Aint) matb, "the duplicate lost the attribute");
    }
    t = all ? alltoall(comm, rank, np, bytes, size, &remote)
            : exchange(comm, rank, bytes, size, &remote);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* rank 0 prints every rank's line: lines of several ranks may reach
     * mpiexec's output interleaved within a line */
    double mine[2] = { (double) remote, t }, *all_of = rank == 0 ? malloc(sizeof(mine) * np) : NULL;
    MPI_Gather(mine, 2, MPI_DOUBLE, all_of, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < np; r++)
        printf("rank %d: %.0f bytes to the other cluster in %.3f s (%.1f Mbit/s)\n", r,
               all_of[2 * r], all_of[2 * r + 1], all_of[2 * r] * 8 / all_of[2 * r + 1] / 1e6);
    free(all_of);
    MPI_Comm_free(&comm);
    MPI_Reduce(&icbc_test_errors, &errs, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("seconds %.3f\n", tmax);
        if (errs == 0)
            printf("No Errors\n");
        else
            printf("Found %d errors\n", errs);
    }
    MPI_Finalize();
    return 0;
}
