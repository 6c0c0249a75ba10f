/* IMPI packets from another host, each held to the layout; see impi_rx.h. */
#include "impi_rx.h"
#include "icbc_bytes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int impi_layout_proc_rank(const impi_layout_t *l, int host, const impi_proc_t *proc)
{
    if (host < 0 || host >= l->nhosts_total)
        return -1;
    const impi_host_t *h = &l->hosts[host];
    for (uint32_t k = 0; k < h->nprocs; k++) {
        const impi_proc_t *p = &l->procs[h->first_rank + (int) k];
        if (p->pid == proc->pid && memcmp(p->host + 12, proc->host + 12, 4) == 0)
            return h->first_rank + (int) k;
    }
    return -1;
}

icbc_status_t impi_rx_init(impi_rx_t *rx, const impi_layout_t *l, int self_host, int peer_host)
{
    memset(rx, 0, sizeof(*rx));
    if (self_host < 0 || self_host >= l->nhosts_total || peer_host < 0 ||
        peer_host >= l->nhosts_total || self_host == peer_host || l->datalen == 0)
        return ICBC_ERR_INVALID;
    rx->layout = l;
    rx->self_host = self_host;
    rx->peer_host = peer_host;
    rx->payload = malloc(l->datalen);
    return rx->payload ? ICBC_OK : ICBC_ERR_NO_MEMORY;
}

void impi_rx_free(impi_rx_t *rx)
{
    free(rx->payload);
    rx->payload = NULL;
}

static icbc_status_t fail(impi_rx_t *rx, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static icbc_status_t fail(impi_rx_t *rx, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    char who[32];

    snprintf(who, sizeof(who), "IMPI host %d: ", rx->peer_host);
    va_start(ap, fmt);
    icbc_verr(ICBC_ERR_INVALID, err, errlen, who, fmt, ap);
    va_end(ap);
    rx->failed = 1;
    return ICBC_ERR_INVALID;
}

/* The header is complete: parse it and hold it to the layout. */
static icbc_status_t check_header(impi_rx_t *rx, char *err, size_t errlen)
{
    impi_pkt_hdr_t *h = &rx->hdr;

    if (impi_pkt_hdr_parse(rx->hdr_bytes, rx->layout->datalen, h) != ICBC_OK)
        return fail(rx, err, errlen,
                    "packet of type %u with %u payload bytes of a %llu-byte message (DATALEN %u)",
                    h->type, h->len, (unsigned long long) h->msglen, rx->layout->datalen);
    if (h->type == IMPI_PK_FINI) {
        rx->src = rx->dest = -1;
        return ICBC_OK;
    }
    if (h->type == IMPI_PK_ICBC &&
        !((rx->layout->datarep_mask >> rx->layout->hosts[rx->peer_host].client) & 1 &&
          (rx->layout->datarep_mask >> rx->layout->hosts[rx->self_host].client) & 1))
        return fail(rx, err, errlen, "ICBC packet between hosts of clients not both ICBC");
    rx->src = impi_layout_proc_rank(rx->layout, rx->peer_host, &h->src);
    if (rx->src < 0)
        return fail(rx, err, errlen, "packet from process %lld, which is not one of that host's",
                    (long long) h->src.pid);
    rx->dest = impi_layout_proc_rank(rx->layout, rx->self_host, &h->dest);
    if (rx->dest < 0)
        return fail(rx, err, errlen, "packet for process %lld, which is not one of this host's",
                    (long long) h->dest.pid);
    return ICBC_OK;
}

/* The packet is whole: to CB, and the next one's header is read next. */
static void deliver(impi_rx_t *rx, impi_rx_cb_t cb, void *arg)
{
    impi_rx_pkt_t pkt = { &rx->hdr, rx->src, rx->dest, rx->payload, rx->hdr.len };

    rx->in_payload = 0;
    rx->have = 0;
    cb(arg, &pkt);
}

uint8_t *impi_rx_payload_room(impi_rx_t *rx, size_t *want)
{
    if (rx->failed || !rx->in_payload) {
        *want = 0;
        return NULL;
    }
    *want = rx->hdr.len - rx->have;
    return rx->payload + rx->have;
}

void impi_rx_payload_filled(impi_rx_t *rx, size_t n, impi_rx_cb_t cb, void *arg)
{
    rx->have += n;
    if (rx->have == rx->hdr.len)
        deliver(rx, cb, arg);
}

int impi_rx_partial(const impi_rx_t *rx, impi_rx_pkt_t *pkt)
{
    if (rx->failed || !rx->in_payload || rx->have == rx->hdr.len)
        return 0;
    pkt->hdr = &rx->hdr;
    pkt->src = rx->src;
    pkt->dest = rx->dest;
    pkt->payload = rx->payload;
    pkt->len = rx->have;
    return 1;
}

uint8_t *impi_rx_swap_payload(impi_rx_t *rx, uint8_t *fresh)
{
    uint8_t *full = rx->payload;

    rx->payload = fresh;
    return full;
}

icbc_status_t impi_rx_feed(impi_rx_t *rx, const void *bytes, size_t len, impi_rx_cb_t cb, void *arg,
                           char *err, size_t errlen)
{
    const uint8_t *p = bytes;

    if (rx->failed)
        return fail(rx, err, errlen, "the connection failed earlier");
    while (len > 0) {
        if (!rx->in_payload) {
            if (!icbc_fill(rx->hdr_bytes, &rx->have, IMPI_PKT_HDR_SIZE, &p, &len))
                break;
            if (check_header(rx, err, errlen) != ICBC_OK)
                return ICBC_ERR_INVALID;
            rx->in_payload = 1;
            rx->have = 0;
        } else {
            icbc_fill(rx->payload, &rx->have, rx->hdr.len, &p, &len);
        }
        if (rx->in_payload && rx->have == rx->hdr.len)
            deliver(rx, cb, arg);
    }
    return ICBC_OK;
}
