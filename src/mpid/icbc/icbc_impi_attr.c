/*
 * IMPI's attributes on MPI_COMM_WORLD (docs/impi.md), as LAM/MPI sets them:
 *
 *   IMPI_CLIENT_SIZE   the number of clients of the IMPI job
 *   IMPI_CLIENT_COLOR  this process's client, 0..IMPI_CLIENT_SIZE-1
 *   IMPI_HOST_SIZE     the number of hosts of every client together
 *   IMPI_HOST_COLOR    this process's host, numbered across all clients
 *
 * A job that is no IMPI client has one client of one host: 1, 0, 1, 0.
 * Their keyvals are created when MPI_COMM_WORLD is committed and are found
 * in mpi.h under those names (contrib/mpich/patches/0006); values are
 * pointers to int, as of MPI's predefined attributes.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"

MPICH_API_PUBLIC int MPIX_Impi_keyvals[4] = { MPI_KEYVAL_INVALID, MPI_KEYVAL_INVALID,
                                              MPI_KEYVAL_INVALID, MPI_KEYVAL_INVALID };

static int values[4];

int MPIDI_ICBC_impi_world_attrs(MPIR_Comm *world)
{
    int mpi_errno = MPI_SUCCESS;

    values[0] = 1, values[1] = 0, values[2] = 1, values[3] = 0;
    if (MPIDI_ICBC_impi.active) {
        values[0] = MPIDI_ICBC_impi.layout.nclients;
        values[2] = MPIDI_ICBC_impi.layout.nhosts_total;
        MPIDI_ICBC_impi_where(MPIR_Process.rank, &values[1], &values[3]);
    }
    for (int k = 0; k < 4; k++) {
        MPII_Keyval *kv;
        if (MPIX_Impi_keyvals[k] == MPI_KEYVAL_INVALID) {
            mpi_errno = MPIR_Comm_create_keyval_impl(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN,
                                                     &MPIX_Impi_keyvals[k], NULL);
            MPIR_ERR_CHECK(mpi_errno);
        }
        MPII_Keyval_get_ptr(MPIX_Impi_keyvals[k], kv);
        mpi_errno = MPIR_Comm_set_attr_impl(world, kv, &values[k], MPIR_ATTR_PTR);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return mpi_errno;
}
