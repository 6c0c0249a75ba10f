/* The shortest whole MPI job: MPI_Init, one barrier (every process has
 * reached the others), MPI_Finalize. benchmarks/startup/startup.py times
 * it as a user's job, from mpiexec to its exit. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("started %d processes\n", size);
    MPI_Finalize();
    return 0;
}
