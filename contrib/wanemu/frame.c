/* Frame inspection: the TCP/UDP payload a frame carries, for the trace. */
#include "wanemu.h"

#define ETH_HLEN_ 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_VLAN 0x8100
#define PROTO_TCP 6
#define PROTO_UDP 17

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t) (p[0] << 8 | p[1]);
}

/* Payload of a transport header at l4 with l4len bytes of IP payload. */
static uint32_t l4_payload(int proto, const uint8_t *l4, size_t avail, uint32_t l4len)
{
    uint32_t hl;

    if (proto == PROTO_UDP) {
        if (avail < 8 || l4len < 8) return 0;
        return l4len - 8;
    }
    if (proto == PROTO_TCP) {
        if (avail < 20) return 0;
        hl = (uint32_t) (l4[12] >> 4) * 4;
        if (hl < 20 || l4len < hl) return 0;
        return l4len - hl;
    }
    return 0;
}

uint32_t wanemu_frame_payload(const uint8_t *frame, size_t len)
{
    size_t off = ETH_HLEN_;
    uint16_t type;

    if (len < ETH_HLEN_) return 0;
    type = get16(frame + 12);
    if (type == ETHERTYPE_VLAN) {
        if (len < ETH_HLEN_ + 4) return 0;
        type = get16(frame + 16);
        off += 4;
    }
    if (type == ETHERTYPE_IPV4) {
        const uint8_t *ip = frame + off;
        uint32_t ihl, tot;

        if (len < off + 20 || (ip[0] >> 4) != 4) return 0;
        ihl = (uint32_t) (ip[0] & 0x0f) * 4;
        tot = get16(ip + 2);
        if (ihl < 20 || tot < ihl || len < off + ihl) return 0;
        /* Only the first fragment carries the transport header. */
        if ((get16(ip + 6) & 0x1fff) != 0) return 0;
        return l4_payload(ip[9], ip + ihl, len - off - ihl, tot - ihl);
    }
    if (type == ETHERTYPE_IPV6) {
        const uint8_t *ip = frame + off;

        if (len < off + 40 || (ip[0] >> 4) != 6) return 0;
        return l4_payload(ip[6], ip + 40, len - off - 40, get16(ip + 4));
    }
    return 0;
}
