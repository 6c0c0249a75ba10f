/*
 * The icbc netmod's inline API. All MPI matching, RMA, partitioned and
 * collective operations go through MPIDIG's active-message layer (the
 * am_fallback headers); icbc supplies the active-message transport below it,
 * and applies accumulates to the process's own window at once (icbc_rma.h).
 */
#ifndef NETMOD_INLINE_H_INCLUDED
#define NETMOD_INLINE_H_INCLUDED

#include "icbc_rma.h"
#include "netmod_am_fallback.h"

#include "icbc_progress.h"
#include "icbc_request.h"
#include "icbc_am.h"
#include "icbc_win.h"
#include "icbc_proc.h"

#include "icbc_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
