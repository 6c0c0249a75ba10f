/*
 * Network-order fields of ICBC's wire formats (business card, wire header,
 * route header): unaligned loads and stores of 16, 32 and 64 bits, the
 * filling of a fixed-size part from a stream, and a growing buffer.
 */
#ifndef ICBC_BYTES_H
#define ICBC_BYTES_H

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t icbc_hton64(uint64_t v)
{
    return ((uint64_t) htonl((uint32_t) v) << 32) | htonl((uint32_t) (v >> 32));
}

static inline void icbc_put16(uint8_t *p, uint16_t v)
{
    v = htons(v);
    memcpy(p, &v, 2);
}

static inline void icbc_put32(uint8_t *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

static inline void icbc_put64(uint8_t *p, uint64_t v)
{
    v = icbc_hton64(v);
    memcpy(p, &v, 8);
}

static inline uint16_t icbc_get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return ntohs(v);
}

static inline uint32_t icbc_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

static inline uint64_t icbc_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return icbc_hton64(v);
}

/* Moves what fits of *SRC (*LEN bytes, both advanced) into DST[*HAVE ..
 * WANT); 1 when DST then holds WANT bytes. For parsers of a stream that
 * comes in pieces of any size. */
static inline int icbc_fill(uint8_t *dst, size_t *have, size_t want, const uint8_t **src,
                            size_t *len)
{
    size_t n = want - *have;

    if (n > *len)
        n = *len;
    memcpy(dst + *have, *src, n);
    *have += n;
    *src += n;
    *len -= n;
    return *have == want;
}

/* *BUF (of *CAP bytes) holds at least NEED bytes after it: its capacity
 * doubles (from 256) until it does, what it held kept. -1: out of memory,
 * *BUF as it was. */
static inline int icbc_grow(uint8_t **buf, size_t *cap, size_t need)
{
    size_t n = *cap ? *cap : 256;
    uint8_t *p;

    if (need <= *cap)
        return 0;
    while (n < need)
        n *= 2;
    if ((p = (uint8_t *) realloc(*buf, n)) == NULL)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

#endif /* ICBC_BYTES_H */
