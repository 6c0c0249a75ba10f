/*
 * bt_lib over 127.0.0.1 with a real listener: handshake, frames of every
 * size, ordering, partial writes, back-pressure, shutdown, peer death, and
 * hostile bytes on the listening port from raw sockets. Client and server
 * share one poller and one thread; every wait is bounded.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bt_lib.h"
#include "icbc_log.h"

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

namespace
{

const char kKey[] = "trunk key of the test";

/* One side of a connection: what its callbacks saw, and how they behave. */
struct Endpoint {
    bt_conn_t *c = nullptr;
    bool ready = false;
    bool closed = false;
    icbc_status_t close_st = ICBC_OK;
    std::string close_msg;
    std::vector<std::string> events; /* order of send completions and on_close */

    std::vector<std::string> hdrs;
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<uint8_t> cur;
    int headers_seen = 0;
    int wait_count = 0; /* on_header answers BT_RECV_WAIT this many times */
    bool discard = false;
    bool destroy_in_payload = false;
    bool destroy_on_close = false;
    Endpoint *destroy_other = nullptr; /* on_payload destroys this one's connection */
    int writable = 0;
};

Endpoint *E(void *arg)
{
    return static_cast<Endpoint *>(arg);
}

void on_ready(bt_conn_t *, void *arg)
{
    E(arg)->ready = true;
}

bt_recv_action_t on_header(bt_conn_t *, const void *hdr, size_t len, uint64_t plen, void **dest,
                           void *arg)
{
    Endpoint *e = E(arg);
    e->headers_seen++;
    if (e->wait_count > 0) {
        e->wait_count--;
        return BT_RECV_WAIT;
    }
    e->hdrs.push_back(len ? std::string(static_cast<const char *>(hdr), len) : std::string());
    e->cur.assign(plen, 0);
    if (e->discard)
        return BT_RECV_DISCARD;
    *dest = e->cur.data();
    return BT_RECV_INTO;
}

void on_payload(bt_conn_t *c, void *arg)
{
    Endpoint *e = E(arg);
    e->payloads.push_back(std::move(e->cur));
    e->cur.clear();
    if (e->destroy_in_payload) {
        bt_conn_destroy(c);
        e->c = nullptr;
    }
    if (e->destroy_other != nullptr && e->destroy_other->c != nullptr) {
        bt_conn_destroy(e->destroy_other->c);
        e->destroy_other->c = nullptr;
    }
}

void on_writable(bt_conn_t *, void *arg)
{
    E(arg)->writable++;
}

void on_close(bt_conn_t *c, icbc_status_t st, const char *msg, void *arg)
{
    Endpoint *e = E(arg);
    e->closed = true;
    e->close_st = st;
    e->close_msg = msg;
    e->events.push_back("close");
    if (e->destroy_on_close) {
        bt_conn_destroy(c);
        e->c = nullptr;
    }
}

void send_done(bt_conn_t *, icbc_status_t st, void *arg)
{
    E(arg)->events.push_back(st == ICBC_OK ? "sent" : "failed");
}

const bt_conn_cbs_t kCbs = { on_ready, on_header, on_payload, on_writable, on_close };

std::vector<uint8_t> pattern(size_t n, unsigned seed)
{
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        v[i] = static_cast<uint8_t>(x >> 16);
    }
    return v;
}

class BtLib : public ::testing::Test
{
  protected:
    bt_poller_t *p = nullptr;
    bt_listener_t *l = nullptr;
    sockaddr_storage addr{};
    socklen_t alen = 0;
    bt_opts_t sopts{}, copts{};
    std::vector<std::unique_ptr<Endpoint>> server; /* one per accepted connection */
    std::vector<std::unique_ptr<Endpoint>> clients;
    std::vector<int> raw_fds;

    void SetUp() override
    {
        ASSERT_EQ(ICBC_OK, bt_poller_create(&p));
        bt_opts_init(&sopts);
        sopts.key = reinterpret_cast<const unsigned char *>(kKey);
        sopts.keylen = sizeof(kKey) - 1;
        sopts.id = "server";
        sopts.handshake_ms = 2000;
        copts = sopts;
        copts.id = "client c1";
    }

    void TearDown() override
    {
        bt_poller_destroy(p); /* no callbacks: endpoints may go after */
        for (int fd : raw_fds)
            close(fd);
    }

    static void accepted(bt_listener_t *, bt_conn_t *c, void *arg)
    {
        auto *self = static_cast<BtLib *>(arg);
        self->server.push_back(std::make_unique<Endpoint>());
        self->server.back()->c = c;
        bt_conn_set_arg(c, self->server.back().get());
    }

    void Listen(int family = AF_INET)
    {
        sockaddr_storage a{};
        socklen_t len;
        if (family == AF_INET) {
            auto *in = reinterpret_cast<sockaddr_in *>(&a);
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            len = sizeof(*in);
        } else {
            auto *in6 = reinterpret_cast<sockaddr_in6 *>(&a);
            in6->sin6_family = AF_INET6;
            in6->sin6_addr = in6addr_loopback;
            len = sizeof(*in6);
        }
        ASSERT_EQ(ICBC_OK, bt_listen(p, reinterpret_cast<sockaddr *>(&a), len, &sopts, &kCbs,
                                     accepted, this, &l));
        ASSERT_EQ(ICBC_OK, bt_listener_addr(l, &addr, &alen));
    }

    Endpoint *Connect()
    {
        clients.push_back(std::make_unique<Endpoint>());
        Endpoint *e = clients.back().get();
        EXPECT_EQ(ICBC_OK, bt_connect(p, reinterpret_cast<sockaddr *>(&addr), alen, &copts, &kCbs,
                                      e, &e->c));
        return e;
    }

    bool RunUntil(const std::function<bool()> &done, int ms = 5000)
    {
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (!done()) {
            if (std::chrono::steady_clock::now() > end)
                return false;
            int n = bt_poller_wait(p, 10);
            EXPECT_GE(n, 0);
        }
        return true;
    }

    void RunFor(int ms)
    {
        RunUntil([] { return false; }, ms);
    }

    /* A connected and authenticated pair; returns the client. */
    Endpoint *Pair()
    {
        Endpoint *c = Connect();
        EXPECT_TRUE(RunUntil([&] { return c->ready && !server.empty() && server.back()->ready; }));
        return c;
    }

    int RawConnect()
    {
        int fd = socket(addr.ss_family, SOCK_STREAM, 0);
        EXPECT_GE(fd, 0);
        timeval tv = { 3, 0 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        EXPECT_EQ(0, connect(fd, reinterpret_cast<sockaddr *>(&addr), alen));
        raw_fds.push_back(fd);
        size_t before = server.size();
        EXPECT_TRUE(RunUntil([&] { return server.size() > before; }));
        return fd;
    }

    static void RawSend(int fd, const void *buf, size_t len)
    {
        ASSERT_EQ(static_cast<ssize_t>(len), send(fd, buf, len, MSG_NOSIGNAL));
    }

    /* The server side closed FD: reads end in EOF or a reset. */
    static bool RawSeesClose(int fd)
    {
        char buf[4096];
        for (;;) {
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return true;
            if (r < 0)
                return false;
        }
    }

    /* Runs the handshake by hand, so the raw socket can then misbehave as
     * an authenticated peer. */
    int RawAuth(const char *key = kKey)
    {
        int fd = RawConnect();
        unsigned char hello[BT_FRAME_HDR_SIZE + BT_NONCE_SIZE];
        EXPECT_EQ(static_cast<ssize_t>(sizeof(hello)), recv(fd, hello, sizeof(hello), MSG_WAITALL));
        const char id[] = "raw";
        unsigned char msg[9 + 64 + sizeof(id) - 1], out[BT_FRAME_HDR_SIZE + 64 + sizeof(id) - 1];
        unsigned int maclen;
        memcpy(msg, "icbc-bt-c", 9);
        memcpy(msg + 9, hello + BT_FRAME_HDR_SIZE, 32);
        memset(msg + 41, 0x5a, 32); /* Nc */
        memcpy(msg + 73, id, sizeof(id) - 1);
        bt_frame_t f = { BT_FRAME_AUTH, 64, sizeof(id) - 1 };
        bt_frame_pack(&f, out);
        memcpy(out + 24, msg + 41, 32);
        HMAC(EVP_sha256(), key, (int) strlen(key), msg, sizeof(msg), out + 56, &maclen);
        memcpy(out + 88, id, sizeof(id) - 1);
        RawSend(fd, out, sizeof(out));
        Endpoint *s = server.back().get();
        EXPECT_TRUE(RunUntil([&] { return s->ready || s->closed; }));
        unsigned char ok[BT_FRAME_HDR_SIZE + BT_MAC_SIZE];
        EXPECT_EQ(static_cast<ssize_t>(sizeof(ok)), recv(fd, ok, sizeof(ok), MSG_WAITALL));
        return fd;
    }

    /* A good client still gets through, and a frame round-trips. */
    void ExpectListenerServes()
    {
        Endpoint *c = Pair();
        ASSERT_TRUE(c->ready);
        Endpoint *s = server.back().get();
        auto data = pattern(1000, 9);
        iovec v = { data.data(), data.size() };
        ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "ping", 4, &v, 1, nullptr, nullptr));
        ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 1; }));
        EXPECT_EQ("ping", s->hdrs[0]);
        EXPECT_EQ(data, s->payloads[0]);
    }

    static std::vector<uint8_t> Frame(int type, uint32_t hlen, uint64_t plen)
    {
        std::vector<uint8_t> b(BT_FRAME_HDR_SIZE);
        bt_frame_t f = { static_cast<uint8_t>(type), hlen, plen };
        bt_frame_pack(&f, b.data());
        return b;
    }
};

/* ---- frame parser ---- */

TEST(BtFrame, PackParseRoundTrip)
{
    unsigned char b[BT_FRAME_HDR_SIZE];
    bt_frame_t f = { BT_FRAME_DATA, 40, 0x01020304ull }, g;
    char why[128];
    bt_frame_pack(&f, b);
    EXPECT_EQ(0, memcmp(b, "ICBT", 4));
    EXPECT_EQ(BT_FRAME_VERSION, b[4]);
    EXPECT_EQ(0x04, b[23]); /* big endian */
    EXPECT_EQ(0x01, b[20]);
    ASSERT_EQ(ICBC_OK, bt_frame_parse(b, BT_HDR_MAX, 64 << 20, &g, why, sizeof(why)));
    EXPECT_EQ(f.type, g.type);
    EXPECT_EQ(40u, g.hdr_len);
    EXPECT_EQ(0x01020304ull, g.payload_len);
}

TEST(BtFrame, RejectsEveryBadField)
{
    unsigned char good[BT_FRAME_HDR_SIZE], b[BT_FRAME_HDR_SIZE];
    bt_frame_t f = { BT_FRAME_DATA, 40, 1000 }, g;
    char why[128];
    bt_frame_pack(&f, good);
    auto bad = [&](int off, uint8_t val, const char *word) {
        memcpy(b, good, sizeof(b));
        b[off] = val;
        EXPECT_EQ(ICBC_ERR_INVALID, bt_frame_parse(b, BT_HDR_MAX, 1 << 20, &g, why, sizeof(why)))
            << "offset " << off;
        EXPECT_NE(nullptr, strstr(why, word)) << why;
    };
    bad(0, 'X', "magic");
    bad(4, 2, "version");
    bad(5, 0, "type");
    bad(5, 6, "type");
    bad(6, 1, "reserved");
    bad(13, 1, "reserved");
    EXPECT_EQ(ICBC_ERR_INVALID, bt_frame_parse(good, 39, 1 << 20, &g, why, sizeof(why)));
    EXPECT_EQ(ICBC_ERR_INVALID, bt_frame_parse(good, BT_HDR_MAX, 999, &g, why, sizeof(why)));
    /* handshake frames have exact sizes */
    bt_frame_t hello = { BT_FRAME_HELLO, 33, 0 }, auth = { BT_FRAME_AUTH, 64, BT_ID_MAX + 1 };
    bt_frame_pack(&hello, b);
    EXPECT_EQ(ICBC_ERR_INVALID, bt_frame_parse(b, BT_HDR_MAX, 1 << 20, &g, why, sizeof(why)));
    bt_frame_pack(&auth, b);
    EXPECT_EQ(ICBC_ERR_INVALID, bt_frame_parse(b, BT_HDR_MAX, 1 << 20, &g, why, sizeof(why)));
    auth.payload_len = BT_ID_MAX;
    bt_frame_pack(&auth, b);
    EXPECT_EQ(ICBC_OK, bt_frame_parse(b, BT_HDR_MAX, 1 << 20, &g, why, sizeof(why)));
}

/* ---- options ---- */

TEST_F(BtLib, RefusesOptionsWithoutKeyOrWithBadLimits)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bt_opts_t o = sopts;
    o.key = nullptr;
    EXPECT_EQ(ICBC_ERR_INVALID, bt_listen(p, reinterpret_cast<sockaddr *>(&a), sizeof(a), &o, &kCbs,
                                          nullptr, nullptr, &l));
    o = sopts;
    o.max_hdr = BT_HDR_MAX + 1;
    EXPECT_EQ(ICBC_ERR_INVALID, bt_listen(p, reinterpret_cast<sockaddr *>(&a), sizeof(a), &o, &kCbs,
                                          nullptr, nullptr, &l));
    o = sopts;
    std::string longid(BT_ID_MAX + 1, 'x');
    o.id = longid.c_str();
    bt_conn_t *c;
    EXPECT_EQ(ICBC_ERR_INVALID,
              bt_connect(p, reinterpret_cast<sockaddr *>(&a), sizeof(a), &o, &kCbs, nullptr, &c));
    l = nullptr;
}

/* ---- handshake ---- */

TEST_F(BtLib, HandshakeSucceedsAndNamesThePeer)
{
    Listen();
    Endpoint *c = Pair();
    ASSERT_EQ(1u, server.size());
    EXPECT_STREQ("client c1", bt_conn_peer_id(server[0]->c));
    EXPECT_STREQ("", bt_conn_peer_id(c->c));
    EXPECT_NE(nullptr, strstr(bt_conn_peer_text(c->c), "127.0.0.1:"));
    EXPECT_NE(nullptr, strstr(bt_conn_peer_text(server[0]->c), "127.0.0.1:"));
    EXPECT_FALSE(c->closed);
}

TEST_F(BtLib, WrongKeyIsRefusedOnBothSides)
{
    Listen();
    static const char other[] = "another key";
    copts.key = reinterpret_cast<const unsigned char *>(other);
    copts.keylen = sizeof(other) - 1;
    testing::internal::CaptureStderr();
    Endpoint *c = Connect();
    ASSERT_TRUE(RunUntil([&] { return c->closed && !server.empty() && server[0]->closed; }));
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(c->ready);
    EXPECT_FALSE(server[0]->ready);
    EXPECT_EQ(ICBC_ERR_AUTH, server[0]->close_st);
    EXPECT_EQ(ICBC_ERR_AUTH, c->close_st);
    EXPECT_NE(std::string::npos, server[0]->close_msg.find("wrong key")) << server[0]->close_msg;
    EXPECT_NE(std::string::npos, log.find("wrong key")) << log;
    EXPECT_NE(std::string::npos, log.find("127.0.0.1:")) << log;
    /* and nothing sent before authentication went through */
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, bt_conn_send(c->c, "x", 1, nullptr, 0, nullptr, nullptr));
    bt_conn_destroy(c->c);
    bt_conn_destroy(server[0]->c);
}

TEST_F(BtLib, FramesPostedBeforeAuthenticationGoOutAfterIt)
{
    Listen();
    Endpoint *c = Connect();
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "early", 5, nullptr, 0, send_done, c));
    ASSERT_TRUE(RunUntil([&] { return !server.empty() && server[0]->payloads.size() == 1; }));
    EXPECT_EQ("early", server[0]->hdrs[0]);
    ASSERT_TRUE(RunUntil([&] { return c->events.size() == 1; }));
    EXPECT_EQ("sent", c->events[0]);
}

TEST_F(BtLib, Ipv6Loopback)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    bool have_v6 = fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    if (!have_v6)
        GTEST_SKIP() << "hardware: no IPv6 loopback on this machine";
    Listen(AF_INET6);
    Endpoint *c = Pair();
    EXPECT_TRUE(c->ready);
    EXPECT_NE(nullptr, strstr(bt_conn_peer_text(c->c), "[::1]:"));
}

/* ---- data ---- */

TEST_F(BtLib, SmallFramesArriveIntact)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    std::vector<size_t> sizes = { 0, 1, 23, 24, 100, 4095, 65536, 70001, 300000 };
    std::vector<std::vector<uint8_t>> data;
    for (size_t i = 0; i < sizes.size(); i++)
        data.push_back(pattern(sizes[i], (unsigned) i));
    for (size_t i = 0; i < sizes.size(); i++) {
        std::string h = "hdr-" + std::to_string(i);
        iovec v = { data[i].data(), data[i].size() };
        ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, h.data(), h.size(), &v, 1, send_done, c));
    }
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == sizes.size(); }));
    for (size_t i = 0; i < sizes.size(); i++) {
        EXPECT_EQ("hdr-" + std::to_string(i), s->hdrs[i]);
        EXPECT_EQ(data[i], s->payloads[i]) << "frame " << i;
    }
    ASSERT_TRUE(RunUntil([&] { return c->events.size() == sizes.size(); }));
    for (auto &ev : c->events)
        EXPECT_EQ("sent", ev);
}

TEST_F(BtLib, LargeFramesBothWays)
{
    const size_t n = 32u << 20;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    auto a = pattern(n, 1), b = pattern(n, 2);
    iovec va = { a.data(), n }, vb = { b.data(), n };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "big", 3, &va, 1, send_done, c));
    ASSERT_EQ(ICBC_OK, bt_conn_send(s->c, "BIG", 3, &vb, 1, send_done, s));
    ASSERT_TRUE(
        RunUntil([&] { return s->payloads.size() == 1 && c->payloads.size() == 1; }, 20000));
    EXPECT_TRUE(s->payloads[0] == a);
    EXPECT_TRUE(c->payloads[0] == b);
    ASSERT_TRUE(RunUntil([&] { return c->events.size() == 1 && s->events.size() == 1; }));
    EXPECT_EQ("sent", c->events[0]);
}

TEST_F(BtLib, ManyFramesStayInOrder)
{
    const int n = 20000;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    auto data = pattern(256, 3);
    for (int i = 0; i < n;) {
        uint32_t seq = htonl(i);
        iovec v = { data.data(), (size_t) (i % 257) };
        icbc_status_t st = bt_conn_send(c->c, &seq, sizeof(seq), &v, 1, nullptr, nullptr);
        if (st == ICBC_ERR_BUSY) {
            bt_poller_wait(p, 10);
            continue;
        }
        ASSERT_EQ(ICBC_OK, st);
        i++;
    }
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == (size_t) n; }, 20000));
    for (int i = 0; i < n; i++) {
        uint32_t seq;
        memcpy(&seq, s->hdrs[i].data(), 4);
        ASSERT_EQ((uint32_t) i, ntohl(seq));
        ASSERT_EQ((size_t) (i % 257), s->payloads[i].size());
        if (!s->payloads[i].empty()) {
            ASSERT_EQ(0, memcmp(data.data(), s->payloads[i].data(), s->payloads[i].size()));
        }
    }
}

TEST_F(BtLib, PartialWritesResumeInsideIovecs)
{
    sopts.rcvbuf = 4096;
    copts.sndbuf = 4096;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    auto data = pattern(1 << 20, 4);
    std::vector<iovec> v;
    size_t cuts[] = { 0, 1, 1000, 4097, 65536, 300001, 777777, 1 << 20 };
    for (size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++)
        v.push_back({ data.data() + cuts[i], cuts[i + 1] - cuts[i] });
    std::string hdr(1000, 'h');
    ASSERT_EQ(ICBC_OK,
              bt_conn_send(c->c, hdr.data(), hdr.size(), v.data(), (int) v.size(), send_done, c));
    EXPECT_GT(bt_conn_queued(c->c), 0u) << "the first write should have been partial";
    for (int i = 0; i < 200; i++) {
        iovec small = { data.data() + i, 100 };
        ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "s", 1, &small, 1, send_done, c));
    }
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 201; }, 10000));
    EXPECT_EQ(hdr, s->hdrs[0]);
    EXPECT_TRUE(s->payloads[0] == data);
    for (int i = 0; i < 200; i++)
        ASSERT_EQ(0, memcmp(data.data() + i, s->payloads[i + 1].data(), 100));
    ASSERT_TRUE(RunUntil([&] { return c->events.size() == 201; }));
    EXPECT_EQ(0u, bt_conn_queued(c->c));
}

TEST_F(BtLib, UnsentCountsWhatTheKernelHasNotSentYet)
{
    sopts.rcvbuf = 4096; /* the receiver's window holds the rest in the sender's kernel */
    copts.sndbuf = 1 << 16;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    auto data = pattern(1 << 20, 5);
    iovec v = { data.data(), data.size() };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "u", 1, &v, 1, send_done, c));
    /* nothing has read yet: part of what was written is still in the kernel */
    EXPECT_GT(bt_conn_queued(c->c), 0u);
    EXPECT_GT(bt_conn_unsent(c->c), bt_conn_queued(c->c));
    EXPECT_LE(bt_conn_unsent(c->c), data.size() + 64);
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 1 && c->events.size() == 1; }, 10000));
    EXPECT_TRUE(s->payloads[0] == data);
    EXPECT_EQ(0u, bt_conn_unsent(c->c));
}

TEST_F(BtLib, DiscardedPayloadKeepsTheStreamInStep)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->discard = true;
    auto data = pattern(200000, 5);
    iovec v = { data.data(), data.size() };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "drop", 4, &v, 1, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 1; }));
    s->discard = false;
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "keep", 4, &v, 1, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 2; }));
    EXPECT_EQ("keep", s->hdrs[1]);
    EXPECT_TRUE(s->payloads[1] == data);
}

/* ---- back-pressure ---- */

TEST_F(BtLib, QueueLimitGivesBusyThenWritable)
{
    copts.max_queued = 256 << 10;
    copts.sndbuf = 16 << 10;
    sopts.rcvbuf = 16 << 10;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->wait_count = 1000000; /* the receiver stops reading */
    auto data = pattern(16 << 10, 6);
    iovec v = { data.data(), data.size() };
    int sent = 0;
    icbc_status_t st = ICBC_OK;
    for (int i = 0; i < 1000 && st == ICBC_OK; i++) {
        st = bt_conn_send(c->c, "q", 1, &v, 1, nullptr, nullptr);
        if (st == ICBC_OK)
            sent++;
        bt_poller_wait(p, 0);
    }
    ASSERT_EQ(ICBC_ERR_BUSY, st);
    EXPECT_GE(bt_conn_queued(c->c), copts.max_queued);
    EXPECT_EQ(0, c->writable);
    s->wait_count = 0;
    bt_conn_resume(s->c);
    ASSERT_TRUE(RunUntil([&] { return c->writable > 0; }));
    EXPECT_LE(bt_conn_queued(c->c), copts.max_queued / 2);
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "q", 1, &v, 1, nullptr, nullptr));
    sent++;
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == (size_t) sent; }));
    for (auto &pl : s->payloads)
        ASSERT_TRUE(pl == data);
}

TEST_F(BtLib, RecvWaitHoldsTheFrameUntilResume)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->wait_count = 1;
    auto a = pattern(5000, 7), b = pattern(7000, 8);
    iovec va = { a.data(), a.size() }, vb = { b.data(), b.size() };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "first", 5, &va, 1, nullptr, nullptr));
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "second", 6, &vb, 1, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return s->headers_seen == 1; }));
    RunFor(200);
    EXPECT_EQ(1, s->headers_seen);
    EXPECT_EQ(0u, s->payloads.size());
    bt_conn_resume(s->c);
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 2; }));
    EXPECT_EQ(3, s->headers_seen);
    EXPECT_EQ("first", s->hdrs[0]);
    EXPECT_EQ("second", s->hdrs[1]);
    EXPECT_TRUE(s->payloads[0] == a);
    EXPECT_TRUE(s->payloads[1] == b);
}

/* ---- closing ---- */

TEST_F(BtLib, ShutdownDeliversQueuedFramesThenCloses)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->destroy_on_close = true;
    c->destroy_on_close = true;
    auto data = pattern(100000, 9);
    iovec v = { data.data(), data.size() };
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "x", 1, &v, 1, send_done, c));
    bt_conn_shutdown(c->c);
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, bt_conn_send(c->c, "x", 1, &v, 1, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return s->closed && c->closed; }));
    EXPECT_EQ(3u, s->payloads.size());
    EXPECT_EQ(ICBC_OK, s->close_st) << s->close_msg;
    EXPECT_EQ(ICBC_OK, c->close_st) << c->close_msg;
    std::vector<std::string> want = { "sent", "sent", "sent", "close" };
    EXPECT_EQ(want, c->events);
}

TEST_F(BtLib, PeerDeathFailsPendingSendsBeforeOnClose)
{
    copts.sndbuf = 64 << 10;
    copts.max_queued = 64 << 20;
    sopts.rcvbuf = 64 << 10;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->wait_count = 1000000;
    auto data = pattern(32u << 20, 10);
    iovec v = { data.data(), data.size() };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "big", 3, &v, 1, send_done, c));
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "next", 4, nullptr, 0, send_done, c));
    ASSERT_TRUE(RunUntil([&] { return s->headers_seen == 1; }));
    bt_conn_destroy(s->c);
    s->c = nullptr;
    ASSERT_TRUE(RunUntil([&] { return c->closed; }));
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, c->close_st);
    std::vector<std::string> want = { "failed", "failed", "close" };
    EXPECT_EQ(want, c->events);
}

TEST_F(BtLib, PeerGoneMidPayloadIsReported)
{
    copts.sndbuf = 64 << 10;
    sopts.rcvbuf = 64 << 10;
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    auto data = pattern(8u << 20, 11);
    iovec v = { data.data(), data.size() };
    ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "big", 3, &v, 1, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return s->headers_seen == 1; }));
    bt_conn_destroy(c->c);
    c->c = nullptr;
    ASSERT_TRUE(RunUntil([&] { return s->closed; }));
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, s->close_st);
    EXPECT_NE(std::string::npos, s->close_msg.find("middle of a payload")) << s->close_msg;
    EXPECT_EQ(0u, s->payloads.size());
}

TEST_F(BtLib, DestroyFromOwnCallbackIsSafe)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->destroy_in_payload = true;
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(ICBC_OK, bt_conn_send(c->c, "d", 1, nullptr, 0, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return c->closed; }));
    EXPECT_EQ(1u, s->payloads.size());
    EXPECT_EQ(nullptr, s->c);
    ExpectListenerServes();
}

/* ---- socket options ---- */

TEST_F(BtLib, SocketOptionsAreApplied)
{
    copts.pacing_rate = 12345678;
    copts.sndbuf = 1 << 20;
    Listen();
    Endpoint *c = Pair();
    int fd = bt_conn_fd(c->c);
    uint64_t rate = 0;
    socklen_t len = sizeof(rate);
    ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &len));
    EXPECT_EQ(12345678u, len == 4 ? (uint32_t) rate : rate);
    int v = 0;
    len = sizeof(v);
    ASSERT_EQ(0, getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len));
    EXPECT_EQ(1, v);
    ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len));
    EXPECT_EQ(1, v);
    ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len));
    EXPECT_GE(v, 1 << 20) << "unless net.core.wmem_max is below 1 MiB";
}

TEST_F(BtLib, SendChecksItsArguments)
{
    sopts.max_hdr = 100;
    copts.max_hdr = 100;
    copts.max_payload = 1000;
    Listen();
    Endpoint *c = Pair();
    std::string big(101, 'h');
    EXPECT_EQ(ICBC_ERR_INVALID,
              bt_conn_send(c->c, big.data(), big.size(), nullptr, 0, nullptr, nullptr));
    std::vector<uint8_t> data(1001);
    iovec v = { data.data(), data.size() };
    EXPECT_EQ(ICBC_ERR_INVALID, bt_conn_send(c->c, "h", 1, &v, 1, nullptr, nullptr));
    EXPECT_EQ(ICBC_ERR_INVALID, bt_conn_send(c->c, "h", 1, &v, -1, nullptr, nullptr));
}

/* ---- hostile input on the listening port ---- */

struct Hostile {
    const char *name;
    std::vector<uint8_t> bytes;
    bool then_close;      /* close the raw socket after the bytes */
    icbc_status_t status; /* what the server's on_close says */
    const char *words;    /* ... and in which words */
};

class BtLibHostile : public BtLib
{
  protected:
    void Check(const Hostile &h, bool authenticated)
    {
        Listen();
        int fd = authenticated ? RawAuth() : RawConnect();
        Endpoint *s = server.back().get();
        if (authenticated) {
            ASSERT_TRUE(s->ready);
        }
        if (!h.bytes.empty())
            RawSend(fd, h.bytes.data(), h.bytes.size());
        if (h.then_close)
            shutdown(fd, SHUT_WR);
        ASSERT_TRUE(RunUntil([&] { return s->closed; })) << h.name;
        EXPECT_EQ(h.status, s->close_st) << h.name << ": " << s->close_msg;
        EXPECT_NE(std::string::npos, s->close_msg.find(h.words)) << h.name << ": " << s->close_msg;
        if (!h.then_close) {
            EXPECT_TRUE(RawSeesClose(fd)) << h.name;
        }
        bt_conn_destroy(s->c);
        s->c = nullptr;
        ExpectListenerServes();
    }
};

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t> &b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

TEST_F(BtLibHostile, BeforeAuthentication)
{
    std::vector<uint8_t> garbage(64);
    for (size_t i = 0; i < garbage.size(); i++)
        garbage[i] = (uint8_t) (i * 37 + 11);
    auto magic = Frame(BT_FRAME_AUTH, 64, 3);
    magic[0] = 'X';
    auto version = Frame(BT_FRAME_AUTH, 64, 3);
    version[4] = 9;
    auto reserved = Frame(BT_FRAME_AUTH, 64, 3);
    reserved[14] = 1;
    std::vector<Hostile> cases = {
        { "garbage", garbage, false, ICBC_ERR_AUTH, "bad magic" },
        { "http", cat(std::vector<uint8_t>(24, 'G'), {}), false, ICBC_ERR_AUTH, "bad magic" },
        { "bad magic", magic, false, ICBC_ERR_AUTH, "bad magic" },
        { "bad version", version, false, ICBC_ERR_AUTH, "version" },
        { "reserved bits", reserved, false, ICBC_ERR_AUTH, "reserved" },
        { "oversize auth id", Frame(BT_FRAME_AUTH, 64, 1ull << 40), false, ICBC_ERR_AUTH,
          "out of bounds" },
        { "oversize auth header", Frame(BT_FRAME_AUTH, 0xffffffffu, 0), false, ICBC_ERR_AUTH,
          "out of bounds" },
        { "data before auth", Frame(BT_FRAME_DATA, 4, 4), false, ICBC_ERR_AUTH,
          "before authentication" },
        { "hello from the connector", cat(Frame(BT_FRAME_HELLO, 32, 0), std::vector<uint8_t>(32)),
          false, ICBC_ERR_INVALID, "unexpected" },
        { "truncated auth then close", cat(Frame(BT_FRAME_AUTH, 64, 3), std::vector<uint8_t>(10)),
          true, ICBC_ERR_AUTH, "closed the connection" },
        { "bad proof", cat(Frame(BT_FRAME_AUTH, 64, 3), std::vector<uint8_t>(67, 'a')), false,
          ICBC_ERR_AUTH, "wrong key" },
    };
    for (auto &h : cases) {
        SCOPED_TRACE(h.name);
        Check(h, false);
        bt_listener_destroy(l);
        l = nullptr;
    }
}

TEST_F(BtLibHostile, AfterAuthentication)
{
    sopts.max_hdr = 1000;
    sopts.max_payload = 1 << 20;
    std::vector<Hostile> cases = {
        { "oversize header", Frame(BT_FRAME_DATA, 1001, 0), false, ICBC_ERR_INVALID,
          "out of bounds" },
        { "oversize payload", Frame(BT_FRAME_DATA, 10, (1 << 20) + 1), false, ICBC_ERR_INVALID,
          "out of bounds" },
        { "huge payload", Frame(BT_FRAME_DATA, 10, ~0ull), false, ICBC_ERR_INVALID,
          "out of bounds" },
        { "second auth", cat(Frame(BT_FRAME_AUTH, 64, 0), std::vector<uint8_t>(64)), false,
          ICBC_ERR_INVALID, "unexpected" },
        { "truncated payload then close",
          cat(Frame(BT_FRAME_DATA, 4, 1000), std::vector<uint8_t>(504, 1)), true,
          ICBC_ERR_PEER_FAILED, "middle of a payload" },
        { "truncated frame header then close", std::vector<uint8_t>(10, 'I'), true,
          ICBC_ERR_PEER_FAILED, "middle of a frame" },
    };
    for (auto &h : cases) {
        SCOPED_TRACE(h.name);
        Check(h, true);
        bt_listener_destroy(l);
        l = nullptr;
    }
}

TEST_F(BtLibHostile, SlowlorisHitsTheDeadline)
{
    sopts.handshake_ms = 300;
    Listen();
    int fd = RawConnect();
    Endpoint *s = server.back().get();
    auto f = Frame(BT_FRAME_AUTH, 64, 0);
    RawSend(fd, f.data(), 10); /* a few bytes, then nothing */
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(RunUntil([&] { return s->closed; }, 3000));
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_EQ(ICBC_ERR_TIMEOUT, s->close_st) << s->close_msg;
    EXPECT_GE(ms, 200);
    EXPECT_TRUE(RawSeesClose(fd));
    sopts.handshake_ms = 2000;
    ExpectListenerServes();
}

TEST_F(BtLibHostile, RawPeerWithTheKeyIsAccepted)
{
    Listen();
    int fd = RawAuth();
    Endpoint *s = server.back().get();
    ASSERT_TRUE(s->ready);
    EXPECT_STREQ("raw", bt_conn_peer_id(s->c));
    auto f = cat(cat(Frame(BT_FRAME_DATA, 2, 3), { 'h', 'i' }), { 1, 2, 3 });
    RawSend(fd, f.data(), f.size());
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == 1; }));
    EXPECT_EQ("hi", s->hdrs[0]);
    EXPECT_EQ((std::vector<uint8_t>{ 1, 2, 3 }), s->payloads[0]);
}

/* ---- foreign descriptors ---- */

TEST_F(BtLib, ForeignDescriptorsAreDispatched)
{
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    int hits = 0;
    auto cb = [](int fd, uint32_t, void *arg) {
        char b;
        (void) !read(fd, &b, 1);
        ++*static_cast<int *>(arg);
    };
    ASSERT_EQ(ICBC_OK, bt_poller_add_fd(p, fds[0], EPOLLIN, cb, &hits));
    (void) !write(fds[1], "x", 1);
    ASSERT_TRUE(RunUntil([&] { return hits == 1; }));
    bt_poller_del_fd(p, fds[0]);
    (void) !write(fds[1], "x", 1);
    RunFor(50);
    EXPECT_EQ(1, hits);
    close(fds[0]);
    close(fds[1]);
}

/* ---- connector side failures ---- */

TEST_F(BtLib, ConnectToAClosedPortIsUnreachable)
{
    Listen();
    bt_listener_destroy(l); /* the port is closed now */
    l = nullptr;
    clients.push_back(std::make_unique<Endpoint>());
    Endpoint *e = clients.back().get();
    icbc_status_t st =
        bt_connect(p, reinterpret_cast<sockaddr *>(&addr), alen, &copts, &kCbs, e, &e->c);
    if (st == ICBC_OK) {
        ASSERT_TRUE(RunUntil([&] { return e->closed; }));
        EXPECT_EQ(ICBC_ERR_UNREACHABLE, e->close_st) << e->close_msg;
    } else {
        EXPECT_EQ(ICBC_ERR_UNREACHABLE, st);
    }
}

TEST_F(BtLib, SilentAcceptorHitsTheConnectorsDeadline)
{
    /* a plain TCP listener that never says HELLO */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)));
    ASSERT_EQ(0, listen(fd, 4));
    raw_fds.push_back(fd);
    alen = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &alen);
    copts.handshake_ms = 200;
    Endpoint *c = Connect();
    ASSERT_TRUE(RunUntil([&] { return c->closed; }, 3000));
    EXPECT_EQ(ICBC_ERR_TIMEOUT, c->close_st) << c->close_msg;
    EXPECT_FALSE(c->ready);
}

TEST_F(BtLib, ShutdownGivesUpOnAPeerThatNeverCloses)
{
    copts.handshake_ms = 300; /* also the time a shutdown waits for the peer */
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    bt_conn_shutdown(c->c);
    ASSERT_TRUE(RunUntil([&] { return s->closed; }));
    EXPECT_EQ(ICBC_OK, s->close_st) << s->close_msg;
    /* the server does not destroy its side: the client stops waiting */
    ASSERT_TRUE(RunUntil([&] { return c->closed; }, 3000));
    EXPECT_EQ(ICBC_OK, c->close_st) << c->close_msg;
}

/* A callback destroys a connection whose events may be in the same batch. */
TEST_F(BtLib, CallbackMayDestroyAnotherConnection)
{
    Listen();
    Endpoint *a = Pair();
    Endpoint *b = Pair();
    Endpoint *sa = server[0].get(), *sb = server[1].get();
    /* whichever server sees its frame first destroys the other */
    sa->destroy_other = sb;
    sb->destroy_other = sa;
    ASSERT_EQ(ICBC_OK, bt_conn_send(b->c, "b", 1, nullptr, 0, nullptr, nullptr));
    ASSERT_EQ(ICBC_OK, bt_conn_send(a->c, "a", 1, nullptr, 0, nullptr, nullptr));
    ASSERT_TRUE(RunUntil([&] { return sa->c == nullptr || sb->c == nullptr; }));
    Endpoint *gone = sa->c == nullptr ? a : b;
    ASSERT_TRUE(RunUntil([&] { return gone->closed; }));
    EXPECT_EQ(1u, sa->payloads.size() + sb->payloads.size());
    ExpectListenerServes();
}

/* Not a pass/fail figure: loopback throughput of 1 MiB frames and the rate
 * of 64-byte frames, recorded as test properties and printed. */
TEST_F(BtLib, LoopbackRates)
{
    Listen();
    Endpoint *c = Pair();
    Endpoint *s = server[0].get();
    s->discard = true;
    auto data = pattern(1 << 20, 12);
    iovec v = { data.data(), data.size() };
    const int big = 512, small = 100000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < big;) {
        if (bt_conn_send(c->c, "t", 1, &v, 1, nullptr, nullptr) == ICBC_OK)
            i++;
        else
            bt_poller_wait(p, 10);
    }
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == (size_t) big; }, 30000));
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double mbs = big / sec;
    iovec sv = { data.data(), 64 };
    s->payloads.clear();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < small;) {
        if (bt_conn_send(c->c, "t", 1, &sv, 1, nullptr, nullptr) == ICBC_OK)
            i++;
        else
            bt_poller_wait(p, 10);
        if (i % 64 == 0)
            bt_poller_wait(p, 0);
    }
    ASSERT_TRUE(RunUntil([&] { return s->payloads.size() == (size_t) small; }, 30000));
    double sec2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("bt_lib loopback, one thread for both ends: %.0f MiB/s with 1 MiB frames, "
           "%.0f k frames/s with 64-byte frames\n",
           mbs, small / sec2 / 1000);
    RecordProperty("MiB_per_s_1MiB_frames", (int) mbs);
    RecordProperty("kframes_per_s_64B", (int) (small / sec2 / 1000));
}

TEST_F(BtLib, AcceptPausesWhenOutOfDescriptors)
{
    Listen();
    rlimit old, low;
    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
    testing::internal::CaptureStderr(); /* opens its file before the limit drops */
    int probe = dup(0);                 /* the lowest free descriptor */
    close(probe);
    low = old;
    low.rlim_cur = probe + 1; /* room for the raw socket, none for accept */
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(0, connect(fd, reinterpret_cast<sockaddr *>(&addr), alen));
    int rounds = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < end) {
        bt_poller_wait(p, 50);
        rounds++;
    }
    setrlimit(RLIMIT_NOFILE, &old);
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, log.find("not accepting")) << log;
    EXPECT_LT(rounds, 100) << "the poller spun on the unacceptable connection";
    EXPECT_TRUE(RunUntil([&] { return server.size() == 1; }));
    close(fd);
}

} // namespace
