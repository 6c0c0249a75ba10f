/*
 * One-sided and collective traffic over the netmod: large puts, gets and
 * accumulates between every pair of ranks, then collectives whose payloads
 * cross the rendezvous threshold. Every result is checked.
 */
#include "icbc_test.h"

#define WIN_ELEMS (1 << 18) /* 2 MiB of doubles per rank */

static void rma(int rank, int size)
{
    double *base;
    MPI_Win win;
    MPI_Win_allocate(WIN_ELEMS * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &base, &win);
    for (int i = 0; i < WIN_ELEMS; i++)
        base[i] = -1;
    int chunk = WIN_ELEMS / size;
    double *src = malloc(chunk * sizeof(double));
    for (int i = 0; i < chunk; i++)
        src[i] = rank * 1e6 + i;

    /* every rank writes its chunk into slot `rank` of every other rank */
    MPI_Win_fence(0, win);
    for (int t = 0; t < size; t++)
        MPI_Put(src, chunk, MPI_DOUBLE, t, (MPI_Aint) rank * chunk, chunk, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    for (int s = 0; s < size; s++) {
        int bad = -1;
        for (int i = 0; i < chunk && bad < 0; i++)
            if (base[s * chunk + i] != s * 1e6 + i)
                bad = i;
        CHECK(bad < 0, "put from %d: element %d wrong", s, bad);
    }

    /* read back the neighbour's whole window with one get */
    double *got = malloc(WIN_ELEMS * sizeof(double));
    int nb = (rank + 1) % size;
    MPI_Win_lock(MPI_LOCK_SHARED, nb, 0, win);
    MPI_Get(got, WIN_ELEMS, MPI_DOUBLE, nb, 0, WIN_ELEMS, MPI_DOUBLE, win);
    MPI_Win_unlock(nb, win);
    for (int s = 0; s < size; s++) {
        int bad = -1;
        for (int i = 0; i < chunk && bad < 0; i++)
            if (got[s * chunk + i] != s * 1e6 + i)
                bad = i;
        CHECK(bad < 0, "get of slot %d: element %d wrong", s, bad);
    }

    /* everybody adds 1 to every element of rank 0's window */
    MPI_Win_fence(0, win);
    double *ones = malloc(WIN_ELEMS * sizeof(double));
    for (int i = 0; i < WIN_ELEMS; i++)
        ones[i] = 1;
    MPI_Accumulate(ones, WIN_ELEMS, MPI_DOUBLE, 0, 0, WIN_ELEMS, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_fence(0, win);
    if (rank == 0) {
        int bad = -1;
        for (int s = 0; s < size; s++)
            for (int i = 0; i < chunk && bad < 0; i++)
                if (base[s * chunk + i] != s * 1e6 + i + size)
                    bad = s * chunk + i;
        CHECK(bad < 0, "accumulate: element %d wrong", bad);
    }
    MPI_Win_free(&win);
    free(src);
    free(got);
    free(ones);
}

static void collectives(int rank, int size)
{
    const int counts[] = { 1, 100, 5000, 300000 };
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        int n = counts[k];
        long *v = malloc(n * sizeof(long)), *r = malloc(n * sizeof(long));
        for (int i = 0; i < n; i++)
            v[i] = (long) rank * i + 1;
        MPI_Allreduce(v, r, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        int bad = -1;
        for (int i = 0; i < n && bad < 0; i++)
            if (r[i] != (long) i * size * (size - 1) / 2 + size)
                bad = i;
        CHECK(bad < 0, "allreduce n=%d: element %d wrong", n, bad);

        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++)
                r[i] = (rank == root) ? (long) root * 7 + i : 0;
            MPI_Bcast(r, n, MPI_LONG, root, MPI_COMM_WORLD);
            bad = -1;
            for (int i = 0; i < n && bad < 0; i++)
                if (r[i] != (long) root * 7 + i)
                    bad = i;
            CHECK(bad < 0, "bcast n=%d root %d: element %d wrong", n, root, bad);
        }
        free(v);
        free(r);
    }
    int per = 65536;
    int *s = malloc((size_t) per * size * sizeof(int)),
        *d = malloc((size_t) per * size * sizeof(int));
    for (int t = 0; t < size; t++)
        for (int i = 0; i < per; i++)
            s[t * per + i] = rank * 100000 + t * 1000 + i % 1000;
    MPI_Alltoall(s, per, MPI_INT, d, per, MPI_INT, MPI_COMM_WORLD);
    int bad = -1;
    for (int f = 0; f < size && bad < 0; f++)
        for (int i = 0; i < per && bad < 0; i++)
            if (d[f * per + i] != f * 100000 + rank * 1000 + i % 1000)
                bad = f * per + i;
    CHECK(bad < 0, "alltoall: element %d wrong", bad);
    free(s);
    free(d);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rma(rank, size);
    collectives(rank, size);
    return icbc_test_finish();
}
