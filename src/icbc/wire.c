/* ICBC active-message wire header; see icbc_wire.h for the layout. */
#include "icbc_wire.h"
#include "icbc_bytes.h"

#include <string.h>

void icbc_am_hdr_pack(const icbc_am_hdr_t *hdr, void *buf)
{
    uint8_t *p = buf;

    p[0] = ICBC_WIRE_VERSION;
    p[1] = hdr->kind;
    icbc_put16(p + 2, hdr->handler_id);
    p[4] = hdr->src_vci;
    p[5] = hdr->dst_vci;
    icbc_put16(p + 6, hdr->am_hdr_sz);
    icbc_put32(p + 8, hdr->src_rank);
    icbc_put32(p + 12, hdr->seq);
    icbc_put64(p + 16, hdr->data_sz);
    p += ICBC_WIRE_AM_HDR_SIZE;
    memset(p, 0, ICBC_WIRE_EXT_SIZE(hdr->kind));
    switch (hdr->kind) {
    case ICBC_MSG_AM: break;
    case ICBC_MSG_CTS:
        icbc_put64(p, hdr->cookie);
        icbc_put32(p + 8, hdr->slot);
        icbc_put32(p + 12, hdr->gen);
        icbc_put32(p + 16, hdr->chunk_size);
        break;
    case ICBC_MSG_CHUNK:
        icbc_put32(p, hdr->slot);
        icbc_put32(p + 4, hdr->gen);
        icbc_put64(p + 8, hdr->offset);
        icbc_put16(p + 16, hdr->lane);
        break;
    case ICBC_MSG_ACK: icbc_put32(p, hdr->acked); break;
    case ICBC_MSG_DELIVERED:
        icbc_put16(p, hdr->lane);
        icbc_put64(p + 8, hdr->bytes);
        break;
    default: /* RTS, SYNC, SYNC_ACK, CONFIRM */ icbc_put64(p, hdr->cookie); break;
    }
}

/* The bytes [from, to) of P are zero. */
static int zero(const uint8_t *p, size_t from, size_t to)
{
    for (; from < to; from++)
        if (p[from] != 0)
            return 0;
    return 1;
}

/* The kind's own part at P into HDR; 0 when a zero byte is not or a
 * DELIVERED names no lane. */
static int parse_ext(const uint8_t *p, icbc_am_hdr_t *hdr)
{
    switch (hdr->kind) {
    case ICBC_MSG_AM: return 1;
    case ICBC_MSG_CTS:
        hdr->cookie = icbc_get64(p);
        hdr->slot = icbc_get32(p + 8);
        hdr->gen = icbc_get32(p + 12);
        hdr->chunk_size = icbc_get32(p + 16);
        return zero(p, 20, 24);
    case ICBC_MSG_CHUNK:
        hdr->slot = icbc_get32(p);
        hdr->gen = icbc_get32(p + 4);
        hdr->offset = icbc_get64(p + 8);
        hdr->lane = icbc_get16(p + 16);
        return zero(p, 18, 24);
    case ICBC_MSG_ACK: hdr->acked = icbc_get32(p); return zero(p, 4, 8);
    case ICBC_MSG_DELIVERED:
        hdr->lane = icbc_get16(p);
        hdr->bytes = icbc_get64(p + 8);
        return zero(p, 2, 8) && hdr->lane != ICBC_WIRE_NO_LANE;
    default: hdr->cookie = icbc_get64(p); return 1;
    }
}

icbc_status_t icbc_am_hdr_parse(const void *buf, size_t len, unsigned max_handler,
                                uint32_t world_size, icbc_am_hdr_t *hdr)
{
    const uint8_t *p = buf;

    if (buf == NULL || len < ICBC_WIRE_AM_HDR_SIZE || p[0] != ICBC_WIRE_VERSION)
        return ICBC_ERR_INVALID;
    memset(hdr, 0, sizeof(*hdr));
    hdr->kind = p[1];
    if (hdr->kind < ICBC_MSG_AM || hdr->kind > ICBC_MSG_KIND_LAST)
        return ICBC_ERR_INVALID;
    hdr->handler_id = icbc_get16(p + 2);
    hdr->src_vci = p[4];
    hdr->dst_vci = p[5];
    hdr->am_hdr_sz = icbc_get16(p + 6);
    hdr->src_rank = icbc_get32(p + 8);
    hdr->seq = icbc_get32(p + 12);
    hdr->data_sz = icbc_get64(p + 16);
    if (hdr->handler_id >= max_handler || hdr->src_rank >= world_size)
        return ICBC_ERR_INVALID;
    if (len != ICBC_WIRE_HDR_LEN(hdr->kind) + (size_t) hdr->am_hdr_sz)
        return ICBC_ERR_INVALID;
    if (hdr->kind != ICBC_MSG_AM && hdr->kind != ICBC_MSG_RTS && hdr->am_hdr_sz != 0)
        return ICBC_ERR_INVALID;
    if (ICBC_MSG_KIND_BARE(hdr->kind) && hdr->data_sz != 0)
        return ICBC_ERR_INVALID;
    return parse_ext(p + ICBC_WIRE_AM_HDR_SIZE, hdr) ? ICBC_OK : ICBC_ERR_INVALID;
}

icbc_status_t icbc_am_hdr_peek(const void *buf, size_t len, uint8_t *kind, uint32_t *seq)
{
    const uint8_t *p = buf;

    if (buf == NULL || len < ICBC_WIRE_AM_HDR_SIZE || p[0] != ICBC_WIRE_VERSION)
        return ICBC_ERR_INVALID;
    *kind = p[1];
    *seq = icbc_get32(p + 12);
    return ICBC_OK;
}

void icbc_am_hdr_set_seq(void *buf, uint32_t seq)
{
    icbc_put32((uint8_t *) buf + 12, seq);
}
