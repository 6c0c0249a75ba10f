/*
 * mx_router: the fabric (UCX) side of routed messages, shared by the router
 * (mx_server.h) and the compute processes (mx_client.h).
 *
 * On the fabric a route message is one UCX active message with id
 * MX_AM_ROUTE: the AM header is the route header (icbc_route.h, 40
 * bytes) followed by the inner header; the AM data is the payload. Both sides
 * send with UCP_AM_SEND_FLAG_REPLY so the receiver learns the sending
 * endpoint. The netmod's direct path uses AM id 0 on the same worker.
 */
#ifndef MX_ROUTER_H
#define MX_ROUTER_H

#include <stddef.h>

#include "icbc_route.h"

/* UCX active-message id of route messages (process <-> router). */
#define MX_AM_ROUTE 1

/* Payloads up to this size are sent eagerly by default, larger ones with
 * UCX rendezvous (the receiver pulls them when it has memory). */
#define MX_RNDV_THRESH_DEFAULT 8192

/* Rendezvous sends a process keeps in flight per router by default. */
#define MX_RNDV_WINDOW_DEFAULT 32

/* Inner headers up to this size travel inside a send request; larger ones
 * are copied to the heap. */
#define MX_INLINE_HDR 256

/* A router sends every registered process a CREDIT (maybe of 0 bytes) at
 * least this often, so that a process can tell a silent router (hung,
 * stopped, cut off without a connection error) from a quiet one. */
#define MX_ROUTER_KEEPALIVE_MS 1000
/* A router silent this long is lost where the fabric does not report the
 * death of a peer (mx_fabric_peer_death_seen): four keepalives missed. */
#define MX_ROUTER_SILENCE_MS 4000

#endif /* MX_ROUTER_H */
