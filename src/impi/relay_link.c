/* The links between the relays of one private client; see
 * impi_relay_link.h. */
#include "impi_relay_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"

void impi_link_hdr_pack(uint32_t kind, uint32_t a, uint32_t b, uint32_t len, uint8_t *buf)
{
    icbc_put32(buf, kind);
    icbc_put32(buf + 4, a);
    icbc_put32(buf + 8, b);
    icbc_put32(buf + 12, len);
}

void impi_link_rx_init(impi_link_rx_t *rx, uint32_t max_len)
{
    memset(rx, 0, sizeof(*rx));
    rx->max_len = max_len;
}

void impi_link_rx_free(impi_link_rx_t *rx)
{
    free(rx->body);
    rx->body = NULL;
    rx->cap = 0;
}

static int known_kind(uint32_t kind)
{
    return kind == IMPI_LINK_HELLO || (kind >= IMPI_LINK_CLIENTS && kind <= IMPI_LINK_FINI_OUT);
}

icbc_status_t impi_link_rx_feed(impi_link_rx_t *rx, const void *bytes, size_t len,
                                impi_link_cb_t cb, void *arg, char *err, size_t errlen)
{
    const uint8_t *p = bytes;

    if (rx->failed) {
        snprintf(err, errlen, "the relays' link broke its format before");
        return ICBC_ERR_INVALID;
    }
    while (len > 0) {
        if (!rx->in_body) {
            if (!icbc_fill(rx->hdr, &rx->have, IMPI_LINK_HDR_SIZE, &p, &len))
                break;
            rx->kind = icbc_get32(rx->hdr);
            rx->a = icbc_get32(rx->hdr + 4);
            rx->b = icbc_get32(rx->hdr + 8);
            rx->len = icbc_get32(rx->hdr + 12);
            if (!known_kind(rx->kind) || rx->len > rx->max_len) {
                snprintf(err, errlen, "a relay link frame of kind %u with %u bytes (at most %u)",
                         rx->kind, rx->len, rx->max_len);
                rx->failed = 1;
                return ICBC_ERR_INVALID;
            }
            if (rx->len > rx->cap) {
                uint8_t *b = realloc(rx->body, rx->len);
                if (b == NULL) {
                    snprintf(err, errlen, "out of memory for a relay link frame of %u bytes",
                             rx->len);
                    rx->failed = 1;
                    return ICBC_ERR_NO_MEMORY;
                }
                rx->body = b;
                rx->cap = rx->len;
            }
            rx->in_body = 1;
            rx->have = 0;
        } else {
            icbc_fill(rx->body, &rx->have, rx->len, &p, &len);
        }
        if (rx->in_body && rx->have == rx->len) {
            rx->in_body = 0;
            rx->have = 0;
            cb(arg, rx->kind, rx->a, rx->b, rx->body, rx->len);
        }
    }
    return ICBC_OK;
}
