/*
 * Which network interfaces reach the job's other nodes, tried at start-up
 * when nothing names the fabric (no router file with one, no device
 * variable). A host may have interfaces that do not carry traffic between
 * nodes (a management network whose switch isolates its ports, a WAN-facing
 * NIC), and UCX, left to itself, offers every one of them in its addresses:
 * a peer that picks one it cannot reach fails at the first message.
 *
 * Every process listens on each of its IPv4 interfaces (up, not loopback)
 * and publishes a card of them; each then connects, from each of its
 * interfaces, to a process of another node on the addresses that interface
 * should reach (the same subnet, or the interface the kernel routes the
 * address through), all at once and bounded by a timeout. The interfaces
 * whose connection completed are the fabric devices (UCX_NET_DEVICES).
 * Connections complete in the listener's backlog: nobody accepts them.
 */
#ifndef ICBC_NETPROBE_H
#define ICBC_NETPROBE_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_NETPROBE_MAX_IFACES 8

/* What a process publishes: its interfaces and the port it listens on at
 * each (plain memory: the processes of a job run one program). */
typedef struct icbc_netprobe_card {
    uint32_t n;
    struct {
        char name[IF_NAMESIZE];
        uint32_t addr, mask; /* network order */
        uint16_t port;
    } ifs[ICBC_NETPROBE_MAX_IFACES];
} icbc_netprobe_card_t;

typedef struct icbc_netprobe {
    icbc_netprobe_card_t card;
    int fds[ICBC_NETPROBE_MAX_IFACES];
} icbc_netprobe_t;

/* Listens on every IPv4 interface of this host that is up and not
 * loopback (at most ICBC_NETPROBE_MAX_IFACES); the card in P->card. */
icbc_status_t icbc_netprobe_listen(icbc_netprobe_t *p);
/* Closes the listeners (once every process has tried). */
void icbc_netprobe_close(icbc_netprobe_t *p);

/* Whether two cards share an address (the processes run on one node). */
int icbc_netprobe_same_node(const icbc_netprobe_card_t *a, const icbc_netprobe_card_t *b);

/* Connects from each interface of MINE to PEER's addresses that interface
 * should reach, at once, waiting at most TIMEOUT_MS. The interfaces that
 * reached PEER go into DEVS, joined by ',' (empty when none); returns
 * their number. */
int icbc_netprobe_try(const icbc_netprobe_card_t *mine, const icbc_netprobe_card_t *peer,
                      int timeout_ms, char *devs, size_t devslen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_NETPROBE_H */
