/*
 * Writes the seed corpora of the binary fuzz targets: a few valid inputs of
 * each, packed with the library's own pack and encode functions, into
 * DIR/<target>/ (make fuzz-seeds writes to test/fuzz/corpus). The router
 * file corpus is plain text kept in the source tree.
 *
 * Usage: gen_seeds DIR
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bt_lib.h"
#include "icbc_bcard.h"
#include "icbc_bytes.h"
#include "icbc_route.h"
#include "icbc_wire.h"

static const char *out_dir;

static void put(const char *target, const char *seed, const void *buf, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", out_dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, seed);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* ---- route header: header, then the inner header it announces ------------ */

static void route_seed(const char *seed, uint8_t type, uint16_t flags, uint32_t inner_len,
                       uint64_t payload_len)
{
    uint8_t buf[ICBC_ROUTE_HDR_SIZE + 64];
    icbc_route_hdr_t h = {
        .type = type,
        .flags = flags,
        .src_cluster = 0,
        .dst_cluster = 1,
        .src_rank = 3,
        .dst_rank = 5,
        .job = 0x1234567890ull,
        .inner_len = inner_len,
        .payload_len = payload_len,
    };

    memset(buf, 0x42, sizeof(buf));
    icbc_route_hdr_pack(&h, buf);
    put("route_hdr_fuzz", seed, buf, ICBC_ROUTE_HDR_SIZE + inner_len);
}

/* An accepting REGISTER_ACK of a router bound to CPUS. */
static void route_ack_seed(const char *seed, const char *cpus)
{
    uint8_t buf[ICBC_ROUTE_HDR_SIZE + ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX];
    icbc_route_hdr_t h = {
        .type = ICBC_ROUTE_REGISTER_ACK,
        .flags = ICBC_ROUTE_F_OK,
        .dst_rank = 5,
        .job = 0x1234567890ull,
    };

    h.inner_len = (uint32_t) icbc_route_ack_pack(1u << 20, cpus, buf + ICBC_ROUTE_HDR_SIZE);
    icbc_route_hdr_pack(&h, buf);
    put("route_hdr_fuzz", seed, buf, ICBC_ROUTE_HDR_SIZE + h.inner_len);
}

static void route_seeds(void)
{
    route_ack_seed("register_ack_cpus", "2-3,6");
    route_seed("msg", ICBC_ROUTE_MSG, ICBC_ROUTE_F_ORDERED, 24, 4096);
    route_seed("challenge", ICBC_ROUTE_CHALLENGE, 0, ICBC_ROUTE_NONCE_SIZE, 0);
    route_seed("register", ICBC_ROUTE_REGISTER, 0, ICBC_ROUTE_MAC_SIZE, 0);
    route_seed("register_ack", ICBC_ROUTE_REGISTER_ACK, ICBC_ROUTE_F_OK, ICBC_ROUTE_COUNT_SIZE, 0);
    route_seed("unreachable", ICBC_ROUTE_UNREACHABLE, 0, ICBC_ROUTE_HDR_SIZE, 0);
    route_seed("credit", ICBC_ROUTE_CREDIT, 0, ICBC_ROUTE_COUNT_SIZE, 0);
}

/* ---- wire header: max_handler (2), world_size (4), header, MPI header ------ */

static void am_seed(const char *seed, uint8_t kind, uint16_t mpi_hdr, uint64_t data_sz)
{
    uint8_t buf[6 + 48 + 16];
    icbc_am_hdr_t h = {
        .kind = kind,
        .handler_id = 7,
        .src_vci = 0,
        .dst_vci = 1,
        .am_hdr_sz = mpi_hdr,
        .src_rank = 2,
        .data_sz = data_sz,
    };
    size_t hlen = ICBC_WIRE_HDR_LEN(kind);

    switch (kind) {
    case ICBC_MSG_RTS: h.cookie = 0xc00c1e; break;
    case ICBC_MSG_CTS:
        h.cookie = 0xc00c1e;
        h.slot = 3;
        h.gen = 9;
        h.chunk_size = 1 << 20;
        break;
    case ICBC_MSG_CHUNK:
        h.slot = 3;
        h.gen = 9;
        h.offset = 65536;
        h.lane = 2;
        break;
    case ICBC_MSG_ACK: h.acked = 41; break;
    case ICBC_MSG_DELIVERED:
        h.lane = 1;
        h.bytes = 1 << 22;
        break;
    }
    memset(buf, 0x33, sizeof(buf));
    icbc_put16(buf, 64);
    icbc_put32(buf + 2, 16);
    icbc_am_hdr_pack(&h, buf + 6);
    put("am_hdr_fuzz", seed, buf, 6 + hlen + mpi_hdr);
}

static void am_seeds(void)
{
    am_seed("am", ICBC_MSG_AM, 16, 100);
    am_seed("rts", ICBC_MSG_RTS, 8, 1 << 20);
    am_seed("cts", ICBC_MSG_CTS, 0, 0);
    am_seed("chunk", ICBC_MSG_CHUNK, 0, 65536);
    am_seed("ack", ICBC_MSG_ACK, 0, 0);
    am_seed("delivered", ICBC_MSG_DELIVERED, 0, 0);
}

/* ---- business card --------------------------------------------------------- */

static void bcard_seeds(void)
{
    static const uint8_t addr[] = { 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02, 0x03 };
    icbc_bcard_tcp_t tcp[2] = {
        { .role = ICBC_BCARD_TCP_WAN, .family = 4, .port = 7300, .addr = { 10, 100, 0, 1 } },
        { .role = ICBC_BCARD_TCP_FABRIC,
          .family = 6,
          .port = 7301,
          .addr = { 0xfd, 0, 0, 0x11, [15] = 1 } },
    };
    uint8_t buf[256];
    size_t len;

    if (icbc_bcard_encode("a0", addr, sizeof(addr), buf, sizeof(buf), &len) != ICBC_OK)
        exit(1);
    put("bcard_fuzz", "plain", buf, len);
    if (icbc_bcard_encode_tcp("node-1.example", addr, sizeof(addr), tcp, 2, 0x0123456789abcdefull,
                              buf, sizeof(buf), &len) != ICBC_OK)
        exit(1);
    put("bcard_fuzz", "tcp2", buf, len);
    if (icbc_bcard_encode_tcp("b3", NULL, 0, tcp, 1, 0, buf, sizeof(buf), &len) != ICBC_OK)
        exit(1);
    memset(buf + len, 0, 8); /* PMI pads cards to the slot's length */
    put("bcard_fuzz", "tcp1_padded", buf, len + 8);
}

/* ---- bt_lib frame: max_hdr (4), max_payload (8), 24-byte frame --------- */

static void frame_seed(const char *seed, uint8_t type, uint32_t hdr_len, uint64_t payload_len)
{
    uint8_t buf[12 + BT_FRAME_HDR_SIZE];
    bt_frame_t f = { .type = type, .hdr_len = hdr_len, .payload_len = payload_len };

    icbc_put32(buf, BT_HDR_MAX);
    icbc_put64(buf + 4, 64ull << 20);
    bt_frame_pack(&f, buf + 12);
    put("bt_frame_fuzz", seed, buf, sizeof(buf));
}

static void frame_seeds(void)
{
    frame_seed("hello", BT_FRAME_HELLO, BT_NONCE_SIZE, 0);
    frame_seed("auth", BT_FRAME_AUTH, BT_NONCE_SIZE + BT_MAC_SIZE, 9);
    frame_seed("auth_ok", BT_FRAME_AUTH_OK, BT_MAC_SIZE, 0);
    frame_seed("data", BT_FRAME_DATA, ICBC_ROUTE_HDR_SIZE + 24, 4096);
    frame_seed("close", BT_FRAME_CLOSE, 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    route_seeds();
    am_seeds();
    bcard_seeds();
    frame_seeds();
    return 0;
}
