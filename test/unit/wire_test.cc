#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "icbc_wire.h"

namespace {

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
    EXPECT_EQ(0x01, buf[16]);  /* big-endian payload length */
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

TEST(WireHeader, RandomBytesNeverPassUnchecked)
{
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; i++) {
        std::vector<uint8_t> buf(rng() % 96);
        for (auto &c : buf)
            c = static_cast<uint8_t>(rng());
        if (!buf.empty() && rng() % 2)
            buf[0] = ICBC_WIRE_VERSION;
        if (buf.size() > 1 && rng() % 2)
            buf[1] = ICBC_MSG_AM;
        icbc_am_hdr_t out;
        if (icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out) == ICBC_OK) {
            ASSERT_LT(out.handler_id, 64);
            ASSERT_LT(out.src_rank, 16u);
            ASSERT_EQ(buf.size(), ICBC_WIRE_HDR_LEN(out.kind) + static_cast<size_t>(out.am_hdr_sz));
        }
    }
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
    buf.assign(ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS) + 8, 0xab);
    icbc_am_hdr_pack(&h, buf.data());
    ASSERT_EQ(ICBC_OK, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));
    EXPECT_EQ(h.cookie, out.cookie);
    EXPECT_EQ(8, out.am_hdr_sz);

    /* CTS and CHUNK never carry an MPI header; CTS has no payload */
    h.kind = ICBC_MSG_CTS;
    h.data_sz = 0;
    icbc_am_hdr_pack(&h, buf.data());
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_am_hdr_parse(buf.data(), buf.size(), 64, 16, &out));
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

} // namespace
