#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "icbc_route.h"

namespace
{

icbc_route_hdr_t sample()
{
    icbc_route_hdr_t h = {};
    h.type = ICBC_ROUTE_MSG;
    h.flags = ICBC_ROUTE_F_ORDERED;
    h.src_cluster = 1;
    h.dst_cluster = 2;
    h.src_rank = 70000;
    h.dst_rank = 5;
    h.job = 0x1122334455667788ull;
    h.inner_len = 48;
    h.payload_len = 1 << 20;
    return h;
}

TEST(RouteHeader, RoundTrip)
{
    icbc_route_hdr_t h = sample(), out;
    uint8_t buf[ICBC_ROUTE_HDR_SIZE];
    icbc_route_hdr_pack(&h, buf);
    ASSERT_EQ(ICBC_OK, icbc_route_hdr_parse(buf, sizeof(buf), &out));
    EXPECT_EQ(h.type, out.type);
    EXPECT_EQ(h.flags, out.flags);
    EXPECT_EQ(h.src_cluster, out.src_cluster);
    EXPECT_EQ(h.dst_cluster, out.dst_cluster);
    EXPECT_EQ(h.src_rank, out.src_rank);
    EXPECT_EQ(h.dst_rank, out.dst_rank);
    EXPECT_EQ(h.job, out.job);
    EXPECT_EQ(h.inner_len, out.inner_len);
    EXPECT_EQ(h.payload_len, out.payload_len);
    EXPECT_EQ(0x11, buf[16]); /* network order */
}

TEST(RouteHeader, EveryTypeAndNoOther)
{
    const uint8_t known[] = { ICBC_ROUTE_MSG,           ICBC_ROUTE_CHALLENGE,
                              ICBC_ROUTE_REGISTER,      ICBC_ROUTE_REGISTER_ACK,
                              ICBC_ROUTE_UNREACHABLE,   ICBC_ROUTE_DEREGISTER,
                              ICBC_ROUTE_CLUSTER_STATE, ICBC_ROUTE_CREDIT,
                              ICBC_ROUTE_PACE };
    for (int t = 0; t < 256; t++) {
        icbc_route_hdr_t h = sample(), out;
        uint8_t buf[ICBC_ROUTE_HDR_SIZE];
        h.type = (uint8_t) t;
        icbc_route_hdr_pack(&h, buf);
        bool is_known = std::find(std::begin(known), std::end(known), t) != std::end(known);
        EXPECT_EQ(is_known ? ICBC_OK : ICBC_ERR_INVALID,
                  icbc_route_hdr_parse(buf, sizeof(buf), &out))
            << "type " << t;
    }
}

TEST(RouteHeader, RejectsBadFields)
{
    icbc_route_hdr_t h = sample(), out;
    uint8_t buf[ICBC_ROUTE_HDR_SIZE];
    icbc_route_hdr_pack(&h, buf);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_route_hdr_parse(buf, sizeof(buf) - 1, &out));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_route_hdr_parse(nullptr, 64, &out));
    struct {
        size_t off;
        uint8_t val;
    } cases[] = {
        { 0, 2 },                  /* version */
        { 1, 0 },                  /* type */
        { 1, 99 },    { 2, 0x80 }, /* unknown flag */
        { 24, 0xff },              /* inner length */
        { 29, 1 },                 /* reserved */
        { 32, 0x01 },              /* payload above the maximum */
    };
    for (auto &c : cases) {
        uint8_t bad[ICBC_ROUTE_HDR_SIZE];
        memcpy(bad, buf, sizeof(bad));
        bad[c.off] = c.val;
        EXPECT_EQ(ICBC_ERR_INVALID, icbc_route_hdr_parse(bad, sizeof(bad), &out)) << c.off;
    }
}

/* What the layout in icbc_route.h allows, decided from the bytes alone. */
bool route_bytes_valid(const uint8_t *b, size_t len)
{
    auto get32 = [&](size_t o) {
        return (uint32_t) b[o] << 24 | (uint32_t) b[o + 1] << 16 | (uint32_t) b[o + 2] << 8 |
               b[o + 3];
    };
    const uint8_t known[] = { ICBC_ROUTE_MSG,           ICBC_ROUTE_CHALLENGE,
                              ICBC_ROUTE_REGISTER,      ICBC_ROUTE_REGISTER_ACK,
                              ICBC_ROUTE_UNREACHABLE,   ICBC_ROUTE_DEREGISTER,
                              ICBC_ROUTE_CLUSTER_STATE, ICBC_ROUTE_CREDIT,
                              ICBC_ROUTE_PACE };
    if (len < ICBC_ROUTE_HDR_SIZE || b[0] != ICBC_ROUTE_VERSION ||
        std::find(std::begin(known), std::end(known), b[1]) == std::end(known))
        return false;
    unsigned flags = (unsigned) b[2] << 8 | b[3];
    if (flags & ~(unsigned) (ICBC_ROUTE_F_ORDERED | ICBC_ROUTE_F_OK))
        return false;
    if (get32(28) != 0 || get32(24) > ICBC_ROUTE_INNER_MAX)
        return false;
    uint64_t payload = (uint64_t) get32(32) << 32 | get32(36);
    return payload <= ICBC_ROUTE_PAYLOAD_MAX;
}

/* Valid headers with a few bits flipped or cut short: the parser accepts
 * exactly what the layout allows, and what it accepts packs back to the
 * same bytes. */
TEST(RouteHeader, MutatedHeadersParseExactlyWhenValid)
{
    std::mt19937 rng(11);
    int accepted = 0, rejected = 0;
    for (int i = 0; i < 20000; i++) {
        icbc_route_hdr_t h = sample(), out;
        h.flags = (uint16_t) (rng() % 4);
        h.src_rank = rng();
        h.dst_rank = rng();
        h.job = (uint64_t) rng() << 32 | rng();
        h.inner_len = rng() % (ICBC_ROUTE_INNER_MAX + 1);
        h.payload_len = ((uint64_t) rng() << 32 | rng()) % (ICBC_ROUTE_PAYLOAD_MAX + 1);
        uint8_t buf[ICBC_ROUTE_HDR_SIZE];
        icbc_route_hdr_pack(&h, buf);
        ASSERT_TRUE(route_bytes_valid(buf, sizeof(buf))) << "sample " << i;
        size_t len = sizeof(buf);
        int nmut = (int) (rng() % 3);
        for (int m = 0; m < nmut; m++) {
            if (rng() % 10 == 0)
                len = rng() % (len + 1);
            else
                buf[rng() % sizeof(buf)] ^= (uint8_t) (1u << (rng() % 8));
        }
        bool valid = route_bytes_valid(buf, len);
        icbc_status_t st = icbc_route_hdr_parse(buf, len, &out);
        ASSERT_EQ(valid ? ICBC_OK : ICBC_ERR_INVALID, st) << "sample " << i;
        if (st != ICBC_OK) {
            rejected++;
            continue;
        }
        accepted++;
        uint8_t again[ICBC_ROUTE_HDR_SIZE];
        icbc_route_hdr_pack(&out, again);
        ASSERT_EQ(0, memcmp(buf, again, sizeof(buf)))
            << "sample " << i << ": what was accepted does not pack back to the same bytes";
    }
    EXPECT_GT(accepted, 5000);
    EXPECT_GT(rejected, 5000);
}

TEST(RouteRegister, MacDependsOnKeyNonceJobAndRank)
{
    unsigned char key[] = "0123456789abcdef", nonce[ICBC_ROUTE_NONCE_SIZE] = { 1, 2, 3 };
    unsigned char a[ICBC_ROUTE_MAC_SIZE], b[ICBC_ROUTE_MAC_SIZE];
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 42, 7, a));
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 42, 7, b));
    EXPECT_TRUE(icbc_route_mac_equal(a, b, sizeof(a)));
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 42, 8, b));
    EXPECT_FALSE(icbc_route_mac_equal(a, b, sizeof(a)));
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 43, 7, b));
    EXPECT_FALSE(icbc_route_mac_equal(a, b, sizeof(a)));
    nonce[31] = 1;
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 42, 7, b));
    EXPECT_FALSE(icbc_route_mac_equal(a, b, sizeof(a)));
    nonce[31] = 0;
    key[0] = 'x';
    ASSERT_EQ(ICBC_OK, icbc_route_register_mac(key, 16, nonce, 42, 7, b));
    EXPECT_FALSE(icbc_route_mac_equal(a, b, sizeof(a)));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_route_register_mac(key, 0, nonce, 42, 7, b));
}

TEST(RegisterAck, WindowAndCpusRoundTrip)
{
    uint8_t buf[ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX];
    char cpus[ICBC_ROUTE_CPUS_MAX + 1];
    uint64_t window = 0;

    size_t n = icbc_route_ack_pack(1u << 20, "2-3,6", buf);
    EXPECT_EQ((size_t) ICBC_ROUTE_COUNT_SIZE + 5, n);
    ASSERT_EQ(ICBC_OK, icbc_route_ack_parse(buf, n, &window, cpus));
    EXPECT_EQ(1u << 20, window);
    EXPECT_STREQ("2-3,6", cpus);

    /* an unbound router sends the window alone, as before the list existed */
    n = icbc_route_ack_pack(7, NULL, buf);
    EXPECT_EQ((size_t) ICBC_ROUTE_COUNT_SIZE, n);
    ASSERT_EQ(ICBC_OK, icbc_route_ack_parse(buf, n, &window, cpus));
    EXPECT_EQ(7u, window);
    EXPECT_STREQ("", cpus);
}

TEST(RegisterAck, AListTooLongIsNotSentAndOneThatIsNoListIsNotTaken)
{
    uint8_t buf[ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX + 8];
    char cpus[ICBC_ROUTE_CPUS_MAX + 1];
    uint64_t window = 0;
    std::string longest(ICBC_ROUTE_CPUS_MAX, '1'), too_long(ICBC_ROUTE_CPUS_MAX + 1, '1');

    EXPECT_EQ((size_t) ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX,
              icbc_route_ack_pack(1, longest.c_str(), buf));
    EXPECT_EQ((size_t) ICBC_ROUTE_COUNT_SIZE, icbc_route_ack_pack(1, too_long.c_str(), buf));

    for (const char *bad : { "3\n", "all", "1;rm", "0x3" }) {
        size_t n = ICBC_ROUTE_COUNT_SIZE + strlen(bad);
        icbc_route_ack_pack(9, NULL, buf);
        memcpy(buf + ICBC_ROUTE_COUNT_SIZE, bad, strlen(bad));
        ASSERT_EQ(ICBC_OK, icbc_route_ack_parse(buf, n, &window, cpus)) << bad;
        EXPECT_EQ(9u, window);
        EXPECT_STREQ("", cpus) << bad;
    }
    /* one byte past the longest list: the window still counts, the list not */
    memset(buf + ICBC_ROUTE_COUNT_SIZE, '1', ICBC_ROUTE_CPUS_MAX + 1);
    ASSERT_EQ(ICBC_OK, icbc_route_ack_parse(buf, ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX + 1,
                                            &window, cpus));
    EXPECT_STREQ("", cpus);
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_route_ack_parse(buf, ICBC_ROUTE_COUNT_SIZE - 1, &window, cpus));
}

} // namespace
