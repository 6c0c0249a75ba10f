/* Per-request active-message state: set up and released with each MPIDIG request. */
#ifndef ICBC_REQUEST_H_INCLUDED
#define ICBC_REQUEST_H_INCLUDED

#include "icbc_impl.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_init(MPIR_Request *req)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(req);

    amreq->hdr_buf = NULL;
    amreq->pack_buf = NULL;
    amreq->rndv_desc = NULL;
    amreq->bounce_buf = NULL;
    amreq->rndv_size = 0;
    amreq->xproto = NULL;
    amreq->xsync = 0;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_finalize(MPIR_Request *req)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(req);

    MPIDI_ICBC_am_request_free_send_bufs(req);
    MPL_free(amreq->bounce_buf);
    amreq->bounce_buf = NULL;
    /* A rendezvous payload nobody received (e.g. a cancelled receive). */
    if (amreq->rndv_desc) {
        mx_fabric_release(MPIDI_ICBC_global.fabric, amreq->rndv_desc);
        amreq->rndv_desc = NULL;
    }
}

#endif /* ICBC_REQUEST_H_INCLUDED */
