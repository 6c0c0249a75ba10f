/*
 * The IMPI relay of a private cluster, run by icbc-router when the cluster's
 * section of the router file has an 'impi-relay' line (docs/impi-relay.md,
 * docs/routerfile.md): the cluster's routers are the relays of its IMPI
 * jobs, router 0 the leader of the trunk, every other router a follower.
 * The leader listens for the job inside at its fabric address and the
 * line's port, and meets the line's impi-server only when that job
 * connects; each relay serves one job after another, in a thread of the
 * daemon, until the daemon ends.
 */
#ifndef ICBC_ROUTER_RELAY_H
#define ICBC_ROUTER_RELAY_H

#include "icbc_routerfile.h"
#include "icbc_status.h"

/* Starts the relay of router INDEX of CLUSTER in RF (which must outlive
 * it). An error (ERR) when the line cannot be served from this router. */
icbc_status_t rt_relay_start(const icbc_routerfile_t *rf, int cluster, int index, char *err,
                             size_t errlen);

#endif /* ICBC_ROUTER_RELAY_H */
