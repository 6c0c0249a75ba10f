/*
 * The LAM/MPI side of impi_pingpong --coll, compiled with LAM's mpicc and
 * started as one client of an IMPI job (test/pytest/test_impi_lam.py):
 * collectives on MPI_COMM_WORLD across the clients, every root.
 *
 *   lam_coll
 *
 * MPI_Barrier; then for every root: MPI_Bcast of 4 ints (root * 100 + i),
 * MPI_Reduce with MPI_SUM of 4 ints ((rank + 1) * (i + 1) from each rank);
 * then MPI_Allreduce of the same. Every result checked; prints
 * "rank R: coll ok" and exits 0, or names what was wrong and aborts.
 */
#include <mpi.h>
#include <stdio.h>

#define N 4

static void check(int ok, const char *what, int root, int rank)
{
    if (!ok) {
        fprintf(stderr, "lam_coll: rank %d: %s from root %d: wrong result\n", rank, what, root);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    int rank, size, root, i, v[N], s[N], r[N];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < N; i++)
        s[i] = (rank + 1) * (i + 1);
    for (root = 0; root < size; root++) {
        for (i = 0; i < N; i++)
            v[i] = rank == root ? root * 100 + i : -1;
        MPI_Bcast(v, N, MPI_INT, root, MPI_COMM_WORLD);
        for (i = 0; i < N; i++)
            check(v[i] == root * 100 + i, "MPI_Bcast", root, rank);
        for (i = 0; i < N; i++)
            r[i] = -1;
        MPI_Reduce(s, r, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        if (rank == root)
            for (i = 0; i < N; i++)
                check(r[i] == (i + 1) * size * (size + 1) / 2, "MPI_Reduce", root, rank);
    }
    MPI_Allreduce(s, r, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < N; i++)
        check(r[i] == (i + 1) * size * (size + 1) / 2, "MPI_Allreduce", 0, rank);
    printf("rank %d: coll ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
