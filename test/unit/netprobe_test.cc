/*
 * The start-up trial of network interfaces (src/icbc/netprobe.c): an
 * interface counts when its connection to the peer completes, not when the
 * peer refuses it or when it should not reach the peer's addresses at all;
 * an interface of several addresses is named once; cards of one node are
 * told apart from cards of two. Loopback stands in for the fabric.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "icbc_netprobe.h"

namespace
{

uint32_t addr(const char *a)
{
    in_addr v{};
    inet_pton(AF_INET, a, &v);
    return v.s_addr;
}

void add(icbc_netprobe_card_t *c, const char *name, const char *a, const char *mask, int port)
{
    uint32_t k = c->n++;
    snprintf(c->ifs[k].name, sizeof(c->ifs[k].name), "%s", name);
    c->ifs[k].addr = addr(a);
    c->ifs[k].mask = addr(mask);
    c->ifs[k].port = (uint16_t) port;
}

/* A listener on ADDR; its port in *PORT. */
int listener(const char *a, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr(a);
    EXPECT_EQ(0, bind(fd, (sockaddr *) &sa, sizeof(sa)));
    EXPECT_EQ(0, listen(fd, 16));
    getsockname(fd, (sockaddr *) &sa, &len);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A port on ADDR that nobody listens on. */
int closed_port(const char *a)
{
    int port, fd = listener(a, &port);
    close(fd);
    return port;
}

TEST(Netprobe, AnInterfaceCountsWhenItsConnectionCompletes)
{
    int port, fd = listener("127.0.0.1", &port);
    icbc_netprobe_card_t mine{}, peer{};
    char devs[64] = "x";
    add(&mine, "lo", "127.0.0.2", "255.0.0.0", 0);
    add(&peer, "lo", "127.0.0.1", "255.0.0.0", port);
    EXPECT_EQ(1, icbc_netprobe_try(&mine, &peer, 2000, devs, sizeof(devs)));
    EXPECT_STREQ("lo", devs);
    close(fd);
}

TEST(Netprobe, ARefusedConnectionDoesNotCount)
{
    icbc_netprobe_card_t mine{}, peer{};
    char devs[64] = "x";
    add(&mine, "lo", "127.0.0.2", "255.0.0.0", 0);
    add(&peer, "lo", "127.0.0.1", "255.0.0.0", closed_port("127.0.0.1"));
    EXPECT_EQ(0, icbc_netprobe_try(&mine, &peer, 2000, devs, sizeof(devs)));
    EXPECT_STREQ("", devs);
}

TEST(Netprobe, OnlyTheInterfacesThatReachCountAndEachOnce)
{
    int port, fd = listener("127.0.0.1", &port);
    icbc_netprobe_card_t mine{}, peer{};
    char devs[64];
    /* two addresses of one interface reach the peer; an interface of a
     * subnet the peer is not in, which the kernel does not route there, is
     * not tried (its address is not this host's: a connection from it could
     * not even start) */
    add(&mine, "lo", "127.0.0.2", "255.0.0.0", 0);
    add(&mine, "lo", "127.0.0.3", "255.0.0.0", 0);
    add(&mine, "fab9", "192.0.2.1", "255.255.255.0", 0);
    add(&peer, "mgmt", "198.51.100.7", "255.255.255.0", closed_port("127.0.0.1"));
    add(&peer, "lo", "127.0.0.1", "255.0.0.0", port);
    EXPECT_EQ(1, icbc_netprobe_try(&mine, &peer, 2000, devs, sizeof(devs)));
    EXPECT_STREQ("lo", devs);
    close(fd);
}

TEST(Netprobe, CardsOfOneNodeShareAnAddress)
{
    icbc_netprobe_card_t a{}, b{}, c{};
    add(&a, "fab0", "10.0.0.1", "255.255.255.0", 1);
    add(&a, "mgmt0", "10.250.0.1", "255.255.255.0", 2);
    add(&b, "fab0", "10.0.0.2", "255.255.255.0", 3);
    add(&c, "mgmt0", "10.250.0.1", "255.255.255.0", 4);
    EXPECT_FALSE(icbc_netprobe_same_node(&a, &b));
    EXPECT_TRUE(icbc_netprobe_same_node(&a, &c));
}

TEST(Netprobe, ListensOnEveryInterfaceButLoopback)
{
    icbc_netprobe_t p;
    ASSERT_EQ(ICBC_OK, icbc_netprobe_listen(&p));
    for (uint32_t k = 0; k < p.card.n; k++) {
        EXPECT_NE(std::string("lo"), p.card.ifs[k].name);
        EXPECT_NE(0, p.card.ifs[k].port);
        EXPECT_GE(p.fds[k], 0);
    }
    icbc_netprobe_close(&p);
    for (int k = 0; k < ICBC_NETPROBE_MAX_IFACES; k++)
        EXPECT_EQ(-1, p.fds[k]);
}

} // namespace
