/*
 * The netmod's process-wide state, and the direct path's fabric endpoint to
 * a peer, made on first use. Kept apart from start-up (icbc_init.c): the
 * inline send code of every path needs these two and nothing else of it.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"

MPIDI_ICBC_global_t MPIDI_ICBC_global;

/* A connection failed: later sends to this peer return an MPI error instead of
 * waiting for a process that is gone. */
static void peer_failed_cb(mx_fabric_ep_t *ep, icbc_status_t status, const char *why, void *arg)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, (int) (intptr_t) arg);

    (void) ep;
    (void) status;
    if (peer == NULL || MPIDI_ICBC_global.finalizing)
        return;
    peer->state = ICBC_PEER_FAILED;
    icbc_error("lost its connection to rank %d (node %s): %s", peer->rank, peer->node, why);
}

int MPIDI_ICBC_peer_connect(icbc_peer_t *peer, mx_fabric_ep_t **ep_p)
{
    int mpi_errno = MPI_SUCCESS;
    icbc_status_t st;
    mx_fabric_ep_t *ep;

    MPIR_ERR_CHKANDJUMP1(peer == NULL, mpi_errno, MPI_ERR_OTHER, "**icbc_cfg", "**icbc_cfg %s",
                         "destination is not in the icbc peer table");
    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(peer->state == ICBC_PEER_FAILED, mpi_errno, peer->rank,
                                   "connection failed earlier");
    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(peer->path == ICBC_PATH_IMPI, mpi_errno, peer->rank,
                                   "it is a process of another IMPI client, reached by IMPI only");
    if (peer->ep) {
        *ep_p = peer->ep;
        goto fn_exit;
    }
    st = mx_fabric_connect_address(MPIDI_ICBC_global.fabric, peer->fabric_addr,
                                   peer->fabric_addr_len, (void *) (intptr_t) peer->rank, &ep);
    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(st != ICBC_OK, mpi_errno, peer->rank, icbc_status_str(st));
    mx_fabric_ep_set_failed_cb(ep, peer_failed_cb);
    peer->ep = ep;
    *ep_p = ep;
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
