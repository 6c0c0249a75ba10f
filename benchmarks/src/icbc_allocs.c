/*
 * Heap allocations per message in steady state between ranks 0 and 1
 * (benchmarks/alloc/allocs.py): a ping-pong of SIZE bytes, WARMUP round
 * trips, then ITERS round trips between two readings of the process's
 * allocation count (benchmarks/alloc/malloc_count.c, preloaded). Every
 * payload is checked.
 *
 *   icbc_allocs [--size BYTES] [--iters N] [--warmup N]
 *
 * Rank 0 prints "size,iters,allocs_rank0,allocs_rank1,allocs_per_message":
 * the allocations of both processes over the measured round trips, and
 * their sum over the 2 x ITERS messages (a message's allocations at its
 * sender and at its receiver). Without the preload it says so and exits 2.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long (*count_fn_t)(void);

int main(int argc, char **argv)
{
    long size = 64, iters = 1000, warmup = 100;
    int rank, nprocs, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup"))
            warmup = atol(argv[i + 1]);
    }
    count_fn_t count = (count_fn_t) dlsym(RTLD_DEFAULT, "icbc_alloc_count");
    if (count == NULL || nprocs != 2 || size < 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "icbc_allocs: needs 2 ranks, SIZE and ITERS > 0, and "
                            "malloc_count.so preloaded\n");
        MPI_Finalize();
        return 2;
    }
    char *buf = malloc(size);
    int peer = 1 - rank;
    unsigned long long before = 0;
    for (long i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            before = count();
        }
        if (rank == 0) {
            memset(buf, (int) (i & 0x7f), size);
            MPI_Send(buf, (int) size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int) size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int) size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int) size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
        if (buf[0] != (char) (i & 0x7f) || buf[size - 1] != (char) (i & 0x7f))
            bad++;
    }
    unsigned long long mine = count() - before, theirs = 0;
    /* the counts are read before these messages */
    if (rank == 1)
        MPI_Send(&mine, 1, MPI_UNSIGNED_LONG_LONG, 0, 1, MPI_COMM_WORLD);
    else
        MPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_bad)
            fprintf(stderr, "icbc_allocs: %d payload(s) wrong\n", all_bad);
        printf("size,iters,allocs_rank0,allocs_rank1,allocs_per_message\n");
        printf("%ld,%ld,%llu,%llu,%.4f\n", size, iters, mine, theirs,
               (double) (mine + theirs) / (2.0 * (double) iters));
    }
    free(buf);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
