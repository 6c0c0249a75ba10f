/* Which interfaces reach the job's other nodes; see icbc_netprobe.h. */
#include "icbc_netprobe.h"
#include "icbc_clock.h"
#include "icbc_netif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

icbc_status_t icbc_netprobe_listen(icbc_netprobe_t *p)
{
    struct ifaddrs *ifa, *i;

    memset(p, 0, sizeof(*p));
    for (int k = 0; k < ICBC_NETPROBE_MAX_IFACES; k++)
        p->fds[k] = -1;
    if (getifaddrs(&ifa) != 0)
        return ICBC_ERR_IO;
    for (i = ifa; i && p->card.n < ICBC_NETPROBE_MAX_IFACES; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask ||
            !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        struct sockaddr_in sa = *(const struct sockaddr_in *) i->ifa_addr;
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sa.sin_port = 0;
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
            listen(fd, SOMAXCONN) != 0 || getsockname(fd, (struct sockaddr *) &sa, &len) != 0) {
            if (fd >= 0)
                close(fd);
            continue; /* an interface nobody can reach us on */
        }
        uint32_t k = p->card.n++;
        snprintf(p->card.ifs[k].name, sizeof(p->card.ifs[k].name), "%s", i->ifa_name);
        p->card.ifs[k].addr = sa.sin_addr.s_addr;
        p->card.ifs[k].mask = ((const struct sockaddr_in *) i->ifa_netmask)->sin_addr.s_addr;
        p->card.ifs[k].port = ntohs(sa.sin_port);
        p->fds[k] = fd;
    }
    freeifaddrs(ifa);
    return ICBC_OK;
}

void icbc_netprobe_close(icbc_netprobe_t *p)
{
    for (int k = 0; k < ICBC_NETPROBE_MAX_IFACES; k++)
        if (p->fds[k] >= 0) {
            close(p->fds[k]);
            p->fds[k] = -1;
        }
}

int icbc_netprobe_same_node(const icbc_netprobe_card_t *a, const icbc_netprobe_card_t *b)
{
    for (uint32_t i = 0; i < a->n && i < ICBC_NETPROBE_MAX_IFACES; i++)
        for (uint32_t j = 0; j < b->n && j < ICBC_NETPROBE_MAX_IFACES; j++)
            if (a->ifs[i].addr == b->ifs[j].addr)
                return 1;
    return 0;
}

/* Whether interface I of MINE should reach ADDR: ADDR is in its subnet, or
 * the kernel routes ADDR through it. */
static int should_reach(const icbc_netprobe_card_t *mine, uint32_t i, uint32_t addr)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };
    char name[IF_NAMESIZE];

    if ((mine->ifs[i].addr & mine->ifs[i].mask) == (addr & mine->ifs[i].mask))
        return 1;
    to.sin_addr.s_addr = addr;
    return icbc_netif_towards((struct sockaddr *) &to, sizeof(to), name, sizeof(name)) == ICBC_OK &&
           strcmp(name, mine->ifs[i].name) == 0;
}

int icbc_netprobe_try(const icbc_netprobe_card_t *mine, const icbc_netprobe_card_t *peer,
                      int timeout_ms, char *devs, size_t devslen)
{
    enum { MAXC = ICBC_NETPROBE_MAX_IFACES * ICBC_NETPROBE_MAX_IFACES };
    struct pollfd pfd[MAXC];
    int iface[MAXC], n = 0, ok[ICBC_NETPROBE_MAX_IFACES] = { 0 }, found = 0;
    uint32_t nmine = mine->n < ICBC_NETPROBE_MAX_IFACES ? mine->n : ICBC_NETPROBE_MAX_IFACES;
    uint32_t npeer = peer->n < ICBC_NETPROBE_MAX_IFACES ? peer->n : ICBC_NETPROBE_MAX_IFACES;

    for (uint32_t i = 0; i < nmine; i++)
        for (uint32_t j = 0; j < npeer; j++) {
            if (!should_reach(mine, i, peer->ifs[j].addr))
                continue;
            struct sockaddr_in from = { .sin_family = AF_INET };
            struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(peer->ifs[j].port) };
            from.sin_addr.s_addr = mine->ifs[i].addr;
            to.sin_addr.s_addr = peer->ifs[j].addr;
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0)
                continue;
            if (bind(fd, (struct sockaddr *) &from, sizeof(from)) != 0) {
                close(fd);
                continue;
            }
            if (connect(fd, (struct sockaddr *) &to, sizeof(to)) == 0) {
                ok[i] = 1;
                close(fd);
            } else if (errno == EINPROGRESS) {
                pfd[n] = (struct pollfd){ fd, POLLOUT, 0 };
                iface[n++] = (int) i;
            } else {
                close(fd);
            }
        }
    double deadline = icbc_clock_now() + timeout_ms / 1000.0;
    for (int left = n; left > 0;) {
        int ms = (int) ((deadline - icbc_clock_now()) * 1000);
        if (ms <= 0 || poll(pfd, (nfds_t) n, ms) <= 0)
            break;
        for (int k = 0; k < n; k++) {
            if (pfd[k].fd < 0 || !pfd[k].revents)
                continue;
            int err = 0;
            socklen_t len = sizeof(err);
            if (getsockopt(pfd[k].fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
                ok[iface[k]] = 1;
            close(pfd[k].fd);
            pfd[k].fd = -1; /* poll skips it */
            left--;
        }
    }
    for (int k = 0; k < n; k++)
        if (pfd[k].fd >= 0)
            close(pfd[k].fd);
    if (devslen)
        devs[0] = '\0';
    for (uint32_t i = 0; i < nmine; i++) {
        int again = 0; /* an interface with several addresses is one device */
        for (uint32_t k = 0; k < i; k++)
            again |= ok[k] && strcmp(mine->ifs[k].name, mine->ifs[i].name) == 0;
        if (!ok[i] || again)
            continue;
        size_t used = strlen(devs);
        snprintf(devs + used, devslen - used, "%s%s", used ? "," : "", mine->ifs[i].name);
        found++;
    }
    return found;
}
