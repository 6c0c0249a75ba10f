#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "icbc_bcard.h"

namespace
{

std::vector<uint8_t> encode(const char *node, const std::string &addr)
{
    std::vector<uint8_t> buf(icbc_bcard_size(node, addr.size()));
    size_t len = 0;
    EXPECT_EQ(ICBC_OK,
              icbc_bcard_encode(node, addr.data(), addr.size(), buf.data(), buf.size(), &len));
    EXPECT_EQ(buf.size(), len);
    return buf;
}

TEST(BusinessCard, RoundTrip)
{
    std::string addr("\x01\x02\x00\x7f ucx address", 17);
    auto buf = encode("a1", addr);
    icbc_bcard_t card;
    ASSERT_EQ(ICBC_OK, icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0));
    EXPECT_STREQ("a1", card.node);
    ASSERT_EQ(addr.size(), card.fabric_addr_len);
    EXPECT_EQ(0, memcmp(addr.data(), card.fabric_addr, addr.size()));
}

TEST(BusinessCard, TrailingPaddingIsAccepted)
{
    auto buf = encode("node-7", "xyz");
    buf.resize(4096, 0);
    icbc_bcard_t card;
    ASSERT_EQ(ICBC_OK, icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0));
    EXPECT_STREQ("node-7", card.node);
    EXPECT_EQ(3u, card.fabric_addr_len);
}

TEST(BusinessCard, EncodeRejectsBadInput)
{
    uint8_t buf[64];
    size_t len;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_encode("", "a", 1, buf, sizeof(buf), &len));
    std::string longname(ICBC_BCARD_MAX_NAME + 1, 'n');
    std::vector<uint8_t> big(1024);
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_bcard_encode(longname.c_str(), "a", 1, big.data(), big.size(), &len));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_encode("a0", "0123456789", 10, buf, 15, &len));
}

struct BadCase {
    const char *what;
    size_t offset;
    uint8_t value;
    const char *message;
};

TEST(BusinessCard, CorruptCardsAreRejectedWithAReason)
{
    const BadCase cases[] = {
        { "magic", 0, 'X', "bad magic" },
        { "version", 5, 9, "unsupported card version" },
        { "name length zero", 7, 0, "node name length" },
        { "name length huge", 6, 0xff, "node name length" },
        { "address length", 8, 0x7f, "lengths exceed" },
        { "name byte", 12, 0x01, "non-printable" },
    };
    for (const auto &c : cases) {
        auto buf = encode("a0", "addr");
        buf[c.offset] = c.value;
        icbc_bcard_t card;
        char why[128] = "";
        EXPECT_EQ(ICBC_ERR_INVALID,
                  icbc_bcard_parse(buf.data(), buf.size(), &card, why, sizeof(why)))
            << c.what;
        EXPECT_NE(nullptr, strstr(why, c.message)) << c.what << ": " << why;
    }
    icbc_bcard_t card;
    uint8_t tiny[4] = { 0 };
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(tiny, sizeof(tiny), &card, nullptr, 0));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(nullptr, 100, &card, nullptr, 0));
}

TEST(BusinessCard, TruncatedCardsAreRejected)
{
    auto buf = encode("a0", "0123456789");
    icbc_bcard_t card;
    for (size_t len = 0; len < buf.size(); len++)
        EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(buf.data(), len, &card, nullptr, 0)) << len;
}

TEST(BusinessCard, RandomMutationsNeverCrash)
{
    std::mt19937 rng(12345);
    auto good = encode("b3", std::string(200, 'u'));
    for (int i = 0; i < 20000; i++) {
        auto buf = good;
        int flips = 1 + rng() % 4;
        for (int f = 0; f < flips; f++)
            buf[rng() % buf.size()] = static_cast<uint8_t>(rng());
        buf.resize(rng() % (buf.size() + 8));
        icbc_bcard_t card;
        icbc_status_t s = icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0);
        ASSERT_TRUE(s == ICBC_OK || s == ICBC_ERR_INVALID);
        if (s == ICBC_OK) {
            ASSERT_LE(card.fabric_addr_len, buf.size());
            ASSERT_LT(strlen(card.node), sizeof(card.node));
        }
    }
}

} // namespace

namespace
{

TEST(BusinessCard, TcpEndpointsRoundTrip)
{
    icbc_bcard_tcp_t tcp[2] = {};
    tcp[0].role = ICBC_BCARD_TCP_WAN;
    tcp[0].family = 4;
    tcp[0].port = 40001;
    tcp[0].addr[0] = 10, tcp[0].addr[1] = 100, tcp[0].addr[3] = 7;
    tcp[1].role = ICBC_BCARD_TCP_FABRIC;
    tcp[1].family = 6;
    tcp[1].port = 40002;
    tcp[1].addr[15] = 1;
    std::vector<uint8_t> buf(icbc_bcard_size_tcp("b3", 5, 2));
    size_t len = 0;
    ASSERT_EQ(ICBC_OK, icbc_bcard_encode_tcp("b3", "addr5", 5, tcp, 2, 0x1122334455667788ull,
                                             buf.data(), buf.size(), &len));
    EXPECT_EQ(buf.size(), len);
    buf.resize(1024, 0);
    icbc_bcard_t card;
    ASSERT_EQ(ICBC_OK, icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0));
    ASSERT_EQ(2, card.ntcp);
    const icbc_bcard_tcp_t *w = icbc_bcard_find_tcp(&card, ICBC_BCARD_TCP_WAN);
    ASSERT_NE(nullptr, w);
    EXPECT_EQ(40001, w->port);
    EXPECT_EQ(0, memcmp(tcp[0].addr, w->addr, 16));
    const icbc_bcard_tcp_t *f = icbc_bcard_find_tcp(&card, ICBC_BCARD_TCP_FABRIC);
    ASSERT_NE(nullptr, f);
    EXPECT_EQ(6, f->family);
    EXPECT_EQ(0x1122334455667788ull, card.machine);
}

TEST(BusinessCard, BadTcpEndpointsAreRejected)
{
    icbc_bcard_tcp_t tcp = {};
    tcp.role = ICBC_BCARD_TCP_WAN;
    tcp.family = 4;
    tcp.port = 1;
    std::vector<uint8_t> buf(icbc_bcard_size_tcp("a0", 3, 1));
    size_t len = 0;
    ASSERT_EQ(ICBC_OK,
              icbc_bcard_encode_tcp("a0", "abc", 3, &tcp, 1, 7, buf.data(), buf.size(), &len));
    size_t k = ICBC_BCARD_HEADER_SIZE + 2 + 3;
    icbc_bcard_t card;
    char why[128];
    auto bad = buf;
    bad[k] = 9; /* count too large */
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(bad.data(), bad.size(), &card, why, sizeof(why)));
    bad = buf;
    bad.resize(bad.size() - 8 - 1); /* no machine id, truncated entry */
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(bad.data(), bad.size(), &card, why, sizeof(why)));
    bad = buf;
    bad[k + 2] = 5; /* family */
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bcard_parse(bad.data(), bad.size(), &card, why, sizeof(why)));
    EXPECT_STREQ("malformed TCP endpoint", why);
    tcp.port = 0;
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_bcard_encode_tcp("a0", "abc", 3, &tcp, 1, 7, buf.data(), buf.size(), &len));
}

} // namespace

namespace
{

TEST(BusinessCard, CountIsWrittenSoPaddingIsNeverReadAsEndpoints)
{
    std::vector<uint8_t> buf(icbc_bcard_size_tcp("a1", 4, 0));
    size_t len = 0;
    ASSERT_EQ(ICBC_OK,
              icbc_bcard_encode_tcp("a1", "addr", 4, nullptr, 0, 42, buf.data(), buf.size(), &len));
    EXPECT_EQ(buf.size(), len);
    buf.resize(512, 0xff); /* padding that is not zero */
    icbc_bcard_t card;
    ASSERT_EQ(ICBC_OK, icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0));
    EXPECT_EQ(0, card.ntcp);
    EXPECT_EQ(42u, card.machine);
}

TEST(BusinessCard, CardWithoutMachineIdHasUnknownMachine)
{
    std::vector<uint8_t> buf(icbc_bcard_size_tcp("a1", 4, 0));
    size_t len = 0;
    ASSERT_EQ(ICBC_OK,
              icbc_bcard_encode_tcp("a1", "addr", 4, nullptr, 0, 42, buf.data(), buf.size(), &len));
    buf.resize(len - 8);
    icbc_bcard_t card;
    ASSERT_EQ(ICBC_OK, icbc_bcard_parse(buf.data(), buf.size(), &card, nullptr, 0));
    EXPECT_EQ(0u, card.machine);
}

TEST(BusinessCard, MachineIdFoldsTheBootId)
{
    EXPECT_EQ(0x0123456789abcdefull ^ 0xfedcba9876543210ull,
              icbc_bcard_machine_id_parse("01234567-89ab-cdef-FEDC-BA9876543210\n"));
    EXPECT_EQ(0u, icbc_bcard_machine_id_parse(""));
    EXPECT_EQ(0u, icbc_bcard_machine_id_parse("01234567-89ab-cdef-fedc-ba987654321"));   /* short */
    EXPECT_EQ(0u, icbc_bcard_machine_id_parse("01234567-89ab-cdef-fedc-ba98765432100")); /* long */
    EXPECT_EQ(0u, icbc_bcard_machine_id_parse("0123456g-89ab-cdef-fedc-ba9876543210"));
    EXPECT_EQ(0u, icbc_bcard_machine_id_parse(nullptr));
    /* one kernel, one id: the same on every call, and known on Linux */
    uint64_t id = icbc_bcard_machine_id();
    EXPECT_NE(0u, id);
    EXPECT_EQ(id, icbc_bcard_machine_id());
}

} // namespace
