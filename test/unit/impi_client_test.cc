/*
 * IMPI start-up, client side: the job's layout built from COLL answers
 * (impi_layout_*), good and hostile, and whole start-ups of several clients
 * through the impi-server command.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "icbc_bytes.h"
#include "impi_client.h"
#include "impi_daemon.h"
#include "impi_hostconn.h"
#include "impi_rx.h"
#include "impi_test_layout.h"

namespace
{

struct Layout : ::testing::Test {
    impi_layout_t l{};
    char err[256] = "";
    std::vector<Client> cl;

    void TearDown() override
    {
        impi_layout_free(&l);
    }
    icbc_status_t add(uint32_t label, uint32_t mask, const Bytes &b)
    {
        err[0] = '\0';
        return impi_layout_add(&l, label, mask, b.data(), b.size(), err, sizeof(err));
    }
    /* Every label answered by every client, up to (not including) STOP. */
    void add_all(uint32_t stop = 0)
    {
        int n;
        const uint32_t *labels = impi_layout_labels(&n);
        uint32_t all = (1u << cl.size()) - 1;
        ASSERT_EQ(ICBC_OK, impi_layout_init(&l, (int) cl.size()));
        for (int i = 0; i < n && labels[i] != stop; i++)
            ASSERT_EQ(ICBC_OK, add(labels[i], all, answer(cl, labels[i], all)))
                << "label 0x" << std::hex << labels[i] << ": " << err;
    }
};

TEST_F(Layout, TwoClientsLayOutTheWorldInImpiOrder)
{
    cl = { Client(0, { 2, 1 }, 0, 12), Client(1, { 3 }, 32768, 0) };
    add_all();
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    EXPECT_EQ(2, l.nclients);
    EXPECT_EQ(3, l.nhosts_total);
    EXPECT_EQ(6, l.nprocs_total);
    EXPECT_EQ(0, l.first_rank[0]);
    EXPECT_EQ(3, l.first_rank[1]);
    EXPECT_EQ(6, l.first_rank[2]);
    EXPECT_EQ(2, l.first_host[1]);
    /* hosts in client order, each with its first world rank */
    EXPECT_EQ(0, l.hosts[0].first_rank);
    EXPECT_EQ(2, l.hosts[1].first_rank);
    EXPECT_EQ(3, l.hosts[2].first_rank);
    EXPECT_EQ(1, l.hosts[2].client);
    EXPECT_EQ(5010u, l.hosts[2].port);
    EXPECT_EQ(3u, l.hosts[2].nprocs);
    EXPECT_EQ(0, memcmp(cl[1].hosts[0].addr, l.hosts[2].addr, 16));
    /* processes in world-rank order */
    EXPECT_EQ(1000, l.procs[3].pid);
    EXPECT_EQ(2, l.procs[2].pid);
    EXPECT_EQ(1, l.procs[2].host[15]);
    /* negotiated: the smallest datalen, tag bound and marks; defaults agreed */
    EXPECT_EQ(32768u, l.datalen);
    EXPECT_EQ(0x7fffffff, l.tagub);
    EXPECT_EQ(IMPI_DEFAULT_COLL_XSIZE, l.coll_xsize);
    EXPECT_EQ(IMPI_DEFAULT_COLL_MAXLINEAR, l.coll_maxlinear);
    EXPECT_EQ(IMPI_DEFAULT_ACKMARK, l.ackmark);
    EXPECT_EQ(IMPI_DEFAULT_HIWATER, l.hiwater);
    EXPECT_EQ(0u, l.version_major);
    EXPECT_EQ(0u, l.version_minor);
}

TEST_F(Layout, PackedLayoutUnpacksToTheSameJob)
{
    cl = { Client(0, { 2, 1 }, 0, 12), Client(1, { 3 }, 32768, 0) };
    add_all();
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    uint8_t *buf = nullptr;
    size_t len = 0;
    ASSERT_EQ(ICBC_OK, impi_layout_pack(&l, &buf, &len));

    impi_layout_t u{};
    ASSERT_EQ(ICBC_OK, impi_layout_unpack(buf, len, &u, err, sizeof(err))) << err;
    EXPECT_EQ(l.nclients, u.nclients);
    EXPECT_EQ(l.nhosts_total, u.nhosts_total);
    EXPECT_EQ(l.nprocs_total, u.nprocs_total);
    for (int c = 0; c <= l.nclients; c++) {
        EXPECT_EQ(l.first_rank[c], u.first_rank[c]);
        EXPECT_EQ(l.first_host[c], u.first_host[c]);
    }
    for (int h = 0; h < l.nhosts_total; h++) {
        EXPECT_EQ(0, memcmp(l.hosts[h].addr, u.hosts[h].addr, 16));
        EXPECT_EQ(l.hosts[h].port, u.hosts[h].port);
        EXPECT_EQ(l.hosts[h].first_rank, u.hosts[h].first_rank);
        EXPECT_EQ(l.hosts[h].client, u.hosts[h].client);
    }
    for (int r = 0; r < l.nprocs_total; r++)
        EXPECT_EQ(l.procs[r].pid, u.procs[r].pid);
    EXPECT_EQ(32768u, u.datalen);
    EXPECT_EQ(l.ackmark, u.ackmark);
    EXPECT_EQ(l.coll_maxlinear, u.coll_maxlinear);
    EXPECT_EQ(3u, u.datarep_mask);
    EXPECT_EQ(0, memcmp(l.datarep, u.datarep, sizeof(l.datarep)));
    impi_layout_free(&u);

    /* a byte short, a byte long, and a header alone are refused with the reason */
    for (size_t bad : { len - 1, len + 1, (size_t) 8 }) {
        std::vector<uint8_t> b(buf, buf + std::min(bad, len));
        b.resize(bad, 0);
        err[0] = '\0';
        EXPECT_EQ(ICBC_ERR_INVALID, impi_layout_unpack(b.data(), b.size(), &u, err, sizeof(err)));
        EXPECT_NE(nullptr, strstr(err, "packed layout")) << err;
        impi_layout_free(&u);
    }
    free(buf);
}

TEST_F(Layout, OptionalLabelsAClientSkipsTakeItsDefaults)
{
    cl = { Client(0, { 1 }, 4096), Client(1, { 1 }, 2048) };
    ASSERT_EQ(ICBC_OK, impi_layout_init(&l, 2));
    ASSERT_EQ(ICBC_OK, add(IMPI_C_NHOSTS, 3, answer(cl, IMPI_C_NHOSTS, 3)));
    ASSERT_EQ(ICBC_OK, add(IMPI_C_NPROCS, 3, answer(cl, IMPI_C_NPROCS, 3)));
    /* client 1 does not give DATALEN: only client 0's counts */
    ASSERT_EQ(ICBC_OK, add(IMPI_C_DATALEN, 1, answer(cl, IMPI_C_DATALEN, 1))) << err;
    for (uint32_t label : { IMPI_H_IPV6, IMPI_H_PORT, IMPI_H_NPROCS, IMPI_P_IPV6, IMPI_P_PID })
        ASSERT_EQ(ICBC_OK, add(label, 3, answer(cl, label, 3))) << err;
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    EXPECT_EQ(4096u, l.datalen);
    EXPECT_EQ(IMPI_DEFAULT_ACKMARK, l.ackmark);
}

TEST_F(Layout, VersionsGiveTheHighestCommonOne)
{
    ASSERT_EQ(ICBC_OK, impi_layout_init(&l, 3));
    auto pair = [](uint32_t a, uint32_t b) {
        Bytes v(8);
        icbc_put32(v.data(), a);
        icbc_put32(v.data() + 4, b);
        return v;
    };
    Bytes b;
    for (auto p : { pair(0, 0), pair(1, 0), pair(2, 1), /* client 0 */
                    pair(0, 0), pair(1, 0),             /* client 1 */
                    pair(0, 0), pair(1, 0), pair(2, 1) /* client 2 */ })
        b.insert(b.end(), p.begin(), p.end());
    ASSERT_EQ(ICBC_OK, add(IMPI_C_VERSION, 7, b)) << err;
    EXPECT_EQ(1u, l.version_major);
    EXPECT_EQ(0u, l.version_minor);
}

TEST_F(Layout, HostileAnswersAreRefusedWithTheReason)
{
    cl = { Client(0, { 2, 1 }), Client(1, { 1 }) };
    struct Case {
        const char *name;
        uint32_t stop; /* labels before this one answered well */
        uint32_t label, mask;
        Bytes bytes;
        const char *words;
    };
    Bytes u0(4, 0), big(4);
    icbc_put32(big.data(), IMPI_HOSTS_MAX + 1);
    Bytes nprocs_mismatch;
    for (uint32_t v : { 2u, 2u, 1u }) { /* client 0 said 3 processes: 2 + 2 */
        Bytes x(4);
        icbc_put32(x.data(), v);
        nprocs_mismatch.insert(nprocs_mismatch.end(), x.begin(), x.end());
    }
    Bytes nprocs_huge;
    for (uint32_t v : { 1u, 0x7fffffffu, 1u }) { /* a count near INT_MAX */
        Bytes x(4);
        icbc_put32(x.data(), v);
        nprocs_huge.insert(nprocs_huge.end(), x.begin(), x.end());
    }
    Bytes ports = answer(cl, IMPI_H_PORT, 3);
    icbc_put32(ports.data() + 4, 0);
    Bytes xsize(8);
    icbc_put32(xsize.data(), 1024);
    icbc_put32(xsize.data() + 4, 2048);
    Bytes version_no_zero(8);
    icbc_put32(version_no_zero.data(), 1);
    std::vector<Case> cases = {
        { "unknown label", IMPI_C_VERSION, 0x1234, 3, u0, "not an IMPI label" },
        { "clients beyond the job", IMPI_C_VERSION, IMPI_C_NHOSTS, 7, answer(cl, IMPI_C_NHOSTS, 3),
          "beyond the 2" },
        { "required part missing", IMPI_C_VERSION, IMPI_C_NHOSTS, 1, answer(cl, IMPI_C_NHOSTS, 1),
          "every client must" },
        { "short answer", IMPI_C_VERSION, IMPI_C_NHOSTS, 3, Bytes(7),
          "7 bytes, the parts of clients 0x3 take 8" },
        { "long answer", IMPI_C_VERSION, IMPI_C_NHOSTS, 3, Bytes(9, 1),
          "9 bytes, the parts of clients 0x3 take 8" },
        { "no hosts", IMPI_C_VERSION, IMPI_C_NHOSTS, 3, Bytes(8), "gives 0 hosts" },
        { "too many hosts", IMPI_C_VERSION, IMPI_C_NHOSTS, 3,
          [&] {
              Bytes b = big;
              b.insert(b.end(), big.begin(), big.end());
              return b;
          }(),
          "C_NHOSTS: client 0 gives" },
        { "host labels before the counts", IMPI_C_VERSION, IMPI_H_IPV6, 3,
          answer(cl, IMPI_H_IPV6, 3), "before the host and process counts" },
        { "hosts hold other counts", IMPI_H_NPROCS, IMPI_H_NPROCS, 3, nprocs_mismatch,
          "hold 4 processes, C_NPROCS said 3" },
        { "a host count near INT_MAX", IMPI_H_NPROCS, IMPI_H_NPROCS, 3, nprocs_huge,
          "hold 2147483648 processes, C_NPROCS said 3" },
        { "port 0", IMPI_H_PORT, IMPI_H_PORT, 3, ports, "gives port 0" },
        { "label twice", IMPI_H_PORT, IMPI_C_NHOSTS, 3, answer(cl, IMPI_C_NHOSTS, 3),
          "after a later label, or twice" },
        { "crossovers disagree", IMPI_C_COLL_XSIZE, IMPI_C_COLL_XSIZE, 3, xsize,
          "disagree (1024 and 2048)" },
        { "datalen too small", IMPI_C_DATALEN, IMPI_C_DATALEN, 3, Bytes(8), "at least 1024" },
        { "version list without 0.0", IMPI_C_VERSION, IMPI_C_VERSION, 1, version_no_zero,
          "without version 0.0" },
        { "version list for other clients", IMPI_C_VERSION, IMPI_C_VERSION, 3, Bytes(8),
          "1 parts for 2 clients" },
        { "process ids short", IMPI_P_PID, IMPI_P_PID, 3, Bytes(24), "take 32" },
    };
    for (auto &k : cases) {
        SCOPED_TRACE(k.name);
        impi_layout_free(&l);
        add_all(k.stop);
        EXPECT_EQ(ICBC_ERR_INVALID, add(k.label, k.mask, k.bytes));
        EXPECT_NE(std::string::npos, std::string(err).find(k.words)) << err;
    }
}

TEST_F(Layout, ClientsThatRepresentDataDifferentlyDoNotStart)
{
    cl = { Client(0, { 1 }), Client(1, { 2 }), Client(2, { 1 }) };
    add_all(IMPI_C_ICBC_DATAREP);
    Bytes rep = answer(cl, IMPI_C_ICBC_DATAREP, 7);
    ASSERT_EQ(3u * IMPI_DATAREP_SIZE, rep.size());
    /* client 2 on a big-endian machine with a 4-byte long */
    uint8_t *c2 = rep.data() + 2 * IMPI_DATAREP_SIZE;
    c2[0] = c2[0] == IMPI_DATAREP_LITTLE ? IMPI_DATAREP_BIG : IMPI_DATAREP_LITTLE;
    c2[3] = c2[3] == 4 ? 8 : 4;
    EXPECT_EQ(ICBC_ERR_INVALID, add(IMPI_C_ICBC_DATAREP, 7, rep));
    std::string e(err);
    EXPECT_NE(std::string::npos, e.find("IMPI clients 0 and 2 represent data differently")) << e;
    EXPECT_NE(std::string::npos, e.find("byte order: little-endian and big-endian")) << e;
    EXPECT_NE(std::string::npos, e.find("long: 8 and 4 bytes")) << e;
    EXPECT_EQ(std::string::npos, e.find("long long")) << e;
    EXPECT_NE(std::string::npos, e.find("does not convert")) << e;
}

TEST_F(Layout, ARepresentationIsCheckedAndAClientMaySkipIt)
{
    cl = { Client(0, { 1 }), Client(1, { 1 }) };
    add_all(IMPI_C_ICBC_DATAREP);
    /* client 0 is another implementation (LAM/MPI gives no such label) */
    ASSERT_EQ(ICBC_OK, add(IMPI_C_ICBC_DATAREP, 2, answer(cl, IMPI_C_ICBC_DATAREP, 2))) << err;
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    EXPECT_EQ(2u, l.datarep_mask);
    uint8_t mine[IMPI_DATAREP_SIZE];
    impi_datarep_local(mine);
    EXPECT_EQ(0, memcmp(mine, l.datarep[1], IMPI_DATAREP_SIZE));
    EXPECT_EQ(sizeof(long), mine[3]);
    /* a part that is no representation */
    for (int at : { 0, 1, IMPI_DATAREP_SIZE - 1 }) {
        impi_layout_free(&l);
        add_all(IMPI_C_ICBC_DATAREP);
        Bytes rep = answer(cl, IMPI_C_ICBC_DATAREP, 3);
        rep[IMPI_DATAREP_SIZE + at] = 0x77;
        EXPECT_EQ(ICBC_ERR_INVALID, add(IMPI_C_ICBC_DATAREP, 3, rep));
        EXPECT_STREQ("C_ICBC_DATAREP: client 1 gives no data representation", err);
    }
}

TEST_F(Layout, IcbcHostsSaysWhichClientsAreIcbc)
{
    cl = { Client(0, { 1 }), Client(1, { 2 }) };
    add_all(IMPI_C_ICBC_HOSTS);
    ASSERT_EQ(ICBC_OK, add(IMPI_C_ICBC_HOSTS, 3, answer(cl, IMPI_C_ICBC_HOSTS, 3))) << err;
    EXPECT_EQ(3u, l.icbc_hosts_mask);
    /* client 0 is another implementation, which gives no such label */
    impi_layout_free(&l);
    add_all(IMPI_C_ICBC_HOSTS);
    ASSERT_EQ(ICBC_OK, add(IMPI_C_ICBC_HOSTS, 2, answer(cl, IMPI_C_ICBC_HOSTS, 2))) << err;
    EXPECT_EQ(2u, l.icbc_hosts_mask);
    /* a value other than 1 */
    impi_layout_free(&l);
    add_all(IMPI_C_ICBC_HOSTS);
    Bytes b = answer(cl, IMPI_C_ICBC_HOSTS, 1);
    b[3] = 2;
    EXPECT_EQ(ICBC_ERR_INVALID, add(IMPI_C_ICBC_HOSTS, 1, b));
    EXPECT_STREQ("C_ICBC_HOSTS: client 0 gives 2 (1)", err);
}

TEST_F(Layout, MachinesOfProcessesLandAtTheirWorldRanks)
{
    cl = { Client(0, { 1 }), Client(1, { 2, 1 }), Client(2, { 2 }) };
    const uint64_t m1[] = { 0x1111, 0x2222, 0x1111 };
    const uint64_t m2[] = { 0x3333, 0x1111 };
    cl[1].local.machines = m1;
    cl[2].local.machines = m2;
    add_all(IMPI_P_ICBC_MACHINE);
    /* client 0 is another implementation: it gives no machines */
    ASSERT_EQ(ICBC_OK, add(IMPI_P_ICBC_MACHINE, 6, answer(cl, IMPI_P_ICBC_MACHINE, 6))) << err;
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    const uint64_t want[] = { 0, 0x1111, 0x2222, 0x1111, 0x3333, 0x1111 };
    ASSERT_EQ(6, l.nprocs_total);
    for (int r = 0; r < 6; r++)
        EXPECT_EQ(want[r], l.machines[r]) << "rank " << r;
    /* and through the packed form every process of a client gets */
    uint8_t *buf = nullptr;
    size_t len = 0;
    ASSERT_EQ(ICBC_OK, impi_layout_pack(&l, &buf, &len));
    impi_layout_t u{};
    ASSERT_EQ(ICBC_OK, impi_layout_unpack(buf, len, &u, err, sizeof(err))) << err;
    for (int r = 0; r < 6; r++)
        EXPECT_EQ(want[r], u.machines[r]) << "rank " << r;
    impi_layout_free(&u);
    /* a part of the wrong size */
    Bytes b = answer(cl, IMPI_P_ICBC_MACHINE, 6);
    b.pop_back();
    impi_layout_free(&l);
    add_all(IMPI_P_ICBC_MACHINE);
    EXPECT_EQ(ICBC_ERR_INVALID, add(IMPI_P_ICBC_MACHINE, 6, b));
    EXPECT_NE(std::string::npos, std::string(err).find("P_ICBC_MACHINE: 39 bytes")) << err;
    free(buf);
}

TEST_F(Layout, CheckNamesALabelThatNeverCame)
{
    cl = { Client(0, { 1 }) };
    add_all(IMPI_P_PID);
    EXPECT_EQ(ICBC_ERR_INVALID, impi_layout_check(&l, err, sizeof(err)));
    EXPECT_STREQ("start-up ended without P_PID", err);
}

TEST_F(Layout, PacketsLargerThanAHostMayBufferAreRefused)
{
    /* every client may give a large DATALEN; the smallest is what goes,
     * and a job whose smallest is above IMPI_DATALEN_MAX does not start */
    cl = { Client(0, { 1 }, IMPI_DATALEN_MAX + 1), Client(1, { 1 }, UINT32_MAX) };
    add_all();
    EXPECT_EQ(ICBC_ERR_INVALID, impi_layout_check(&l, err, sizeof(err)));
    EXPECT_NE(nullptr, strstr(err, "C_DATALEN")) << err;
    impi_layout_free(&l);
    cl = { Client(0, { 1 }, IMPI_DATALEN_MAX), Client(1, { 1 }, UINT32_MAX) };
    add_all();
    EXPECT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    EXPECT_EQ(IMPI_DATALEN_MAX, l.datalen);
}

TEST_F(Layout, AcceptedHostConnectionsAreHeldToTheLayout)
{
    cl = { Client(0, { 1, 1 }), Client(1, { 2 }) };
    add_all();
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    auto rank = [](uint32_t r) {
        Bytes b(4);
        icbc_put32(b.data(), r);
        return b;
    };
    auto v4 = [](const char *a) {
        uint32_t x;
        inet_pton(AF_INET, a, &x);
        return x;
    };
    std::vector<uint8_t> connected(3, 0);
    int host = -7;
    /* host 2 (client 1's only host, 10.0.1.0) connects to host 1 */
    ASSERT_EQ(ICBC_OK, impi_host_accept_check(&l, 1, rank(2).data(), v4("10.0.1.0"),
                                              connected.data(), &host, err, sizeof(err)))
        << err;
    EXPECT_EQ(2, host);
    EXPECT_TRUE(impi_host_connects(2, 1));
    EXPECT_FALSE(impi_host_connects(1, 2));
    struct Case {
        const char *name;
        uint32_t rank;
        const char *from;
        bool already;
        const char *words;
    } cases[] = {
        { "not a host of the job", 3, "10.0.1.0", false, "names host 3; the job has 3 hosts" },
        { "a lower host", 0, "10.0.0.0", false, "does not connect to host 1" },
        { "itself", 1, "10.0.0.1", false, "does not connect to host 1" },
        { "another address", 2, "10.9.9.9", false,
          "from 10.9.9.9 names host 2, which advertised 10.0.1.0" },
        { "twice", 2, "10.0.1.0", true, "a second connection from host 2 (10.0.1.0)" },
    };
    for (auto &k : cases) {
        SCOPED_TRACE(k.name);
        connected[2] = k.already;
        err[0] = '\0';
        EXPECT_EQ(ICBC_ERR_INVALID,
                  impi_host_accept_check(&l, 1, rank(k.rank).data(), v4(k.from), connected.data(),
                                         &host, err, sizeof(err)));
        EXPECT_EQ(-1, host);
        EXPECT_NE(std::string::npos, std::string(err).find(k.words)) << err;
    }
}

/* ---- packets from another host ------------------------------------------ */

struct Rx : Layout {
    impi_rx_t rx{};
    struct Got {
        impi_pkt_hdr_t hdr;
        int src, dest;
        Bytes payload;
    };
    std::vector<Got> got;

    void SetUp() override
    {
        /* host 0 is this one (client 0: ranks 0, 1), host 2 the peer
         * (client 1: ranks 3, 4) */
        cl = { Client(0, { 2, 1 }), Client(1, { 2 }) };
        add_all();
        ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
        ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, &l, 0, 2));
    }
    void TearDown() override
    {
        impi_rx_free(&rx);
        Layout::TearDown();
    }
    static void on_pkt(void *arg, const impi_rx_pkt_t *p)
    {
        static_cast<Rx *>(arg)->got.push_back(
            { *p->hdr, p->src, p->dest, Bytes(p->payload, p->payload + p->len) });
    }
    Bytes pkt(uint32_t type, int64_t src_pid, int src_client, int64_t dst_pid, int dst_client,
              const Bytes &payload = {}, uint64_t msglen = 0)
    {
        impi_pkt_hdr_t h{};
        h.type = type;
        h.len = (uint32_t) payload.size();
        h.src.host[12] = 10;
        h.src.host[14] = (uint8_t) src_client;
        h.src.pid = src_pid;
        h.dest.host[12] = 10;
        h.dest.host[14] = (uint8_t) dst_client;
        h.dest.pid = dst_pid;
        h.msglen = msglen ? msglen : payload.size();
        h.tag = 7;
        Bytes b(IMPI_PKT_HDR_SIZE);
        impi_pkt_hdr_pack(&h, b.data());
        b.insert(b.end(), payload.begin(), payload.end());
        return b;
    }
    icbc_status_t feed(const Bytes &b, size_t step)
    {
        for (size_t i = 0; i < b.size(); i += step) {
            icbc_status_t st = impi_rx_feed(&rx, b.data() + i, std::min(step, b.size() - i), on_pkt,
                                            this, err, sizeof(err));
            if (st != ICBC_OK)
                return st;
        }
        return ICBC_OK;
    }
};

TEST_F(Rx, PacketsArriveWholeInAnyPieces)
{
    Bytes data(1000);
    for (size_t i = 0; i < data.size(); i++)
        data[i] = (uint8_t) i;
    /* client 1's processes have pids 1000, 1001; client 0's host 0 has 0, 1 */
    Bytes stream = pkt(IMPI_PK_DATA, 1001, 1, 1, 0, data);
    Bytes ack = pkt(IMPI_PK_SYNCACK, 1000, 1, 0, 0);
    Bytes fini(IMPI_PKT_HDR_SIZE);
    impi_pkt_hdr_t f{};
    f.type = IMPI_PK_FINI;
    f.len = 128; /* LAM's bogus length of a control packet */
    f.src.pid = f.dest.pid = -1;
    impi_pkt_hdr_pack(&f, fini.data());
    stream.insert(stream.end(), ack.begin(), ack.end());
    stream.insert(stream.end(), fini.begin(), fini.end());
    for (size_t step : { (size_t) 1, (size_t) 7, (size_t) 128, stream.size() }) {
        SCOPED_TRACE(step);
        got.clear();
        ASSERT_EQ(ICBC_OK, feed(stream, step)) << err;
        ASSERT_EQ(3u, got.size());
        EXPECT_EQ(4, got[0].src);
        EXPECT_EQ(1, got[0].dest);
        EXPECT_EQ(data, got[0].payload);
        EXPECT_EQ(7, got[0].hdr.tag);
        EXPECT_EQ((uint32_t) IMPI_PK_SYNCACK, got[1].hdr.type);
        EXPECT_EQ(3, got[1].src);
        EXPECT_EQ(0, got[1].dest);
        EXPECT_TRUE(got[1].payload.empty());
        EXPECT_EQ((uint32_t) IMPI_PK_FINI, got[2].hdr.type);
        EXPECT_EQ(-1, got[2].src);
        EXPECT_TRUE(got[2].payload.empty()) << "FINI's claimed length was read as payload";
    }
}

TEST_F(Rx, APayloadMayBeWrittenInPlaceByTheReader)
{
    Bytes data(5000);
    for (size_t i = 0; i < data.size(); i++)
        data[i] = (uint8_t) (i * 7);
    Bytes first = pkt(IMPI_PK_DATA, 1001, 1, 1, 0, data);
    Bytes second = pkt(IMPI_PK_DATA, 1000, 1, 0, 0, { 1, 2, 3 });
    size_t want = 1;

    /* no room before a header has been read */
    EXPECT_EQ(nullptr, impi_rx_payload_room(&rx, &want));
    EXPECT_EQ(0u, want);
    /* the header and 100 payload bytes through feed, the rest written in
     * place in three pieces, then the next packet through feed again */
    ASSERT_EQ(ICBC_OK, impi_rx_feed(&rx, first.data(), IMPI_PKT_HDR_SIZE + 100, on_pkt, this, err,
                                    sizeof(err)))
        << err;
    size_t at = IMPI_PKT_HDR_SIZE + 100;
    for (size_t piece : { (size_t) 1, (size_t) 2899, (size_t) 2000 }) {
        uint8_t *room = impi_rx_payload_room(&rx, &want);
        ASSERT_NE(nullptr, room);
        ASSERT_EQ(first.size() - at, want);
        EXPECT_TRUE(got.empty());
        memcpy(room, first.data() + at, piece);
        impi_rx_payload_filled(&rx, piece, on_pkt, this);
        at += piece;
    }
    ASSERT_EQ(first.size(), at);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(data, got[0].payload);
    EXPECT_EQ(4, got[0].src);
    EXPECT_EQ(nullptr, impi_rx_payload_room(&rx, &want)) << "room after the packet was whole";
    ASSERT_EQ(ICBC_OK, feed(second, second.size())) << err;
    ASSERT_EQ(2u, got.size());
    EXPECT_EQ(Bytes({ 1, 2, 3 }), got[1].payload);
}

TEST_F(Rx, PacketsThePeerMayNotSendEndTheConnection)
{
    struct Case {
        const char *name;
        Bytes bytes;
        const char *words;
    } cases[] = {
        { "a process of another host", pkt(IMPI_PK_DATA, 0, 0, 0, 0, Bytes(4)),
          "from process 0, which is not one of that host's" },
        { "an unknown pid", pkt(IMPI_PK_DATA, 1005, 1, 0, 0, Bytes(4)),
          "from process 1005, which is not one of that host's" },
        { "for a process elsewhere", pkt(IMPI_PK_SYNCACK, 1000, 1, 2, 0),
          "for process 2, which is not one of this host's" },
        { "beyond DATALEN", pkt(IMPI_PK_DATA, 1000, 1, 0, 0, Bytes(65537)), "65537 payload bytes" },
        { "beyond its message", pkt(IMPI_PK_DATASYNC, 1000, 1, 0, 0, Bytes(8), 4),
          "8 payload bytes of a 4-byte message" },
        { "an unknown type", pkt(9, 1000, 1, 0, 0), "packet of type 9" },
    };
    for (auto &k : cases) {
        SCOPED_TRACE(k.name);
        impi_rx_free(&rx);
        ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, &l, 0, 2));
        got.clear();
        err[0] = '\0';
        EXPECT_EQ(ICBC_ERR_INVALID, feed(k.bytes, 64));
        EXPECT_TRUE(got.empty());
        EXPECT_NE(std::string::npos, std::string(err).find("IMPI host 2: ")) << err;
        EXPECT_NE(std::string::npos, std::string(err).find(k.words)) << err;
        /* and nothing more is taken from it */
        EXPECT_EQ(ICBC_ERR_INVALID, feed(pkt(IMPI_PK_SYNCACK, 1000, 1, 0, 0), 128));
        EXPECT_TRUE(got.empty());
    }
}

/* An ICBC packet from client 1's process 1000 to client 0's process 0:
 * COUNT header bytes of PAYLOAD, at SEQNUM of a MSGLEN-byte message. */
static Bytes icbc_pkt(const Bytes &payload, int64_t count, uint64_t seqnum, uint64_t msglen)
{
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_ICBC;
    h.len = (uint32_t) payload.size();
    h.src.host[12] = 10;
    h.src.host[14] = 1;
    h.src.pid = 1000;
    h.dest.host[12] = 10;
    h.dest.pid = 0;
    h.count = count;
    h.seqnum = seqnum;
    h.msglen = msglen;
    Bytes b(IMPI_PKT_HDR_SIZE);
    impi_pkt_hdr_pack(&h, b.data());
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

TEST_F(Rx, IcbcPacketsPassBetweenIcbcClientsAndMustFitTheirMessage)
{
    /* a 40-byte header with the first 100 payload bytes of 65636, then the rest */
    Bytes first = icbc_pkt(Bytes(140, 1), 40, 0, 65636);
    Bytes next = icbc_pkt(Bytes(65536, 2), 0, 100, 65636);
    Bytes stream = first;
    stream.insert(stream.end(), next.begin(), next.end());
    ASSERT_EQ(ICBC_OK, feed(stream, 1000)) << err;
    ASSERT_EQ(2u, got.size());
    EXPECT_EQ(40, got[0].hdr.count);
    EXPECT_EQ(140u, got[0].payload.size());
    EXPECT_EQ(100u, got[1].hdr.seqnum);
    EXPECT_EQ(3, got[1].src);
    EXPECT_EQ(0, got[1].dest);

    struct Case {
        const char *name;
        Bytes bytes;
    } cases[] = {
        { "a header longer than the packet", icbc_pkt(Bytes(10), 11, 0, 0) },
        { "a first packet with an offset", icbc_pkt(Bytes(50), 40, 1, 100) },
        { "more payload than its message", icbc_pkt(Bytes(50), 40, 0, 9) },
        { "a continuation beyond its message", icbc_pkt(Bytes(50), 0, 60, 100) },
        { "an empty continuation", icbc_pkt(Bytes(), 0, 60, 100) },
        { "a negative header length", icbc_pkt(Bytes(50), -1, 0, 100) },
        { "beyond DATALEN", icbc_pkt(Bytes(65537), 40, 0, 65537 - 40) },
    };
    for (auto &k : cases) {
        SCOPED_TRACE(k.name);
        impi_rx_free(&rx);
        ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, &l, 0, 2));
        got.clear();
        EXPECT_EQ(ICBC_ERR_INVALID, feed(k.bytes, 64));
        EXPECT_TRUE(got.empty());
        EXPECT_NE(std::string::npos, std::string(err).find("packet of type 256")) << err;
    }
}

TEST_F(Rx, IcbcPacketsFromAClientOfAnotherMpiEndTheConnection)
{
    /* client 1 gives no C_ICBC_DATAREP: another MPI (LAM/MPI) */
    impi_rx_free(&rx);
    impi_layout_free(&l);
    add_all(IMPI_C_ICBC_DATAREP);
    ASSERT_EQ(ICBC_OK, add(IMPI_C_ICBC_DATAREP, 1, answer(cl, IMPI_C_ICBC_DATAREP, 1))) << err;
    ASSERT_EQ(ICBC_OK, impi_layout_check(&l, err, sizeof(err))) << err;
    ASSERT_EQ(1u, l.datarep_mask);
    ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, &l, 0, 2));
    EXPECT_EQ(ICBC_ERR_INVALID, feed(icbc_pkt(Bytes(40), 40, 0, 0), 64));
    EXPECT_TRUE(got.empty());
    EXPECT_NE(std::string::npos, std::string(err).find("not both ICBC")) << err;
}

TEST(ImpiLocal, HostsMustAddUpToTheProcesses)
{
    Client c(0, { 2, 2 });
    c.local.nprocs = 3;
    uint8_t *b;
    size_t n;
    EXPECT_EQ(ICBC_ERR_INVALID, impi_local_part(&c.local, IMPI_C_NPROCS, &b, &n));
}

/* ---- start-up through impi-server ----------------------------------------- */

struct StartUp {
    icbc_status_t st = ICBC_ERR_INVALID;
    impi_client_t *client = nullptr;
    impi_layout_t layout{};
    char err[512] = "";
};

void run_client(const std::string &server, int rank, Client *c, StartUp *out, uint64_t key = 0,
                bool have_key = false, int timeout_ms = 20000)
{
    impi_client_params_t p{};
    p.server = server.c_str();
    p.client = rank;
    p.have_key = have_key;
    p.key = key;
    p.timeout_ms = timeout_ms;
    out->st =
        impi_client_startup(&p, c->get(), &out->client, &out->layout, out->err, sizeof(out->err));
}

TEST(ImpiClient, ThreeClientsStartUpThroughImpiServerAndFinish)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "3", "-listen", "127.0.0.1", "-host", "127.0.0.1" }));
    std::string server = d.addr + ":" + std::to_string(d.port);
    std::vector<Client> cl = { Client(0, { 1, 1 }), Client(1, { 4 }, 16384),
                               Client(2, { 1, 2, 1 }) };
    StartUp s[3];
    std::vector<std::thread> t;
    for (int r = 0; r < 3; r++)
        t.emplace_back(run_client, server, 2 - r, &cl[2 - r], &s[2 - r], 0, false, 20000);
    for (auto &x : t)
        x.join();
    for (int r = 0; r < 3; r++) {
        ASSERT_EQ(ICBC_OK, s[r].st) << "client " << r << ": " << s[r].err;
        const impi_layout_t &l = s[r].layout;
        EXPECT_EQ(3, l.nclients);
        EXPECT_EQ(6, l.nhosts_total);
        EXPECT_EQ(10, l.nprocs_total);
        EXPECT_EQ(16384u, l.datalen);
        EXPECT_EQ(6, l.first_rank[2]);
        /* every client learns the same job */
        EXPECT_EQ(0, memcmp(s[0].layout.hosts, l.hosts, 6 * sizeof(impi_host_t)));
        EXPECT_EQ(0, memcmp(s[0].layout.procs, l.procs, 10 * sizeof(impi_proc_t)));
    }
    EXPECT_EQ(2001, s[0].layout.procs[7].pid); /* client 2, its second process */
    for (int r = 0; r < 3; r++) {
        EXPECT_EQ(ICBC_OK, impi_client_fini(s[r].client));
        impi_layout_free(&s[r].layout);
    }
    std::string errtext;
    EXPECT_EQ(0, d.wait(&errtext)) << errtext;
}

/* Two ICBC clients, each with a node of two processes: every client gives
 * C_ICBC_HOSTS, so both give their processes as hosts of their own. */
TEST(ImpiClient, IcbcClientsTakeTheirProcessesAsHosts)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "2", "-listen", "127.0.0.1", "-host", "127.0.0.1" }));
    std::string server = d.addr + ":" + std::to_string(d.port);
    std::vector<Client> nodes = { Client(0, { 2 }), Client(1, { 2 }) };
    std::vector<Client> own = { Client(0, { 1, 1 }), Client(1, { 1, 1 }) };
    StartUp s[2];
    std::vector<std::thread> t;
    for (int r = 0; r < 2; r++)
        t.emplace_back([&, r] {
            impi_client_params_t p{};
            p.server = server.c_str();
            p.client = r;
            p.timeout_ms = 20000;
            p.local_own_hosts = own[r].get();
            s[r].st = impi_client_startup(&p, nodes[r].get(), &s[r].client, &s[r].layout, s[r].err,
                                          sizeof(s[r].err));
        });
    for (auto &x : t)
        x.join();
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(ICBC_OK, s[r].st) << "client " << r << ": " << s[r].err;
        EXPECT_EQ(3u, s[r].layout.icbc_hosts_mask);
        EXPECT_EQ(4, s[r].layout.nhosts_total);
        EXPECT_EQ(1u, s[r].layout.hosts[3].nprocs);
        EXPECT_EQ(ICBC_OK, impi_client_fini(s[r].client));
        impi_layout_free(&s[r].layout);
    }
    std::string errtext;
    EXPECT_EQ(0, d.wait(&errtext)) << errtext;
}

/* After start-up the server's connection is quiet until FINI; when the
 * server ends (here: another client closed without FINI, which ends it
 * with an error), impi_client_check says so, naming the server. */
TEST(ImpiClient, CheckSeesTheServerEndTheJob)
{
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "2", "-listen", "127.0.0.1", "-host", "127.0.0.1" }));
    std::string server = d.addr + ":" + std::to_string(d.port);
    std::vector<Client> cl = { Client(0, { 1 }), Client(1, { 1 }) };
    StartUp s[2];
    std::thread t(run_client, server, 1, &cl[1], &s[1], 0, false, 20000);
    run_client(server, 0, &cl[0], &s[0]);
    t.join();
    ASSERT_EQ(ICBC_OK, s[0].st) << s[0].err;
    ASSERT_EQ(ICBC_OK, s[1].st) << s[1].err;
    char err[256] = "";
    EXPECT_EQ(ICBC_OK, impi_client_check(s[0].client, err, sizeof(err))) << err;
    impi_client_destroy(s[1].client); /* client 1 dies */
    std::string errtext;
    EXPECT_EQ(1, d.wait(&errtext));
    EXPECT_NE(std::string::npos, errtext.find("before FINI")) << errtext;
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, impi_client_check(s[0].client, err, sizeof(err)));
    EXPECT_NE(nullptr, strstr(err, "closed its connection before this client's FINI")) << err;
    EXPECT_NE(nullptr, strstr(err, server.c_str())) << err;
    impi_client_destroy(s[0].client);
    for (auto &x : s)
        impi_layout_free(&x.layout);
}

TEST(ImpiClient, KeyAuthentication)
{
    char path[] = "/tmp/impi-key-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(6, write(fd, "424242", 6));
    close(fd);
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "1", "-listen", "127.0.0.1", "-host", "127.0.0.1", "-auth",
                          std::string("key:") + path }));
    std::string server = d.addr + ":" + std::to_string(d.port);
    Client c(0, { 1 });
    StartUp none, good;
    run_client(server, 0, &c, &none);
    EXPECT_EQ(ICBC_ERR_AUTH, none.st);
    EXPECT_NE(std::string::npos, std::string(none.err).find("refused this client at "
                                                            "authentication"))
        << none.err;
    run_client(server, 0, &c, &good, 424242, true);
    ASSERT_EQ(ICBC_OK, good.st) << good.err;
    EXPECT_EQ(ICBC_OK, impi_client_fini(good.client));
    impi_layout_free(&good.layout);
    std::string errtext;
    EXPECT_EQ(0, d.wait(&errtext)) << errtext;
    unlink(path);
}

TEST(ImpiClient, WrongKeyEndsWithAnErrorNamingTheServer)
{
    char path[] = "/tmp/impi-key-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_EQ(1, write(fd, "7", 1));
    close(fd);
    Daemon d;
    ASSERT_TRUE(d.start({ "-server", "1", "-listen", "127.0.0.1", "-host", "127.0.0.1", "-auth",
                          std::string("key:") + path }));
    std::string server = d.addr + ":" + std::to_string(d.port);
    Client c(0, { 1 });
    StartUp bad;
    run_client(server, 0, &c, &bad, 8, true);
    EXPECT_NE(ICBC_OK, bad.st);
    EXPECT_NE(std::string::npos, std::string(bad.err).find("IMPI server " + server)) << bad.err;
    unlink(path);
}

TEST(ImpiClient, SilentServerTimesOut)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sin);
    ASSERT_EQ(0, bind(l, (sockaddr *) &sin, sizeof(sin)));
    ASSERT_EQ(0, listen(l, 4));
    ASSERT_EQ(0, getsockname(l, (sockaddr *) &sin, &len));
    std::string server = "127.0.0.1:" + std::to_string(ntohs(sin.sin_port));
    Client c(0, { 1 });
    StartUp s;
    run_client(server, 0, &c, &s, 0, false, 300);
    EXPECT_EQ(ICBC_ERR_TIMEOUT, s.st);
    EXPECT_EQ("IMPI server " + server + ": authentication: no answer in time", std::string(s.err));
    close(l);
}

TEST(ImpiClient, NoServerOrABadAddress)
{
    Client c(0, { 1 });
    StartUp s, t;
    run_client("127.0.0.1:1", 0, &c, &s);
    EXPECT_EQ(ICBC_ERR_UNREACHABLE, s.st);
    EXPECT_NE(std::string::npos, std::string(s.err).find("IMPI server 127.0.0.1:1: connect:"))
        << s.err;
    run_client("impi.example:80", 0, &c, &t);
    EXPECT_EQ(ICBC_ERR_INVALID, t.st);
    EXPECT_STREQ("IMPI server 'impi.example:80': not an IPv4 ADDR:PORT", t.err);
}

} // namespace
