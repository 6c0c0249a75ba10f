/*
 * The netmod's process-wide state, and the direct path's UCX endpoint to a
 * peer, made on first use. Kept apart from start-up (icbc_init.c): the
 * inline send code of every path needs these two and nothing else of it.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"

MPIDI_ICBC_global_t MPIDI_ICBC_global;

/* A connection failed: later sends to this peer return an MPI error instead of
 * waiting for a process that is gone. */
static void peer_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, (int) (intptr_t) arg);

    if (peer == NULL || MPIDI_ICBC_global.finalizing)
        return;
    peer->state = ICBC_PEER_FAILED;
    icbc_error("lost its connection to rank %d (node %s): %s", peer->rank, peer->node,
               ucs_status_string(status));
}

int MPIDI_ICBC_peer_connect(icbc_peer_t *peer, ucp_ep_h *ep_p)
{
    int mpi_errno = MPI_SUCCESS;
    ucs_status_t status;
    ucp_ep_h ep;

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

    ucp_ep_params_t params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = peer->fabric_addr,
        .err_mode = MPIR_CVAR_CH4_ICBC_PEER_ERRORS ? UCP_ERR_HANDLING_MODE_PEER
                                                   : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = { .cb = peer_error_cb, .arg = (void *) (intptr_t) peer->rank },
    };
    status = ucp_ep_create(MPIDI_ICBC_global.worker, &params, &ep);
    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(status != UCS_OK, mpi_errno, peer->rank,
                                   ucs_status_string(status));
    peer->ep = ep;
    *ep_p = ep;
fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
