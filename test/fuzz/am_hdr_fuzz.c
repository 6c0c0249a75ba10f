/*
 * Fuzzes icbc_am_hdr_parse (icbc_wire.h). The input is 2 bytes max_handler
 * and 4 bytes world_size (big endian), then the received wire header and
 * MPI layer's header. Checks:
 *   - it accepts exactly the headers icbc_wire.h describes (an independent
 *     check of version, kind, handler and rank bounds, the length rule and
 *     the per-kind rules; the sequence number may take any value);
 *   - the MPI header it announces ends exactly at the end of the buffer;
 *   - every field a kind does not carry is zero (each field one meaning);
 *   - an accepted header packs back to the same ICBC_WIRE_HDR_LEN bytes and
 *     parses again (with the same MPI header bytes) to the same fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "icbc_wire.h"
#include "fuzz_check.h"

#define PARAMS_SIZE 6

/* Size of each kind's own part and its bytes that must be zero, as
 * icbc_wire.h lists them (an independent table, not the header's macro). */
static const struct {
    size_t ext, zero_from, zero_to;
} kinds[] = {
    [ICBC_MSG_AM] = { 0, 0, 0 },         [ICBC_MSG_RTS] = { 8, 0, 0 },
    [ICBC_MSG_CTS] = { 24, 20, 24 },     [ICBC_MSG_CHUNK] = { 24, 18, 24 },
    [ICBC_MSG_SYNC] = { 8, 0, 0 },       [ICBC_MSG_SYNC_ACK] = { 8, 0, 0 },
    [ICBC_MSG_CONFIRM] = { 8, 0, 0 },    [ICBC_MSG_ACK] = { 8, 4, 8 },
    [ICBC_MSG_DELIVERED] = { 16, 2, 8 },
};

/* What icbc_wire.h says a valid header is. */
static int expect_valid(const uint8_t *p, size_t len, unsigned max_handler, uint32_t world_size)
{
    uint8_t kind;
    uint16_t mpi_hdr;
    size_t want, i;

    if (len < ICBC_WIRE_AM_HDR_SIZE || p[0] != ICBC_WIRE_VERSION)
        return 0;
    kind = p[1];
    if (kind < ICBC_MSG_AM || kind > ICBC_MSG_DELIVERED)
        return 0;
    if (icbc_get16(p + 2) >= max_handler || icbc_get32(p + 8) >= world_size)
        return 0;
    mpi_hdr = icbc_get16(p + 6);
    want = 24 + kinds[kind].ext + (size_t) mpi_hdr;
    if (len != want)
        return 0;
    for (i = kinds[kind].zero_from; i < kinds[kind].zero_to; i++)
        if (p[24 + i] != 0)
            return 0;
    if (kind == ICBC_MSG_DELIVERED && icbc_get16(p + 24) == 0xffff)
        return 0;
    if (kind != ICBC_MSG_AM && kind != ICBC_MSG_RTS && mpi_hdr != 0)
        return 0;
    if ((kind == ICBC_MSG_CTS || kind == ICBC_MSG_SYNC || kind == ICBC_MSG_SYNC_ACK ||
         kind == ICBC_MSG_CONFIRM || kind == ICBC_MSG_ACK || kind == ICBC_MSG_DELIVERED) &&
        icbc_get64(p + 16) != 0)
        return 0;
    return 1;
}

static int same_hdr(const icbc_am_hdr_t *a, const icbc_am_hdr_t *b)
{
    return a->kind == b->kind && a->handler_id == b->handler_id && a->src_vci == b->src_vci &&
           a->dst_vci == b->dst_vci && a->am_hdr_sz == b->am_hdr_sz && a->src_rank == b->src_rank &&
           a->seq == b->seq && a->data_sz == b->data_sz && a->cookie == b->cookie &&
           a->slot == b->slot && a->gen == b->gen && a->offset == b->offset &&
           a->chunk_size == b->chunk_size && a->lane == b->lane && a->bytes == b->bytes &&
           a->acked == b->acked;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    icbc_am_hdr_t h, h2;
    unsigned max_handler;
    uint32_t world_size;
    const uint8_t *buf;
    uint8_t *copy;
    size_t len, hlen;
    icbc_status_t st;

    if (size < PARAMS_SIZE)
        return 0;
    max_handler = icbc_get16(data);
    world_size = icbc_get32(data + 2);
    buf = data + PARAMS_SIZE;
    len = size - PARAMS_SIZE;

    memset(&h, 0, sizeof(h));
    st = icbc_am_hdr_parse(buf, len, max_handler, world_size, &h);
    FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_INVALID);
    FUZZ_CHECK((st == ICBC_OK) == expect_valid(buf, len, max_handler, world_size));
    if (st != ICBC_OK)
        return 0;

    FUZZ_CHECK(h.kind >= ICBC_MSG_AM && h.kind <= ICBC_MSG_KIND_LAST);
    {
        uint8_t kind;
        uint32_t seq;
        FUZZ_CHECK(icbc_am_hdr_peek(buf, len, &kind, &seq) == ICBC_OK);
        FUZZ_CHECK(kind == h.kind && seq == h.seq);
    }
    FUZZ_CHECK(h.handler_id < max_handler);
    FUZZ_CHECK(h.src_rank < world_size);
    hlen = ICBC_WIRE_HDR_LEN(h.kind);
    FUZZ_CHECK(hlen + h.am_hdr_sz == len);
    {
        int k = h.kind, has_cookie = k == ICBC_MSG_RTS || k == ICBC_MSG_CTS || k == ICBC_MSG_SYNC ||
                                     k == ICBC_MSG_SYNC_ACK || k == ICBC_MSG_CONFIRM;
        int has_slot = k == ICBC_MSG_CTS || k == ICBC_MSG_CHUNK;
        FUZZ_CHECK(has_cookie || h.cookie == 0);
        FUZZ_CHECK(has_slot || (h.slot == 0 && h.gen == 0));
        FUZZ_CHECK(k == ICBC_MSG_CTS || h.chunk_size == 0);
        FUZZ_CHECK(k == ICBC_MSG_CHUNK || h.offset == 0);
        FUZZ_CHECK(k == ICBC_MSG_CHUNK || k == ICBC_MSG_DELIVERED || h.lane == 0);
        FUZZ_CHECK(k == ICBC_MSG_DELIVERED || h.bytes == 0);
        FUZZ_CHECK(k == ICBC_MSG_ACK || h.acked == 0);
    }
    if (ICBC_MSG_KIND_BARE(h.kind))
        FUZZ_CHECK(h.am_hdr_sz == 0 && h.data_sz == 0);
    if (h.kind == ICBC_MSG_CHUNK)
        FUZZ_CHECK(h.am_hdr_sz == 0);

    /* Round trip: pack the header in front of the same MPI header bytes. */
    copy = malloc(len);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, buf, len);
    memset(copy, 0xee, hlen);
    icbc_am_hdr_pack(&h, copy);
    FUZZ_CHECK(memcmp(copy, buf, len) == 0);
    memset(&h2, 0xa5, sizeof(h2));
    FUZZ_CHECK(icbc_am_hdr_parse(copy, len, max_handler, world_size, &h2) == ICBC_OK);
    FUZZ_CHECK(same_hdr(&h, &h2));
    free(copy);
    return 0;
}
