/* The 24-byte frame header: packing and the one parser that checks it. */
#include "bt_impl.h"

#include <stdio.h>
#include <string.h>

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t) (v >> 32));
    put32(p + 4, (uint32_t) v);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t) get32(p) << 32 | get32(p + 4);
}

void bt_frame_pack(const bt_frame_t *f, void *buf)
{
    unsigned char *p = buf;

    memcpy(p, BT_FRAME_MAGIC, 4);
    p[4] = BT_FRAME_VERSION;
    p[5] = f->type;
    p[6] = p[7] = 0;
    put32(p + 8, f->hdr_len);
    put32(p + 12, 0);
    put64(p + 16, f->payload_len);
}

static const char *type_name(int type)
{
    switch (type) {
    case BT_FRAME_HELLO: return "HELLO";
    case BT_FRAME_AUTH: return "AUTH";
    case BT_FRAME_AUTH_OK: return "AUTH_OK";
    case BT_FRAME_DATA: return "DATA";
    case BT_FRAME_CLOSE: return "CLOSE";
    }
    return "?";
}

/* Exact lengths of the handshake frames; DATA is bounded by the options. */
static int lengths_ok(const bt_frame_t *f, uint32_t max_hdr, uint64_t max_payload)
{
    switch (f->type) {
    case BT_FRAME_HELLO:
    case BT_FRAME_AUTH_OK: return f->hdr_len == BT_NONCE_SIZE && f->payload_len == 0;
    case BT_FRAME_AUTH:
        return f->hdr_len == BT_NONCE_SIZE + BT_MAC_SIZE && f->payload_len <= BT_ID_MAX;
    case BT_FRAME_CLOSE: return f->hdr_len == 0 && f->payload_len == 0;
    case BT_FRAME_DATA:
        return f->hdr_len <= max_hdr && f->hdr_len <= BT_HDR_MAX && f->payload_len <= max_payload;
    }
    return 0;
}

icbc_status_t bt_frame_parse(const void *buf, uint32_t max_hdr, uint64_t max_payload, bt_frame_t *f,
                             char *why, size_t whylen)
{
    const unsigned char *p = buf;

    if (memcmp(p, BT_FRAME_MAGIC, 4) != 0) {
        snprintf(why, whylen, "bad magic %02x%02x%02x%02x (not a bt_lib peer?)", p[0], p[1], p[2],
                 p[3]);
        return ICBC_ERR_INVALID;
    }
    if (p[4] != BT_FRAME_VERSION) {
        snprintf(why, whylen, "frame version %u, expected %u", p[4], BT_FRAME_VERSION);
        return ICBC_ERR_INVALID;
    }
    if (p[5] < BT_FRAME_HELLO || p[5] > BT_FRAME_CLOSE) {
        snprintf(why, whylen, "unknown frame type %u", p[5]);
        return ICBC_ERR_INVALID;
    }
    if (p[6] != 0 || p[7] != 0 || get32(p + 12) != 0) {
        snprintf(why, whylen, "reserved bytes of a %s frame are not zero", type_name(p[5]));
        return ICBC_ERR_INVALID;
    }
    f->type = p[5];
    f->hdr_len = get32(p + 8);
    f->payload_len = get64(p + 16);
    if (!lengths_ok(f, max_hdr, max_payload)) {
        snprintf(why, whylen,
                 "%s frame with header %u bytes, payload %llu bytes: out of bounds "
                 "(header <= %u, payload <= %llu for DATA)",
                 type_name(f->type), f->hdr_len, (unsigned long long) f->payload_len, max_hdr,
                 (unsigned long long) max_payload);
        return ICBC_ERR_INVALID;
    }
    return ICBC_OK;
}
