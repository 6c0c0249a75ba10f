/*
 * The links between the relays of one private client (trunking,
 * docs/impi-relay.md): frames {Uint4 kind, Uint4 a, Uint4 b, Uint4 len} and
 * LEN bytes, big-endian.
 *
 *   start-up, a follower and the leader (on the leader's start-up port):
 *   HELLO    follower -> leader, first: A its rank; body its inside and
 *            outside IPv4 addresses (4 bytes each), outside port and link
 *            port (4 bytes each)
 *   CLIENTS  leader -> follower: A the number of clients, B the private one
 *   PORTS    follower -> leader: its persona ports, 4 bytes per client (0
 *            for the private one)
 *   TABLES   leader -> follower: A the number of relays; body per relay its
 *            inside address and link port (4 bytes each), then the inside
 *            and the outside layout, each as 4 bytes of length and
 *            impi_layout_pack's bytes
 *
 *   packets, between every two relays (on the link port of the lower):
 *   RANK     the connecting relay, first: A its rank
 *   OUT      a packet for the receiver's connection to outside host A
 *   IN       a packet for the receiver's persona of client B, to inside
 *            host A
 *   FINI_IN  inside host A sent FINI to a persona of the sender
 *   FINI_OUT outside host A sent FINI to the sender
 *
 * A packet in OUT and IN is whole (header and payload) and already has the
 * process ids of the side it goes to.
 */
#ifndef ICBC_IMPI_RELAY_LINK_H
#define ICBC_IMPI_RELAY_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IMPI_LINK_HDR_SIZE 16

enum {
    IMPI_LINK_HELLO = 0x49524c59u, /* "IRLY": what tells a follower from a client */
    IMPI_LINK_CLIENTS = 1,
    IMPI_LINK_PORTS = 2,
    IMPI_LINK_TABLES = 3,
    IMPI_LINK_RANK = 4,
    IMPI_LINK_OUT = 5,
    IMPI_LINK_IN = 6,
    IMPI_LINK_FINI_IN = 7,
    IMPI_LINK_FINI_OUT = 8,
};

void impi_link_hdr_pack(uint32_t kind, uint32_t a, uint32_t b, uint32_t len, uint8_t *buf);

typedef void (*impi_link_cb_t)(void *arg, uint32_t kind, uint32_t a, uint32_t b,
                               const uint8_t *body, size_t len);

/* Frames in, in any pieces. */
typedef struct impi_link_rx {
    uint8_t hdr[IMPI_LINK_HDR_SIZE];
    uint32_t kind, a, b, len;
    size_t have;
    int in_body;
    uint8_t *body; /* owned, grown to the largest frame */
    size_t cap;
    uint32_t max_len; /* the largest body taken */
    int failed;
} impi_link_rx_t;

void impi_link_rx_init(impi_link_rx_t *rx, uint32_t max_len);
void impi_link_rx_free(impi_link_rx_t *rx);
/* CB once per whole frame. ICBC_ERR_INVALID with the reason in ERR: an
 * unknown kind or a body above MAX_LEN; the link must close (and every
 * later call says so again). */
icbc_status_t impi_link_rx_feed(impi_link_rx_t *rx, const void *bytes, size_t len,
                                impi_link_cb_t cb, void *arg, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_RELAY_LINK_H */
