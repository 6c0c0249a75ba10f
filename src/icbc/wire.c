/* ICBC active-message wire header; see icbc_wire.h for the layout. */
#include "icbc_wire.h"
#include "icbc_bytes.h"

#include <arpa/inet.h>
#include <string.h>

void icbc_am_hdr_pack(const icbc_am_hdr_t *hdr, void *buf)
{
    uint8_t *p = buf;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;

    p[0] = ICBC_WIRE_VERSION;
    p[1] = hdr->kind;
    v16 = htons(hdr->handler_id);
    memcpy(p + 2, &v16, 2);
    p[4] = hdr->src_vci;
    p[5] = hdr->dst_vci;
    v16 = htons(hdr->am_hdr_sz);
    memcpy(p + 6, &v16, 2);
    v32 = htonl(hdr->src_rank);
    memcpy(p + 8, &v32, 4);
    v32 = htonl(hdr->seq);
    memcpy(p + 12, &v32, 4);
    v64 = icbc_hton64(hdr->data_sz);
    memcpy(p + 16, &v64, 8);
    if (hdr->kind != ICBC_MSG_AM) {
        v64 = icbc_hton64(hdr->cookie);
        memcpy(p + 24, &v64, 8);
        v32 = htonl(hdr->slot);
        memcpy(p + 32, &v32, 4);
        v32 = htonl(hdr->gen);
        memcpy(p + 36, &v32, 4);
        v64 = icbc_hton64(hdr->offset);
        memcpy(p + 40, &v64, 8);
    }
}

icbc_status_t icbc_am_hdr_parse(const void *buf, size_t len, unsigned max_handler,
                                uint32_t world_size, icbc_am_hdr_t *hdr)
{
    const uint8_t *p = buf;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;

    if (buf == NULL || len < ICBC_WIRE_AM_HDR_SIZE || p[0] != ICBC_WIRE_VERSION)
        return ICBC_ERR_INVALID;
    hdr->kind = p[1];
    if (hdr->kind < ICBC_MSG_AM || hdr->kind > ICBC_MSG_KIND_LAST)
        return ICBC_ERR_INVALID;
    memcpy(&v16, p + 2, 2);
    hdr->handler_id = ntohs(v16);
    hdr->src_vci = p[4];
    hdr->dst_vci = p[5];
    memcpy(&v16, p + 6, 2);
    hdr->am_hdr_sz = ntohs(v16);
    memcpy(&v32, p + 8, 4);
    hdr->src_rank = ntohl(v32);
    memcpy(&v64, p + 16, 8);
    hdr->data_sz = icbc_hton64(v64);
    memcpy(&v32, p + 12, 4);
    hdr->seq = ntohl(v32);
    if (hdr->handler_id >= max_handler || hdr->src_rank >= world_size)
        return ICBC_ERR_INVALID;
    if (len != ICBC_WIRE_HDR_LEN(hdr->kind) + (size_t) hdr->am_hdr_sz)
        return ICBC_ERR_INVALID;
    hdr->cookie = 0;
    hdr->slot = hdr->gen = 0;
    hdr->offset = 0;
    if (hdr->kind != ICBC_MSG_AM) {
        memcpy(&v64, p + 24, 8);
        hdr->cookie = icbc_hton64(v64);
        memcpy(&v32, p + 32, 4);
        hdr->slot = ntohl(v32);
        memcpy(&v32, p + 36, 4);
        hdr->gen = ntohl(v32);
        memcpy(&v64, p + 40, 8);
        hdr->offset = icbc_hton64(v64);
        if (hdr->kind != ICBC_MSG_RTS && hdr->am_hdr_sz != 0)
            return ICBC_ERR_INVALID;
        if (ICBC_MSG_KIND_BARE(hdr->kind) && hdr->data_sz != 0)
            return ICBC_ERR_INVALID;
    }
    return ICBC_OK;
}

icbc_status_t icbc_am_hdr_peek(const void *buf, size_t len, uint8_t *kind, uint32_t *seq)
{
    const uint8_t *p = buf;
    uint32_t v32;

    if (buf == NULL || len < ICBC_WIRE_AM_HDR_SIZE || p[0] != ICBC_WIRE_VERSION)
        return ICBC_ERR_INVALID;
    *kind = p[1];
    memcpy(&v32, p + 12, 4);
    *seq = ntohl(v32);
    return ICBC_OK;
}

void icbc_am_hdr_set_seq(void *buf, uint32_t seq)
{
    uint32_t v32 = htonl(seq);

    memcpy((uint8_t *) buf + 12, &v32, 4);
}
