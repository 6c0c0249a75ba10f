/*
 * Every MPI-1 collective (and MPI_Exscan) on MPI_COMM_WORLD of an IMPI job,
 * from every root, the same program on every client: compiled with LAM's
 * mpicc for a LAM/MPI 7.1.4 client and with ours for an ICBC client
 * (test/pytest/test_impi_lam.py).
 *
 *   coll_all [-a] [-x] [-r ROUNDS] [COUNT...]
 *
 * For each COUNT (ints per block; default 3 and 20000, the second above
 * IMPI's DATALEN of 64 KiB so that blocks travel as long messages):
 * Barrier; Bcast, Reduce (MPI_SUM), Gather, Gatherv, Scatter and Scatterv
 * from every root; Allreduce, Allgather, Allgatherv, Alltoall, Alltoallv,
 * Scan, Exscan and Reduce_scatter. The v-forms give rank r (r % 3) + 1
 * times COUNT ints, placed in reverse rank order with a gap. Every value
 * received is checked; prints "rank R: coll_all ok" and exits 0, or names
 * the collective, root and element that was wrong and aborts.
 *
 * -r runs the whole sequence ROUNDS times (default 1), printing "rank R:
 * round K" after each. -a leaves out Alltoall and Alltoallv. LAM/MPI 7.1.4 cannot run them
 * across IMPI clients, not even between two LAM clients: its persistent
 * receives from another client's processes on a collective context
 * register a second receive for IMPI's synchronous messages on the same
 * context and tag (its lam_pt2impidatasync leaves negative context ids
 * alone), which takes the data, and MPI_Waitall never returns
 * (docs/impi.md, LAM/MPI 7.1.4 as it behaves).
 *
 * -x leaves out MPI_Reduce, MPI_Allreduce and MPI_Reduce_scatter. Across
 * three or more clients LAM/MPI 7.1.4 cannot reduce to a LAM root: its
 * linear reduction among the clients' masters receives every other
 * master's part into one buffer and applies the operation once, after the
 * last (ssi_coll_impi_reduce.c), so all but one client's part are lost.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, with_alltoall = 1, with_reduce = 1;

/* the value rank FROM puts at element I of its block for rank TO */
static int val(int from, int to, int i)
{
    return from * 1000003 + to * 7919 + i;
}

static void check(int ok, const char *what, int root, long i)
{
    if (!ok) {
        fprintf(stderr, "coll_all: rank %d: %s (root %d): wrong element %ld\n", rank, what, root,
                i);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static int vcount(int r, int n)
{
    return (r % 3 + 1) * n;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "coll_all: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Gatherv/Scatterv/Allgatherv layout: blocks in reverse rank order, a gap
 * of 2 ints before each; returns the total length */
static int vlayout(int n, int *counts, int *displs)
{
    int off = 0;
    for (int r = size - 1; r >= 0; r--) {
        off += 2;
        counts[r] = vcount(r, n);
        displs[r] = off;
        off += counts[r];
    }
    return off;
}

static void run(int n)
{
    int total = n * size, root, i, r;
    /* room for the v-forms' blocks of up to 3 COUNT with their gaps */
    size_t room = sizeof(int) * ((size_t) total * 3 + 2 * size);
    int *a = xmalloc(room), *b = xmalloc(room);
    int *counts = xmalloc(sizeof(int) * size), *displs = xmalloc(sizeof(int) * size);
    int *rcounts = xmalloc(sizeof(int) * size), *rdispls = xmalloc(sizeof(int) * size);
    int vlen = vlayout(n, counts, displs);

    MPI_Barrier(MPI_COMM_WORLD);
    for (root = 0; root < size; root++) {
        for (i = 0; i < n; i++)
            a[i] = rank == root ? val(root, 0, i) : -1;
        MPI_Bcast(a, n, MPI_INT, root, MPI_COMM_WORLD);
        for (i = 0; i < n; i++)
            check(a[i] == val(root, 0, i), "MPI_Bcast", root, i);

        for (i = 0; i < n; i++)
            a[i] = (rank + 1) * (i % 100 + 1);
        if (with_reduce)
            MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        for (i = 0; with_reduce && rank == root && i < n; i++)
            check(b[i] == (i % 100 + 1) * size * (size + 1) / 2, "MPI_Reduce", root, i);

        for (i = 0; i < n; i++)
            a[i] = val(rank, root, i);
        for (i = 0; i < total; i++)
            b[i] = -1;
        MPI_Gather(a, n, MPI_INT, b, n, MPI_INT, root, MPI_COMM_WORLD);
        for (i = 0; rank == root && i < total; i++)
            check(b[i] == val(i / n, root, i % n), "MPI_Gather", root, i);

        for (i = 0; i < vcount(rank, n); i++)
            a[i] = val(rank, root, i);
        for (i = 0; i < vlen; i++)
            b[i] = -1;
        MPI_Gatherv(a, vcount(rank, n), MPI_INT, b, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
        for (r = 0; rank == root && r < size; r++) {
            for (i = 0; i < counts[r]; i++)
                check(b[displs[r] + i] == val(r, root, i), "MPI_Gatherv", root, displs[r] + i);
            check(b[displs[r] - 1] == -1, "MPI_Gatherv (gap)", root, displs[r] - 1);
        }

        for (i = 0; rank == root && i < total; i++)
            a[i] = val(root, i / n, i % n);
        for (i = 0; i < n; i++)
            b[i] = -1;
        MPI_Scatter(a, n, MPI_INT, b, n, MPI_INT, root, MPI_COMM_WORLD);
        for (i = 0; i < n; i++)
            check(b[i] == val(root, rank, i), "MPI_Scatter", root, i);

        for (r = 0; rank == root && r < size; r++)
            for (i = 0; i < counts[r]; i++)
                a[displs[r] + i] = val(root, r, i);
        for (i = 0; i < vcount(rank, n); i++)
            b[i] = -1;
        MPI_Scatterv(a, counts, displs, MPI_INT, b, vcount(rank, n), MPI_INT, root, MPI_COMM_WORLD);
        for (i = 0; i < vcount(rank, n); i++)
            check(b[i] == val(root, rank, i), "MPI_Scatterv", root, i);
    }

    for (i = 0; i < n; i++)
        a[i] = (rank + 1) * (i % 100 + 1);
    if (with_reduce)
        MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; with_reduce && i < n; i++)
        check(b[i] == (i % 100 + 1) * size * (size + 1) / 2, "MPI_Allreduce", -1, i);

    for (i = 0; i < n; i++)
        a[i] = val(rank, -1, i);
    MPI_Allgather(a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD);
    for (i = 0; i < total; i++)
        check(b[i] == val(i / n, -1, i % n), "MPI_Allgather", -1, i);

    for (i = 0; i < vcount(rank, n); i++)
        a[i] = val(rank, -1, i);
    for (i = 0; i < vlen; i++)
        b[i] = -1;
    MPI_Allgatherv(a, vcount(rank, n), MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
    for (r = 0; r < size; r++)
        for (i = 0; i < counts[r]; i++)
            check(b[displs[r] + i] == val(r, -1, i), "MPI_Allgatherv", -1, displs[r] + i);

    if (!with_alltoall)
        goto scans;
    for (i = 0; i < total; i++)
        a[i] = val(rank, i / n, i % n);
    MPI_Alltoall(a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD);
    for (i = 0; i < total; i++)
        check(b[i] == val(i / n, rank, i % n), "MPI_Alltoall", -1, i);

    /* rank r sends vcount(r, n) ints to every rank */
    for (r = 0; r < size; r++) {
        counts[r] = vcount(rank, n);
        displs[r] = r * 3 * n;
        rcounts[r] = vcount(r, n);
        rdispls[r] = (size - 1 - r) * 3 * n;
        for (i = 0; i < counts[r]; i++)
            a[displs[r] + i] = val(rank, r, i);
    }
    for (i = 0; i < total * 3; i++)
        b[i] = -1;
    MPI_Alltoallv(a, counts, displs, MPI_INT, b, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
    for (r = 0; r < size; r++)
        for (i = 0; i < rcounts[r]; i++)
            check(b[rdispls[r] + i] == val(r, rank, i), "MPI_Alltoallv", -1, rdispls[r] + i);

scans:
    for (i = 0; i < n; i++)
        a[i] = (rank + 1) * (i % 100 + 1);
    MPI_Scan(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < n; i++)
        check(b[i] == (i % 100 + 1) * (rank + 1) * (rank + 2) / 2, "MPI_Scan", -1, i);
    MPI_Exscan(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; rank > 0 && i < n; i++)
        check(b[i] == (i % 100 + 1) * rank * (rank + 1) / 2, "MPI_Exscan", -1, i);

    /* rank r gets vcount(r, n) sums */
    total = 0;
    for (r = 0; r < size; r++) {
        counts[r] = vcount(r, n);
        total += counts[r];
    }
    for (i = 0; i < total; i++)
        a[i] = (rank + 1) * (i % 100 + 1);
    if (with_reduce)
        MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0, r = 0; r < rank; r++)
        i += counts[r];
    for (int k = 0; with_reduce && k < counts[rank]; k++)
        check(b[k] == ((i + k) % 100 + 1) * size * (size + 1) / 2, "MPI_Reduce_scatter", -1, k);

    free(a);
    free(b);
    free(counts);
    free(displs);
    free(rcounts);
    free(rdispls);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int k = 1, rounds = 1;
    for (; k < argc && argv[k][0] == '-'; k++) {
        if (strcmp(argv[k], "-a") == 0)
            with_alltoall = 0;
        else if (strcmp(argv[k], "-x") == 0)
            with_reduce = 0;
        else if (strcmp(argv[k], "-r") == 0 && k + 1 < argc)
            rounds = atoi(argv[++k]);
    }
    for (int round = 1; round <= rounds; round++) {
        if (k < argc)
            for (int j = k; j < argc; j++)
                run(atoi(argv[j]));
        else {
            run(3);
            run(20000);
        }
        printf("rank %d: round %d\n", rank, round);
        fflush(stdout);
    }
    printf("rank %d: coll_all ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
