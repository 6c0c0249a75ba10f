/*
 * MPI_Win_complete, then a barrier: every target's MPI_Win_test after the
 * barrier must find the epoch complete (the step of mpi4py's
 * testStartCompletePostTest). Across clusters the COMPLETE notice of rank 0
 * and the barrier's messages can take different routers; a notice still on
 * its way when the barrier ends shows here as a Win_test that says "open".
 *
 *   pscw_complete_order [--rounds N]
 *
 * Rank 0 is the origin, every other rank a target. Prints "No Errors", or
 * how many rounds a target found the epoch still open.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, rounds = 200, early = 0, late = 0;
    int mem = 0;
    MPI_Win win;
    MPI_Group world, others, origin;

    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[++i]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_create(&mem, sizeof(mem), sizeof(mem), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0;
    MPI_Group_excl(world, 1, &zero, &others);
    MPI_Group_incl(world, 1, &zero, &origin);

    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            MPI_Win_start(others, 0, win);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_complete(win);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            int flag;
            MPI_Win_post(origin, 0, win);
            MPI_Win_test(win, &flag);
            if (flag) {
                /* rank 0 has not completed yet: the epoch cannot be over */
                early++;
                MPI_Barrier(MPI_COMM_WORLD);
                MPI_Barrier(MPI_COMM_WORLD);
                continue;
            }
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_test(win, &flag);
            if (!flag) {
                late++;
                MPI_Win_wait(win); /* the notice is on its way: close the epoch */
            }
        }
    }
    int errs[2] = { early, late }, sum[2];
    MPI_Reduce(errs, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (sum[0] == 0 && sum[1] == 0) {
            printf("No Errors\n");
        } else {
            printf("pscw_complete_order: %d of %d target-rounds found the epoch still open after "
                   "MPI_Win_complete and a barrier; %d found it over before the origin "
                   "completed\n",
                   sum[1], rounds * (size - 1), sum[0]);
        }
    }
    MPI_Group_free(&others);
    MPI_Group_free(&origin);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
