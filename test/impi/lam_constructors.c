/*
 * LAM/MPI 7.1.4's communicator constructors on a communicator that spans
 * IMPI clients (test/pytest/test_impi_lam.py; docs/impi.md, "LAM/MPI 7.1.4
 * as it behaves"): with MPI_ERRORS_RETURN on MPI_COMM_WORLD, every process
 * calls MPI_Comm_split, MPI_Comm_dup and MPI_Comm_create on it and prints
 * for each "rank R: NAME: made" or "rank R: NAME: refused (CLASS: TEXT)",
 * then ends with the barrier IMPI requires of MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void report(int rank, const char *name, int rc, MPI_Comm *made)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;

    if (rc == MPI_SUCCESS) {
        printf("rank %d: %s: made\n", rank, name);
        if (*made != MPI_COMM_NULL)
            MPI_Comm_free(made);
    } else {
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, text, &len);
        printf("rank %d: %s: refused (%s: %s)\n", rank, name,
               cls == MPI_ERR_COMM ? "MPI_ERR_COMM" : "another class", text);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int rank, rc;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Group g;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
    report(rank, "MPI_Comm_split", rc, &c);
    c = MPI_COMM_NULL;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &c);
    report(rank, "MPI_Comm_dup", rc, &c);
    c = MPI_COMM_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &g);
    rc = MPI_Comm_create(MPI_COMM_WORLD, g, &c);
    report(rank, "MPI_Comm_create", rc, &c);
    MPI_Group_free(&g);
    MPI_Finalize();
    return 0;
}
