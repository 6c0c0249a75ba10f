/*
 * One process of an ICBC job that is a client of an IMPI job
 * (test/pytest/test_impi_clients.py, test_impi_relay.py): waits for a
 * message from world rank SRC (the first argument, default 0), a process of
 * another client. Used where that client's host sends
 * something the IMPI path must refuse: the wait must end with the job's
 * error naming the host, never hang. Prints "impi_recv: got N bytes" when
 * a message does come.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, n, rc, src;
    char buf[256];
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    src = argc > 1 ? atoi(argv[1]) : 0;
    rc = MPI_Recv(buf, sizeof(buf), MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        MPI_Error_string(rc, text, &n);
        printf("impi_recv: rank %d: MPI_Recv failed: %s\n", rank, text);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Get_count(&st, MPI_BYTE, &n);
    printf("impi_recv: rank %d: got %d bytes\n", rank, n);
    MPI_Finalize();
    return 0;
}
