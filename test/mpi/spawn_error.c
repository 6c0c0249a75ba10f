/*
 * Dynamic processes are not supported by the icbc netmod: MPI_Comm_spawn
 * must return an error (with MPI_ERRORS_RETURN) rather than hang or crash.
 */
#include "icbc_test.h"

int main(int argc, char **argv)
{
    MPI_Comm child;
    int errcodes[1];
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int err = MPI_Comm_spawn("/bin/true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                             &child, errcodes);
    CHECK(err != MPI_SUCCESS, "MPI_Comm_spawn succeeded unexpectedly");
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(err, msg, &len);
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            fprintf(stderr, "spawn error (expected): %s\n", msg);
    }
    return icbc_test_finish();
}
