// Tests of the router (src/router) and its fabric transport (src/mx_router):
// two routers in two "clusters" on 127.0.0.1 run as threads; compute
// processes are mx_client instances on fabrics of their own. The fabric API
// of routers and processes is UCX (UCX_TLS=tcp), or libfabric's when
// ICBC_TEST_FABRIC_API=ofi (test/router/ofi.sh runs them all again so).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "icbc_log.h"
#include "icbc_route.h"
#include "icbc_routerfile.h"
#include "mx_client.h"
#include "mx_fabric.h"
#include "router.h"

namespace
{

constexpr uint64_t kJob = 0x1cbc000042ull;

// The fabric API every router and process of these tests speaks.
mx_fabric_api_t TestApi()
{
    const char *want = getenv("ICBC_TEST_FABRIC_API");
    mx_fabric_api_t api = MX_FABRIC_UCX;
    if (want && *want && mx_fabric_api_parse(want, &api) != ICBC_OK) {
        fprintf(stderr, "ICBC_TEST_FABRIC_API=%s: want ucx or ofi\n", want);
        exit(2);
    }
    return api;
}

// A fabric of a test's own process on the loopback interface.
mx_fabric_t *TestFabric(const mx_fabric_cbs_t *cbs = nullptr, void *arg = nullptr)
{
    static const mx_fabric_cbs_t none = {};
    mx_fabric_params_t p = {};
    mx_fabric_t *f = nullptr;
    char err[512] = "";
    p.api = TestApi();
    p.peers_may_fail = 1;
    p.peer_errors = 1;
    p.ofi_iface = "lo";
    EXPECT_EQ(ICBC_OK, mx_fabric_create(&p, cbs ? cbs : &none, arg, &f, err, sizeof(err))) << err;
    return f;
}

double NowMs()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// A port that is free now, below the kernel's ephemeral range
// (ip_local_port_range starts at 32768): a port the kernel handed out and
// took back could be given to an outgoing connection (UCX connects a lot)
// before the router binds it. Never the same port twice in one run.
int FreePort()
{
    static unsigned seed = (unsigned) getpid() * 2654435761u ^ (unsigned) time(NULL);
    static std::vector<bool> given(12000);
    for (int tries = 0; tries < 1000; tries++) {
        int slot = (int) (rand_r(&seed) % 12000), port = 20000 + slot;
        if (given[slot])
            continue;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t) port);
        if (fd < 0)
            abort();
        int ok = bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0;
        close(fd);
        if (!ok)
            continue;
        given[slot] = true;
        return port;
    }
    abort();
}

void WriteFile(const std::string &path, const std::string &data)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << data;
    f.close();
    chmod(path.c_str(), 0600);
}

// Resident bytes of this process (/proc/self/statm).
size_t ResidentBytes()
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t) resident * (size_t) sysconf(_SC_PAGESIZE);
}

// Peak resident bytes (VmHWM) of process PID, 0 if unknown.
size_t PeakResidentBytes(pid_t pid)
{
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::stoull(line.substr(6)) * 1024;
    return 0;
}

// Payload byte I of message SEQ: checkable and different per message.
uint8_t Pattern(size_t seq, size_t i)
{
    return (uint8_t) ((i * 131 + seq * 7 + (i >> 11)) & 0xff);
}

std::vector<uint8_t> MakePayload(size_t seq, size_t len)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; i++)
        v[i] = Pattern(seq, i);
    return v;
}

// A temporary directory with a router file for two clusters a and b with
// one router each (plus spare hosts for clients), and its key.
struct TwoClusters {
    std::string dir, rf_path, rf_badkey_path;
    int fab_a, wan_a, fab_b, wan_b;

    TwoClusters()
    {
        char tmpl[] = "/tmp/icbc-router-test-XXXXXX";
        dir = mkdtemp(tmpl);
        fab_a = FreePort();
        wan_a = FreePort();
        fab_b = FreePort();
        wan_b = FreePort();
        WriteFile(dir + "/routers.key", "0123456789abcdef0123456789abcdef\n");
        WriteFile(dir + "/other.key", "fedcba9876543210fedcba9876543210\n");
        rf_path = dir + "/routers.conf";
        rf_badkey_path = dir + "/badkey.conf";
        WriteFile(rf_path, Text("routers.key"));
        WriteFile(rf_badkey_path, Text("other.key"));
    }
    ~TwoClusters()
    {
        std::string cmd = "rm -rf '" + dir + "'";
        if (system(cmd.c_str()) != 0) { /* best effort */
        }
    }
    std::string Text(const char *key) const
    {
        char buf[1024];
        const char *api = mx_fabric_api_name(TestApi());
        snprintf(buf, sizeof(buf),
                 "key %s\n"
                 "cluster a\n"
                 "    fabric-api %s\n"
                 "    hosts a0 a1 a2\n"
                 "    router a0 fabric=127.0.0.1:%d wan=127.0.0.1:%d\n"
                 "cluster b\n"
                 "    fabric-api %s\n"
                 "    hosts b0 b1 b2\n"
                 "    router b0 fabric=127.0.0.1:%d wan=127.0.0.1:%d\n",
                 key, api, fab_a, wan_a, api, fab_b, wan_b);
        return buf;
    }
};

using RfPtr = std::unique_ptr<icbc_routerfile_t, void (*)(icbc_routerfile_t *)>;

RfPtr LoadRf(const std::string &path)
{
    icbc_routerfile_t *rf = nullptr;
    char err[ICBC_RF_ERR_LEN];
    EXPECT_EQ(ICBC_OK, icbc_routerfile_load(path.c_str(), &rf, err, sizeof(err))) << err;
    return RfPtr(rf, icbc_routerfile_free);
}

// A router running in a thread of the test.
class RouterThread
{
  public:
    RouterThread(const icbc_routerfile_t *rf, const char *host, size_t max_memory = 0,
                 int streams = 0, int trunk_wait_ms = 300, int max_pulls = 0,
                 size_t eager_window = 0)
    {
        icbc_router_config_t cfg = {};
        cfg.eager_window = eager_window;
        cfg.max_pulls = max_pulls;
        char err[512] = "";
        cfg.rf = rf;
        cfg.host = host;
        cfg.max_memory = max_memory;
        cfg.streams = streams;
        cfg.register_ms = 2000;
        cfg.trunk_wait_ms = trunk_wait_ms; /* the fabric API: the router file's */
        EXPECT_EQ(ICBC_OK, icbc_router_create(&cfg, &r_, err, sizeof(err))) << err;
        if (r_)
            th_ = std::thread([this] { icbc_router_run(r_); });
    }
    ~RouterThread()
    {
        Stop();
    }
    void Stop()
    {
        if (r_ == nullptr)
            return;
        icbc_router_stop(r_);
        th_.join();
        icbc_router_destroy(r_);
        r_ = nullptr;
    }
    icbc_router_stats_t Stats()
    {
        icbc_router_stats_t st = {};
        if (r_)
            icbc_router_get_stats(r_, &st);
        return st;
    }
    bool ok() const
    {
        return r_ != nullptr;
    }
    // CPU time the router's thread has used so far, in seconds.
    double CpuSeconds()
    {
        clockid_t cid;
        struct timespec ts;
        if (r_ == nullptr || pthread_getcpuclockid(th_.native_handle(), &cid) != 0 ||
            clock_gettime(cid, &ts) != 0)
            return -1;
        return ts.tv_sec + ts.tv_nsec / 1e9;
    }

  private:
    icbc_router_t *r_ = nullptr;
    std::thread th_;
};

struct Received {
    icbc_route_hdr_t route;
    std::string inner;
    std::vector<uint8_t> data;
    bool done = false;
};

// A compute process: a fabric of its own, an mx_client on it.
class Client
{
  public:
    Client(const icbc_routerfile_t *rf, int cluster, uint32_t rank, const std::string &keyfile = "",
           int timeout_ms = 5000, int rndv_window = 0, uint64_t job = kJob, int reconnect_ms = 0)
    {
        fabric_ = TestFabric();

        unsigned char key[ICBC_RF_KEY_MAX];
        size_t keylen = 0;
        char err[512] = "";
        if (keyfile.empty()) {
            EXPECT_EQ(ICBC_OK,
                      icbc_routerfile_read_key(rf, key, sizeof(key), &keylen, err, sizeof(err)));
        } else {
            std::ifstream f(keyfile, std::ios::binary);
            std::string k((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            memcpy(key, k.data(), k.size());
            keylen = k.size();
        }
        const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(rf, (size_t) cluster);
        mx_client_params_t p = {};
        p.fabric = fabric_;
        p.routers = cl->routers;
        p.nrouters = cl->nrouters;
        p.cluster = (uint16_t) cluster;
        p.job = job;
        p.rank = rank;
        p.key = key;
        p.keylen = keylen;
        p.timeout_ms = timeout_ms;
        p.rndv_window = rndv_window;
        p.on_msg = OnMsg;
        p.on_router_lost = OnLost;
        p.on_router_back = OnBack;
        p.reconnect_ms = reconnect_ms;
        p.on_cluster_state = OnClusterState;
        p.arg = this;
        status_ = mx_client_create(&p, &c_, err, sizeof(err));
        error_ = err;
    }
    ~Client()
    {
        if (c_)
            mx_client_destroy(c_);
        mx_fabric_destroy(fabric_);
    }
    icbc_status_t status() const
    {
        return status_;
    }
    const std::string &error() const
    {
        return error_;
    }
    mx_client_t *client()
    {
        return c_;
    }
    int lost() const
    {
        return lost_;
    }
    int backs() const
    {
        return backs_;
    }

    void Progress()
    {
        if (mx_fabric_progress(fabric_) == 0) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
        // Pull rendezvous payloads outside the fabric's callback.
        for (auto &p : pulls_) {
            icbc_status_t st = mx_client_recv_data(c_, p.desc, p.item->data.data(),
                                                   p.item->data.size(), PullDone, p.item);
            EXPECT_EQ(ICBC_OK, st);
        }
        pulls_.clear();
    }

    // Completed messages in arrival order.
    size_t Ready() const
    {
        size_t n = 0;
        for (auto &m : inbox_) {
            if (!m->done)
                break;
            n++;
        }
        return n;
    }
    bool WaitFor(size_t n, double timeout_ms = 20000)
    {
        double end = NowMs() + timeout_ms;
        while (Ready() < n && NowMs() < end)
            Progress();
        return Ready() >= n;
    }
    std::unique_ptr<Received> Pop()
    {
        auto m = std::move(inbox_.front());
        inbox_.pop_front();
        return m;
    }

    // Sends and counts completions; payload kept alive by the caller.
    icbc_status_t Send(uint16_t dst_cluster, uint32_t dst_rank, uint16_t flags,
                       const std::string &inner, const std::vector<uint8_t> &payload)
    {
        sends_++;
        icbc_status_t st =
            mx_client_send(c_, 0, dst_cluster, dst_rank, flags, inner.data(), inner.size(),
                           payload.data(), payload.size(), SendDone, this);
        if (st != ICBC_OK)
            sends_--;
        return st;
    }
    size_t Unsent() const
    {
        return sends_ - sent_;
    }
    bool WaitSends(double timeout_ms = 20000)
    {
        double end = NowMs() + timeout_ms;
        while (sent_ < sends_ && NowMs() < end)
            Progress();
        return sent_ == sends_;
    }
    // Progresses until CLUSTER was announced (un)reachable, in order after
    // the announcements already consumed.
    bool WaitClusterState(uint16_t cluster, bool reachable, double timeout_ms = 10000)
    {
        double end = NowMs() + timeout_ms;
        for (;;) {
            for (; seen_states_ < states_.size(); seen_states_++)
                if (states_[seen_states_] == std::make_pair(cluster, reachable)) {
                    seen_states_++;
                    return true;
                }
            if (NowMs() >= end)
                return false;
            Progress();
        }
    }
    size_t ClusterStates() const
    {
        return states_.size();
    }
    bool WaitLost(double timeout_ms = 10000)
    {
        double end = NowMs() + timeout_ms;
        while (lost_ < 0 && NowMs() < end)
            Progress();
        return lost_ >= 0;
    }

  private:
    struct Pull {
        void *desc;
        Received *item;
    };
    static int OnMsg(const mx_client_msg_t *m, void *arg)
    {
        Client *self = static_cast<Client *>(arg);
        auto item = std::make_unique<Received>();
        item->route = m->route;
        item->inner.assign((const char *) m->inner, m->inner_len);
        item->data.resize(m->len);
        int keep = 0;
        if (m->rndv) {
            self->pulls_.push_back({ m->data, item.get() });
            keep = 1;
        } else {
            if (m->len)
                memcpy(item->data.data(), m->data, m->len);
            item->done = true;
        }
        self->inbox_.push_back(std::move(item));
        return keep;
    }
    static void PullDone(void *arg, icbc_status_t st)
    {
        EXPECT_EQ(ICBC_OK, st);
        static_cast<Received *>(arg)->done = true;
    }
    static void SendDone(void *arg, icbc_status_t st)
    {
        Client *self = static_cast<Client *>(arg);
        if (st != ICBC_OK)
            self->send_errors_++;
        self->sent_++;
    }
    static void OnLost(int router, icbc_status_t st, void *arg)
    {
        static_cast<Client *>(arg)->lost_ = router;
    }
    static void OnBack(int router, void *arg)
    {
        static_cast<Client *>(arg)->backs_++;
    }
    static void OnClusterState(int router, uint16_t cluster, int reachable, void *arg)
    {
        static_cast<Client *>(arg)->states_.push_back({ cluster, reachable != 0 });
    }

    mx_fabric_t *fabric_ = nullptr;
    mx_client_t *c_ = nullptr;
    icbc_status_t status_ = ICBC_ERR_INVALID;
    std::string error_;
    std::deque<std::unique_ptr<Received>> inbox_;
    std::vector<Pull> pulls_;
    size_t sends_ = 0, sent_ = 0, send_errors_ = 0;
    int lost_ = -1;
    int backs_ = 0;
    std::vector<std::pair<uint16_t, bool>> states_;
    size_t seen_states_ = 0;
};

bool WaitTrunks(RouterThread &a, RouterThread &b, double timeout_ms = 10000)
{
    double end = NowMs() + timeout_ms;
    while (NowMs() < end) {
        if (a.Stats().trunks_up == 1 && b.Stats().trunks_up == 1)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

class RouterTest : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        setenv("UCX_TLS", "tcp", 1);
        icbc_log_set_level(getenv("ICBC_LOG_LEVEL") ? ICBC_LOG_DEBUG : ICBC_LOG_ERROR);
    }
};

const size_t kSizes[] = { 0, 1, 100, 4096, 8191, 8192, 8193, 65536, 1u << 20, 4u << 20 };

// Sends every size from S to D (ordered) and checks arrival, order and bytes.
void CheckFlow(Client &s, Client &d, uint16_t dst_cluster, uint32_t dst_rank, size_t seq0)
{
    std::vector<std::vector<uint8_t>> payloads;
    size_t n = sizeof(kSizes) / sizeof(kSizes[0]);
    for (size_t i = 0; i < n; i++)
        payloads.push_back(MakePayload(seq0 + i, kSizes[i]));
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(ICBC_OK, s.Send(dst_cluster, dst_rank, ICBC_ROUTE_F_ORDERED,
                                  "inner-" + std::to_string(seq0 + i), payloads[i]));
    // Both ends must progress: rendezvous sends complete when the router pulls.
    double end = NowMs() + 30000;
    while (d.Ready() < n && NowMs() < end) {
        s.Progress();
        d.Progress();
    }
    ASSERT_EQ(n, d.Ready());
    ASSERT_TRUE(s.WaitSends());
    for (size_t i = 0; i < n; i++) {
        auto m = d.Pop();
        EXPECT_EQ(ICBC_ROUTE_MSG, m->route.type);
        EXPECT_EQ(kJob, m->route.job);
        EXPECT_EQ(dst_rank, m->route.dst_rank);
        EXPECT_EQ("inner-" + std::to_string(seq0 + i), m->inner) << "order broken at " << i;
        ASSERT_EQ(kSizes[i], m->data.size());
        EXPECT_TRUE(m->data == payloads[i]) << "payload of message " << i << " differs";
    }
}

// Sends N ordered messages of LEN bytes from S to rank 1 of cluster b (kept
// in *PAYLOADS) and moves only S for HOLD_MS: the receiver takes nothing yet.
void SendWhileReceiverWaits(Client &s, size_t n, size_t len, double hold_ms,
                            std::vector<std::vector<uint8_t>> *payloads)
{
    for (size_t i = 0; i < n; i++)
        payloads->push_back(MakePayload(i, len));
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(ICBC_OK, s.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), (*payloads)[i]));
    double end = NowMs() + hold_ms;
    while (NowMs() < end)
        s.Progress();
}

// Moves S and D until D has every message of PAYLOADS; checks order and bytes.
void ExpectAllInOrder(Client &s, Client &d, const std::vector<std::vector<uint8_t>> &payloads,
                      double timeout_ms)
{
    size_t n = payloads.size();
    double end = NowMs() + timeout_ms;
    while (d.Ready() < n && NowMs() < end) {
        s.Progress();
        d.Progress();
    }
    ASSERT_EQ(n, d.Ready());
    for (size_t i = 0; i < n; i++) {
        auto m = d.Pop();
        EXPECT_EQ(std::to_string(i), m->inner) << "order broken at " << i;
        EXPECT_TRUE(m->data == payloads[i]) << i;
    }
}

// Routers a0 and b0 with their trunk up, and one process registered on each
// side (cluster a rank 0, cluster b rank 1).
struct RoutedPair {
    TwoClusters su;
    RfPtr rf;
    RouterThread ra, rb;
    std::unique_ptr<Client> ca, cb;

    RoutedPair() : rf(LoadRf(su.rf_path)), ra(rf.get(), "a0"), rb(rf.get(), "b0")
    {
    }
    void Connect()
    {
        ASSERT_TRUE(ra.ok() && rb.ok());
        ASSERT_TRUE(WaitTrunks(ra, rb));
        ca.reset(new Client(rf.get(), 0, 0));
        cb.reset(new Client(rf.get(), 1, 1));
        ASSERT_EQ(ICBC_OK, ca->status()) << ca->error();
        ASSERT_EQ(ICBC_OK, cb->status()) << cb->error();
    }
};

TEST_F(RouterTest, ForwardsBothWaysInOrder)
{
    RoutedPair p;
    ASSERT_NO_FATAL_FAILURE(p.Connect());
    RouterThread &ra = p.ra, &rb = p.rb;
    Client &ca = *p.ca, &cb = *p.cb;

    CheckFlow(ca, cb, 1, 1, 0);
    CheckFlow(cb, ca, 0, 0, 100);

    size_t n = sizeof(kSizes) / sizeof(kSizes[0]);
    /* counters move when the routers' sends complete, which may be after the
     * clients saw the data: wait for both directions to settle */
    double settle = NowMs() + 10000;
    for (;;) {
        icbc_router_stats_t a = ra.Stats(), b = rb.Stats();
        if ((a.msgs_out >= n && b.msgs_out >= n && a.msgs_in >= n && b.msgs_in >= n &&
             a.buffered == 0 && b.buffered == 0) ||
            NowMs() > settle)
            break;
        ca.Progress();
        cb.Progress();
    }
    icbc_router_stats_t sa = ra.Stats(), sb = rb.Stats();
    EXPECT_EQ(n, sa.msgs_out);
    EXPECT_EQ(n, sa.msgs_in);
    EXPECT_EQ(n, sb.msgs_out);
    EXPECT_EQ(n, sb.msgs_in);
    EXPECT_EQ(1u, sa.registered);
    EXPECT_EQ(1u, sb.registered);
    EXPECT_EQ(0u, sa.unreachable);
    EXPECT_EQ(0u, sa.buffered);
}

// One pair of routers serves two jobs whose processes have the same ranks
// and clusters: registrations are per (job, rank), so each job's messages,
// eager and rendezvous, reach only that job's process, in order, and one
// job leaving makes its rank unreachable without touching the other.
TEST_F(RouterTest, TwoJobsWithTheSameRanksStayApart)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const uint64_t job2 = kJob + 1;
    RouterThread ra(rf.get(), "a0"), rb(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, rb));
    auto b1p = std::make_unique<Client>(rf.get(), 1, 1);
    Client a1(rf.get(), 0, 0), &b1 = *b1p;
    Client a2(rf.get(), 0, 0, "", 5000, 0, job2), b2(rf.get(), 1, 1, "", 5000, 0, job2);
    for (Client *c : { &a1, &b1, &a2, &b2 })
        ASSERT_EQ(ICBC_OK, c->status()) << c->error();
    EXPECT_EQ(2u, ra.Stats().registered);
    const size_t n = 40;
    std::vector<std::vector<uint8_t>> p1, p2;
    for (size_t i = 0; i < n; i++) {
        p1.push_back(MakePayload(i, (i * 7919) % 70000));
        p2.push_back(MakePayload(1000 + i, (i * 104729) % 70000));
    }
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(ICBC_OK, a1.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), p1[i]));
        ASSERT_EQ(ICBC_OK, a2.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), p2[i]));
    }
    double end = NowMs() + 20000;
    while ((b1.Ready() < n || b2.Ready() < n) && NowMs() < end)
        for (Client *c : { &a1, &b1, &a2, &b2 })
            c->Progress();
    ASSERT_EQ(n, b1.Ready());
    ASSERT_EQ(n, b2.Ready());
    for (size_t i = 0; i < n; i++) {
        auto m1 = b1.Pop(), m2 = b2.Pop();
        EXPECT_EQ(kJob, m1->route.job);
        EXPECT_EQ(job2, m2->route.job);
        EXPECT_EQ(std::to_string(i), m1->inner);
        EXPECT_EQ(std::to_string(i), m2->inner);
        EXPECT_TRUE(m1->data == p1[i]) << i;
        EXPECT_TRUE(m2->data == p2[i]) << i;
    }
    // Nothing more is on its way to either receiver.
    end = NowMs() + 300;
    while (NowMs() < end)
        for (Client *c : { &a1, &b1, &a2, &b2 })
            c->Progress();
    EXPECT_EQ(0u, b1.Ready());
    EXPECT_EQ(0u, b2.Ready());
    EXPECT_EQ(0u, ra.Stats().unreachable);

    // Job 1's receiver leaves: its rank is unreachable for job 1 only.
    b1p.reset();
    std::vector<uint8_t> small(100);
    ASSERT_EQ(ICBC_OK, a1.Send(1, 1, ICBC_ROUTE_F_ORDERED, "late", small));
    ASSERT_EQ(ICBC_OK, a2.Send(1, 1, ICBC_ROUTE_F_ORDERED, "still", small));
    end = NowMs() + 10000;
    while ((a1.Ready() < 1 || b2.Ready() < 1) && NowMs() < end)
        for (Client *c : { &a1, &a2, &b2 })
            c->Progress();
    ASSERT_EQ(1u, a1.Ready());
    EXPECT_EQ(ICBC_ROUTE_UNREACHABLE, a1.Pop()->route.type);
    ASSERT_EQ(1u, b2.Ready());
    EXPECT_EQ("still", b2.Pop()->inner);
    EXPECT_EQ(0u, a2.Ready());
}

// A router with nothing to forward sleeps in epoll. After traffic the UCX
// event descriptor is readable until the worker is re-armed; a loop that took
// that as work would spin at a full core and starve the processes it serves.
TEST_F(RouterTest, IdleRouterSleeps)
{
    RoutedPair p;
    ASSERT_NO_FATAL_FAILURE(p.Connect());
    RouterThread &ra = p.ra, &rb = p.rb;
    CheckFlow(*p.ca, *p.cb, 1, 1, 0);
    CheckFlow(*p.cb, *p.ca, 0, 0, 100);

    double a0 = ra.CpuSeconds(), b0 = rb.CpuSeconds();
    ASSERT_GE(a0, 0);
    ASSERT_GE(b0, 0);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    double a = ra.CpuSeconds() - a0, b = rb.CpuSeconds() - b0;
    // A spinning loop uses close to 2 s here; a sleeping one a few ms.
    EXPECT_LT(a, 0.2) << "router a used " << a << " s of CPU in 2 s idle";
    EXPECT_LT(b, 0.2) << "router b used " << b << " s of CPU in 2 s idle";
}

TEST_F(RouterTest, UnorderedMessagesAllArrive)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0", 0, 3), rb(rf.get(), "b0", 0, 3);
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 5);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    const size_t n = 40;
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < n; i++)
        payloads.push_back(MakePayload(i, (i % 5) * 70000 + i));
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(ICBC_OK, ca.Send(1, 5, 0, std::to_string(i), payloads[i]));
    double end = NowMs() + 30000;
    while (cb.Ready() < n && NowMs() < end) {
        ca.Progress();
        cb.Progress();
    }
    ASSERT_EQ(n, cb.Ready());
    std::vector<bool> seen(n);
    for (size_t i = 0; i < n; i++) {
        auto m = cb.Pop();
        size_t k = std::stoul(m->inner);
        ASSERT_LT(k, n);
        EXPECT_FALSE(seen[k]);
        seen[k] = true;
        EXPECT_TRUE(m->data == payloads[k]) << k;
    }
}

TEST_F(RouterTest, LocalDeliveryInsideCluster)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0");
    ASSERT_TRUE(ra.ok());
    Client c0(rf.get(), 0, 0), c1(rf.get(), 0, 1);
    ASSERT_EQ(ICBC_OK, c0.status()) << c0.error();
    ASSERT_EQ(ICBC_OK, c1.status()) << c1.error();
    CheckFlow(c0, c1, 0, 1, 0);
    // Counters are published once per loop turn: let the last completion land.
    const uint64_t n = sizeof(kSizes) / sizeof(kSizes[0]);
    double end = NowMs() + 3000;
    while (ra.Stats().msgs_local < n && NowMs() < end)
        c0.Progress();
    EXPECT_EQ(n, ra.Stats().msgs_local);
}

TEST_F(RouterTest, WrongKeyIsRefused)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0");
    Client bad(rf.get(), 0, 3, su.dir + "/other.key");
    EXPECT_EQ(ICBC_ERR_AUTH, bad.status());
    EXPECT_NE(std::string::npos, bad.error().find("refused")) << bad.error();
    EXPECT_NE(std::string::npos, bad.error().find("a0")) << bad.error();
    double end = NowMs() + 5000;
    while (ra.Stats().refused_fabric < 1 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(1u, ra.Stats().refused_fabric);
    EXPECT_EQ(0u, ra.Stats().registered);
}

TEST_F(RouterTest, UnreachableRouterIsAClearError)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    Client c(rf.get(), 0, 0, "", 2000); // no router running
    EXPECT_NE(ICBC_OK, c.status());
    EXPECT_NE(std::string::npos, c.error().find("router a0")) << c.error();
    EXPECT_TRUE(c.error().find("unreachable") != std::string::npos ||
                c.error().find("timeout") != std::string::npos)
        << c.error();
}

TEST_F(RouterTest, TrunkWithWrongKeyIsRefused)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path), rfbad = LoadRf(su.rf_badkey_path);
    RouterThread ra(rf.get(), "a0"), rb(rfbad.get(), "b0");
    double end = NowMs() + 8000;
    while (rb.Stats().refused_trunk < 1 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(rb.Stats().refused_trunk, 1u); // b accepts (a has the lower index)
    EXPECT_EQ(0u, ra.Stats().refused_trunk);
    EXPECT_EQ(0u, ra.Stats().trunks_up);
    EXPECT_EQ(0u, rb.Stats().trunks_up);
}

TEST_F(RouterTest, UnknownDestinationGivesUnreachable)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0"), rb(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client ca(rf.get(), 0, 7);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    std::vector<uint8_t> small = MakePayload(1, 10), big = MakePayload(2, 100000);
    ASSERT_EQ(ICBC_OK, ca.Send(1, 99, ICBC_ROUTE_F_ORDERED, "x", small)); // remote, unknown rank
    ASSERT_EQ(ICBC_OK, ca.Send(0, 98, 0, "y", big));                      // local, unknown rank
    ASSERT_EQ(ICBC_OK, ca.Send(9, 1, 0, "z", small));                     // no such cluster
    ASSERT_TRUE(ca.WaitFor(3));
    std::vector<uint32_t> lost_ranks;
    for (int i = 0; i < 3; i++) {
        auto m = ca.Pop();
        EXPECT_EQ(ICBC_ROUTE_UNREACHABLE, m->route.type);
        EXPECT_EQ(7u, m->route.dst_rank);
        ASSERT_EQ((size_t) ICBC_ROUTE_HDR_SIZE, m->inner.size());
        icbc_route_hdr_t lost;
        ASSERT_EQ(ICBC_OK, icbc_route_hdr_parse(m->inner.data(), m->inner.size(), &lost));
        EXPECT_EQ(ICBC_ROUTE_MSG, lost.type);
        EXPECT_EQ(7u, lost.src_rank);
        lost_ranks.push_back(lost.dst_rank);
    }
    std::sort(lost_ranks.begin(), lost_ranks.end());
    EXPECT_EQ((std::vector<uint32_t>{ 1, 98, 99 }), lost_ranks);
    // Counters are published once per loop turn: give them a moment.
    double end = NowMs() + 3000;
    while ((ra.Stats().unreachable < 2 || rb.Stats().unreachable < 1) && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(2u, ra.Stats().unreachable);
    EXPECT_EQ(1u, rb.Stats().unreachable);
}

TEST_F(RouterTest, TrunkDownGivesUnreachable)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0");
    auto rb = std::make_unique<RouterThread>(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, *rb));
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    rb->Stop();
    double end = NowMs() + 5000;
    while (ra.Stats().trunks_up != 0 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<uint8_t> p = MakePayload(0, 64), big = MakePayload(1, 1 << 20);
    double t0 = NowMs();
    ASSERT_EQ(ICBC_OK, ca.Send(1, 1, ICBC_ROUTE_F_ORDERED, "t", p));
    ASSERT_EQ(ICBC_OK, ca.Send(1, 1, ICBC_ROUTE_F_ORDERED, "u", big));
    ASSERT_TRUE(ca.WaitFor(2));
    EXPECT_GE(NowMs() - t0, 250); // waited --trunk-wait (300 ms) for the trunk
    EXPECT_EQ(ICBC_ROUTE_UNREACHABLE, ca.Pop()->route.type);
    EXPECT_EQ(ICBC_ROUTE_UNREACHABLE, ca.Pop()->route.type);
    EXPECT_TRUE(ca.WaitSends());
    // Router b stopped in order: cluster b is not announced unreachable.
    EXPECT_FALSE(ca.WaitClusterState(1, false, 600));
    EXPECT_EQ(0u, ra.Stats().clusters_unreachable);
}

TEST_F(RouterTest, RouterLossIsReported)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    auto ra = std::make_unique<RouterThread>(rf.get(), "a0");
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ra->Stop();
    ASSERT_TRUE(ca.WaitLost());
    EXPECT_EQ(0, ca.lost());
    EXPECT_FALSE(mx_client_router_alive(ca.client(), 0));
    std::vector<uint8_t> p(10);
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, ca.Send(1, 1, 0, "", p));
}

TEST_F(RouterTest, MemoryBoundUnderFlood)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const size_t bound = 1u << 20;
    RouterThread ra(rf.get(), "a0", bound, 2), rb(rf.get(), "b0", bound, 2);
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    // 24 MiB in 96 rendezvous messages of 256 KiB; the receiver starts late.
    const size_t n = 96, len = 256u << 10;
    std::vector<std::vector<uint8_t>> payloads;
    SendWhileReceiverWaits(ca, n, len, 500, &payloads);
    ExpectAllInOrder(ca, cb, payloads, 60000);
    // Counters are published once per loop turn: let the last completions land.
    double settle = NowMs() + 3000;
    while ((ra.Stats().bytes_out < n * len || rb.Stats().bytes_in < n * len) && NowMs() < settle)
        ca.Progress();
    icbc_router_stats_t sa = ra.Stats(), sb = rb.Stats();
    EXPECT_LE(sa.peak_buffered, bound);
    EXPECT_LE(sb.peak_buffered, bound);
    EXPECT_GT(sa.peak_buffered, 0u);
    EXPECT_EQ(n * len, sa.bytes_out);
    EXPECT_EQ(n * len, sb.bytes_in);
}

// One pull at a time, two senders flooding one receiver with rendezvous
// messages while trunk payloads also wait for memory: everything arrives,
// whole and in order per sender.
TEST_F(RouterTest, OnePullAtATime)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const size_t bound = 2u << 20, n = 24, len = 200000;
    RouterThread ra(rf.get(), "a0", bound, 2, 300, 1), rb(rf.get(), "b0", bound, 2, 300, 1);
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client c0(rf.get(), 0, 0), c2(rf.get(), 0, 2), cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, c0.status()) << c0.error();
    ASSERT_EQ(ICBC_OK, c2.status()) << c2.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < 2 * n; i++)
        payloads.push_back(MakePayload(i, len + i));
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(ICBC_OK, c0.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), payloads[i]));
        ASSERT_EQ(ICBC_OK,
                  c2.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(n + i), payloads[n + i]));
    }
    double end = NowMs() + 60000;
    while (cb.Ready() < 2 * n && NowMs() < end) {
        c0.Progress();
        c2.Progress();
        cb.Progress();
    }
    ASSERT_EQ(2 * n, cb.Ready());
    size_t next[2] = { 0, n };
    for (size_t i = 0; i < 2 * n; i++) {
        auto m = cb.Pop();
        size_t seq = std::stoul(m->inner);
        int from = m->route.src_rank == 0 ? 0 : 1;
        EXPECT_EQ(next[from], seq) << "order from rank " << m->route.src_rank;
        next[from] = seq + 1;
        EXPECT_TRUE(m->data == payloads[seq]) << seq;
    }
    EXPECT_TRUE(c0.WaitSends());
    EXPECT_TRUE(c2.WaitSends());
    EXPECT_LE(ra.Stats().peak_buffered, bound);
}

// The router cannot refuse a rendezvous announcement and holds a UCX
// descriptor for each until it pulls; the sender's window bounds how many.
TEST_F(RouterTest, RendezvousWindowBoundsUnpulledPayloads)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const size_t bound = 1u << 20, n = 40, len = 256u << 10;
    const int window = 3;
    RouterThread ra(rf.get(), "a0", bound, 2), rb(rf.get(), "b0", bound, 2);
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client ca(rf.get(), 0, 0, "", 5000, window), cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    // Both routers fill to their bound, and router a leaves announced
    // payloads unpulled.
    std::vector<std::vector<uint8_t>> payloads;
    SendWhileReceiverWaits(ca, n, len, 1500, &payloads);
    icbc_router_stats_t st = ra.Stats();
    EXPECT_GE(st.peak_descs_held, 1u);
    EXPECT_LE(st.peak_descs_held, (uint64_t) window);
    ExpectAllInOrder(ca, cb, payloads, 30000);
    ASSERT_TRUE(ca.WaitSends());
    EXPECT_LE(ra.Stats().peak_descs_held, (uint64_t) window);
}

// ---- a process that dies with sends its router has not pulled yet ----------
//
// The dying process is this test program run again with
// ICBC_ROUTER_TEST_DYING="ROUTERFILE N LEN": before main, it registers as
// rank 7 of cluster a, sends N rendezvous messages of LEN bytes to rank 1 of
// cluster b, keeps them moving for a while, reports on stdout and kills
// itself, so that its router meets a dead endpoint with pulls still waiting
// for memory.

constexpr uint32_t kDyingRank = 7;

struct DyingProcess {
    DyingProcess()
    {
        const char *spec = getenv("ICBC_ROUTER_TEST_DYING");
        char rf_path[512];
        size_t n = 0, len = 0;
        if (spec == nullptr || sscanf(spec, "%511s %zu %zu", rf_path, &n, &len) != 3)
            return;
        setenv("UCX_TLS", "tcp", 1);
        icbc_log_set_level(ICBC_LOG_ERROR);
        icbc_routerfile_t *rf = nullptr;
        char err[ICBC_RF_ERR_LEN];
        if (icbc_routerfile_load(rf_path, &rf, err, sizeof(err)) != ICBC_OK)
            _exit(3);
        auto *c = new Client(rf, 0, kDyingRank);
        if (c->status() != ICBC_OK)
            _exit(4);
        std::vector<std::vector<uint8_t>> payloads;
        for (size_t i = 0; i < n; i++)
            payloads.push_back(MakePayload(i, len));
        for (size_t i = 0; i < n; i++)
            if (c->Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), payloads[i]) != ICBC_OK)
                _exit(5);
        double end = NowMs() + 1500;
        while (NowMs() < end)
            c->Progress();
        if (write(1, "sent\n", 5) != 5)
            _exit(6);
        kill(getpid(), SIGKILL);
        _exit(7);
    }
} dying_process;

} // namespace

TEST_F(RouterTest, SenderDeathWithPullsWaitingForMemory)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const size_t bound = 1u << 20, n = 96, len = 256u << 10;
    RouterThread ra(rf.get(), "a0", bound, 2), rb(rf.get(), "b0", bound, 2);
    ASSERT_TRUE(WaitTrunks(ra, rb));
    // The destination registers but takes nothing yet: both routers fill up
    // to their bound, and router a leaves the rest of the sends unpulled.
    Client cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();

    int out[2];
    ASSERT_EQ(0, pipe(out));
    std::string spec = su.rf_path + " " + std::to_string(n) + " " + std::to_string(len);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        setenv("ICBC_ROUTER_TEST_DYING", spec.c_str(), 1);
        execl("/proc/self/exe", "icbc_router_tests", "--gtest_filter=-*", (char *) NULL);
        _exit(127);
    }
    ASSERT_GT(pid, 0);
    close(out[1]);
    char line[16] = "";
    ssize_t got = read(out[0], line, sizeof(line) - 1);
    close(out[0]);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_EQ(5, got) << "the dying process did not report its sends";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    EXPECT_GT(ra.Stats().peak_buffered, 0u);
    EXPECT_LE(ra.Stats().peak_buffered, bound);

    // What router a had pulled before the death arrives whole; the rest is
    // dropped. Either way the routers keep running.
    double end = NowMs() + 5000;
    while (NowMs() < end)
        cb.Progress();
    size_t whole = 0;
    while (cb.Ready() > 0) {
        auto m = cb.Pop();
        ASSERT_EQ(kDyingRank, m->route.src_rank);
        size_t seq = std::stoul(m->inner);
        ASSERT_LT(seq, n);
        EXPECT_TRUE(m->data == MakePayload(seq, len)) << "message " << seq << " corrupted";
        whole++;
    }
    EXPECT_LT(whole, n) << "every send was pulled before the death: nothing waited for memory";
    ASSERT_TRUE(ra.ok() && rb.ok());

    // A process registering afterwards is served as usual.
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    CheckFlow(ca, cb, 1, 1, 1000);
    // Everything charged, also for the dead sender, is given back (the last
    // completions are published a loop turn later).
    end = NowMs() + 3000;
    while ((ra.Stats().buffered != 0 || rb.Stats().buffered != 0) && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(0u, ra.Stats().buffered);
    EXPECT_EQ(0u, rb.Stats().buffered);
}

// ---- the icbc-router program ------------------------------------------------

namespace
{

// Runs icbc-router with ARGS; stderr goes to LOG. Returns the child's pid.
pid_t Spawn(const std::vector<std::string> &args, const std::string &log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        std::vector<char *> argv;
        argv.push_back((char *) ICBC_ROUTER_BIN);
        for (auto &a : args)
            argv.push_back((char *) a.c_str());
        argv.push_back(nullptr);
        execv(ICBC_ROUTER_BIN, argv.data());
        _exit(127);
    }
    return pid;
}

int WaitExit(pid_t pid, double timeout_ms = 10000)
{
    double end = NowMs() + timeout_ms;
    int status = 0;
    while (NowMs() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

std::string Slurp(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool WaitForText(const std::string &path, const std::string &text, double timeout_ms = 10000)
{
    double end = NowMs() + timeout_ms;
    while (NowMs() < end) {
        if (Slurp(path).find(text) != std::string::npos)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

} // namespace

TEST_F(RouterTest, ProgramOptions)
{
    TwoClusters su;
    std::string log = su.dir + "/out.log";
    EXPECT_EQ(0, WaitExit(Spawn({ "--help" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("--max-memory"));
    EXPECT_EQ(2, WaitExit(Spawn({ "--routerfile", su.rf_path, "--streams", "0" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("bad --streams '0'")) << Slurp(log);
    EXPECT_EQ(2, WaitExit(Spawn({ "--routerfile", su.rf_path, "--pacing", "fast" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("bad --pacing")) << Slurp(log);
    EXPECT_EQ(2, WaitExit(Spawn({ "--routerfile", su.rf_path, "--max-memory", "12parsecs" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("bad --max-memory")) << Slurp(log);
    EXPECT_EQ(1, WaitExit(Spawn({ "--routerfile", su.rf_path, "--host", "nosuch" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("no 'router nosuch' entry")) << Slurp(log);
    EXPECT_EQ(1, WaitExit(Spawn({ "--routerfile", su.dir + "/missing.conf" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("missing.conf")) << Slurp(log);
    unsetenv("ICBC_ROUTERFILE");
    EXPECT_EQ(2, WaitExit(Spawn({ "--host", "a0" }, log)));
    EXPECT_NE(std::string::npos, Slurp(log).find("no router file")) << Slurp(log);
}

TEST_F(RouterTest, ProgramForwardsAndStopsCleanly)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    std::string loga = su.dir + "/a.log", logb = su.dir + "/b.log";
    pid_t a = Spawn({ "--routerfile", su.rf_path, "--host", "a0", "--stats-interval", "0.2",
                      "--streams", "2", "--pacing", "1gbit", "--max-memory", "8Mi" },
                    loga);
    pid_t b = Spawn({ "--routerfile", su.rf_path, "--host", "b0", "--streams", "2" }, logb);
    ASSERT_TRUE(WaitForText(loga, "up, 2 streams")) << Slurp(loga);
    ASSERT_TRUE(WaitForText(logb, "up, 2 streams")) << Slurp(logb);
    {
        Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 1);
        ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
        ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
        CheckFlow(ca, cb, 1, 1, 0);
        CheckFlow(cb, ca, 0, 0, 50);
    }
    ASSERT_TRUE(WaitForText(loga, "stats: out 10 msgs")) << Slurp(loga);
    kill(a, SIGTERM);
    kill(b, SIGINT);
    EXPECT_EQ(0, WaitExit(a));
    EXPECT_EQ(0, WaitExit(b));
    std::string la = Slurp(loga), lb = Slurp(logb);
    size_t last = lb.rfind("stats:");
    ASSERT_NE(std::string::npos, last) << lb;
    EXPECT_NE(std::string::npos, lb.find("in 10 msgs", last)) << lb;
    EXPECT_NE(std::string::npos, lb.find("peak RSS", last)) << lb;
}

TEST_F(RouterTest, ProgramDaemonAndPidfile)
{
    TwoClusters su;
    std::string log = su.dir + "/d.log", pidfile = su.dir + "/router.pid";
    pid_t parent = Spawn({ "--routerfile", su.rf_path, "--host", "a0", "--daemon", "--pidfile",
                           pidfile, "--logfile", log },
                         su.dir + "/parent.log");
    ASSERT_EQ(0, WaitExit(parent)) << Slurp(su.dir + "/parent.log");
    std::string text = Slurp(pidfile);
    ASSERT_FALSE(text.empty());
    pid_t pid = (pid_t) std::stol(text);
    ASSERT_GT(pid, 1);
    EXPECT_EQ(0, kill(pid, SIGTERM));
    double end = NowMs() + 10000;
    while (kill(pid, 0) == 0 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_NE(0, kill(pid, 0)) << "daemon still running";
    EXPECT_NE(std::string::npos, Slurp(log).find("stats:")) << Slurp(log);
    EXPECT_NE(0, access(pidfile.c_str(), F_OK)) << "pidfile left behind";
    // A daemon that cannot start says so through the parent's exit status.
    pid_t bad = Spawn({ "--routerfile", su.rf_path, "--host", "b1", "--daemon", "--logfile", log },
                      su.dir + "/parent.log");
    EXPECT_EQ(1, WaitExit(bad));
}

// A raw fabric endpoint to a router's fabric address: what a stranger can do.
class RawPeer
{
  public:
    explicit RawPeer(const icbc_rf_router_t &rt)
    {
        f_ = TestFabric();
        // The router's CHALLENGE arrives here.
        mx_fabric_set_am_handler(
            f_, MX_AM_ROUTE, [](mx_fabric_t *, const mx_fabric_am_t *, void *) { return 0; },
            nullptr);
        EXPECT_EQ(ICBC_OK, mx_fabric_connect(f_, (const struct sockaddr *) &rt.fabric.sa,
                                             rt.fabric.salen, &failed_, &ep_));
        if (ep_)
            mx_fabric_ep_set_failed_cb(ep_, [](mx_fabric_ep_t *, icbc_status_t, const char *,
                                               void *arg) { *(bool *) arg = true; });
    }
    ~RawPeer()
    {
        if (ep_)
            mx_fabric_ep_close(ep_, 0);
        mx_fabric_destroy(f_);
    }
    void Send(const std::string &hdr)
    {
        bool done = false;
        if (mx_fabric_am_send(
                ep_, MX_AM_ROUTE, hdr.data(), hdr.size(), NULL, 0, MX_FABRIC_SEND_EAGER,
                [](void *arg, icbc_status_t) { *(bool *) arg = true; }, &done) != ICBC_OK)
            return;
        double end = NowMs() + 5000;
        while (!done && NowMs() < end)
            mx_fabric_progress(f_);
    }
    // Progresses until the router closed the endpoint or TIMEOUT_MS passed.
    bool WaitClosed(double timeout_ms)
    {
        double end = NowMs() + timeout_ms;
        while (!failed_ && NowMs() < end)
            mx_fabric_progress(f_);
        return failed_;
    }

  private:
    mx_fabric_t *f_ = nullptr;
    mx_fabric_ep_t *ep_ = nullptr;
    bool failed_ = false;
};

TEST_F(RouterTest, StrangersAreRefused)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0"); // REGISTER deadline 2 s
    const icbc_rf_router_t &rt = icbc_routerfile_cluster(rf.get(), 0)->routers[0];
    // A TCP connection to the fabric's port that never speaks its protocol:
    // nothing but the guard ends it.
    int mute = socket(rt.fabric.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(mute, 0);
    ASSERT_EQ(0, connect(mute, (const struct sockaddr *) &rt.fabric.sa, rt.fabric.salen))
        << strerror(errno);
    {
        RawPeer garbage(rt), wrong_type(rt), silent(rt);
        garbage.Send(std::string(17, 'x'));
        icbc_route_hdr_t h = {};
        h.type = ICBC_ROUTE_MSG;
        h.dst_cluster = 1;
        uint8_t buf[ICBC_ROUTE_HDR_SIZE];
        icbc_route_hdr_pack(&h, buf);
        wrong_type.Send(std::string((const char *) buf, sizeof(buf)));
        EXPECT_TRUE(garbage.WaitClosed(3000));
        EXPECT_TRUE(wrong_type.WaitClosed(3000));
        // Refused at the deadline. On libfabric the peer hears of it from
        // the router's BYE only if the guard has not shut the socket first:
        // the guard ages sockets from their accept, the deadline runs from
        // the endpoint's HELLO, which this peer sends late (it progresses
        // only here), and rxm tells a peer nothing of a socket shut down.
        // The router's side of it is checked below on both APIs.
        bool told = silent.WaitClosed(5000);
        if (TestApi() == MX_FABRIC_UCX) {
            EXPECT_TRUE(told);
        }
    }
    double end = NowMs() + 3000;
    while (ra.Stats().refused_fabric < 3 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(3u, ra.Stats().refused_fabric);
    EXPECT_EQ(0u, ra.Stats().registered);
    // The guard shut the mute connection once it was as old as the REGISTER
    // deadline (the strangers' sockets may have been closed by their
    // refusal before the guard came to them).
    end = NowMs() + 5000;
    while (ra.Stats().fabric_conns_closed < 1 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(ra.Stats().fabric_conns_closed, 1u);
    struct pollfd pfd = { mute, POLLIN, 0 };
    char byte;
    ASSERT_EQ(1, poll(&pfd, 1, 3000));
    EXPECT_GE(0, recv(mute, &byte, 1, MSG_DONTWAIT)); // its end, not data
    close(mute);
    // The router still serves honest processes.
    Client c0(rf.get(), 0, 0), c1(rf.get(), 0, 1);
    ASSERT_EQ(ICBC_OK, c0.status()) << c0.error();
    ASSERT_EQ(ICBC_OK, c1.status()) << c1.error();
    CheckFlow(c0, c1, 0, 1, 0);
}

TEST_F(RouterTest, TrunkComesBackAfterPeerRestart)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0");
    auto rb = std::make_unique<RouterThread>(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, *rb));
    rb->Stop();
    rb = std::make_unique<RouterThread>(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, *rb, 15000)); // backoff is at most 5 s
    Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    CheckFlow(ca, cb, 1, 1, 0);
}

// Not a benchmark (loopback, shared cores), a sanity figure: prints the
// rate of 4 MiB messages through two routers.
TEST_F(RouterTest, ThroughputFigure)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0"), rb(rf.get(), "b0");
    ASSERT_TRUE(WaitTrunks(ra, rb));
    Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    const size_t n = 64, len = 4u << 20, window = 8;
    std::vector<uint8_t> payload = MakePayload(0, len);
    size_t sent = 0, got = 0;
    double t0 = NowMs();
    while (got < n && NowMs() - t0 < 60000) {
        while (sent < n && sent - got < window) {
            ASSERT_EQ(ICBC_OK, ca.Send(1, 1, 0, "t", payload));
            sent++;
        }
        ca.Progress();
        cb.Progress();
        while (cb.Ready() > 0) {
            auto m = cb.Pop();
            EXPECT_EQ(len, m->data.size());
            got++;
        }
    }
    double ms = NowMs() - t0;
    ASSERT_EQ(n, got);
    printf("[ figure   ] %zu x %zu B through two routers: %.1f ms, %.0f MB/s\n", n, len, ms,
           n * len / ms / 1e3);
}

TEST_F(RouterTest, MessagesWaitForTheTrunkToComeUp)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0", 0, 0, 10000);
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    // Router a retries at 0, 0.1, 0.3, 0.7, 1.5, 3.1 s: after 1.6 s there is
    // time to start router b and register the receiver before the trunk is up.
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < 6; i++)
        payloads.push_back(MakePayload(i, i * 50000));
    for (size_t i = 0; i < 6; i++)
        ASSERT_EQ(ICBC_OK, ca.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), payloads[i]));
    RouterThread rb(rf.get(), "b0");
    Client cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    double end = NowMs() + 15000;
    while (cb.Ready() < 6 && NowMs() < end) {
        ca.Progress();
        cb.Progress();
    }
    ASSERT_EQ(6u, cb.Ready());
    for (size_t i = 0; i < 6; i++) {
        auto m = cb.Pop();
        EXPECT_EQ(std::to_string(i), m->inner);
        EXPECT_TRUE(m->data == payloads[i]) << i;
    }
    EXPECT_EQ(0u, ra.Stats().unreachable);
}

// UCX hands eager data to the router whether or not it has room: the eager
// window a process gets at registration bounds what it makes the router hold
// while the trunk is not up yet, and the rest waits in the process, in order.
TEST_F(RouterTest, EagerWindowBoundsWhatARouterHolds)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    const size_t window = 64u << 10, n = 300, len = 2000;
    RouterThread ra(rf.get(), "a0", 0, 0, 10000, 0, window);
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(1600)); /* as above */
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < n; i++)
        payloads.push_back(MakePayload(i, len));
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(ICBC_OK, ca.Send(1, 1, ICBC_ROUTE_F_ORDERED, std::to_string(i), payloads[i]));
    double end = NowMs() + 500;
    while (NowMs() < end)
        ca.Progress();
    // 600 KB were sent; the router holds one window's worth, plus at most
    // one message, and the rest has not left the process.
    icbc_router_stats_t st = ra.Stats();
    EXPECT_GT(st.buffered, window / 2);
    EXPECT_LE(st.buffered, window + len);
    EXPECT_GE(ca.Unsent(), n - window / len - 1);
    RouterThread rb(rf.get(), "b0");
    Client cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    ExpectAllInOrder(ca, cb, payloads, 15000);
    ASSERT_TRUE(ca.WaitSends());
    EXPECT_LE(ra.Stats().peak_buffered, window + len);
    EXPECT_EQ(0u, ra.Stats().unreachable);
}

namespace
{

// ICBC_ROUTER_TEST_ROUTER="ROUTERFILE HOST": before main, runs the router of
// HOST until killed, reporting "up" on stdout, so that a test can make a
// router die without closing its trunks.
struct RouterProcess {
    RouterProcess()
    {
        const char *spec = getenv("ICBC_ROUTER_TEST_ROUTER");
        char rf_path[512], host[64];
        size_t headroom = 0;
        if (spec == nullptr || sscanf(spec, "%511s %63s %zu", rf_path, host, &headroom) < 2)
            return;
        setenv("UCX_TLS", "tcp", 1);
        icbc_log_set_level(ICBC_LOG_ERROR);
        icbc_routerfile_t *rf = nullptr;
        icbc_router_t *r = nullptr;
        char err[ICBC_RF_ERR_LEN];
        if (icbc_routerfile_load(rf_path, &rf, err, sizeof(err)) != ICBC_OK)
            _exit(3);
        icbc_router_config_t cfg = {};
        cfg.rf = rf;
        cfg.host = host;
        cfg.register_ms = 2000;
        cfg.trunk_wait_ms = 300;
        if (headroom) {
            // Bounded by its resident size alone: long stream queues and the
            // default payload bound would let it take in the whole flood.
            cfg.max_rss = ResidentBytes() + headroom;
            cfg.stream_queue = 64u << 20;
        }
        if (icbc_router_create(&cfg, &r, err, sizeof(err)) != ICBC_OK) {
            fprintf(stderr, "router %s: %s\n", host, err);
            _exit(4);
        }
        char up[64];
        int n = headroom ? snprintf(up, sizeof(up), "up %zu\n", cfg.max_rss)
                         : snprintf(up, sizeof(up), "up\n");
        if (write(1, up, (size_t) n) != n)
            _exit(5);
        icbc_router_run(r);
        _exit(6);
    }
} router_process;

// SpawnRouter with HEADROOM: the router's --max-rss is its resident size
// before it was created plus HEADROOM; *BOUND tells it.
pid_t SpawnRouter(const std::string &rf_path, const char *host, size_t headroom = 0,
                  size_t *bound = nullptr)
{
    int out[2];
    if (pipe(out) != 0)
        return -1;
    std::string spec = rf_path + " " + host;
    if (headroom)
        spec += " " + std::to_string(headroom);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        setenv("ICBC_ROUTER_TEST_ROUTER", spec.c_str(), 1);
        execl("/proc/self/exe", "icbc_router_tests", "--gtest_filter=-*", (char *) NULL);
        _exit(127);
    }
    close(out[1]);
    char line[64] = "";
    ssize_t got = pid > 0 ? read(out[0], line, sizeof(line) - 1) : -1;
    close(out[0]);
    if (bound && got > 3)
        *bound = strtoull(line + 3, nullptr, 10);
    if (pid > 0 && (got < 3 || strncmp(line, "up", 2) != 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return -1;
    }
    return pid;
}

} // namespace

// A process whose router died registers again with the daemon restarted at
// the same router file entry (mx_client's reconnect_ms), and sends through
// it again; without reconnect_ms it does not try.
TEST_F(RouterTest, ClientRegistersAgainWithARestartedRouter)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    auto ra = std::make_unique<RouterThread>(rf.get(), "a0");
    Client ca(rf.get(), 0, 0, "", 5000, 0, kJob, 200);
    Client still(rf.get(), 0, 1);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    ASSERT_EQ(ICBC_OK, still.status()) << still.error();
    ra.reset(); // the router goes away
    double end = NowMs() + 5000;
    while ((ca.lost() != 0 || still.lost() != 0) && NowMs() < end) {
        ca.Progress();
        still.Progress();
        mx_client_watch(ca.client());
        mx_client_watch(still.client());
    }
    ASSERT_EQ(0, ca.lost()) << "the client did not see its router go";
    ASSERT_EQ(0, still.lost());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED,
              mx_client_send(ca.client(), 0, 1, 1, 0, "x", 1, nullptr, 0, nullptr, nullptr));
    ra = std::make_unique<RouterThread>(rf.get(), "a0");
    end = NowMs() + 5000;
    while (ca.backs() == 0 && NowMs() < end) {
        ca.Progress();
        still.Progress();
        mx_client_watch(ca.client());
        mx_client_watch(still.client());
    }
    ASSERT_EQ(1, ca.backs()) << "not registered again within 5 s";
    EXPECT_TRUE(mx_client_router_alive(ca.client(), 0));
    EXPECT_EQ(ICBC_OK,
              mx_client_send(ca.client(), 0, 1, 1, 0, "x", 1, nullptr, 0, nullptr, nullptr));
    EXPECT_EQ(0, still.backs());
    EXPECT_FALSE(mx_client_router_alive(still.client(), 0)) << "reconnected without reconnect_ms";
}

// A router that is down when a process starts: with reconnect_ms the
// process starts on the other router of its cluster and registers with it
// once it runs; without, the start fails naming it.
TEST_F(RouterTest, ARouterDownAtStartIsTakenWhenItComes)
{
    TwoClusters su;
    std::string text = su.Text("routers.key");
    char line[160];
    snprintf(line, sizeof(line), "    router a1 fabric=127.0.0.1:%d wan=127.0.0.1:%d\n", FreePort(),
             FreePort());
    text.insert(text.find("cluster b"), line);
    std::string path = su.dir + "/two-routers.conf";
    WriteFile(path, text);
    RfPtr rf = LoadRf(path);
    RouterThread ra(rf.get(), "a0");

    // UCX refuses the connection at once; libfabric's rxm says nothing
    // until the start's time limit
    Client strict(rf.get(), 0, 1, "", 2000);
    EXPECT_TRUE(strict.status() == ICBC_ERR_UNREACHABLE || strict.status() == ICBC_ERR_TIMEOUT)
        << icbc_status_str(strict.status());
    EXPECT_NE(std::string::npos, strict.error().find("router a1")) << strict.error();

    Client ca(rf.get(), 0, 0, "", 2000, 0, kJob, 200);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    EXPECT_TRUE(mx_client_router_alive(ca.client(), 0));
    EXPECT_FALSE(mx_client_router_alive(ca.client(), 1));
    EXPECT_EQ(ICBC_ERR_PEER_FAILED,
              mx_client_send(ca.client(), 1, 1, 1, 0, "x", 1, nullptr, 0, nullptr, nullptr));
    auto ra1 = std::make_unique<RouterThread>(rf.get(), "a1");
    double end = NowMs() + 5000;
    while (ca.backs() == 0 && NowMs() < end) {
        ca.Progress();
        mx_client_watch(ca.client());
    }
    ASSERT_EQ(1, ca.backs()) << "router a1 not registered with within 5 s of its start";
    EXPECT_TRUE(mx_client_router_alive(ca.client(), 1));
    EXPECT_EQ(ICBC_OK,
              mx_client_send(ca.client(), 1, 1, 1, 0, "x", 1, nullptr, 0, nullptr, nullptr));
}

TEST_F(RouterTest, LostClusterIsAnnouncedAndSoIsItsReturn)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    RouterThread ra(rf.get(), "a0"); // --trunk-wait 300 ms
    Client ca(rf.get(), 0, 0);
    ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
    pid_t pid = SpawnRouter(su.rf_path, "b0");
    ASSERT_GT(pid, 0) << "router b0 did not start";
    double end = NowMs() + 10000;
    while (ra.Stats().trunks_up != 1 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(1u, ra.Stats().trunks_up);

    // Router b0 dies without closing its trunk: the processes of cluster a
    // learn at once that cluster b is unreachable (they move their traffic
    // to other routers; messages already queued wait for the trunk wait).
    double t0 = NowMs();
    ASSERT_EQ(0, kill(pid, SIGKILL));
    ASSERT_EQ(pid, waitpid(pid, nullptr, 0));
    ASSERT_TRUE(ca.WaitClusterState(1, false, 5000));
    EXPECT_LT(NowMs() - t0, 250) << "announced only after the trunk wait";
    end = NowMs() + 3000;
    while (ra.Stats().clusters_unreachable != 1 && NowMs() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(1u, ra.Stats().clusters_unreachable);

    // A process registering now is told at once.
    Client ca2(rf.get(), 0, 2);
    ASSERT_EQ(ICBC_OK, ca2.status()) << ca2.error();
    EXPECT_TRUE(ca2.WaitClusterState(1, false, 2000));

    // Router b comes back: both hear that cluster b is reachable again, and
    // messages flow.
    RouterThread rb(rf.get(), "b0");
    ASSERT_TRUE(ca.WaitClusterState(1, true, 15000)); // backoff is at most 5 s
    EXPECT_TRUE(ca2.WaitClusterState(1, true, 2000));
    EXPECT_EQ(2u, ca.ClusterStates());
    Client cb(rf.get(), 1, 1);
    ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
    CheckFlow(ca, cb, 1, 1, 0);
    EXPECT_EQ(0u, cb.ClusterStates());
}

// A router daemon's --max-rss bounds its whole resident size: with stream
// queues and a payload bound that would let it take in a 24 MiB flood while
// the receiver waits, it pulls only what fits under the bound, and
// everything still arrives, whole and in order.
TEST_F(RouterTest, ResidentSizeBoundUnderFlood)
{
    TwoClusters su;
    RfPtr rf = LoadRf(su.rf_path);
    size_t bound = 0;
    pid_t pid = SpawnRouter(su.rf_path, "a0", 12u << 20, &bound);
    ASSERT_GT(pid, 0);
    ASSERT_GT(bound, 12u << 20);
    {
        RouterThread rb(rf.get(), "b0", 1u << 20, 2);
        double end = NowMs() + 10000;
        while (rb.Stats().trunks_up < 1 && NowMs() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ASSERT_EQ(1u, rb.Stats().trunks_up);
        Client ca(rf.get(), 0, 0), cb(rf.get(), 1, 1);
        ASSERT_EQ(ICBC_OK, ca.status()) << ca.error();
        ASSERT_EQ(ICBC_OK, cb.status()) << cb.error();
        const size_t n = 96, len = 256u << 10;
        std::vector<std::vector<uint8_t>> payloads;
        SendWhileReceiverWaits(ca, n, len, 1500, &payloads);
        ExpectAllInOrder(ca, cb, payloads, 60000);
        ASSERT_TRUE(ca.WaitSends());
    }
    size_t hwm = PeakResidentBytes(pid);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    printf("router a0: --max-rss %zu B, peak resident %zu B\n", bound, hwm);
    EXPECT_GT(hwm, 0u);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer keeps freed memory in quarantine and adds shadow
     * memory, so the resident size does not follow what the router holds:
     * under it the flood must still arrive whole and in order; the normal
     * build checks the bound. */
    printf("router a0: resident bound not checked under AddressSanitizer\n");
#else
    EXPECT_LE(hwm, bound) << "peak resident " << hwm << " B over the bound " << bound << " B";
#endif
}

/* The JSON form of the stats names every counter with its value, so that
 * tools read numbers instead of scraping the human line. */
TEST(RouterStats, JsonNamesEveryCounter)
{
    icbc_router_stats_t st = {};
    uint64_t *words = reinterpret_cast<uint64_t *>(&st);
    size_t nwords = offsetof(icbc_router_stats_t, peak_rss_kb) / sizeof(uint64_t);
    for (size_t i = 0; i < nwords; i++)
        words[i] = 1000 + i;
    st.peak_rss_kb = 4242;
    char buf[2048];
    icbc_router_format_stats_json(&st, buf, sizeof(buf));
    std::string j(buf);
    EXPECT_EQ('{', j.front());
    EXPECT_EQ('}', j.back());
    for (size_t i = 0; i < nwords; i++)
        EXPECT_NE(std::string::npos, j.find(": " + std::to_string(1000 + i))) << j;
    EXPECT_NE(std::string::npos, j.find("\"peak_buffered\": " + std::to_string(st.peak_buffered)))
        << j;
    EXPECT_NE(std::string::npos, j.find("\"peak_rss_kb\": 4242")) << j;
}
