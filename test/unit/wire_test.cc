#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <random>
#include <vector>

#include "icbc_wire.h"

namespace
{

std::vector<uint8_t> packed(const icbc_am_hdr_t &h)
{
    std::vector<uint8_t> buf(ICBC_WIRE_AM_HDR_SIZE + h.am_hdr_sz, 0xab);
    icbc_am_hdr_pack(&h, buf.data());
    return buf;
}

icbc_am_hdr_t sample()
{
    icbc_am_hdr_t h{};
    h.kind = ICBC_MSG_AM;
    h.handler_id = 7;
    h.src_vci = 1;
    h.dst_vci = 2;
    h.am_hdr_sz = 48;
    h.src_rank = 1234567;
    h.data_sz = 0x0102030405060708ull;
    return h;
}

TEST(WireHeader, RoundTripInNetworkOrder)
{
    auto buf = packed(sample());
    EXPECT_EQ(ICBC_WIRE_VERSION, buf[0]);
    EXPECT_EQ(0x01, buf[16]); /* big-endian payload length */
    EXPECT_EQ(0x08, buf[23]);
    icbc_am_hdr_t out;
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 2000000, &out));
    EXPECT_EQ(7, out.handler_id);
    EXPECT_EQ(1, out.src_vci);
    EXPECT_EQ(2, out.dst_vci);
    EXPECT_EQ(48, out.am_hdr_sz);
    EXPECT_EQ(1234567u, out.src_rank);
    EXPECT_EQ(0x0102030405060708ull, out.data_sz);
}

TEST(WireHeader, RejectsEveryInconsistentField)
{
    icbc_am_hdr_t out;
    auto good = packed(sample());

    auto b = good;
    b[0] = ICBC_WIRE_VERSION + 1;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(b.data(), b.size(), 64, 2000000, &out));
    b = good;
    b[1] = 99;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(b.data(), b.size(), 64, 2000000, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(good.data(), good.size(), 7, 2000000, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(good.data(), good.size(), 64, 1234567, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(good.data(), good.size() - 1, 64, 2000000, &out));
    auto longer = good;
    longer.push_back(0);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(longer.data(), longer.size(), 64, 2000000, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(good.data(), 10, 64, 2000000, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(nullptr, 100, 64, 2000000, &out));
}

/* What the layout in icbc_wire.h allows, decided from the bytes alone: the
 * oracle the parser is held to. */
bool wire_bytes_valid(const std::vector<uint8_t> &b, unsigned max_handler, uint32_t world)
{
    auto get16 = [&](size_t o) { return (unsigned) (b[o] << 8 | b[o + 1]); };
    auto get32 = [&](size_t o) { return (uint32_t) get16(o) << 16 | get16(o + 2); };
    if (b.size() < ICBC_WIRE_AM_HDR_SIZE || b[0] != ICBC_WIRE_VERSION)
        return false;
    unsigned kind = b[1];
    if (kind < ICBC_MSG_AM || kind > ICBC_MSG_DELIVERED || get16(2) >= max_handler ||
        get32(8) >= world)
        return false;
    size_t am_hdr_sz = get16(6);
    /* each kind's own part: its size and the bytes in it that are zero */
    struct {
        size_t ext, zero_from, zero_to;
    } part[10] = {};
    part[ICBC_MSG_RTS] = part[ICBC_MSG_SYNC] = part[ICBC_MSG_SYNC_ACK] =
        part[ICBC_MSG_CONFIRM] = { 8, 0, 0 };
    part[ICBC_MSG_CTS] = { 24, 20, 24 };
    part[ICBC_MSG_CHUNK] = { 24, 18, 24 };
    part[ICBC_MSG_ACK] = { 8, 4, 8 };
    part[ICBC_MSG_DELIVERED] = { 16, 2, 8 };
    size_t hdr = 24 + part[kind].ext;
    if (b.size() != hdr + am_hdr_sz)
        return false;
    for (size_t i = part[kind].zero_from; i < part[kind].zero_to; i++)
        if (b[24 + i] != 0)
            return false;
    if (kind == ICBC_MSG_DELIVERED && get16(24) == 0xffff)
        return false;
    if (kind != ICBC_MSG_AM && kind != ICBC_MSG_RTS && am_hdr_sz != 0)
        return false;
    bool data_zero = get32(16) == 0 && get32(20) == 0;
    bool bare = kind == ICBC_MSG_CTS || kind == ICBC_MSG_SYNC || kind == ICBC_MSG_SYNC_ACK ||
                kind == ICBC_MSG_CONFIRM || kind == ICBC_MSG_ACK || kind == ICBC_MSG_DELIVERED;
    return !(bare && !data_zero);
}

/* Valid headers of every kind, a few bytes changed, cut or extended: the
 * parser accepts exactly what the layout allows, and what it accepts packs
 * back to the same bytes. */
TEST(WireHeader, MutatedHeadersParseExactlyWhenValid)
{
    std::mt19937 rng(7);
    const unsigned max_handler = 64;
    const uint32_t world = 1000;
    int accepted = 0, rejected = 0;
    for (int i = 0; i < 20000; i++) {
        icbc_am_hdr_t h = {};
        h.kind = (uint8_t) (ICBC_MSG_AM + rng() % 9);
        h.seq = rng() % 3 ? 0 : rng();
        h.handler_id = (uint16_t) (rng() % max_handler);
        h.src_vci = (uint8_t) rng();
        h.dst_vci = (uint8_t) rng();
        h.src_rank = rng() % world;
        h.am_hdr_sz =
            (h.kind == ICBC_MSG_AM || h.kind == ICBC_MSG_RTS) ? (uint16_t) (rng() % 64) : 0;
        h.data_sz = ICBC_MSG_KIND_BARE(h.kind) ? 0 : ((uint64_t) rng() << 20 | rng());
        uint8_t k = h.kind;
        if (k == ICBC_MSG_RTS || k == ICBC_MSG_CTS || k == ICBC_MSG_SYNC ||
            k == ICBC_MSG_SYNC_ACK || k == ICBC_MSG_CONFIRM)
            h.cookie = (uint64_t) rng() << 32 | rng();
        if (k == ICBC_MSG_CTS || k == ICBC_MSG_CHUNK) {
            h.slot = rng();
            h.gen = rng();
        }
        if (k == ICBC_MSG_CTS)
            h.chunk_size = rng();
        if (k == ICBC_MSG_CHUNK) {
            h.offset = (uint64_t) rng() << 32 | rng();
            h.lane = rng() % 2 ? ICBC_WIRE_NO_LANE : (uint16_t) (rng() % 64);
        }
        if (k == ICBC_MSG_DELIVERED) {
            h.lane = (uint16_t) (rng() % 64);
            h.bytes = (uint64_t) rng() << 20 | rng();
        }
        if (k == ICBC_MSG_ACK)
            h.acked = rng();
        std::vector<uint8_t> buf(ICBC_WIRE_HDR_LEN(h.kind) + h.am_hdr_sz, 0x5a);
        icbc_am_hdr_pack(&h, buf.data());
        ASSERT_TRUE(wire_bytes_valid(buf, max_handler, world)) << "sample " << i;
        int nmut = (int) (rng() % 4); /* 0: the valid header itself */
        for (int m = 0; m < nmut; m++) {
            switch (rng() % 8) {
            case 0: buf.resize(rng() % (buf.size() + 1)); break;
            case 1: buf.push_back((uint8_t) rng()); break;
            default:
                if (!buf.empty())
                    buf[rng() % std::min<size_t>(buf.size(), ICBC_WIRE_HDR_MAX)] ^=
                        (uint8_t) (1u << (rng() % 8));
            }
        }
        icbc_am_hdr_t out;
        bool valid = wire_bytes_valid(buf, max_handler, world);
        icbc_status_t st = icbc_am_hdr_parse(buf.data(), buf.size(), max_handler, world, &out);
        ASSERT_EQ(valid ? ICBC_OK : ICBC_ERR_INVALID, st) << "sample " << i;
        if (st != ICBC_OK) {
            rejected++;
            continue;
        }
        accepted++;
        std::vector<uint8_t> again(buf.size());
        icbc_am_hdr_pack(&out, again.data());
        size_t fixed = ICBC_WIRE_HDR_LEN(out.kind);
        ASSERT_TRUE(std::equal(buf.begin(), buf.begin() + fixed, again.begin()))
            << "sample " << i << ": what was accepted does not pack back to the same bytes";
    }
    /* both branches were taken many times: the assertions above ran */
    EXPECT_GT(accepted, 5000);
    EXPECT_GT(rejected, 5000);
}

TEST(WireHeader, RendezvousKindsRoundTrip)
{
    icbc_am_hdr_t h = {};
    h.kind = ICBC_MSG_CHUNK;
    h.src_rank = 3;
    h.data_sz = 262144;
    h.slot = 17;
    h.gen = 0xdeadbeef;
    h.offset = (1ull << 33) + 5;
    std::vector<uint8_t> buf(ICBC_WIRE_HDR_LEN(ICBC_MSG_CHUNK));
    icbc_am_hdr_pack(&h, buf.data());
    icbc_am_hdr_t out;
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));
    EXPECT_EQ(ICBC_MSG_CHUNK, out.kind);
    EXPECT_EQ(17u, out.slot);
    EXPECT_EQ(0xdeadbeefu, out.gen);
    EXPECT_EQ(h.offset, out.offset);

    h.kind = ICBC_MSG_RTS;
    h.cookie = 0x0102030405060708ull;
    h.am_hdr_sz = 8;
    buf.assign(ICBC_WIRE_HDR_MAX + 8, 0xab);
    icbc_am_hdr_pack(&h, buf.data());
    ASSERT_EQ(ICBC_OK,
              icbc_am_hdr_parse(buf.data(), ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS) + 8, 64, 16, &out));
    EXPECT_EQ(h.cookie, out.cookie);
    EXPECT_EQ(8, out.am_hdr_sz);

    /* CTS and CHUNK never carry an MPI header; CTS has no payload */
    h.kind = ICBC_MSG_CTS;
    h.data_sz = 0;
    icbc_am_hdr_pack(&h, buf.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_am_hdr_parse(buf.data(), ICBC_WIRE_HDR_LEN(ICBC_MSG_CTS) + 8, 64, 16, &out));
    h.am_hdr_sz = 0;
    h.data_sz = 1;
    icbc_am_hdr_pack(&h, buf.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_am_hdr_parse(buf.data(), ICBC_WIRE_HDR_LEN(ICBC_MSG_CTS), 64, 16, &out));
    /* an AM must not be given the rendezvous length */
    h.kind = ICBC_MSG_AM;
    h.data_sz = 0;
    icbc_am_hdr_pack(&h, buf.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_am_hdr_parse(buf.data(), ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS), 64, 16, &out));
}

/* Each field has one meaning: a CTS's chunk size, a CHUNK's lane,
 * DELIVERED's lane and bytes and ACK's sequence number travel in fields of
 * their own and come back as they went. */
TEST(WireHeader, EveryKindKeepsItsOwnFields)
{
    icbc_am_hdr_t h = {}, out;
    std::vector<uint8_t> buf;
    auto round = [&](const icbc_am_hdr_t &in) {
        buf.assign(ICBC_WIRE_HDR_LEN(in.kind), 0x77);
        icbc_am_hdr_pack(&in, buf.data());
        return icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out);
    };

    h.kind = ICBC_MSG_CTS;
    h.cookie = 5;
    h.slot = 6;
    h.gen = 7;
    h.chunk_size = 1u << 20;
    ASSERT_EQ(ICBC_OK, round(h));
    EXPECT_EQ(1u << 20, out.chunk_size);
    EXPECT_EQ(0u, out.offset);
    EXPECT_EQ(5u, out.cookie);

    h = {};
    h.kind = ICBC_MSG_CHUNK;
    h.data_sz = 4096;
    h.offset = 1u << 20;
    h.lane = 3;
    ASSERT_EQ(ICBC_OK, round(h));
    EXPECT_EQ(3, out.lane);
    EXPECT_EQ(0u, out.seq);
    EXPECT_EQ(1u << 20, out.offset);
    h.lane = ICBC_WIRE_NO_LANE;
    ASSERT_EQ(ICBC_OK, round(h));
    EXPECT_EQ(ICBC_WIRE_NO_LANE, out.lane);
    buf[24 + 20] = 1; /* a zero byte that is not */
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));

    h = {};
    h.kind = ICBC_MSG_DELIVERED;
    h.lane = 9;
    h.bytes = 3ull << 32;
    ASSERT_EQ(ICBC_OK, round(h));
    EXPECT_EQ(9, out.lane);
    EXPECT_EQ(3ull << 32, out.bytes);
    EXPECT_EQ(0u, out.cookie);
    h.lane = ICBC_WIRE_NO_LANE; /* a report names a lane */
    EXPECT_EQ(ICBC_ERR_INVALID, round(h));

    h = {};
    h.kind = ICBC_MSG_ACK;
    h.acked = 0xfffffff0u;
    ASSERT_EQ(ICBC_OK, round(h));
    EXPECT_EQ(0xfffffff0u, out.acked);
    EXPECT_EQ(0u, out.cookie);
    EXPECT_EQ(0u, out.seq);
}

/* A header of the first version (which overloaded fields) is refused. */
TEST(WireHeader, VersionOneIsRefused)
{
    icbc_am_hdr_t h = sample(), out;
    auto buf = packed(h);
    ASSERT_EQ(2, ICBC_WIRE_VERSION);
    buf[0] = 1;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 2000000, &out));
    uint8_t kind;
    uint32_t seq;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_peek(buf.data(), buf.size(), &kind, &seq));
}

} // namespace

/* The ordered lane's sequence number: set into a packed header, seen by
 * peek before a parse, and carried by the parse. */
TEST(WireHeader, SequenceNumberIsPeekedSetAndParsed)
{
    icbc_am_hdr_t h = {};
    h.kind = ICBC_MSG_CONFIRM;
    h.src_rank = 2;
    h.cookie = 0x0000000500000003ull;
    std::vector<uint8_t> buf(ICBC_WIRE_HDR_LEN(ICBC_MSG_CONFIRM));
    icbc_am_hdr_pack(&h, buf.data());
    uint8_t kind = 0;
    uint32_t seq = 99;
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_peek(buf.data(), buf.size(), &kind, &seq));
    EXPECT_EQ(ICBC_MSG_CONFIRM, kind);
    EXPECT_EQ(0u, seq);
    icbc_am_hdr_set_seq(buf.data(), 0xfffffffeu);
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_peek(buf.data(), buf.size(), &kind, &seq));
    EXPECT_EQ(0xfffffffeu, seq);
    icbc_am_hdr_t out;
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));
    EXPECT_EQ(0xfffffffeu, out.seq);
    EXPECT_EQ(h.cookie, out.cookie);
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_am_hdr_peek(buf.data(), ICBC_WIRE_AM_HDR_SIZE - 1, &kind, &seq));
    buf[0] ^= 0x80;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_peek(buf.data(), buf.size(), &kind, &seq));
    /* a payload on the bare kinds is refused */
    h.kind = ICBC_MSG_ACK;
    h.data_sz = 1;
    icbc_am_hdr_pack(&h, buf.data());
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));
}
