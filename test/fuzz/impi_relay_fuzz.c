/*
 * Fuzzes the IMPI relay's start-up and packet routing (impi_relay.h:
 * impi_rly_*) with what its two start-up connections send: records
 * {uint8 side, uint8 n, n bytes}, side bit 0 = the inside client, else the
 * server. Once start-up is over, records with side bit 1 set are instead
 * bytes of the host connection from the inside's first host to persona 0
 * (side bit 0 set) or from outside host 0 to the relay (bit 0 clear),
 * parsed by impi_rx as the daemon does and routed. The seeds begin with
 * whole, valid start-ups (test/fuzz/corpus/impi_relay_fuzz). Checks:
 *   - every call returns a status the header promises, with a message for
 *     every error, and the first error ends the input;
 *   - what the relay queues for the inside client is its AUTH answer, then
 *     whole commands; for the server, whole commands and at most the raw
 *     key after AUTH;
 *   - once started, both layouts have the same processes in the same
 *     world ranks, and a routed packet names a process of the other side
 *     and goes to the host that holds its destination.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "impi_relay.h"
#include "impi_rx.h"
#include "fuzz_check.h"

static uint32_t persona_port(void *arg, int relay, int client, uint8_t *addr)
{
    (void) arg;
    (void) addr;
    return 7000 + 100 * (uint32_t) relay + (uint32_t) client;
}

/* Whole commands, and nothing else, in P[OFF..LEN). */
static void check_cmds(const uint8_t *p, size_t off, size_t len)
{
    while (off < len) {
        impi_cmd_hdr_t h;
        FUZZ_CHECK(len - off >= IMPI_CMD_HDR_SIZE);
        FUZZ_CHECK(impi_cmd_hdr_parse(p + off, &h) == ICBC_OK);
        FUZZ_CHECK(len - off - IMPI_CMD_HDR_SIZE >= h.len);
        off += IMPI_CMD_HDR_SIZE + h.len;
    }
}

static int host_of(const impi_layout_t *l, int rank)
{
    int h = 0;

    while (h + 1 < l->nhosts_total && l->hosts[h + 1].first_rank <= rank)
        h++;
    return h;
}

typedef struct {
    const impi_rly_t *rly;
    int from_inside;
} route_arg_t;

static void on_packet(void *arg, const impi_rx_pkt_t *pkt)
{
    const route_arg_t *ra = arg;
    const impi_layout_t *to =
        ra->from_inside ? impi_rly_outside(ra->rly) : impi_rly_inside(ra->rly);
    impi_pkt_hdr_t h;
    int host;

    if (pkt->hdr->type == IMPI_PK_FINI)
        return;
    int relay, k = impi_rly_client(ra->rly);
    impi_relay_route(impi_rly_inside(ra->rly), impi_rly_outside(ra->rly), k, ra->from_inside, pkt,
                     &h, &host, &relay);
    FUZZ_CHECK(host >= 0 && host < to->nhosts_total);
    /* the relay holding the source on the next side */
    FUZZ_CHECK(relay >= 0 && relay < (int) to->nhosts[to->hosts[host_of(to, pkt->src)].client]);
    FUZZ_CHECK(pkt->dest >= to->hosts[host].first_rank &&
               pkt->dest < to->hosts[host].first_rank + (int) to->hosts[host].nprocs);
    FUZZ_CHECK(memcmp(&h.dest, &to->procs[pkt->dest], sizeof(h.dest)) == 0);
    FUZZ_CHECK(memcmp(&h.src, &to->procs[pkt->src], sizeof(h.src)) == 0);
    FUZZ_CHECK(h.len == pkt->hdr->len && h.srqid == pkt->hdr->srqid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    impi_rly_config_t cfg = { .persona_port = persona_port };
    impi_rly_t *rly;
    impi_rx_t rx[2];
    int rx_ready = 0, inside_auth = 0, server_key = 0;
    char err[512];
    size_t off = 1;

    /* one relay, or a trunk of two (the top bit of the first byte) */
    cfg.ntrunks = size > 0 && (data[0] & 0x80) ? 2 : 1;
    for (int j = 0; j < 2; j++) {
        cfg.trunk[j].inside_addr[12] = 192;
        cfg.trunk[j].inside_addr[15] = (uint8_t) (1 + j);
        cfg.trunk[j].outside_addr[12] = 10;
        cfg.trunk[j].outside_addr[15] = (uint8_t) (99 + j);
        cfg.trunk[j].outside_port = 6000 + (uint32_t) j;
    }
    cfg.require_key = size > 0 && (data[0] & 1);
    cfg.key = 12345;
    if (impi_rly_create(&cfg, &rly) != ICBC_OK)
        return 0;
    while (off + 2 <= size) {
        int side = data[off];
        size_t n = data[off + 1];
        off += 2;
        if (n > size - off)
            n = size - off;
        const uint8_t *p = data + off;
        off += n;
        if (impi_rly_started(rly) && (side & 2)) {
            int from_inside = side & 1;
            const impi_layout_t *in = impi_rly_inside(rly), *out = impi_rly_outside(rly);
            int k = impi_rly_client(rly);
            if (in->nclients < 2)
                continue;
            if (!rx_ready) {
                /* inside host first_host[K] to the persona of the first other
                 * client; outside host of that client to the relay */
                int other = k == 0 ? 1 : 0;
                /* relay 0's persona and outside host */
                if (impi_rx_init(&rx[1], in, in->first_host[other], in->first_host[k]) != ICBC_OK)
                    break;
                if (impi_rx_init(&rx[0], out, out->first_host[k], out->first_host[other]) !=
                    ICBC_OK) {
                    impi_rx_free(&rx[1]);
                    break;
                }
                rx_ready = 1;
            }
            route_arg_t ra = { rly, from_inside };
            (void) impi_rx_feed(&rx[from_inside], p, n, on_packet, &ra, err, sizeof(err));
            continue;
        }
        err[0] = '\0';
        icbc_status_t st = (side & 1) ? impi_rly_inside_input(rly, p, n, err, sizeof(err))
                                      : impi_rly_server_input(rly, p, n, err, sizeof(err));
        FUZZ_CHECK(st == ICBC_OK || st == ICBC_ERR_AUTH || st == ICBC_ERR_INVALID ||
                   st == ICBC_ERR_IO || st == ICBC_ERR_NO_MEMORY);
        FUZZ_CHECK(st == ICBC_OK || err[0] != '\0');
        /* what went out */
        size_t len;
        const uint8_t *o = impi_rly_inside_output(rly, &len);
        size_t at = 0;
        if (!inside_auth && len >= IMPI_AUTH_REPLY_SIZE) {
            at = IMPI_AUTH_REPLY_SIZE;
            inside_auth = 1;
        }
        if (inside_auth)
            check_cmds(o, at, len);
        impi_rly_inside_consume(rly, len);
        o = impi_rly_server_output(rly, &len);
        at = 0;
        if (cfg.require_key && !server_key && len == IMPI_AUTH_KEY_SIZE + IMPI_CMD_HDR_SIZE + 4 &&
            icbc_get64(o) == cfg.key) {
            at = IMPI_AUTH_KEY_SIZE; /* the raw key, then IMPI */
            server_key = 1;
        }
        check_cmds(o, at, len);
        impi_rly_server_consume(rly, len);
        if (st != ICBC_OK)
            break;
        if (impi_rly_started(rly)) {
            const impi_layout_t *in = impi_rly_inside(rly), *out = impi_rly_outside(rly);
            FUZZ_CHECK(in->nprocs_total == out->nprocs_total && in->nclients == out->nclients);
            for (int c = 0; c < in->nclients; c++)
                FUZZ_CHECK(in->first_rank[c] == out->first_rank[c]);
            FUZZ_CHECK(out->nhosts[impi_rly_client(rly)] >= 1 &&
                       out->nhosts[impi_rly_client(rly)] <= (uint32_t) cfg.ntrunks);
        }
    }
    if (rx_ready) {
        impi_rx_free(&rx[0]);
        impi_rx_free(&rx[1]);
    }
    impi_rly_destroy(rly);
    return 0;
}
