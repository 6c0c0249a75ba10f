/*
 * The collectives of a communicator that spans IMPI clients beyond Barrier,
 * Bcast, Reduce and Allreduce (test/pytest/test_impi_clients.py): Gather(v),
 * Scatter(v), Allgather(v), Alltoall(v), Scan, Exscan, Reduce_scatter and
 * Reduce_scatter_block, from every root where they have one, in place where
 * MPI allows it, with a strided datatype on one side, counts that differ
 * per rank (zero for some), and a non-commutative operation for the scans
 * and Reduce_scatter. Each runs on MPI_COMM_WORLD (clients in rank blocks)
 * and on a communicator split from it in reverse rank order with the odd
 * ranks first, whose ranks alternate between clients.
 *
 *   mpiexec -n K -genv ICBC_IMPI_SERVER ADDR:PORT -genv ICBC_IMPI_CLIENT C \
 *       impi_coll
 *
 * Prints "impi_coll: rank R of N: ok, C checks" and exits 0, or names
 * what was wrong and aborts.
 */
#include "icbc_test.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, checks;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "impi_coll: rank %d: ", wrank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        fflush(stderr);                                                                            \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                              \
    } while (0)

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond))                                                                               \
            FAIL(__VA_ARGS__);                                                                     \
    } while (0)

/* The value element I of rank R's block contributes. */
static int val(int r, int i)
{
    return r * 1000 + i + 1;
}

/* Count of rank R's block in the v-collectives: 0 for every third rank. */
static int vcount(int r)
{
    return r % 3 == 1 ? 0 : 2 + r % 4;
}

/* The receive layout of the v-collectives: rank r's vcount(r) ints, placed
 * in reverse rank order with a gap of one after each; returns the length. */
static int reverse_layout(int size, int *counts, int *displs)
{
    int off = 0;
    for (int r = size - 1; r >= 0; r--) {
        counts[r] = vcount(r);
        displs[r] = off;
        off += counts[r] + 1;
    }
    return off;
}

static void gathers(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *recv = malloc(sizeof(int) * 2 * size * 8), *send = malloc(sizeof(int) * 16);
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    MPI_Datatype strided; /* 3 ints, every other one: what the receiver sees as 3 MPI_INT */
    MPI_Type_vector(3, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);

    for (int root = 0; root < size; root++) {
        /* Gather: 3 ints from each, the root's in place for odd roots */
        for (int i = 0; i < 6; i++)
            send[i] = i % 2 ? -5 : val(rank, i / 2);
        for (int i = 0; i < 3 * size; i++)
            recv[i] = -1;
        if (rank == root && root % 2) {
            for (int i = 0; i < 3; i++)
                recv[3 * rank + i] = val(rank, i);
            MPI_Gather(MPI_IN_PLACE, 3, MPI_INT, recv, 3, MPI_INT, root, comm);
        } else {
            MPI_Gather(send, 1, strided, recv, 3, MPI_INT, root, comm);
        }
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < 3; i++)
                    EXPECT(recv[3 * r + i] == val(r, i), "%s: MPI_Gather to %d: block of %d", name,
                           root, r);

        /* Gatherv: rank r's vcount(r) ints, placed in reverse rank order
         * with a gap */
        int off = reverse_layout(size, counts, displs);
        for (int i = 0; i < vcount(rank); i++)
            send[i] = val(rank, i);
        for (int i = 0; i < off; i++)
            recv[i] = -1;
        MPI_Gatherv(send, vcount(rank), MPI_INT, recv, counts, displs, MPI_INT, root, comm);
        if (rank == root)
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < counts[r]; i++)
                    EXPECT(recv[displs[r] + i] == val(r, i), "%s: MPI_Gatherv to %d: block of %d",
                           name, root, r);
                EXPECT(recv[displs[r] + counts[r]] == -1, "%s: MPI_Gatherv wrote past block %d",
                       name, r);
            }

        /* Scatter: the root's blocks to every rank, in place at even roots */
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 3; i++)
                recv[3 * r + i] = rank == root ? val(r, i) : -1;
        int got[6] = { -1, -1, -1, -1, -1, -1 };
        if (rank == root && root % 2 == 0) {
            MPI_Scatter(recv, 3, MPI_INT, MPI_IN_PLACE, 3, MPI_INT, root, comm);
            for (int i = 0; i < 3; i++)
                got[2 * i] = recv[3 * rank + i];
        } else {
            MPI_Scatter(recv, 3, MPI_INT, got, 1, strided, root, comm);
        }
        for (int i = 0; i < 3; i++)
            EXPECT(got[2 * i] == val(rank, i), "%s: MPI_Scatter from %d", name, root);
        EXPECT(got[1] == -1 && got[3] == -1, "%s: MPI_Scatter wrote into the strided gaps", name);

        /* Scatterv: the Gatherv layout, back */
        for (int r = 0; r < size; r++)
            for (int i = 0; i < counts[r]; i++)
                recv[displs[r] + i] = rank == root ? val(r, i) + 7 : -1;
        for (int i = 0; i < 8; i++)
            send[i] = -1;
        MPI_Scatterv(recv, counts, displs, MPI_INT, send, vcount(rank), MPI_INT, root, comm);
        for (int i = 0; i < vcount(rank); i++)
            EXPECT(send[i] == val(rank, i) + 7, "%s: MPI_Scatterv from %d", name, root);
        EXPECT(send[vcount(rank)] == -1, "%s: MPI_Scatterv wrote past the block", name);
    }

    /* Allgather, also in place */
    for (int i = 0; i < 3; i++)
        send[i] = val(rank, i);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 3 * size; i++)
            recv[i] = pass && i / 3 == rank ? val(rank, i % 3) : -1;
        MPI_Allgather(pass ? MPI_IN_PLACE : send, 3, MPI_INT, recv, 3, MPI_INT, comm);
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 3; i++)
                EXPECT(recv[3 * r + i] == val(r, i), "%s: MPI_Allgather%s: block of %d", name,
                       pass ? " in place" : "", r);
    }
    /* Allgatherv, also in place */
    int off = reverse_layout(size, counts, displs);
    for (int i = 0; i < vcount(rank); i++)
        send[i] = val(rank, i);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < off; i++)
            recv[i] = -1;
        if (pass)
            memcpy(recv + displs[rank], send, sizeof(int) * counts[rank]);
        MPI_Allgatherv(pass ? MPI_IN_PLACE : send, vcount(rank), MPI_INT, recv, counts, displs,
                       MPI_INT, comm);
        for (int r = 0; r < size; r++) {
            for (int i = 0; i < counts[r]; i++)
                EXPECT(recv[displs[r] + i] == val(r, i), "%s: MPI_Allgatherv%s: block of %d", name,
                       pass ? " in place" : "", r);
            EXPECT(recv[displs[r] + counts[r]] == -1, "%s: MPI_Allgatherv wrote past block %d",
                   name, r);
        }
    }
    MPI_Type_free(&strided);
    free(recv);
    free(send);
    free(counts);
    free(displs);
}

/* Element I of what rank FROM sends to rank TO. */
static int a2a(int from, int to, int i)
{
    return from * 100000 + to * 100 + i;
}

static void alltoalls(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *send = malloc(sizeof(int) * 8 * size), *recv = malloc(sizeof(int) * 8 * size);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);

    for (int pass = 0; pass < 2; pass++) {
        for (int to = 0; to < size; to++)
            for (int i = 0; i < 2; i++)
                send[2 * to + i] = a2a(rank, to, i);
        if (pass)
            memcpy(recv, send, sizeof(int) * 2 * size);
        MPI_Alltoall(pass ? MPI_IN_PLACE : send, 2, MPI_INT, recv, 2, MPI_INT, comm);
        for (int from = 0; from < size; from++)
            for (int i = 0; i < 2; i++)
                EXPECT(recv[2 * from + i] == a2a(from, rank, i), "%s: MPI_Alltoall%s from %d", name,
                       pass ? " in place" : "", from);
    }
    /* Alltoallv: (from + to) % 4 elements per pair, blocks in reverse order */
    int soff = 0, roff = 0;
    for (int r = size - 1; r >= 0; r--) {
        sc[r] = (rank + r) % 4;
        sd[r] = soff;
        soff += sc[r];
        rc[r] = (r + rank) % 4;
        rd[r] = roff;
        roff += rc[r] + 1;
    }
    for (int to = 0; to < size; to++)
        for (int i = 0; i < sc[to]; i++)
            send[sd[to] + i] = a2a(rank, to, i);
    for (int i = 0; i < roff; i++)
        recv[i] = -1;
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
    for (int from = 0; from < size; from++) {
        for (int i = 0; i < rc[from]; i++)
            EXPECT(recv[rd[from] + i] == a2a(from, rank, i), "%s: MPI_Alltoallv from %d", name,
                   from);
        EXPECT(recv[rd[from] + rc[from]] == -1, "%s: MPI_Alltoallv wrote past block %d", name,
               from);
    }
    /* in place (send and receive layouts are the same) */
    for (int r = 0; r < size; r++) {
        rc[r] = (r + rank) % 4;
        rd[r] = 4 * r;
        for (int i = 0; i < rc[r]; i++)
            recv[rd[r] + i] = a2a(rank, r, i);
    }
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT, comm);
    for (int from = 0; from < size; from++)
        for (int i = 0; i < rc[from]; i++)
            EXPECT(recv[rd[from] + i] == a2a(from, rank, i), "%s: MPI_Alltoallv in place from %d",
                   name, from);
    free(send);
    free(recv);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void scans(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Datatype pair;
    MPI_Op concat;
    MPI_Type_contiguous(2, MPI_LONG, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(icbc_test_concat_digits, 0, &concat);

    /* the digits of ranks 0..r, in rank order: size <= 18 fits a long */
    long want = 0, before = 0;
    for (int r = 0; r <= rank; r++) {
        before = want;
        want = want * 10 + r % 9 + 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        long d[2] = { rank % 9 + 1, 1 }, out[2] = { -1, -1 };
        if (pass) {
            out[0] = d[0], out[1] = d[1];
            MPI_Scan(MPI_IN_PLACE, out, 1, pair, concat, comm);
        } else {
            MPI_Scan(d, out, 1, pair, concat, comm);
        }
        EXPECT(out[0] == want, "%s: MPI_Scan%s (non-commutative) gives %ld, not %ld", name,
               pass ? " in place" : "", out[0], want);
        if (pass) {
            out[0] = d[0], out[1] = d[1];
            MPI_Exscan(MPI_IN_PLACE, out, 1, pair, concat, comm);
        } else {
            out[0] = out[1] = -1;
            MPI_Exscan(d, out, 1, pair, concat, comm);
        }
        if (rank > 0)
            EXPECT(out[0] == before, "%s: MPI_Exscan%s (non-commutative) gives %ld, not %ld", name,
                   pass ? " in place" : "", out[0], before);
    }
    long s = rank + 1, sum = -1;
    MPI_Scan(&s, &sum, 1, MPI_LONG, MPI_SUM, comm);
    EXPECT(sum == (long) (rank + 1) * (rank + 2) / 2, "%s: MPI_Scan with MPI_SUM", name);

    /* Reduce_scatter: rank r gets (r % 3) + 1 elements of the sum vector */
    int *counts = malloc(sizeof(int) * size), total = 0;
    for (int r = 0; r < size; r++)
        total += counts[r] = r % 3 + 1;
    long *in = malloc(sizeof(long) * total), *res = malloc(sizeof(long) * total);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < total; i++)
            in[i] = (long) (rank + 1) * (i + 1);
        for (int i = 0; i < total; i++)
            res[i] = -1;
        if (pass)
            MPI_Reduce_scatter(MPI_IN_PLACE, in, counts, MPI_LONG, MPI_SUM, comm);
        else
            MPI_Reduce_scatter(in, res, counts, MPI_LONG, MPI_SUM, comm);
        long *mine = pass ? in : res;
        int first = 0;
        for (int r = 0; r < rank; r++)
            first += counts[r];
        for (int i = 0; i < counts[rank]; i++)
            EXPECT(mine[i] == (long) size * (size + 1) / 2 * (first + i + 1),
                   "%s: MPI_Reduce_scatter%s element %d", name, pass ? " in place" : "", i);
    }
    /* Reduce_scatter_block with the non-commutative operation */
    long *pin = malloc(sizeof(long) * 2 * size), pout[2] = { -1, -1 };
    for (int r = 0; r < size; r++)
        pin[2 * r] = rank % 9 + 1, pin[2 * r + 1] = 1;
    MPI_Reduce_scatter_block(pin, pout, 1, pair, concat, comm);
    long all = 0;
    for (int r = 0; r < size; r++)
        all = all * 10 + r % 9 + 1;
    EXPECT(pout[0] == all, "%s: MPI_Reduce_scatter_block (non-commutative) gives %ld, not %ld",
           name, pout[0], all);

    free(pin);
    free(in);
    free(res);
    free(counts);
    MPI_Op_free(&concat);
    MPI_Type_free(&pair);
}

int main(int argc, char **argv)
{
    int size;
    MPI_Comm mixed;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 18)
        FAIL("at most 18 processes (the digits of the scans must fit a long)");
    /* odd world ranks first, each half in reverse: ranks alternate between
     * clients */
    MPI_Comm_split(MPI_COMM_WORLD, 0, (wrank % 2 ? 0 : size) + size - wrank, &mixed);

    gathers(MPI_COMM_WORLD, "world");
    alltoalls(MPI_COMM_WORLD, "world");
    scans(MPI_COMM_WORLD, "world");
    gathers(mixed, "mixed");
    alltoalls(mixed, "mixed");
    scans(mixed, "mixed");
    MPI_Comm_free(&mixed);

    printf("impi_coll: rank %d of %d: ok, %d checks\n", wrank, size, checks);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
