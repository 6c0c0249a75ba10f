/*
 * What an application that paces itself does, for the NPB binaries, which
 * stay unchanged: right after MPI_Init, set ICBC_PACING_MATB on
 * MPI_COMM_WORLD to ICBC_BENCH_MATB (bits/s; docs/pacing.md). Loaded into
 * the ranks with mpiexec -genv LD_PRELOAD (benchmarks/apps/run.py,
 * {matb_lib} in a --variant). Fortran's MPI_INIT (mpi_init_) is wrapped
 * too: MPICH's calls the profiling entry, not MPI_Init.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <icbc.h>
#include <stdio.h>
#include <stdlib.h>

static void set_matb(void)
{
    const char *v = getenv("ICBC_BENCH_MATB");
    int flag = 0;
    void *old;

    if (v == NULL)
        return;
    MPI_Comm_get_attr(MPI_COMM_WORLD, ICBC_PACING_MATB, &old, &flag);
    if (!flag && MPI_Comm_set_attr(MPI_COMM_WORLD, ICBC_PACING_MATB,
                                   (void *) (MPI_Aint) atoll(v)) != MPI_SUCCESS)
        fprintf(stderr, "matb_preload: setting ICBC_PACING_MATB failed\n");
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);

    if (rc == MPI_SUCCESS)
        set_matb();
    return rc;
}

void mpi_init_(MPI_Fint *ierr)
{
    void (*real)(MPI_Fint *) = (void (*)(MPI_Fint *)) dlsym(RTLD_NEXT, "mpi_init_");

    real(ierr);
    if (*ierr == MPI_SUCCESS)
        set_matb();
}
