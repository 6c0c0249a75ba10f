/*
 * An update of a process's own window must not overtake a later update that
 * another process makes as a consequence of it (the step an MCS queue lock,
 * e.g. mpi4py.util.sync.Mutex, relies on):
 *
 *   rank r (every rank but 0), round i, inside one MPI_Win_lock_all epoch:
 *     MPI_Accumulate(-1 -> my "next", MPI_REPLACE)      own window, not flushed
 *     MPI_Fetch_and_op(r -> rank 0's "tail[r]", REPLACE); MPI_Win_flush(0)
 *     wait until my "next" == i
 *   rank 0: sees tail[r] == r, clears it, then
 *     MPI_Accumulate(i -> rank r's "next", MPI_REPLACE); MPI_Win_flush(r)
 *
 * Rank 0 writes i only after rank r's fetch-and-op, which rank r issued after
 * its own -1. If the -1 is applied after the i, "next" stays -1 and rank r
 * would wait for ever; the test then fails after --deadline seconds with the
 * round and the value it saw, instead of hanging.
 *
 *   rma_self_order [--rounds N] [--deadline S]
 */
#include "icbc_test.h"

#include <time.h>

enum { NEXT = 0, TAIL = 1 }; /* window layout: next, then tail[size] on rank 0 */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Read my own window word while the MPI library updates it. */
static int read_own(MPI_Win win, volatile int *base, int rank, int disp)
{
    MPI_Win_flush(rank, win); /* progress */
    MPI_Win_sync(win);
    return base[disp];
}

int main(int argc, char **argv)
{
    int rank, size, rounds = 1000;
    double deadline = 20;
    int *base;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--deadline") && i + 1 < argc)
            deadline = atof(argv[++i]);
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "rma_self_order needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Win_allocate((MPI_Aint) (1 + size) * sizeof(int), sizeof(int), MPI_INFO_NULL,
                     MPI_COMM_WORLD, &base, &win);
    for (int k = 0; k < 1 + size; k++)
        base[k] = -1;
    MPI_Barrier(MPI_COMM_WORLD);

    int lost = 0, served = 0, checked = 0;
    if (rank == 0) {
        /* serve every other rank's rounds */
        int *round = calloc(size, sizeof(int));
        int remaining = (size - 1) * rounds;
        MPI_Win_lock_all(0, win);
        double t_last = now();
        while (remaining > 0) {
            int any = 0;
            for (int r = 1; r < size; r++) {
                int none = -1, prev;
                if (read_own(win, (volatile int *) base, 0, TAIL + r) != r)
                    continue;
                MPI_Fetch_and_op(&none, &prev, MPI_INT, 0, TAIL + r, MPI_REPLACE, win);
                MPI_Win_flush(0, win);
                MPI_Accumulate(&round[r], 1, MPI_INT, r, NEXT, 1, MPI_INT, MPI_REPLACE, win);
                MPI_Win_flush(r, win);
                round[r]++;
                remaining--;
                served++;
                any = 1;
            }
            if (any)
                t_last = now();
            else if (now() - t_last > 2 * deadline)
                break; /* the others report what they lost */
        }
        MPI_Win_unlock_all(win);
        free(round);
    } else {
        for (int i = 0; i < rounds && !lost; i++) {
            int none = -1, me = rank, prev, v = -1;
            MPI_Win_lock_all(0, win);
            MPI_Accumulate(&none, 1, MPI_INT, rank, NEXT, 1, MPI_INT, MPI_REPLACE, win);
            MPI_Fetch_and_op(&me, &prev, MPI_INT, 0, TAIL + rank, MPI_REPLACE, win);
            MPI_Win_flush(0, win);
            double t0 = now();
            while ((v = read_own(win, (volatile int *) base, rank, NEXT)) == -1 &&
                   now() - t0 < deadline)
                ;
            MPI_Win_unlock_all(win);
            checked++;
            CHECK(v == i,
                  "round %d: my own earlier update overwrote rank 0's later one "
                  "(\"next\" is %d after %.0f s, rank 0 wrote %d)",
                  i, v, now() - t0, i);
            if (v != i)
                lost = 1;
        }
    }

    /* the checks ran: every round was served or reported */
    int total_checked = 0, total_served = 0;
    MPI_Reduce(&checked, &total_checked, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&served, &total_served, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(total_checked > 0, "no round was checked");
        printf("rma_self_order: %d rank(s) x %d rounds, %d checked, %d served\n", size - 1, rounds,
               total_checked, total_served);
    }
    MPI_Win_free(&win);
    return icbc_test_finish();
}
