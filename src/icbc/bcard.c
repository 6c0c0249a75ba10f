/* Business card encoding and parsing; see icbc_bcard.h for the layout. */
#include "icbc_bcard.h"
#include "icbc_bytes.h"

#include <stdio.h>
#include <string.h>

#define ICBC_BCARD_MACHINE_SIZE 8

size_t icbc_bcard_size(const char *node, size_t fabric_addr_len)
{
    return ICBC_BCARD_HEADER_SIZE + strlen(node) + fabric_addr_len;
}

size_t icbc_bcard_size_tcp(const char *node, size_t fabric_addr_len, int ntcp)
{
    return icbc_bcard_size(node, fabric_addr_len) + 1 + (size_t) ntcp * ICBC_BCARD_TCP_SIZE +
           ICBC_BCARD_MACHINE_SIZE;
}

static icbc_status_t encode(const char *node, const void *fabric_addr, size_t fabric_addr_len,
                            const icbc_bcard_tcp_t *tcp, int ntcp, uint64_t machine, int with_count,
                            void *buf, size_t cap, size_t *len_p);

icbc_status_t icbc_bcard_encode(const char *node, const void *fabric_addr, size_t fabric_addr_len,
                                void *buf, size_t cap, size_t *len_p)
{
    return encode(node, fabric_addr, fabric_addr_len, NULL, 0, 0, 0, buf, cap, len_p);
}

/* Always writes the count, also 0: whatever pads the card after it (PMI
 * fills slots of different lengths) is then never read as endpoints. */
icbc_status_t icbc_bcard_encode_tcp(const char *node, const void *fabric_addr,
                                    size_t fabric_addr_len, const icbc_bcard_tcp_t *tcp, int ntcp,
                                    uint64_t machine, void *buf, size_t cap, size_t *len_p)
{
    return encode(node, fabric_addr, fabric_addr_len, tcp, ntcp, machine, 1, buf, cap, len_p);
}

static int valid_tcp(const icbc_bcard_tcp_t *t)
{
    return (t->role == ICBC_BCARD_TCP_WAN || t->role == ICBC_BCARD_TCP_FABRIC) &&
           (t->family == 4 || t->family == 6) && t->port != 0;
}

static icbc_status_t encode(const char *node, const void *fabric_addr, size_t fabric_addr_len,
                            const icbc_bcard_tcp_t *tcp, int ntcp, uint64_t machine, int with_count,
                            void *buf, size_t cap, size_t *len_p)
{
    size_t n = strlen(node);
    uint8_t *p = buf;

    if (n == 0 || n > ICBC_BCARD_MAX_NAME || fabric_addr_len > UINT32_MAX || ntcp < 0 ||
        ntcp > ICBC_BCARD_MAX_TCP)
        return ICBC_ERR_INVALID;
    for (int i = 0; i < ntcp; i++)
        if (!valid_tcp(&tcp[i]))
            return ICBC_ERR_INVALID;
    if ((with_count ? icbc_bcard_size_tcp(node, fabric_addr_len, ntcp)
                    : icbc_bcard_size(node, fabric_addr_len)) > cap)
        return ICBC_ERR_INVALID;
    icbc_put32(p, ICBC_BCARD_MAGIC);
    icbc_put16(p + 4, ICBC_BCARD_VERSION);
    icbc_put16(p + 6, (uint16_t) n);
    icbc_put32(p + 8, (uint32_t) fabric_addr_len);
    memcpy(p + ICBC_BCARD_HEADER_SIZE, node, n);
    if (fabric_addr_len > 0)
        memcpy(p + ICBC_BCARD_HEADER_SIZE + n, fabric_addr, fabric_addr_len);
    *len_p = ICBC_BCARD_HEADER_SIZE + n + fabric_addr_len;
    if (with_count) {
        uint8_t *q = p + *len_p;
        *q++ = (uint8_t) ntcp;
        for (int i = 0; i < ntcp; i++, q += ICBC_BCARD_TCP_SIZE) {
            q[0] = tcp[i].role;
            q[1] = tcp[i].family;
            icbc_put16(q + 2, tcp[i].port);
            memcpy(q + 4, tcp[i].addr, 16);
        }
        icbc_put32(q, (uint32_t) (machine >> 32));
        icbc_put32(q + 4, (uint32_t) machine);
        q += ICBC_BCARD_MACHINE_SIZE;
        *len_p = (size_t) (q - p);
    }
    return ICBC_OK;
}

const icbc_bcard_tcp_t *icbc_bcard_find_tcp(const icbc_bcard_t *card, icbc_bcard_tcp_role_t role)
{
    for (int i = 0; i < card->ntcp; i++)
        if (card->tcp[i].role == role)
            return &card->tcp[i];
    return NULL;
}

static icbc_status_t bad(char *err, size_t errlen, const char *what)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", what);
    return ICBC_ERR_INVALID;
}

icbc_status_t icbc_bcard_parse(const void *buf, size_t len, icbc_bcard_t *card, char *err,
                               size_t errlen)
{
    const uint8_t *p = buf;
    size_t n, m;

    if (buf == NULL || len < ICBC_BCARD_HEADER_SIZE)
        return bad(err, errlen, "card shorter than its header");
    if (icbc_get32(p) != ICBC_BCARD_MAGIC)
        return bad(err, errlen, "bad magic (not an ICBC business card)");
    if (icbc_get16(p + 4) != ICBC_BCARD_VERSION)
        return bad(err, errlen, "unsupported card version");
    n = icbc_get16(p + 6);
    m = icbc_get32(p + 8);
    if (n == 0 || n > ICBC_BCARD_MAX_NAME)
        return bad(err, errlen, "node name length out of range");
    if (m > len - ICBC_BCARD_HEADER_SIZE || n > len - ICBC_BCARD_HEADER_SIZE - m)
        return bad(err, errlen, "lengths exceed the card");
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[ICBC_BCARD_HEADER_SIZE + i];
        if (c < 0x21 || c > 0x7e)
            return bad(err, errlen, "node name has a non-printable byte");
    }
    memcpy(card->node, p + ICBC_BCARD_HEADER_SIZE, n);
    card->node[n] = '\0';
    card->fabric_addr = m ? p + ICBC_BCARD_HEADER_SIZE + n : NULL;
    card->fabric_addr_len = m;
    card->ntcp = 0;
    card->machine = 0;

    size_t off = ICBC_BCARD_HEADER_SIZE + n + m;
    if (off < len) {
        int k = p[off++];
        if (k > ICBC_BCARD_MAX_TCP)
            return bad(err, errlen, "too many TCP endpoints");
        if ((size_t) k * ICBC_BCARD_TCP_SIZE > len - off)
            return bad(err, errlen, "TCP endpoints exceed the card");
        for (int i = 0; i < k; i++, off += ICBC_BCARD_TCP_SIZE) {
            icbc_bcard_tcp_t *t = &card->tcp[i];
            t->role = p[off];
            t->family = p[off + 1];
            t->port = icbc_get16(p + off + 2);
            memcpy(t->addr, p + off + 4, 16);
            if (!valid_tcp(t))
                return bad(err, errlen, "malformed TCP endpoint");
        }
        card->ntcp = k;
        if (len - off >= ICBC_BCARD_MACHINE_SIZE)
            card->machine = (uint64_t) icbc_get32(p + off) << 32 | icbc_get32(p + off + 4);
    }
    return ICBC_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* XOR-fold the 128 bits of a UUID "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
uint64_t icbc_bcard_machine_id_parse(const char *uuid)
{
    uint64_t half[2] = { 0, 0 };
    int digits = 0;

    if (uuid == NULL)
        return 0;
    for (const char *c = uuid; *c && *c != '\n'; c++) {
        int v = hex_value(*c);
        if (*c == '-')
            continue;
        if (v < 0 || digits == 32)
            return 0;
        half[digits / 16] = half[digits / 16] << 4 | (uint64_t) v;
        digits++;
    }
    if (digits != 32)
        return 0;
    return half[0] ^ half[1];
}

uint64_t icbc_bcard_machine_id(void)
{
    char text[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    if (f == NULL)
        return 0;
    if (fgets(text, sizeof(text), f) == NULL)
        text[0] = '\0';
    fclose(f);
    return icbc_bcard_machine_id_parse(text);
}
