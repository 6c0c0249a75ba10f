/*
 * mx_guard and icbc_netif over 127.0.0.1 with plain sockets: which
 * connections the guard shuts down (untrusted and old, the oldest beyond
 * the bound), which it leaves alone (young, trusted hosts, other listeners),
 * and the interface names this host gives its addresses. Ages are given
 * explicitly (the scan's NOW), so nothing depends on timing.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "icbc_netif.h"
#include "mx_guard.h"

namespace
{

int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = {};
    socklen_t l = sizeof(a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, bind(fd, (sockaddr *) &a, sizeof(a)));
    EXPECT_EQ(0, listen(fd, 128));
    EXPECT_EQ(0, getsockname(fd, (sockaddr *) &a, &l));
    *port = ntohs(a.sin_port);
    return fd;
}

/* A client connection to PORT and the accepted server end. */
struct Pair {
    int client = -1, server = -1;
};

Pair connect_pair(int lfd, uint16_t port)
{
    Pair p;
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p.client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(0, connect(p.client, (sockaddr *) &a, sizeof(a)));
    p.server = accept(lfd, nullptr, nullptr);
    EXPECT_GE(p.server, 0);
    return p;
}

/* The client sees the end of the stream (the guard shut the server end). */
bool client_sees_eof(const Pair &p)
{
    pollfd pf = { p.client, POLLIN, 0 };
    char c;
    return poll(&pf, 1, 1000) == 1 && recv(p.client, &c, 1, MSG_DONTWAIT) == 0;
}

bool client_still_open(const Pair &p)
{
    pollfd pf = { p.client, POLLIN, 0 };
    return poll(&pf, 1, 0) == 0;
}

void close_all(std::vector<Pair> &v)
{
    for (auto &p : v) {
        close(p.client);
        close(p.server);
    }
}

sockaddr_in loopback()
{
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

} // namespace

TEST(GuardTest, SilentConnectionsAreShutDownOnceAsOldAsTheTimeout)
{
    mx_guard_t *g;
    uint16_t port;
    ASSERT_EQ(ICBC_OK, mx_guard_begin(&g));
    int lfd = listener(&port);
    ASSERT_EQ(1u, mx_guard_end(g));
    std::vector<Pair> v;
    for (int i = 0; i < 5; i++)
        v.push_back(connect_pair(lfd, port));

    EXPECT_EQ(0u, mx_guard_scan(g, 0, 1000, 100)); // first seen now
    EXPECT_EQ(5u, mx_guard_untrusted(g));
    EXPECT_EQ(0u, mx_guard_scan(g, 999, 1000, 100)); // not yet as old as the timeout
    for (auto &p : v)
        EXPECT_TRUE(client_still_open(p));
    EXPECT_EQ(5u, mx_guard_scan(g, 1000, 1000, 100));
    for (auto &p : v)
        EXPECT_TRUE(client_sees_eof(p));
    EXPECT_EQ(0u, mx_guard_scan(g, 2000, 1000, 100)); // each counted once
    close_all(v);
    close(lfd);
    mx_guard_free(g);
}

TEST(GuardTest, ConnectionsOfARegisteredHostStayUntilTheTimeoutAfterItLeft)
{
    mx_guard_t *g;
    uint16_t port;
    sockaddr_in host = loopback();
    ASSERT_EQ(ICBC_OK, mx_guard_begin(&g));
    int lfd = listener(&port);
    ASSERT_EQ(1u, mx_guard_end(g));
    std::vector<Pair> v;
    for (int i = 0; i < 3; i++)
        v.push_back(connect_pair(lfd, port));

    mx_guard_trust(g, (sockaddr *) &host, +1, 0);
    mx_guard_trust(g, (sockaddr *) &host, +1, 0);
    EXPECT_EQ(0u, mx_guard_scan(g, 0, 1000, 100));
    EXPECT_EQ(0u, mx_guard_scan(g, 5000, 1000, 100));
    mx_guard_trust(g, (sockaddr *) &host, -1, 6000); // one of two processes left
    EXPECT_EQ(0u, mx_guard_scan(g, 9000, 1000, 100));
    mx_guard_trust(g, (sockaddr *) &host, -1, 10000); // the last one left
    EXPECT_EQ(0u, mx_guard_scan(g, 10999, 1000, 100));
    for (auto &p : v)
        EXPECT_TRUE(client_still_open(p));
    EXPECT_EQ(3u, mx_guard_scan(g, 11000, 1000, 100));
    for (auto &p : v)
        EXPECT_TRUE(client_sees_eof(p));
    close_all(v);
    close(lfd);
    mx_guard_free(g);
}

TEST(GuardTest, BeyondTheBoundTheOldestGoFirst)
{
    mx_guard_t *g;
    uint16_t port;
    ASSERT_EQ(ICBC_OK, mx_guard_begin(&g));
    int lfd = listener(&port);
    ASSERT_EQ(1u, mx_guard_end(g));
    std::vector<Pair> old, young;
    for (int i = 0; i < 4; i++)
        old.push_back(connect_pair(lfd, port));
    EXPECT_EQ(0u, mx_guard_scan(g, 0, 1000, 10));
    for (int i = 0; i < 4; i++)
        young.push_back(connect_pair(lfd, port));
    EXPECT_EQ(2u, mx_guard_scan(g, 100, 1000, 6)); // 8 untrusted, 6 allowed
    EXPECT_EQ(6u, mx_guard_untrusted(g));
    int old_shut = 0;
    for (auto &p : old)
        old_shut += client_sees_eof(p);
    EXPECT_EQ(2, old_shut);
    for (auto &p : young)
        EXPECT_TRUE(client_still_open(p));
    close_all(old);
    close_all(young);
    close(lfd);
    mx_guard_free(g);
}

TEST(GuardTest, ConnectionsOfOtherListenersAreNotTouched)
{
    mx_guard_t *g;
    uint16_t before_port, port;
    int before = listener(&before_port); // not UCX's: opened before begin
    ASSERT_EQ(ICBC_OK, mx_guard_begin(&g));
    int lfd = listener(&port);
    ASSERT_EQ(1u, mx_guard_end(g));
    Pair other = connect_pair(before, before_port);
    Pair mine = connect_pair(lfd, port);
    EXPECT_EQ(0u, mx_guard_scan(g, 0, 10, 100));
    EXPECT_EQ(1u, mx_guard_scan(g, 50, 10, 100));
    EXPECT_TRUE(client_sees_eof(mine));
    EXPECT_TRUE(client_still_open(other));
    std::vector<Pair> v = { other, mine };
    close_all(v);
    close(lfd);
    close(before);
    mx_guard_free(g);
}

TEST(NetifTest, LoopbackAddressesAreHeldByLo)
{
    char name[IF_NAMESIZE + 1];
    sockaddr_in a = loopback();
    ASSERT_EQ(ICBC_OK, icbc_netif_holding((sockaddr *) &a, name, sizeof(name)));
    EXPECT_STREQ("lo", name);
    a.sin_port = htons(7100);
    ASSERT_EQ(ICBC_OK, icbc_netif_towards((sockaddr *) &a, sizeof(a), name, sizeof(name)));
    EXPECT_STREQ("lo", name);
}

TEST(NetifTest, AnAddressOfNoInterfaceIsNotFound)
{
    char name[IF_NAMESIZE + 1] = "";
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "203.0.113.77", &a.sin_addr); /* TEST-NET-3 */
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, icbc_netif_holding((sockaddr *) &a, name, sizeof(name)));
}

TEST(NetifTest, FabricDevicesOfAClusterComeFromItsRouters)
{
    char dir[] = "/tmp/icbc-netif-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    std::string key = std::string(dir) + "/k";
    FILE *kf = fopen(key.c_str(), "w");
    ASSERT_NE(nullptr, kf);
    fputs("00112233445566778899aabbccddeeff\n", kf);
    fclose(kf);
    chmod(key.c_str(), 0600);
    const char *text = "policy alltoall\n"
                       "key k\n"
                       "cluster a\n"
                       "    hosts h0 h1\n"
                       "    router h0 fabric=127.0.0.1:7100 wan=127.0.0.1:7200\n"
                       "    router h1 fabric=127.0.0.2:7100 wan=127.0.0.2:7200\n"
                       "cluster b\n"
                       "    hosts h2\n";
    icbc_routerfile_t *rf = nullptr;
    char err[ICBC_RF_ERR_LEN], list[ICBC_NETIF_LIST_MAX];
    ASSERT_EQ(ICBC_OK,
              icbc_routerfile_parse(text, strlen(text), "t.conf", dir, &rf, err, sizeof(err)))
        << err;
    ASSERT_EQ(ICBC_OK, icbc_netif_fabric_devices(rf, 0, list, sizeof(list), err, sizeof(err)))
        << err;
    EXPECT_STREQ("lo", list); // both routers through lo: listed once
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_netif_fabric_devices(rf, 1, list, sizeof(list), err, sizeof(err)));
    icbc_routerfile_free(rf);

    /* a 'fabric' network names the device without routers, and wins over them */
    const char *net = "policy tcp\n"
                      "cluster a\n"
                      "    hosts h0\n"
                      "    fabric 127.0.0.0/8\n"
                      "cluster b\n"
                      "    hosts h1\n"
                      "    fabric 203.0.113.0/24\n";
    ASSERT_EQ(ICBC_OK,
              icbc_routerfile_parse(net, strlen(net), "n.conf", dir, &rf, err, sizeof(err)))
        << err;
    ASSERT_EQ(ICBC_OK, icbc_netif_fabric_devices(rf, 0, list, sizeof(list), err, sizeof(err)))
        << err;
    EXPECT_STREQ("lo", list);
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_netif_fabric_devices(rf, 1, list, sizeof(list), err, sizeof(err)));
    EXPECT_STREQ("n.conf:7: no interface of this host has an address in cluster 'b''s fabric "
                 "network",
                 err);
    icbc_routerfile_free(rf);
    unlink(key.c_str());
    rmdir(dir);
}
