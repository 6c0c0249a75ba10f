/*
 * The IMPI server: its protocol fed byte strings (impi_srv_*), and the
 * impi-server daemon driven over sockets as IMPI clients drive it.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "impi_daemon.h"
#include "impi_server.h"

namespace
{

typedef std::vector<uint8_t> Bytes;

Bytes cmd(uint32_t c, const Bytes &payload = {})
{
    Bytes b(IMPI_CMD_HDR_SIZE);
    impi_cmd_hdr_pack(c, (uint32_t) payload.size(), b.data());
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

Bytes u32(uint32_t v)
{
    Bytes b(4);
    icbc_put32(b.data(), v);
    return b;
}

Bytes u64(uint64_t v)
{
    Bytes b(8);
    icbc_put64(b.data(), v);
    return b;
}

Bytes cat(Bytes a, const Bytes &b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Bytes coll(uint32_t label, const Bytes &data)
{
    return cmd(IMPI_CMD_COLL, cat(u32(label), data));
}

/* The protocol alone: slots fed bytes, their output read back. */
struct ImpiProto : ::testing::Test {
    impi_srv_t *srv = nullptr;
    char err[512] = "";

    void make(int n, bool key = false, uint64_t k = 0)
    {
        impi_srv_config_t cfg = { n, key ? 1 : 0, k };
        ASSERT_EQ(ICBC_OK, impi_srv_create(&cfg, &srv));
    }
    void TearDown() override
    {
        impi_srv_destroy(srv);
    }
    icbc_status_t feed(int slot, const Bytes &b, bool byte_by_byte = false)
    {
        if (!byte_by_byte)
            return impi_srv_input(srv, slot, b.data(), b.size(), err, sizeof(err));
        for (uint8_t c : b) {
            icbc_status_t st = impi_srv_input(srv, slot, &c, 1, err, sizeof(err));
            if (st != ICBC_OK)
                return st;
        }
        return ICBC_OK;
    }
    Bytes out(int slot)
    {
        size_t len;
        const uint8_t *p = (const uint8_t *) impi_srv_output(srv, slot, &len);
        Bytes b(p, p + len);
        impi_srv_consume(srv, slot, len);
        return b;
    }
    /* AUTH (none) and IMPI: a client that named its rank. */
    int client(int rank)
    {
        int s = impi_srv_accept(srv, ("10.0.0." + std::to_string(rank + 1) + ":1000").c_str());
        EXPECT_GE(s, 0);
        EXPECT_EQ(ICBC_OK, feed(s, cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE))));
        Bytes auth = out(s);
        EXPECT_EQ(cat(u32(IMPI_AUTH_NONE), u32(0)), auth);
        EXPECT_EQ(ICBC_OK, feed(s, cmd(IMPI_CMD_IMPI, u32((uint32_t) rank))));
        return s;
    }
    std::string error() const
    {
        return err;
    }
};

Bytes coll_answer(uint32_t label, uint32_t mask, const Bytes &data)
{
    return cmd(IMPI_CMD_COLL, cat(cat(u32(label), u32(mask)), data));
}

TEST_F(ImpiProto, ThreeClientsStartUpAndFinish)
{
    make(3);
    int c2 = client(2), c0 = client(0);
    EXPECT_TRUE(out(c2).empty()) << "the client count before every client named its rank";
    int c1 = client(1);
    for (int s : { c0, c1, c2 })
        EXPECT_EQ(cmd(IMPI_CMD_IMPI, u32(3)), out(s));
    /* every label, ascending, contributions answered in client-rank order */
    for (uint32_t label : { IMPI_C_VERSION, IMPI_C_NHOSTS, IMPI_H_IPV6, IMPI_P_PID }) {
        Bytes d0 = u32(label + 0), d1 = cat(u32(label + 1), u32(7)), d2 = u32(label + 2);
        EXPECT_EQ(ICBC_OK, feed(c1, coll(label, d1)));
        EXPECT_EQ(ICBC_OK, feed(c2, coll(label, d2)));
        EXPECT_TRUE(out(c1).empty()) << "answered before client 0 gave label " << label;
        EXPECT_EQ(ICBC_OK, feed(c0, coll(label, d0)));
        Bytes want = coll_answer(label, 7, cat(cat(d0, d1), d2));
        for (int s : { c0, c1, c2 })
            EXPECT_EQ(want, out(s)) << "label " << label;
    }
    EXPECT_EQ(ICBC_OK, feed(c0, cmd(IMPI_CMD_DONE)));
    EXPECT_EQ(ICBC_OK, feed(c2, cmd(IMPI_CMD_DONE)));
    EXPECT_FALSE(impi_srv_started(srv));
    EXPECT_EQ(ICBC_OK, feed(c1, cmd(IMPI_CMD_DONE)));
    EXPECT_TRUE(impi_srv_started(srv));
    for (int s : { c0, c1, c2 })
        EXPECT_EQ(cmd(IMPI_CMD_DONE), out(s));
    for (int s : { c0, c1, c2 }) {
        EXPECT_FALSE(impi_srv_finished(srv));
        EXPECT_EQ(ICBC_OK, feed(s, cmd(IMPI_CMD_FINI)));
        EXPECT_EQ(ICBC_OK, impi_srv_closed(srv, s, err, sizeof(err)));
    }
    EXPECT_TRUE(impi_srv_finished(srv));
}

TEST_F(ImpiProto, CommandsSplitIntoSingleBytesGiveTheSameAnswers)
{
    make(2);
    int a = impi_srv_accept(srv, "a"), b = impi_srv_accept(srv, "b");
    Bytes start = cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)), cmd(IMPI_CMD_IMPI, u32(0)));
    ASSERT_EQ(ICBC_OK, feed(a, cat(start, coll(IMPI_C_NPROCS, u32(4))), true));
    start = cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)), cmd(IMPI_CMD_IMPI, u32(1)));
    ASSERT_EQ(ICBC_OK, feed(b, cat(start, coll(IMPI_C_NPROCS, u32(2))), true));
    Bytes want = cat(cat(cat(u32(IMPI_AUTH_NONE), u32(0)), cmd(IMPI_CMD_IMPI, u32(2))),
                     coll_answer(IMPI_C_NPROCS, 3, cat(u32(4), u32(2))));
    EXPECT_EQ(want, out(a));
    EXPECT_EQ(want, out(b));
}

TEST_F(ImpiProto, AClientThatSkipsALabelDoesNotHoldItUp)
{
    make(2);
    int c0 = client(0), c1 = client(1);
    out(c0);
    out(c1);
    ASSERT_EQ(ICBC_OK, feed(c0, coll(IMPI_C_TAGUB, u32(32767))));
    EXPECT_TRUE(out(c0).empty());
    /* client 1 has no TAGUB to give and moves on to the next label */
    ASSERT_EQ(ICBC_OK, feed(c1, coll(IMPI_H_IPV6, Bytes(16, 1))));
    EXPECT_EQ(coll_answer(IMPI_C_TAGUB, 1, u32(32767)), out(c0));
    EXPECT_TRUE(out(c1).empty()) << "a client that did not give a label gets no answer";
    ASSERT_EQ(ICBC_OK, feed(c0, coll(IMPI_H_IPV6, Bytes(16, 0))));
    Bytes want = coll_answer(IMPI_H_IPV6, 3, cat(Bytes(16, 0), Bytes(16, 1)));
    EXPECT_EQ(want, out(c0));
    EXPECT_EQ(want, out(c1));
}

TEST_F(ImpiProto, ADoneClientDoesNotHoldUpLabels)
{
    make(2);
    int c0 = client(0), c1 = client(1);
    out(c0);
    out(c1);
    ASSERT_EQ(ICBC_OK, feed(c1, cmd(IMPI_CMD_DONE)));
    ASSERT_EQ(ICBC_OK, feed(c0, coll(IMPI_P_PID, u64(1234))));
    EXPECT_EQ(coll_answer(IMPI_P_PID, 1, u64(1234)), out(c0));
}

TEST_F(ImpiProto, KeyAuthentication)
{
    make(1, true, 987654321);
    int s = impi_srv_accept(srv, "x");
    ASSERT_EQ(ICBC_OK, feed(s, cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE | IMPI_AUTH_MASK_KEY))));
    EXPECT_EQ(cat(u32(IMPI_AUTH_KEY), u32(8)), out(s));
    ASSERT_EQ(ICBC_OK, feed(s, cat(u64(987654321), cmd(IMPI_CMD_IMPI, u32(0)))));
    EXPECT_EQ(cmd(IMPI_CMD_IMPI, u32(1)), out(s));
}

/* Strangers (nothing authenticated yet) are refused alone: a port scan
 * does not end a job's start-up. */
TEST_F(ImpiProto, StrangersAreRefusedAloneAndStartUpGoesOn)
{
    make(2, true, 42);
    struct {
        Bytes bytes;
        const char *msg;
    } bad[] = {
        { Bytes{ 'G', 'E', 'T', ' ', '/', ' ', 'H', 'T' }, "malformed command" },
        { cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)), "not the key this server requires" },
        { cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_KEY)), u64(41)), "sent the wrong key" },
        { cmd(IMPI_CMD_IMPI, u32(0)), "sent IMPI while authenticating" },
        { cmd(IMPI_CMD_AUTH, Bytes(8, 0)), "malformed command" },
    };
    for (const auto &b : bad) {
        int s = impi_srv_accept(srv, "203.0.113.9:4444");
        ASSERT_GE(s, 0);
        EXPECT_EQ(ICBC_ERR_AUTH, feed(s, b.bytes));
        EXPECT_NE(std::string::npos, error().find(b.msg)) << error();
        EXPECT_NE(std::string::npos, error().find("203.0.113.9:4444")) << error();
    }
    int c[2];
    for (int r = 0; r < 2; r++) {
        c[r] = impi_srv_accept(srv, "client");
        ASSERT_GE(c[r], 0) << "refused strangers kept their slots";
        ASSERT_EQ(ICBC_OK, feed(c[r], cat(cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_KEY)), u64(42)),
                                          cmd(IMPI_CMD_IMPI, u32((uint32_t) r)))));
    }
    Bytes want = cat(cat(u32(IMPI_AUTH_KEY), u32(8)), cmd(IMPI_CMD_IMPI, u32(2)));
    EXPECT_EQ(want, out(c[0]));
    EXPECT_EQ(want, out(c[1]));
}

/* A client's error ends the start-up, with a message naming the client
 * and what was wrong. */
TEST_F(ImpiProto, ClientErrorsNameTheClientAndTheFault)
{
    struct Case {
        const char *what;
        std::vector<Bytes> steps; /* after AUTH and IMPI rank 0 of 2 */
        const char *msg;
    } cases[] = {
        { "unknown command", { cmd(0x58585858, u32(0)) }, "malformed command (0x58585858 '?'" },
        { "oversized COLL", { cmd(IMPI_CMD_COLL, {}) }, "malformed command" },
        { "labels out of order",
          { coll(IMPI_H_IPV6, {}), coll(IMPI_C_VERSION, {}) },
          "gave COLL label 0x1000 after 0x2000 (labels must ascend)" },
        { "FINI before start-up",
          { cmd(IMPI_CMD_DONE), cmd(IMPI_CMD_FINI) },
          "sent FINI while done, waiting for the others (before start-up ended)" },
        { "IMPI twice", { cmd(IMPI_CMD_IMPI, u32(1)) }, "sent IMPI while exchanging COLL labels" },
    };
    for (const Case &c : cases) {
        impi_srv_destroy(srv);
        srv = nullptr;
        make(2);
        int s = client(0);
        icbc_status_t st = ICBC_OK;
        for (const Bytes &b : c.steps)
            if ((st = feed(s, b)) != ICBC_OK)
                break;
        EXPECT_EQ(ICBC_ERR_INVALID, st) << c.what;
        EXPECT_NE(std::string::npos, error().find(c.msg)) << c.what << ": " << error();
        EXPECT_NE(std::string::npos, error().find("client 0 (10.0.0.1:1000)")) << error();
    }
    /* an oversized COLL length in the header */
    impi_srv_destroy(srv);
    srv = nullptr;
    make(1);
    int s = client(0);
    Bytes big(IMPI_CMD_HDR_SIZE);
    impi_cmd_hdr_pack(IMPI_CMD_COLL, IMPI_CMD_LEN_MAX + 1, big.data());
    EXPECT_EQ(ICBC_ERR_INVALID, feed(s, big));
    EXPECT_NE(std::string::npos, error().find("16777217 bytes")) << error();
}

TEST_F(ImpiProto, RankOutOfRangeOrTakenTwice)
{
    make(2);
    int a = impi_srv_accept(srv, "a:1");
    ASSERT_EQ(ICBC_OK, feed(a, cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE))));
    EXPECT_EQ(ICBC_ERR_INVALID, feed(a, cmd(IMPI_CMD_IMPI, u32(2))));
    EXPECT_NE(std::string::npos, error().find("names client rank 2, outside 0..1")) << error();

    impi_srv_destroy(srv);
    srv = nullptr;
    make(2);
    client(1);
    int b = impi_srv_accept(srv, "b:2");
    ASSERT_EQ(ICBC_OK, feed(b, cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE))));
    EXPECT_EQ(ICBC_ERR_INVALID, feed(b, cmd(IMPI_CMD_IMPI, u32(1))));
    EXPECT_NE(std::string::npos,
              error().find("names client rank 1, which 10.0.0.2:1000 already has"))
        << error();
}

TEST_F(ImpiProto, AClientThatClosesBeforeFiniIsAnError)
{
    make(2);
    int c0 = client(0);
    client(1);
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, impi_srv_closed(srv, c0, err, sizeof(err)));
    EXPECT_NE(std::string::npos,
              error().find("client 0 (10.0.0.1:1000) closed its connection while exchanging COLL "
                           "labels, before FINI"))
        << error();
}

TEST_F(ImpiProto, WaitingForNamesTheMissingClientsAndLabel)
{
    make(3);
    int c0 = client(0);
    client(2);
    char what[256];
    impi_srv_waiting_for(srv, what, sizeof(what));
    EXPECT_STREQ("clients that have not connected and named their rank: 1", what);
    int c1 = client(1);
    ASSERT_EQ(ICBC_OK, feed(c0, coll(IMPI_C_NHOSTS, u32(1))));
    ASSERT_EQ(ICBC_OK, feed(c1, coll(IMPI_C_NHOSTS, u32(1))));
    impi_srv_waiting_for(srv, what, sizeof(what));
    EXPECT_STREQ("COLL label 0x1100 from client(s): 2", what);
}

/* ---- the daemon ------------------------------------------------------------ */

int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin = {};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (sockaddr *) &sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void send_all(int fd, const Bytes &b)
{
    ASSERT_EQ((ssize_t) b.size(), write(fd, b.data(), b.size()));
}

Bytes recv_n(int fd, size_t n)
{
    Bytes b(n);
    size_t got = 0;
    while (got < n) {
        pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 10000) <= 0)
            break;
        ssize_t r = read(fd, b.data() + got, n - got);
        if (r <= 0)
            break;
        got += (size_t) r;
    }
    b.resize(got);
    return b;
}

TEST(ImpiServerDaemon, TwoClientsOverTcpThenExitZero)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "2", "-listen", "127.0.0.1" }));
    EXPECT_EQ("127.0.0.1", d.addr);
    int fd[2];
    for (int r = 0; r < 2; r++) {
        fd[r] = dial(d.port);
        ASSERT_GE(fd[r], 0);
        send_all(fd[r], cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)));
        EXPECT_EQ(cat(u32(IMPI_AUTH_NONE), u32(0)), recv_n(fd[r], 8));
        send_all(fd[r], cmd(IMPI_CMD_IMPI, u32((uint32_t) r)));
    }
    for (int r = 0; r < 2; r++)
        EXPECT_EQ(cmd(IMPI_CMD_IMPI, u32(2)), recv_n(fd[r], 12));
    for (int r = 0; r < 2; r++)
        send_all(fd[r], coll(IMPI_C_DATALEN, u32(65536)));
    Bytes want = coll_answer(IMPI_C_DATALEN, 3, cat(u32(65536), u32(65536)));
    for (int r = 0; r < 2; r++)
        EXPECT_EQ(want, recv_n(fd[r], want.size()));
    for (int r = 0; r < 2; r++)
        send_all(fd[r], cmd(IMPI_CMD_DONE));
    for (int r = 0; r < 2; r++)
        EXPECT_EQ(cmd(IMPI_CMD_DONE), recv_n(fd[r], 8));
    for (int r = 0; r < 2; r++) {
        send_all(fd[r], cmd(IMPI_CMD_FINI));
        close(fd[r]);
    }
    std::string errtext;
    EXPECT_EQ(0, d.wait(&errtext)) << errtext;
}

TEST(ImpiServerDaemon, ClientDeathEndsItWithAMessageNamingTheClient)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "2", "-listen", "127.0.0.1" }));
    int fd = dial(d.port);
    send_all(fd, cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)), cmd(IMPI_CMD_IMPI, u32(1))));
    recv_n(fd, 8);
    close(fd);
    std::string errtext;
    EXPECT_EQ(1, d.wait(&errtext));
    EXPECT_NE(std::string::npos, errtext.find("client 1 (127.0.0.1:")) << errtext;
    EXPECT_NE(std::string::npos, errtext.find("closed its connection")) << errtext;
}

TEST(ImpiServerDaemon, StalledStartUpNamesWhomItWaitsFor)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "2", "-listen", "127.0.0.1", "-timeout", "1" }));
    int fd = dial(d.port);
    send_all(fd, cat(cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_NONE)), cmd(IMPI_CMD_IMPI, u32(0))));
    std::string errtext;
    EXPECT_EQ(1, d.wait(&errtext));
    EXPECT_NE(std::string::npos,
              errtext.find("start-up made no progress for 1 s; waiting for clients that have not "
                           "connected and named their rank: 1"))
        << errtext;
    close(fd);
}

TEST(ImpiServerDaemon, BadOptionsExitTwo)
{
    for (auto args :
         std::vector<std::vector<std::string>>{ { "-server", "0" },
                                                { "-server", "33" },
                                                { "-auth", "key:/nonexistent", "-server", "1" },
                                                { "-port", "70000", "-server", "1" },
                                                { "-bogus", "1" },
                                                { "-port", "1" } }) {
        Daemon d;
        EXPECT_FALSE(d.start(args));
        std::string errtext;
        EXPECT_EQ(2, d.wait(&errtext)) << args[0];
        EXPECT_NE(std::string::npos, errtext.find("impi-server:")) << errtext;
    }
}

} // namespace
