#include <gtest/gtest.h>

#include <cstring>

#include "icbc_peer.h"

namespace
{

TEST(PeerTable, InitGivesUnknownPeers)
{
    icbc_peer_table_t t;
    ASSERT_EQ(ICBC_OK, icbc_peer_table_init(&t, 5));
    EXPECT_EQ(5, t.size);
    for (int r = 0; r < 5; r++) {
        icbc_peer_t *p = icbc_peer_get(&t, r);
        ASSERT_NE(nullptr, p);
        EXPECT_EQ(r, p->rank);
        EXPECT_EQ(-1, p->cluster);
        EXPECT_EQ(ICBC_PATH_NONE, p->path);
        EXPECT_EQ(nullptr, p->ep);
    }
    EXPECT_EQ(nullptr, icbc_peer_get(&t, 5));
    EXPECT_EQ(nullptr, icbc_peer_get(&t, -1));
    icbc_peer_table_destroy(&t);
}

TEST(PeerTable, GrowKeepsExistingPeers)
{
    icbc_peer_table_t t;
    ASSERT_EQ(ICBC_OK, icbc_peer_table_init(&t, 2));
    ASSERT_EQ(ICBC_OK, icbc_peer_set_address(icbc_peer_get(&t, 1), "a1", "addr", 4));
    icbc_peer_get(&t, 1)->path = ICBC_PATH_DIRECT;
    ASSERT_EQ(ICBC_OK, icbc_peer_table_grow(&t, 1000));
    EXPECT_EQ(1000, t.size);
    icbc_peer_t *p = icbc_peer_get(&t, 1);
    EXPECT_STREQ("a1", p->node);
    EXPECT_EQ(ICBC_PATH_DIRECT, p->path);
    ASSERT_EQ(4u, p->fabric_addr_len);
    EXPECT_EQ(0, memcmp("addr", p->fabric_addr, 4));
    EXPECT_EQ(999, icbc_peer_get(&t, 999)->rank);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_peer_table_grow(&t, 10));
    icbc_peer_table_destroy(&t);
}

TEST(PeerTable, SetAddressReplacesAndOwnsACopy)
{
    icbc_peer_table_t t;
    ASSERT_EQ(ICBC_OK, icbc_peer_table_init(&t, 1));
    char addr[] = "first";
    icbc_peer_t *p = icbc_peer_get(&t, 0);
    ASSERT_EQ(ICBC_OK, icbc_peer_set_address(p, "n", addr, sizeof(addr)));
    addr[0] = 'X';
    EXPECT_EQ('f', static_cast<char *>(p->fabric_addr)[0]);
    ASSERT_EQ(ICBC_OK, icbc_peer_set_address(p, "m", "2", 1));
    EXPECT_STREQ("m", p->node);
    EXPECT_EQ(1u, p->fabric_addr_len);
    icbc_peer_table_destroy(&t);
}

TEST(PeerTable, PathNames)
{
    EXPECT_STREQ("direct", icbc_path_name(ICBC_PATH_DIRECT));
    EXPECT_STREQ("routed", icbc_path_name(ICBC_PATH_ROUTED));
    EXPECT_STREQ("tcp-direct", icbc_path_name(ICBC_PATH_TCP_DIRECT));
    EXPECT_STREQ("impi", icbc_path_name(ICBC_PATH_IMPI));
}

} // namespace
