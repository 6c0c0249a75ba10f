/*
 * Progress: drive the UCX worker. When more processes than cores share a
 * node, a busy-polling process steals the core its peer needs to answer; with
 * yield-when-idle on, a process gives up its time slice after a run of idle
 * polls (MPIR_CVAR_CH4_ICBC_YIELD).
 */
#ifndef ICBC_PROGRESS_H_INCLUDED
#define ICBC_PROGRESS_H_INCLUDED

#include "icbc_impl.h"
#include <sched.h>

#define MPIDI_ICBC_IDLE_POLLS_BEFORE_YIELD 16

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    if (vci != 0)
        return MPI_SUCCESS;
    if (unlikely(MPIDI_ICBC_global.xpath))
        MPIDI_ICBC_xpath_progress();
    if (ucp_worker_progress(MPIDI_ICBC_global.worker)) {
        MPIDI_ICBC_global.idle_polls = 0;
    } else if (MPIDI_ICBC_global.yield_when_idle &&
               ++MPIDI_ICBC_global.idle_polls >= MPIDI_ICBC_IDLE_POLLS_BEFORE_YIELD) {
        MPIDI_ICBC_global.idle_polls = 0;
        sched_yield();
    }
    return MPI_SUCCESS;
}

#endif /* ICBC_PROGRESS_H_INCLUDED */
