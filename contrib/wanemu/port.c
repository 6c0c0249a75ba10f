/*
 * A port of the emulator: an AF_PACKET socket bound to one interface, in
 * promiscuous mode, that sees every frame the cluster's switch sends to the
 * WAN (ARP included) and sends the frames arriving from other clusters.
 */
#define _GNU_SOURCE
#include "wanemu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icbc_log.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define PORT_RCVBUF (8 << 20)
#define PORT_SNDBUF (4 << 20)

icbc_status_t wanemu_port_open(struct wanemu_port *p)
{
    struct sockaddr_ll sll;
    struct packet_mreq mr;
    int one = 1, rcv = PORT_RCVBUF, snd = PORT_SNDBUF;

    memset(&p->st, 0, sizeof(p->st));
    p->ifindex = (int) if_nametoindex(p->ifname);
    if (p->ifindex == 0) {
        icbc_error("port %s: no interface '%s' in this network namespace: %s", p->name, p->ifname,
                   strerror(errno));
        return ICBC_ERR_NOT_FOUND;
    }
    /* Protocol 0: receive nothing until bound to the interface. */
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        icbc_error("port %s: socket(AF_PACKET): %s (root or CAP_NET_RAW needed)", p->name,
                   strerror(errno));
        return ICBC_ERR_IO;
    }
    /* Larger queues than the defaults absorb the emulator's scheduling
     * hiccups; the *FORCE variants pass the sysctl limits as root. */
    if (setsockopt(p->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
        setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    if (setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) < 0)
        setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
    /* Our own transmissions must not come back as input. */
    if (setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0)
        icbc_warn("port %s: PACKET_IGNORE_OUTGOING: %s; filtering in user space", p->name,
                  strerror(errno));
    setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
    /* Arrival times from the kernel: a frame's delay starts when it reached
     * the port, not when the emulator got round to reading it. */
    if (setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0)
        icbc_warn("port %s: SO_TIMESTAMPNS: %s; using read times", p->name, strerror(errno));

    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = p->ifindex;
    if (bind(p->fd, (struct sockaddr *) &sll, sizeof(sll)) < 0) {
        icbc_error("port %s: bind to %s: %s", p->name, p->ifname, strerror(errno));
        goto fail;
    }
    memset(&mr, 0, sizeof(mr));
    mr.mr_ifindex = p->ifindex;
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0) {
        icbc_error("port %s: promiscuous mode on %s: %s", p->name, p->ifname, strerror(errno));
        goto fail;
    }
    return ICBC_OK;

fail:
    close(p->fd);
    p->fd = -1;
    return ICBC_ERR_IO;
}

void wanemu_port_close(struct wanemu_port *p)
{
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

/* Kernel receive time of a message (SCM_TIMESTAMPNS, CLOCK_REALTIME), or 0. */
static int64_t msg_stamp(struct msghdr *mh)
{
    struct cmsghdr *c;

    for (c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
        }
    }
    return 0;
}

int wanemu_port_recv(struct wanemu_port *p, uint8_t (*bufs)[WANEMU_MAX_FRAME + 1], uint32_t *lens,
                     int64_t *stamps, int max)
{
    struct mmsghdr msgs[64];
    struct iovec iov[64];
    struct sockaddr_ll from[64];
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl[64];
    int n, i, k = 0;

    if (max > 64) max = 64;
    memset(msgs, 0, sizeof(msgs[0]) * (size_t) max);
    for (i = 0; i < max; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = WANEMU_MAX_FRAME + 1;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
        msgs[i].msg_hdr.msg_control = ctl[i].buf;
        msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
    }
    n = recvmmsg(p->fd, msgs, (unsigned) max, MSG_DONTWAIT, NULL);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            icbc_warn("port %s: recvmmsg: %s", p->name, strerror(errno));
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (from[i].sll_pkttype == PACKET_OUTGOING) continue;
        if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || msgs[i].msg_len > WANEMU_MAX_FRAME) {
            p->st.truncated++;
            continue;
        }
        p->st.rx++;
        p->st.rx_bytes += msgs[i].msg_len;
        if (k != i) memcpy(bufs[k], bufs[i], msgs[i].msg_len);
        stamps[k] = msg_stamp(&msgs[i].msg_hdr);
        lens[k++] = msgs[i].msg_len;
    }
    return k;
}

icbc_status_t wanemu_port_send(struct wanemu_port *p, const uint8_t *frame, uint32_t len)
{
    ssize_t n;

    do {
        n = send(p->fd, frame, len, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t) len) {
        if (p->st.tx_errors++ == 0)
            icbc_warn("port %s: send of %u bytes: %s (further errors are only counted)", p->name,
                      len, n < 0 ? strerror(errno) : "short write");
        return ICBC_ERR_IO;
    }
    p->st.tx++;
    p->st.tx_bytes += len;
    return ICBC_OK;
}

void wanemu_port_poll_stats(struct wanemu_port *p)
{
    struct tpacket_stats ts;
    socklen_t sl = sizeof(ts);

    /* The kernel resets these counters on every read. */
    if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &ts, &sl) == 0)
        p->st.kernel_drops += ts.tp_drops;
}
