/*
 * Progress: drive the fabric (and the routed and TCP paths). When more
 * processes than cores share a machine, a busy-polling process steals the
 * core its peer, a router or the WAN emulator needs; with yield-when-idle on
 * (MPIR_CVAR_CH4_ICBC_YIELD), an empty poll goes to MPIDI_ICBC_progress_idle,
 * which spins briefly, then yields, then sleeps (MPIR_CVAR_CH4_ICBC_IDLE_SLEEP,
 * doubling up to MPIR_CVAR_CH4_ICBC_IDLE_SLEEP_MAX).
 */
#ifndef ICBC_PROGRESS_H_INCLUDED
#define ICBC_PROGRESS_H_INCLUDED

#include "icbc_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    unsigned work = 0;

    if (vci != 0)
        return MPI_SUCCESS;
    if (unlikely(MPIDI_ICBC_dump_requested))
        MPIDI_ICBC_dump();
    if (unlikely(MPIDI_ICBC_global.xpath)) {
        work = (unsigned) MPIDI_ICBC_path_progress();
        MPIDI_ICBC_pace_progress();
        MPIDI_ICBC_xfer_progress();
    }
    work += mx_fabric_progress(MPIDI_ICBC_global.fabric);
    if (work)
        MPIDI_ICBC_global.idle_polls = 0;
    else if (MPIDI_ICBC_global.yield_when_idle)
        MPIDI_ICBC_progress_idle();
    return MPI_SUCCESS;
}

#endif /* ICBC_PROGRESS_H_INCLUDED */
