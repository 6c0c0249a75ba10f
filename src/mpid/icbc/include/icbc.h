/*
 * icbc.h: what ICBC's MPI adds for applications (docs/pacing.md).
 * Include after mpi.h; valid between MPI_Init and MPI_Finalize.
 */
#ifndef ICBC_H_INCLUDED
#define ICBC_H_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

/* Communicator attribute keyval: this process's sending to other clusters,
 * for messages sent on the communicator (and its duplicates), is paced at
 * the attribute's value in bits/s, MATB; 0: not paced. A communicator
 * without the attribute takes MPI_COMM_WORLD's.
 * The value is the attribute itself, not a pointer to it:
 *
 *     MPI_Comm_set_attr(MPI_COMM_WORLD, ICBC_PACING_MATB, (void *) (MPI_Aint) 100000000);
 */
extern int ICBC_PACING_MATB;

#ifdef __cplusplus
}
#endif

#endif /* ICBC_H_INCLUDED */
