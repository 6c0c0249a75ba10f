// The fabric transport (mx_fabric.h) on each API this build has: two real
// fabrics in one process on 127.0.0.1, a listener and a connecting one, or
// two workers reaching each other by address.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "mx_fabric.h"
}

namespace
{

struct Received {
    unsigned id = 0;
    std::string hdr;
    std::vector<char> data;
    void *desc = nullptr; // a kept rendezvous descriptor or eager data
    size_t len = 0;
    bool rndv = false;
    mx_fabric_ep_t *ep = nullptr;
};

// One fabric and what reached it.
struct Side {
    mx_fabric_t *f = nullptr;
    std::vector<Received> got;
    std::vector<mx_fabric_ep_t *> accepted;
    std::vector<std::string> failed;
    int keep = 0; // on_am keeps data (1) or not (0)
};

int on_am(mx_fabric_t *, const mx_fabric_am_t *am, void *arg)
{
    Side *s = static_cast<Side *>(arg);
    Received r;
    r.id = am->id;
    r.hdr.assign(static_cast<const char *>(am->hdr), am->hdr_len);
    r.len = am->len;
    r.rndv = am->rndv != 0;
    r.ep = am->ep;
    if (!am->rndv)
        r.data.assign(static_cast<const char *>(am->data),
                      static_cast<const char *>(am->data) + am->len);
    if (s->keep)
        r.desc = am->data;
    s->got.push_back(r);
    return s->keep;
}

void on_accept(mx_fabric_t *, mx_fabric_ep_t *ep, void *arg)
{
    static_cast<Side *>(arg)->accepted.push_back(ep);
}

void on_ep_failed(mx_fabric_ep_t *ep, icbc_status_t, const char *why, void *arg)
{
    static_cast<Side *>(arg)->failed.push_back(why ? why : "");
}

const mx_fabric_cbs_t cbs = { on_accept, on_ep_failed };

struct Done {
    int n = 0;
    icbc_status_t st = ICBC_OK;
};

void done_cb(void *arg, icbc_status_t st)
{
    Done *d = static_cast<Done *>(arg);
    d->n++;
    d->st = st;
}

sockaddr_in loopback(uint16_t port)
{
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

uint16_t free_port()
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = loopback(0);
    socklen_t len = sizeof(sa);
    bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa));
    getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len);
    close(fd);
    return ntohs(sa.sin_port);
}

class Fabric : public ::testing::TestWithParam<mx_fabric_api_t>
{
  protected:
    Side server, client;
    sockaddr_in server_sa{};

    void SetUp() override
    {
        if (!mx_fabric_api_available(GetParam()))
            GTEST_SKIP() << mx_fabric_api_name(GetParam()) << " is not part of this build";
    }

    void TearDown() override
    {
        mx_fabric_destroy(client.f);
        mx_fabric_destroy(server.f);
    }

    mx_fabric_t *make(Side *s, const sockaddr_in *sa, int listen)
    {
        mx_fabric_params_t p{};
        char err[256] = "";
        p.api = GetParam();
        p.addr = reinterpret_cast<const sockaddr *>(sa);
        p.addrlen = sizeof(*sa);
        p.listen = listen;
        p.peers_may_fail = 1;
        p.peer_errors = 1;
        p.wakeup = 1;
        p.ucx_tls = "tcp";
        p.ucx_devices = "lo";
        EXPECT_EQ(ICBC_OK, mx_fabric_create(&p, &cbs, s, &s->f, err, sizeof(err))) << err;
        for (unsigned id = 0; s->f && id < MX_FABRIC_AM_IDS; id++)
            mx_fabric_set_am_handler(s->f, id, on_am, s);
        return s->f;
    }

    // A listener on 127.0.0.1 and a client bound there.
    void listen_and_client()
    {
        server_sa = loopback(free_port());
        sockaddr_in any = loopback(0);
        ASSERT_NE(nullptr, make(&server, &server_sa, 1));
        ASSERT_NE(nullptr, make(&client, &any, 0));
    }

    bool progress_until(const std::function<bool()> &cond, double seconds = 10)
    {
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!cond()) {
            if (std::chrono::steady_clock::now() > end)
                return false;
            if (server.f)
                mx_fabric_progress(server.f);
            if (client.f)
                mx_fabric_progress(client.f);
        }
        return true;
    }

    mx_fabric_ep_t *connect()
    {
        mx_fabric_ep_t *ep = nullptr;
        EXPECT_EQ(ICBC_OK,
                  mx_fabric_connect(client.f, reinterpret_cast<const sockaddr *>(&server_sa),
                                    sizeof(server_sa), &client, &ep));
        return ep;
    }
};

std::vector<char> pattern(size_t n, unsigned seed)
{
    std::vector<char> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = static_cast<char>((i * 131 + seed) >> 3);
    return v;
}

TEST_P(Fabric, EagerMessagesBothWaysOverAnAcceptedEndpoint)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(&client, mx_fabric_ep_arg(ep));
    std::vector<char> payload = pattern(1000, 7);
    Done d;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 3, "head", 4, payload.data(), payload.size(),
                                         MX_FABRIC_SEND_EAGER, done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 1 && d.n == 1; }));
    EXPECT_EQ(ICBC_OK, d.st);
    ASSERT_EQ(1u, server.accepted.size());
    const Received &r = server.got[0];
    EXPECT_EQ(3u, r.id);
    EXPECT_EQ("head", r.hdr);
    EXPECT_FALSE(r.rndv);
    EXPECT_EQ(payload, r.data);
    EXPECT_EQ(server.accepted[0], r.ep);
    EXPECT_STRNE("", mx_fabric_ep_peer(server.accepted[0]));

    // The reply on the accepted endpoint arrives on the connecting one.
    Done d2;
    ASSERT_EQ(ICBC_OK,
              mx_fabric_am_send(server.accepted[0], 5, "re", 2, "xyz", 3, 0, done_cb, &d2));
    ASSERT_TRUE(progress_until([&] { return client.got.size() == 1 && d2.n == 1; }));
    EXPECT_EQ(5u, client.got[0].id);
    EXPECT_EQ("re", client.got[0].hdr);
    EXPECT_EQ(std::string("xyz"),
              std::string(client.got[0].data.begin(), client.got[0].data.end()));
    EXPECT_EQ(ep, client.got[0].ep);
    mx_fabric_ep_close(ep, 1);
}

TEST_P(Fabric, MessagesOfOnePairArriveInOrder)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    const int n = 500;
    std::vector<int> seq(n);
    std::vector<char> big = pattern(20000, 1);
    std::vector<char> large_eager = pattern(60000, 2);
    Done d;
    for (int i = 0; i < n; i++) {
        seq[i] = i;
        // every tenth by rendezvous: those must not overtake the eager ones;
        // every seventh a large eager one (beyond libfabric rxm's own eager
        // size, which it sends by a protocol of its own): the small ones
        // after it must not overtake it
        bool rndv = i % 10 == 9, large = !rndv && i % 7 == 3;
        const char *data = rndv ? big.data() : large ? large_eager.data() : "e";
        size_t len = rndv ? big.size() : large ? large_eager.size() : 1;
        ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 1, &seq[i], sizeof(int), data, len,
                                             rndv ? MX_FABRIC_SEND_RNDV : MX_FABRIC_SEND_EAGER,
                                             done_cb, &d));
    }
    ASSERT_TRUE(progress_until([&] { return server.got.size() == (size_t) n && d.n == n; }));
    for (int i = 0; i < n; i++) {
        int v;
        memcpy(&v, server.got[i].hdr.data(), sizeof(v));
        ASSERT_EQ(i, v);
        ASSERT_EQ(i % 10 == 9, server.got[i].rndv);
        if (i % 10 != 9 && i % 7 == 3)
            ASSERT_TRUE(server.got[i].data == large_eager) << i;
    }
    EXPECT_EQ(ICBC_OK, d.st);
}

TEST_P(Fabric, RendezvousPayloadIsPulledIntoTheReceiversBuffer)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    std::vector<char> payload = pattern(4 << 20, 3);
    Done sent;
    server.keep = 1;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 2, "rts", 3, payload.data(), payload.size(),
                                         MX_FABRIC_SEND_RNDV, done_cb, &sent));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 1; }));
    ASSERT_TRUE(server.got[0].rndv);
    EXPECT_EQ(payload.size(), server.got[0].len);
    EXPECT_EQ("rts", server.got[0].hdr);
    EXPECT_EQ(0, sent.n); // the sender waits for the pull
    std::vector<char> buf(payload.size());
    Done pulled;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_recv(server.f, server.got[0].desc, buf.data(), buf.size(),
                                         done_cb, &pulled));
    ASSERT_TRUE(progress_until([&] { return pulled.n == 1 && sent.n == 1; }));
    EXPECT_EQ(ICBC_OK, pulled.st);
    EXPECT_EQ(ICBC_OK, sent.st);
    EXPECT_TRUE(buf == payload);
}

TEST_P(Fabric, KeptEagerDataAndDroppedRendezvousAreGivenBack)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    std::vector<char> payload = pattern(100000, 9);
    server.keep = 1;
    Done d;
    // More kept messages than a receiver posts buffers for at a time.
    for (int i = 0; i < 200; i++)
        ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "k", 1, payload.data(), 100, 0, done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.got.size() >= 64; })) << server.got.size();
    for (size_t i = 0; i < server.got.size(); i++)
        mx_fabric_release(server.f, server.got[i].desc);
    server.keep = 0; // the rest are used inside on_am
    size_t released = server.got.size();
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 200 && d.n == 200; }))
        << server.got.size() << " received, " << d.n << " sent";
    for (size_t i = 0; i < server.got.size(); i++)
        EXPECT_EQ(0, memcmp(server.got[i].data.data(), payload.data(), 100)) << i;
    EXPECT_GE(released, 64u);
    server.keep = 1;
    // A rendezvous the receiver drops completes at the sender.
    Done r;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "drop", 4, payload.data(), payload.size(),
                                         MX_FABRIC_SEND_RNDV, done_cb, &r));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 201; }));
    mx_fabric_release(server.f, server.got[200].desc);
    ASSERT_TRUE(progress_until([&] { return r.n == 1; }));
}

TEST_P(Fabric, WorkersReachEachOtherByAddress)
{
    sockaddr_in any = loopback(0);
    ASSERT_NE(nullptr, make(&server, &any, 0));
    ASSERT_NE(nullptr, make(&client, &any, 0));
    std::vector<char> addr(mx_fabric_address_max(server.f));
    size_t len = addr.size();
    ASSERT_EQ(ICBC_OK, mx_fabric_address(server.f, addr.data(), &len));
    mx_fabric_ep_t *ep = nullptr;
    ASSERT_EQ(ICBC_OK, mx_fabric_connect_address(client.f, addr.data(), len, nullptr, &ep));
    std::vector<char> payload = pattern(1 << 20, 5);
    Done d;
    server.keep = 1;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 4, "direct", 6, payload.data(), payload.size(), 0,
                                         done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 1; }));
    ASSERT_TRUE(server.got[0].rndv);
    EXPECT_TRUE(server.accepted.empty()); // no listener: nothing announced
    std::vector<char> buf(payload.size());
    Done pulled;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_recv(server.f, server.got[0].desc, buf.data(), buf.size(),
                                         done_cb, &pulled));
    ASSERT_TRUE(progress_until([&] { return pulled.n == 1 && d.n == 1; }));
    EXPECT_TRUE(buf == payload);
}

// Eager sends complete for their owner once the data is copied; the
// fabric may still hold the messages (a connection it makes on first use,
// a socket it writes from progress). Once mx_fabric_sends_done holds the
// sender may stop progressing: the receiver alone gets every message.
TEST_P(Fabric, MessagesLeaveOnceSendsAreDone)
{
    sockaddr_in any = loopback(0);
    ASSERT_NE(nullptr, make(&server, &any, 0));
    ASSERT_NE(nullptr, make(&client, &any, 0));
    EXPECT_TRUE(mx_fabric_sends_done(client.f)); // nothing sent yet
    std::vector<char> addr(mx_fabric_address_max(server.f));
    size_t len = addr.size();
    ASSERT_EQ(ICBC_OK, mx_fabric_address(server.f, addr.data(), &len));
    mx_fabric_ep_t *ep = nullptr;
    ASSERT_EQ(ICBC_OK, mx_fabric_connect_address(client.f, addr.data(), len, nullptr, &ep));
    std::vector<char> payload = pattern(60000, 11);
    const int n = 20;
    std::vector<int> ids(n); // headers stay valid until sent (mx_fabric.h)
    for (int i = 0; i < n; i++) {
        ids[i] = i;
        ASSERT_EQ(ICBC_OK,
                  mx_fabric_am_send(ep, 1, &ids[i], sizeof(int), payload.data(), payload.size(),
                                    MX_FABRIC_SEND_EAGER, nullptr, nullptr));
    }
    // a new connection: not all of that can have left inside the calls
    EXPECT_FALSE(mx_fabric_sends_done(client.f));
    ASSERT_TRUE(progress_until([&] { return mx_fabric_sends_done(client.f) != 0; }));
    mx_fabric_t *sender = client.f;
    client.f = nullptr; // progress_until now drives the receiver alone
    ASSERT_TRUE(progress_until([&] { return server.got.size() == (size_t) n; }))
        << server.got.size() << " of " << n << " arrived";
    client.f = sender;
    for (int i = 0; i < n; i++) {
        int v;
        memcpy(&v, server.got[i].hdr.data(), sizeof(v));
        EXPECT_EQ(i, v);
        EXPECT_TRUE(server.got[i].data == payload) << i;
    }
}

TEST_P(Fabric, APeerThatGoesAwayFailsItsEndpoint)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    Done d;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "h", 1, "x", 1, 0, done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.accepted.size() == 1 && d.n == 1; }));
    mx_fabric_destroy(client.f);
    client.f = nullptr;
    ASSERT_TRUE(progress_until([&] { return server.failed.size() == 1; }));
    Done after;
    // Sends on a failed endpoint fail, at once or by their completion.
    icbc_status_t st = mx_fabric_am_send(server.accepted[0], 0, "h", 1, "x", 1, 0, done_cb, &after);
    if (st == ICBC_OK) {
        ASSERT_TRUE(progress_until([&] { return after.n == 1; }));
        EXPECT_NE(ICBC_OK, after.st);
    }
    mx_fabric_ep_close(server.accepted[0], 0);
}

// A peer process that stops (SIGSTOP: a process computing, not polling)
// keeps its endpoint: the pull waits and completes once it runs again. A
// pull from a peer process that was killed fails within seconds, also when
// the fabric has already seen the connection go (libfabric's rxm then
// connects again, is refused, and refuses the read for ever).
TEST_P(Fabric, AKilledPeerFailsAPullFromItAStoppedOneDoesNot)
{
    server_sa = loopback(free_port());
    int ready[2];
    ASSERT_EQ(0, pipe(ready));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) { // the peer: two rendezvous sends, one after the other
        char c;
        close(ready[1]);
        if (read(ready[0], &c, 1) != 1)
            _exit(2);
        Side peer;
        sockaddr_in any = loopback(0);
        if (make(&peer, &any, 0) == nullptr)
            _exit(3);
        client.f = peer.f;
        mx_fabric_ep_t *ep = connect();
        std::vector<char> payload = pattern(4 << 20, 7);
        Done d;
        static const int ids[2] = { 0, 1 }; // headers the fabric may copy later
        for (int i = 0; ep != nullptr && i < 2; i++)
            if (mx_fabric_am_send(ep, 3, &ids[i], sizeof(ids[i]), payload.data(), payload.size(),
                                  MX_FABRIC_SEND_RNDV, done_cb, &d) != ICBC_OK)
                _exit(4);
        for (;;) // until killed
            mx_fabric_progress(peer.f);
    }
    close(ready[0]);
    ASSERT_NE(nullptr, make(&server, &server_sa, 1));
    server.keep = 1;
    ASSERT_EQ(1, write(ready[1], "x", 1));
    close(ready[1]);
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 2; }));
    ASSERT_TRUE(server.got[0].rndv && server.got[1].rndv);

    kill(pid, SIGSTOP);
    std::vector<char> buf(server.got[0].len);
    Done pulled;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_recv(server.f, server.got[0].desc, buf.data(), buf.size(),
                                         done_cb, &pulled));
    progress_until([&] { return pulled.n == 1; }, 3.5);
    EXPECT_EQ(0, pulled.n) << "a pull from a stopped process ended: " << pulled.st;
    EXPECT_TRUE(server.failed.empty()) << server.failed[0];
    kill(pid, SIGCONT);
    ASSERT_TRUE(progress_until([&] { return pulled.n == 1; }));
    EXPECT_EQ(ICBC_OK, pulled.st);
    EXPECT_TRUE(buf == pattern(4 << 20, 7));

    // The peer dies; the fabric sees its connection close before the next
    // pull starts.
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    progress_until([] { return false; }, 1.0);
    Done lost;
    auto t0 = std::chrono::steady_clock::now();
    icbc_status_t st =
        mx_fabric_am_recv(server.f, server.got[1].desc, buf.data(), buf.size(), done_cb, &lost);
    if (st == ICBC_OK)
        ASSERT_TRUE(progress_until([&] { return lost.n == 1; }, 15))
            << "a pull from a killed process still waits";
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    EXPECT_NE(ICBC_OK, st == ICBC_OK ? lost.st : st);
    EXPECT_LT(took.count(), 8.0);
    ASSERT_TRUE(progress_until([&] { return server.failed.size() == 1; }, 5));
    printf("pull from a killed process failed after %.2f s: %s\n", took.count(),
           server.failed[0].c_str());
}

TEST_P(Fabric, TheEventDescriptorWakesForAPeer)
{
    listen_and_client();
    int efd = mx_fabric_efd(server.f);
    ASSERT_GE(efd, 0);
    // The server goes to sleep before anything reaches it.
    icbc_status_t armed;
    for (int i = 0; (armed = mx_fabric_arm(server.f)) == ICBC_ERR_BUSY && i < 1000; i++)
        mx_fabric_progress(server.f);
    ASSERT_EQ(ICBC_OK, armed);
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    Done d;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "h", 1, "x", 1, 0, done_cb, &d));
    pollfd pfd = { efd, POLLIN, 0 };
    int woke = 0;
    for (int i = 0; i < 5000 && !woke; i++) {
        mx_fabric_progress(client.f);
        woke = poll(&pfd, 1, 1);
    }
    ASSERT_EQ(1, woke);
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 1; }));
}

TEST_P(Fabric, ImmediateHeadersAndIdsWithoutAHandler)
{
    listen_and_client();
    mx_fabric_ep_t *ep = connect();
    ASSERT_NE(nullptr, ep);
    mx_fabric_set_am_handler(server.f, 6, nullptr, nullptr);
    Done d;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "wake", 4, nullptr, 0, 0, done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 1 && d.n == 1; }));
    // The transport may refuse (BUSY) rather than queue; never an error.
    icbc_status_t st = ICBC_ERR_BUSY;
    ASSERT_TRUE(progress_until([&] {
        char hdr[8] = "imm";
        st = mx_fabric_am_send(ep, 1, hdr, 3, nullptr, 0, MX_FABRIC_SEND_IMMEDIATE, nullptr,
                               nullptr);
        memset(hdr, 0, sizeof(hdr)); // the transport keeps no part of it
        return st != ICBC_ERR_BUSY;
    }));
    ASSERT_EQ(ICBC_OK, st) << icbc_status_str(st);
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 2; }));
    EXPECT_EQ("imm", server.got[1].hdr);
    // No handler: dropped, and what follows still arrives.
    Done a, b;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 6, "lost", 4, "x", 1, 0, done_cb, &a));
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 2, "next", 4, "y", 1, 0, done_cb, &b));
    ASSERT_TRUE(progress_until([&] { return server.got.size() == 3 && a.n == 1 && b.n == 1; }));
    EXPECT_EQ("next", server.got[2].hdr);
    // An immediate send carries no payload.
    EXPECT_EQ(ICBC_ERR_INVALID,
              mx_fabric_am_send(ep, 1, "h", 1, "x", 1, MX_FABRIC_SEND_IMMEDIATE, nullptr, nullptr));
}

struct EpFailure {
    int n = 0;
    void *arg = nullptr;
};

void ep_failed_own(mx_fabric_ep_t *, icbc_status_t, const char *, void *arg)
{
    static_cast<EpFailure *>(arg)->n++;
}

TEST_P(Fabric, AnEndpointMayHaveItsOwnFailureCallback)
{
    listen_and_client();
    EpFailure own;
    mx_fabric_ep_t *ep = nullptr;
    ASSERT_EQ(ICBC_OK, mx_fabric_connect(client.f, reinterpret_cast<const sockaddr *>(&server_sa),
                                         sizeof(server_sa), &own, &ep));
    mx_fabric_ep_set_failed_cb(ep, ep_failed_own);
    Done d;
    ASSERT_EQ(ICBC_OK, mx_fabric_am_send(ep, 0, "h", 1, "x", 1, 0, done_cb, &d));
    ASSERT_TRUE(progress_until([&] { return server.accepted.size() == 1 && d.n == 1; }));
    mx_fabric_destroy(server.f);
    server.f = nullptr;
    // The peer is gone: a send (or the transport on its own) finds out.
    ASSERT_TRUE(progress_until([&] {
        if (own.n == 0)
            mx_fabric_am_send(ep, 0, "h", 1, "x", 1, 0, nullptr, nullptr);
        return own.n == 1;
    }));
    EXPECT_TRUE(client.failed.empty()); // not the fabric's callback
}

TEST(FabricApi, NamesParse)
{
    mx_fabric_api_t a;
    EXPECT_EQ(ICBC_OK, mx_fabric_api_parse("ucx", &a));
    EXPECT_EQ(MX_FABRIC_UCX, a);
    EXPECT_EQ(ICBC_OK, mx_fabric_api_parse("ofi", &a));
    EXPECT_EQ(MX_FABRIC_OFI, a);
    EXPECT_EQ(ICBC_ERR_INVALID, mx_fabric_api_parse("verbs", &a));
    EXPECT_EQ(ICBC_ERR_INVALID, mx_fabric_api_parse(nullptr, &a));
    EXPECT_STREQ("ofi", mx_fabric_api_name(MX_FABRIC_OFI));
}

INSTANTIATE_TEST_SUITE_P(Apis, Fabric, ::testing::Values(MX_FABRIC_UCX, MX_FABRIC_OFI),
                         [](const ::testing::TestParamInfo<mx_fabric_api_t> &i) {
                             return std::string(mx_fabric_api_name(i.param));
                         });

} // namespace
