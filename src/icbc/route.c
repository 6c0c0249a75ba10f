/* Route header, the router registration proof and REGISTER_ACK's inner
 * header; see icbc_route.h. */
#include "icbc_route.h"
#include "icbc_bytes.h"

#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

void icbc_route_hdr_pack(const icbc_route_hdr_t *hdr, void *buf)
{
    uint8_t *p = buf;

    p[0] = ICBC_ROUTE_VERSION;
    p[1] = hdr->type;
    icbc_put16(p + 2, hdr->flags);
    icbc_put16(p + 4, hdr->src_cluster);
    icbc_put16(p + 6, hdr->dst_cluster);
    icbc_put32(p + 8, hdr->src_rank);
    icbc_put32(p + 12, hdr->dst_rank);
    icbc_put64(p + 16, hdr->job);
    icbc_put32(p + 24, hdr->inner_len);
    icbc_put32(p + 28, 0);
    icbc_put64(p + 32, hdr->payload_len);
}

static int known_type(uint8_t type)
{
    switch (type) {
    case ICBC_ROUTE_MSG:
    case ICBC_ROUTE_CHALLENGE:
    case ICBC_ROUTE_REGISTER:
    case ICBC_ROUTE_REGISTER_ACK:
    case ICBC_ROUTE_UNREACHABLE:
    case ICBC_ROUTE_DEREGISTER:
    case ICBC_ROUTE_CLUSTER_STATE:
    case ICBC_ROUTE_CREDIT:
    case ICBC_ROUTE_PACE: return 1;
    default: return 0;
    }
}

icbc_status_t icbc_route_hdr_parse(const void *buf, size_t len, icbc_route_hdr_t *hdr)
{
    const uint8_t *p = buf;

    if (buf == NULL || len < ICBC_ROUTE_HDR_SIZE || p[0] != ICBC_ROUTE_VERSION || !known_type(p[1]))
        return ICBC_ERR_INVALID;
    hdr->type = p[1];
    hdr->flags = icbc_get16(p + 2);
    if (hdr->flags & ~(ICBC_ROUTE_F_ORDERED | ICBC_ROUTE_F_OK))
        return ICBC_ERR_INVALID;
    hdr->src_cluster = icbc_get16(p + 4);
    hdr->dst_cluster = icbc_get16(p + 6);
    hdr->src_rank = icbc_get32(p + 8);
    hdr->dst_rank = icbc_get32(p + 12);
    hdr->job = icbc_get64(p + 16);
    hdr->inner_len = icbc_get32(p + 24);
    if (icbc_get32(p + 28) != 0 || hdr->inner_len > ICBC_ROUTE_INNER_MAX)
        return ICBC_ERR_INVALID;
    hdr->payload_len = icbc_get64(p + 32);
    if (hdr->payload_len > ICBC_ROUTE_PAYLOAD_MAX)
        return ICBC_ERR_INVALID;
    return ICBC_OK;
}

icbc_status_t icbc_route_register_mac(const unsigned char *key, size_t keylen,
                                      const unsigned char nonce[ICBC_ROUTE_NONCE_SIZE],
                                      uint64_t job, uint32_t rank,
                                      unsigned char mac[ICBC_ROUTE_MAC_SIZE])
{
    static const char label[] = "icbc-register";
    unsigned char msg[sizeof(label) - 1 + ICBC_ROUTE_NONCE_SIZE + 12];
    unsigned int maclen = 0;

    if (key == NULL || keylen == 0)
        return ICBC_ERR_INVALID;
    memcpy(msg, label, sizeof(label) - 1);
    memcpy(msg + sizeof(label) - 1, nonce, ICBC_ROUTE_NONCE_SIZE);
    icbc_put64(msg + sizeof(label) - 1 + ICBC_ROUTE_NONCE_SIZE, job);
    icbc_put32(msg + sizeof(label) - 1 + ICBC_ROUTE_NONCE_SIZE + 8, rank);
    if (HMAC(EVP_sha256(), key, (int) keylen, msg, sizeof(msg), mac, &maclen) == NULL ||
        maclen != ICBC_ROUTE_MAC_SIZE)
        return ICBC_ERR_INVALID;
    return ICBC_OK;
}

int icbc_route_mac_equal(const unsigned char *a, const unsigned char *b, size_t len)
{
    unsigned char diff = 0;

    for (size_t i = 0; i < len; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

size_t icbc_route_ack_pack(uint64_t window, const char *cpus, void *buf)
{
    size_t n = cpus ? strnlen(cpus, ICBC_ROUTE_CPUS_MAX + 1) : 0;

    if (n > ICBC_ROUTE_CPUS_MAX)
        n = 0; /* too long to tell: the processes stay where they are */
    icbc_put64(buf, window);
    if (n)
        memcpy((uint8_t *) buf + ICBC_ROUTE_COUNT_SIZE, cpus, n);
    return ICBC_ROUTE_COUNT_SIZE + n;
}

icbc_status_t icbc_route_ack_parse(const void *inner, size_t len, uint64_t *window, char *cpus)
{
    const char *list = (const char *) inner + ICBC_ROUTE_COUNT_SIZE;
    size_t n;

    cpus[0] = '\0';
    if (len < ICBC_ROUTE_COUNT_SIZE)
        return ICBC_ERR_INVALID;
    n = len - ICBC_ROUTE_COUNT_SIZE;
    *window = icbc_get64(inner);
    if (n == 0 || n > ICBC_ROUTE_CPUS_MAX)
        return ICBC_OK;
    for (size_t i = 0; i < n; i++)
        if ((list[i] < '0' || list[i] > '9') && list[i] != ',' && list[i] != '-')
            return ICBC_OK;
    memcpy(cpus, list, n);
    cpus[n] = '\0';
    return ICBC_OK;
}
