/*
 * Fuzzes impi_rx_feed (src/impi/rx.c): the bytes another IMPI host sends on
 * its connection, turned into packets and held to the job's layout (the
 * layout of impi_fuzz_layout.h). The input is this host and the peer host
 * (1 byte each, modulo the hosts), the size of the pieces the bytes arrive
 * in (1 byte: its top bit set, a piece that arrives while a payload is
 * being read is written in place, as the agent receives long payloads,
 * through impi_rx_payload_room and impi_rx_payload_filled), then the
 * bytes.
 * Checks:
 *   - every packet delivered comes from a process of the peer host and goes
 *     to one of this host (FINI: neither), with at most DATALEN payload
 *     bytes, and only DATA, DATASYNC and ICBC packets carry any, ICBC
 *     packets only between hosts of ICBC clients;
 *   - a refusal comes with a reason naming the peer host, and every later
 *     piece is refused too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_fuzz_layout.h"
#include "impi_rx.h"

static int self_host, peer_host, packets;

static void on_packet(void *arg, const impi_rx_pkt_t *p)
{
    const impi_layout_t *l = &layout;

    packets++;
    FUZZ_CHECK(p->len == p->hdr->len && p->len <= l->datalen);
    if (p->hdr->type == IMPI_PK_FINI) {
        FUZZ_CHECK(p->src == -1 && p->dest == -1 && p->len == 0);
        return;
    }
    const impi_host_t *peer = &l->hosts[peer_host], *self = &l->hosts[self_host];
    FUZZ_CHECK(p->src >= peer->first_rank && p->src < peer->first_rank + (int) peer->nprocs);
    FUZZ_CHECK(p->dest >= self->first_rank && p->dest < self->first_rank + (int) self->nprocs);
    FUZZ_CHECK(p->len == 0 || p->hdr->type == IMPI_PK_DATA || p->hdr->type == IMPI_PK_DATASYNC ||
               p->hdr->type == IMPI_PK_ICBC);
    /* ICBC's own packets only between ICBC clients */
    FUZZ_CHECK(p->hdr->type != IMPI_PK_ICBC || (peer->client != 2 && self->client != 2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_rx_t rx;
    char err[256];

    if (layout.nclients == 0)
        build_layout();
    if (size < 3)
        return 0;
    self_host = data[0] % layout.nhosts_total;
    peer_host = data[1] % layout.nhosts_total;
    if (peer_host == self_host)
        peer_host = (peer_host + 1) % layout.nhosts_total;
    size_t piece = 1 + (data[2] & 0x7f) % 200;
    int in_place = (data[2] & 0x80) != 0;
    FUZZ_CHECK(impi_rx_init(&rx, &layout, self_host, peer_host) == ICBC_OK);
    packets = 0;
    int failed = 0;
    for (size_t i = 3; i < size;) {
        size_t n = size - i < piece ? size - i : piece;
        size_t want;
        uint8_t *room = in_place ? impi_rx_payload_room(&rx, &want) : NULL;
        if (room != NULL) {
            FUZZ_CHECK(want > 0 && want <= layout.datalen);
            size_t k = n < want ? n : want; /* the rest of the piece comes next */
            memcpy(room, data + i, k);
            impi_rx_payload_filled(&rx, k, on_packet, NULL);
            i += k;
            continue;
        }
        uint8_t *copy = malloc(n); /* exactly its bytes, for ASan */
        memcpy(copy, data + i, n);
        err[0] = '\0';
        icbc_status_t rc = impi_rx_feed(&rx, copy, n, on_packet, NULL, err, sizeof(err));
        free(copy);
        i += n;
        if (rc != ICBC_OK) {
            FUZZ_CHECK(rc == ICBC_ERR_INVALID && strncmp(err, "IMPI host ", 10) == 0);
            failed = 1;
        } else {
            FUZZ_CHECK(!failed);
        }
    }
    impi_rx_free(&rx);
    return 0;
}
