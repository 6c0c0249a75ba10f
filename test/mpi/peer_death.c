/*
 * A peer dies in the middle of a transfer. The job must end with an error
 * that names what happened — it must not hang. Rank 1 kills itself while
 * rank 0 waits for a large message from it; the test driver checks that
 * mpiexec returns non-zero well within its time limit.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t n = 8 << 20;
    char *buf = malloc(n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        usleep(200000);
        kill(getpid(), SIGKILL);
    } else if (rank == 0) {
        MPI_Recv(buf, (int) n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("rank 0 received a message from a dead peer\n");
    }
    MPI_Finalize();
    return 0;
}
