/*
 * Network interfaces of this host, as the router file sees them. The fabric
 * device of a cluster is the interface that holds an address in the
 * cluster's 'fabric' network when the router file gives one; else the
 * interface this host uses to reach the fabric addresses of the cluster's
 * routers: the one that holds the local address the kernel picks towards
 * them (on a router host, the one that holds the router's own fabric address).
 *
 * UCX is opened on that device alone (docs/router.md, SECURITY): its ports
 * then listen on the fabric address only, never on a WAN-facing or a
 * management interface, and its wire-up cannot pick a lane over a network
 * the other end does not share.
 */
#ifndef ICBC_NETIF_H
#define ICBC_NETIF_H

#include <net/if.h>
#include <stddef.h>
#include <sys/socket.h>

#include "icbc_routerfile.h"
#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A UCX_NET_DEVICES list: interface names joined by ',' (at most
 * ICBC_RF_MAX_ROUTERS distinct ones). */
#define ICBC_NETIF_LIST_MAX (ICBC_RF_MAX_ROUTERS * (IF_NAMESIZE + 1))

/* Name of the interface that holds the local address the kernel uses
 * towards DST (nothing is sent). ICBC_ERR_UNREACHABLE when there is no
 * route, ICBC_ERR_NOT_FOUND when no interface holds that address. */
icbc_status_t icbc_netif_towards(const struct sockaddr *dst, socklen_t dstlen, char *name,
                                 size_t namelen);

/* Name of the interface that holds ADDR itself; ICBC_ERR_NOT_FOUND if none. */
icbc_status_t icbc_netif_holding(const struct sockaddr *addr, char *name, size_t namelen);

/* Name of the first interface with an address in NET/PREFIX. */
icbc_status_t icbc_netif_in_network(const struct sockaddr_storage *net, int prefix, char *name,
                                    size_t namelen);

/* The fabric device(s) of CLUSTER seen from this host: the interface in its
 * 'fabric' network, else every distinct interface towards the fabric
 * addresses of its routers, in router order, joined by ','.
 * ICBC_ERR_NOT_FOUND when the cluster has neither (no device can be
 * derived: keep UCX's choice); any other error leaves one line in ERR
 * naming the file and line. */
icbc_status_t icbc_netif_fabric_devices(const icbc_routerfile_t *rf, int cluster, char *list,
                                        size_t listlen, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_NETIF_H */
