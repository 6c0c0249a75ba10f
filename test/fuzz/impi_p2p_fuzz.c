/*
 * Fuzzes the receive side of IMPI point-to-point messages: the bytes another
 * IMPI host sends, cut into packets by impi_rx_feed (src/impi/rx.c) and
 * acted on by impi_p2p_packet (src/impi/p2p.c), on the layout of
 * impi_fuzz_layout.h. Before the bytes come, this host has sends of its
 * own in flight to the peer (a long message, a synchronous one, and enough
 * short ones to fill the flow-control window), so that SYNCACK and
 * PROTOACK find something to act on; every message that arrives is matched
 * at once. The input is this host and the peer host (1 byte each, modulo
 * the hosts), the size of the pieces (1 byte), then the bytes.
 * Checks:
 *   - every packet this host emits parses again (impi_pkt_hdr_parse), with
 *     at most DATALEN payload bytes;
 *   - the bytes of a long message are handed on within the message, and
 *     only for a long message this host matched;
 *   - a send completes once, and only a send that was started;
 *   - a refusal comes with a reason naming the peer host.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "impi_fuzz_layout.h"
#include "impi_p2p.h"
#include "impi_rx.h"

#define NSENDS 30
#define NLONGS 64

static impi_p2p_t *p2p;
static int sends_done[NSENDS + 1];
static struct {
    uint64_t drqid, msglen, received;
} longs[NLONGS];
static int nlongs;
static uint8_t *sendbuf;

static icbc_status_t emit(void *arg, int host, const uint8_t *hdr, const void *payload, size_t len)
{
    impi_pkt_hdr_t h;

    (void) arg;
    (void) payload;
    FUZZ_CHECK(host >= 0 && host < layout.nhosts_total);
    FUZZ_CHECK(impi_pkt_hdr_parse(hdr, layout.datalen, &h) == ICBC_OK);
    FUZZ_CHECK(len <= layout.datalen && len == h.len);
    return ICBC_OK;
}

static void arrived(void *arg, const impi_msg_t *m)
{
    uint64_t drqid = 0;

    (void) arg;
    FUZZ_CHECK(m->len <= m->msglen && m->len <= layout.datalen);
    if (m->kind == IMPI_MSG_SHORT)
        return;
    FUZZ_CHECK(impi_p2p_matched(p2p, m, &drqid) == ICBC_OK);
    if (m->kind == IMPI_MSG_LONG_HEAD && nlongs < NLONGS) {
        longs[nlongs].drqid = drqid;
        longs[nlongs].msglen = m->msglen;
        longs[nlongs].received = m->len;
        nlongs++;
    }
}

static void data(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *bytes, size_t len,
                 int last)
{
    (void) arg;
    for (int i = 0; i < nlongs; i++) {
        if (longs[i].drqid != drqid)
            continue;
        FUZZ_CHECK(offset == longs[i].received && offset + len <= longs[i].msglen);
        if (len) { /* the first and last byte are readable (ASan) */
            volatile uint8_t first = bytes[0], end = bytes[len - 1];
            (void) first;
            (void) end;
        }
        longs[i].received += len;
        FUZZ_CHECK(!last == (longs[i].received < longs[i].msglen));
        return;
    }
    /* a long message beyond NLONGS is not tracked; none other may come */
    FUZZ_CHECK(nlongs == NLONGS);
}

static void send_done(void *arg, uint64_t srqid)
{
    (void) arg;
    FUZZ_CHECK(srqid >= 1 && srqid <= NSENDS && !sends_done[srqid]);
    sends_done[srqid] = 1;
}

static int cancel(void *arg, int src, uint64_t srqid)
{
    (void) arg;
    (void) src;
    return (int) (srqid & 1);
}

static const impi_p2p_ops_t ops = { emit, arrived, data, send_done, cancel, NULL };

struct feed {
    int host, failed;
    char err[256];
};

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    struct feed *f = arg;

    if (f->failed)
        return;
    f->err[0] = '\0';
    if (impi_p2p_packet(p2p, f->host, pkt, f->err, sizeof(f->err)) != ICBC_OK) {
        FUZZ_CHECK(strncmp(f->err, "IMPI host ", 10) == 0);
        f->failed = 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size)
{
    impi_rx_t rx;
    struct feed f = { 0 };

    if (layout.nclients == 0)
        build_layout();
    if (size < 3)
        return 0;
    int self = bytes[0] % layout.nhosts_total;
    int peer = bytes[1] % layout.nhosts_total;
    if (peer == self)
        peer = (peer + 1) % layout.nhosts_total;
    size_t piece = 1 + bytes[2] % 200;
    size_t biglen = 2 * (size_t) layout.datalen + 5;
    if (!sendbuf)
        sendbuf = calloc(1, biglen);
    FUZZ_CHECK(sendbuf != NULL);
    FUZZ_CHECK(impi_p2p_create(&layout, self, &ops, NULL, &p2p) == ICBC_OK);
    FUZZ_CHECK(impi_rx_init(&rx, &layout, self, peer) == ICBC_OK);
    memset(sends_done, 0, sizeof(sends_done));
    nlongs = 0;
    for (int i = 1; i <= NSENDS; i++) {
        impi_send_t s = { .src = layout.hosts[self].first_rank,
                          .dest = layout.hosts[peer].first_rank,
                          .lsrank = 0,
                          .tag = i,
                          .cid = 0,
                          .srqid = (uint64_t) i,
                          .buf = sendbuf,
                          .len = i == 1 ? biglen : (size_t) i,
                          .sync = i == 2 };
        FUZZ_CHECK(impi_p2p_send(p2p, &s) == ICBC_OK);
    }
    f.host = peer;
    for (size_t i = 3; i < size && !f.failed; i += piece) {
        size_t n = size - i < piece ? size - i : piece;
        uint8_t *copy = malloc(n); /* exactly its bytes, for ASan */
        memcpy(copy, bytes + i, n);
        f.err[0] = '\0';
        icbc_status_t rc = impi_rx_feed(&rx, copy, n, on_packet, &f, f.err, sizeof(f.err));
        free(copy);
        if (rc != ICBC_OK) {
            FUZZ_CHECK(strncmp(f.err, "IMPI host ", 10) == 0);
            f.failed = 1;
        }
    }
    impi_rx_free(&rx);
    impi_p2p_destroy(p2p);
    p2p = NULL;
    return 0;
}
