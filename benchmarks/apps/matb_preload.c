/*
 * What an application that paces itself does, for the NPB binaries, which
 * stay unchanged: right after MPI_Init, set ICBC_PACING_MATB on
 * MPI_COMM_WORLD to ICBC_BENCH_MATB (bits/s; docs/pacing.md). Loaded into
 * the ranks with mpiexec -genv LD_PRELOAD (benchmarks/apps/run.py,
 * {matb_lib} in a --variant). Fortran's MPI_INIT calls MPI_Init too.
 */
#include <mpi.h>
#include <icbc.h>
#include <stdio.h>
#include <stdlib.h>

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    const char *v = getenv("ICBC_BENCH_MATB");

    if (rc == MPI_SUCCESS && v != NULL &&
        MPI_Comm_set_attr(MPI_COMM_WORLD, ICBC_PACING_MATB, (void *) (MPI_Aint) atoll(v)) !=
            MPI_SUCCESS)
        fprintf(stderr, "matb_preload: setting ICBC_PACING_MATB failed\n");
    return rc;
}
