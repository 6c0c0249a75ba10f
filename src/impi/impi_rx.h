/*
 * The receive side of a connection between two IMPI hosts: bytes in,
 * whole packets out, each held to the job's layout before anyone uses it.
 * The port faces the WAN, so a packet the peer host may not send ends the
 * connection with a reason: an unknown type or a payload beyond DATALEN or
 * its message (impi_pkt_hdr_parse), a source process that is not one of the
 * peer host's, a destination that is not one of this host's, an ICBC
 * packet unless both hosts' clients are ICBC. FINI, which LAM sends with
 * empty process ids, is taken as it is.
 */
#ifndef ICBC_IMPI_RX_H
#define ICBC_IMPI_RX_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"
#include "impi_client.h"
#include "impi_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A whole packet: its header, the world ranks of its source and
 * destination (-1 for FINI) and its payload (DATA and DATASYNC). */
typedef struct impi_rx_pkt {
    const impi_pkt_hdr_t *hdr;
    int src, dest;
    const uint8_t *payload;
    size_t len;
} impi_rx_pkt_t;

typedef void (*impi_rx_cb_t)(void *arg, const impi_rx_pkt_t *pkt);

typedef struct impi_rx {
    const impi_layout_t *layout;
    int self_host, peer_host;
    uint8_t hdr_bytes[IMPI_PKT_HDR_SIZE];
    size_t have;    /* header bytes, then payload bytes, of the packet being read */
    int in_payload; /* the header is read and checked */
    impi_pkt_hdr_t hdr;
    int src, dest;
    uint8_t *payload; /* owned: DATALEN bytes */
    int failed;
} impi_rx_t;

/* For the connection between SELF_HOST and PEER_HOST of LAYOUT. */
icbc_status_t impi_rx_init(impi_rx_t *rx, const impi_layout_t *layout, int self_host,
                           int peer_host);
void impi_rx_free(impi_rx_t *rx);
/* LEN bytes from the connection: CB runs once per whole packet, in order.
 * ICBC_ERR_INVALID with the reason in ERR: the connection must close (and
 * every later call says so again). */
icbc_status_t impi_rx_feed(impi_rx_t *rx, const void *bytes, size_t len, impi_rx_cb_t cb, void *arg,
                           char *err, size_t errlen);

/* While the payload of a packet is being read: where its next bytes go
 * and how many it still wants (*WANT), so that a reader can receive them
 * there itself (a large payload straight from the socket, no copy); NULL
 * otherwise (header bytes come first, or the connection failed). */
uint8_t *impi_rx_payload_room(impi_rx_t *rx, size_t *want);
/* N (at most *WANT) bytes were written at impi_rx_payload_room's pointer:
 * CB runs if that completed the packet. */
void impi_rx_payload_filled(impi_rx_t *rx, size_t n, impi_rx_cb_t cb, void *arg);

/* Between a packet's checked header and its last byte: the packet as far
 * as it came (PKT->len is the payload bytes read so far, PKT->hdr->len the
 * whole), and 1; 0 when no packet is partly read. For a reader that hands
 * the bytes on as they come (the relay's cut-through). */
int impi_rx_partial(const impi_rx_t *rx, impi_rx_pkt_t *pkt);

/* Inside CB only: the buffer holding the packet being delivered is the
 * caller's from now on (it is pkt->payload), and FRESH, of the layout's
 * DATALEN bytes, takes its place for the packets that follow; the rx owns
 * FRESH (impi_rx_free frees it). */
uint8_t *impi_rx_swap_payload(impi_rx_t *rx, uint8_t *fresh);

/* The world rank of process PROC on host HOST of LAYOUT (by the IPv4 bytes
 * 12..15 of its P_IPV6 and its pid), or -1. */
int impi_layout_proc_rank(const impi_layout_t *layout, int host, const impi_proc_t *proc);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_RX_H */
