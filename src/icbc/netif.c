/*
 * Network interfaces of this host as the router file sees them (icbc_netif.h).
 */
#include "icbc_netif.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int same_host_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *) a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *) b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr,
                      &((const struct sockaddr_in6 *) b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return 0;
}

icbc_status_t icbc_netif_holding(const struct sockaddr *addr, char *name, size_t namelen)
{
    struct ifaddrs *ifa, *i;
    icbc_status_t st = ICBC_ERR_NOT_FOUND;

    if (getifaddrs(&ifa) != 0)
        return ICBC_ERR_IO;
    for (i = ifa; i; i = i->ifa_next) {
        if (i->ifa_addr && same_host_addr(i->ifa_addr, addr)) {
            snprintf(name, namelen, "%s", i->ifa_name);
            st = ICBC_OK;
            break;
        }
    }
    freeifaddrs(ifa);
    return st;
}

icbc_status_t icbc_netif_towards(const struct sockaddr *dst, socklen_t dstlen, char *name,
                                 size_t namelen)
{
    struct sockaddr_storage local;
    socklen_t llen = sizeof(local);
    int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int ok;

    if (fd < 0)
        return ICBC_ERR_IO;
    /* A connected UDP socket takes the source address of the route. */
    ok = connect(fd, dst, dstlen) == 0 && getsockname(fd, (struct sockaddr *) &local, &llen) == 0;
    close(fd);
    if (!ok)
        return ICBC_ERR_UNREACHABLE;
    return icbc_netif_holding((const struct sockaddr *) &local, name, namelen);
}

static int in_network(const struct sockaddr *a, const struct sockaddr_storage *net, int prefix)
{
    const unsigned char *x, *y;
    int bits;

    if (a->sa_family != net->ss_family)
        return 0;
    if (a->sa_family == AF_INET) {
        x = (const unsigned char *) &((const struct sockaddr_in *) a)->sin_addr;
        y = (const unsigned char *) &((const struct sockaddr_in *) net)->sin_addr;
    } else if (a->sa_family == AF_INET6) {
        x = (const unsigned char *) &((const struct sockaddr_in6 *) a)->sin6_addr;
        y = (const unsigned char *) &((const struct sockaddr_in6 *) net)->sin6_addr;
    } else {
        return 0;
    }
    for (bits = 0; bits + 8 <= prefix; bits += 8)
        if (x[bits / 8] != y[bits / 8])
            return 0;
    if (bits < prefix) {
        unsigned char mask = (unsigned char) (0xff00 >> (prefix - bits));
        if ((x[bits / 8] & mask) != (y[bits / 8] & mask))
            return 0;
    }
    return 1;
}

icbc_status_t icbc_netif_in_network(const struct sockaddr_storage *net, int prefix, char *name,
                                    size_t namelen)
{
    struct ifaddrs *ifa, *i;
    icbc_status_t st = ICBC_ERR_NOT_FOUND;

    if (getifaddrs(&ifa) != 0)
        return ICBC_ERR_IO;
    for (i = ifa; i; i = i->ifa_next) {
        if (i->ifa_addr && in_network(i->ifa_addr, net, prefix)) {
            snprintf(name, namelen, "%s", i->ifa_name);
            st = ICBC_OK;
            break;
        }
    }
    freeifaddrs(ifa);
    return st;
}

static int list_has(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, name, n) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

icbc_status_t icbc_netif_fabric_devices(const icbc_routerfile_t *rf, int cluster, char *list,
                                        size_t listlen, char *err, size_t errlen)
{
    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(rf, (size_t) cluster);
    char dev[IF_NAMESIZE + 1];
    size_t used = 0;

    if (listlen)
        list[0] = '\0';
    if (cl == NULL)
        return ICBC_ERR_NOT_FOUND;
    if (cl->fabric_line) {
        icbc_status_t st =
            icbc_netif_in_network(&cl->fabric_net, cl->fabric_prefix, dev, sizeof(dev));
        if (st != ICBC_OK) {
            snprintf(err, errlen,
                     "%s:%d: no interface of this host has an address in cluster "
                     "'%s''s fabric network",
                     icbc_routerfile_name(rf), cl->fabric_line, cl->name);
            return st;
        }
        snprintf(list, listlen, "%s", dev);
        return ICBC_OK;
    }
    if (cl->nrouters == 0)
        return ICBC_ERR_NOT_FOUND;
    for (size_t i = 0; i < cl->nrouters; i++) {
        const icbc_rf_router_t *rt = &cl->routers[i];
        icbc_status_t st = icbc_netif_towards((const struct sockaddr *) &rt->fabric.sa,
                                              rt->fabric.salen, dev, sizeof(dev));
        if (st != ICBC_OK) {
            snprintf(err, errlen, "%s:%d: router '%s': no local interface %s fabric=%s",
                     icbc_routerfile_name(rf), rt->line, rt->host,
                     st == ICBC_ERR_UNREACHABLE ? "has a route to" : "holds the address towards",
                     rt->fabric.text);
            return st;
        }
        if (list_has(list, dev))
            continue;
        size_t need = strlen(dev) + (used ? 1 : 0);
        if (used + need + 1 > listlen) {
            snprintf(err, errlen, "%s: fabric devices of cluster '%s' do not fit %zu bytes",
                     icbc_routerfile_name(rf), cl->name, listlen);
            return ICBC_ERR_INVALID;
        }
        used += (size_t) snprintf(list + used, listlen - used, "%s%s", used ? "," : "", dev);
    }
    return ICBC_OK;
}
