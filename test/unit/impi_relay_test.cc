/*
 * The IMPI relay's start-up (impi_rly_*): an inside client's commands go
 * through the relay to the server's protocol (impi_srv, in process), beside
 * a client outside that talks to the server directly; each side reads the
 * answers it gets into a layout, as a client would, and the test checks
 * what each sees of the other. Hostile or out-of-order input from either
 * side is refused with its reason.
 *
 * Then its data phase (relay_fwd.c) on the layouts that start-up made: the
 * relay's host connections are socket pairs whose other ends the test
 * writes and reads byte by byte, so that a packet can be held half sent
 * for as long as a case needs.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "icbc_bytes.h"
#include "impi_proto.h"
#include "impi_relay.h"
#include "impi_rx.h"
#include "impi_server.h"
#include "relay_impl.h"
#include "impi_test_layout.h"

namespace
{

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

Bytes coll(uint32_t label, const Bytes &part)
{
    Bytes b = u32(label);
    b.insert(b.end(), part.begin(), part.end());
    return cmd(IMPI_CMD_COLL, b);
}

/* Every COLL label of CL's part, then DONE. */
Bytes labels_and_done(const Client &cl)
{
    int n;
    const uint32_t *labels = impi_layout_labels(&n);
    Bytes b;
    for (int i = 0; i < n; i++) {
        Bytes c = coll(labels[i], cl.part(labels[i]));
        b.insert(b.end(), c.begin(), c.end());
    }
    Bytes d = cmd(IMPI_CMD_DONE);
    b.insert(b.end(), d.begin(), d.end());
    return b;
}

/* The answers a client got, read as a client reads them. */
struct Reader {
    Bytes in;
    size_t off = 0;
    bool auth = false;
    int nclients = 0;
    bool done = false;
    impi_layout_t layout{};
    std::string err;

    void feed(const void *p, size_t n)
    {
        in.insert(in.end(), (const uint8_t *) p, (const uint8_t *) p + n);
        if (!auth && in.size() - off >= IMPI_AUTH_REPLY_SIZE) {
            auth = true;
            off += IMPI_AUTH_REPLY_SIZE;
        }
        impi_cmd_hdr_t h;
        while (auth && err.empty() && in.size() - off >= IMPI_CMD_HDR_SIZE &&
               impi_cmd_hdr_parse(&in[off], &h) == ICBC_OK &&
               in.size() - off >= IMPI_CMD_HDR_SIZE + h.len) {
            const uint8_t *p = &in[off + IMPI_CMD_HDR_SIZE];
            char why[256] = "";
            if (h.cmd == IMPI_CMD_IMPI) {
                nclients = (int) icbc_get32(p);
                impi_layout_init(&layout, nclients);
            } else if (h.cmd == IMPI_CMD_COLL) {
                if (impi_layout_add(&layout, icbc_get32(p), icbc_get32(p + 4), p + 8, h.len - 8,
                                    why, sizeof(why)) != ICBC_OK)
                    err = why;
            } else if (h.cmd == IMPI_CMD_DONE) {
                if (impi_layout_check(&layout, why, sizeof(why)) != ICBC_OK)
                    err = why;
                done = true;
            }
            off += IMPI_CMD_HDR_SIZE + h.len;
        }
    }
    ~Reader()
    {
        if (nclients)
            impi_layout_free(&layout);
    }
};

uint32_t persona_port(void *, int relay, int client, uint8_t *)
{
    return 7000 + 100 * (uint32_t) relay + (uint32_t) client;
}

/* impi_srv for two clients: slot A is client 0 outside, slot B the relay
 * of client 1, whose inside client talks to the relay only. */
struct RelayStartup : ::testing::Test {
    impi_srv_t *srv = nullptr;
    impi_rly_t *rly = nullptr;
    int a = -1, b = -1;
    Reader outside, inside;
    std::string srv_err, rly_err;
    impi_rly_config_t cfg{};

    void SetUp() override
    {
        impi_srv_config_t sc = { 2, 0, 0 };
        ASSERT_EQ(ICBC_OK, impi_srv_create(&sc, &srv));
        a = impi_srv_accept(srv, "outside");
        b = impi_srv_accept(srv, "relay");
        for (int j = 0; j < IMPI_RELAY_TRUNKS_MAX; j++) {
            impi_rly_trunk_t &t = cfg.trunk[j];
            t.inside_addr[12] = 192, t.inside_addr[13] = 168, t.inside_addr[15] = (uint8_t) (1 + j);
            t.outside_addr[12] = 10, t.outside_addr[15] = (uint8_t) (99 + j);
            t.outside_port = 6000 + (uint32_t) j;
        }
        cfg.persona_port = persona_port;
    }
    void make_relay()
    {
        ASSERT_EQ(ICBC_OK, impi_rly_create(&cfg, &rly));
    }
    void TearDown() override
    {
        impi_rly_destroy(rly);
        impi_srv_destroy(srv);
    }
    /* Moves bytes between the four ends until nothing moves. */
    void pump()
    {
        for (bool moved = true; moved && srv_err.empty() && rly_err.empty();) {
            moved = false;
            char err[512] = "";
            size_t n;
            const void *p = impi_srv_output(srv, a, &n);
            if (n) {
                outside.feed(p, n);
                impi_srv_consume(srv, a, n);
                moved = true;
            }
            p = impi_srv_output(srv, b, &n);
            if (n) {
                if (impi_rly_server_input(rly, p, n, err, sizeof(err)) != ICBC_OK)
                    rly_err = err;
                impi_srv_consume(srv, b, n);
                moved = true;
            }
            p = impi_rly_server_output(rly, &n);
            if (n) {
                Bytes copy((const uint8_t *) p, (const uint8_t *) p + n);
                impi_rly_server_consume(rly, n);
                if (impi_srv_input(srv, b, copy.data(), n, err, sizeof(err)) != ICBC_OK)
                    srv_err = err;
                moved = true;
            }
            p = impi_rly_inside_output(rly, &n);
            if (n) {
                inside.feed(p, n);
                impi_rly_inside_consume(rly, n);
                moved = true;
            }
        }
    }
    void from_outside(const Bytes &bytes)
    {
        char err[512] = "";
        if (impi_srv_input(srv, a, bytes.data(), bytes.size(), err, sizeof(err)) != ICBC_OK)
            srv_err = err;
        pump();
    }
    icbc_status_t from_inside(const Bytes &bytes)
    {
        char err[512] = "";
        icbc_status_t st = impi_rly_inside_input(rly, bytes.data(), bytes.size(), err, sizeof(err));
        if (st != ICBC_OK)
            rly_err = err;
        pump();
        return st;
    }
    Bytes hello(uint32_t rank, uint32_t auth_mask = IMPI_AUTH_MASK_NONE)
    {
        Bytes h = cmd(IMPI_CMD_AUTH, u32(auth_mask)), i = cmd(IMPI_CMD_IMPI, u32(rank));
        h.insert(h.end(), i.begin(), i.end());
        return h;
    }
    /* Client OUT (0, outside) and IN (1, behind the relay) through start-up. */
    void start_job(const Client &out, const Client &in)
    {
        from_outside(hello(0));
        ASSERT_EQ(ICBC_OK, from_inside(hello(1)));
        from_outside(labels_and_done(out));
        ASSERT_EQ(ICBC_OK, from_inside(labels_and_done(in)));
        ASSERT_EQ("", srv_err);
        ASSERT_EQ("", rly_err);
    }
};

TEST_F(RelayStartup, EachSideSeesTheOtherAsOneHostOfItsProcesses)
{
    make_relay();
    Client out(0, { 1, 2 }, 0, 10), in(1, { 2, 1, 1 }, 16384, 4);
    from_outside(hello(0));
    ASSERT_EQ(ICBC_OK, from_inside(hello(1)));
    EXPECT_EQ(2, inside.nclients);
    EXPECT_EQ(1, impi_rly_client(rly));
    from_outside(labels_and_done(out));
    ASSERT_EQ(ICBC_OK, from_inside(labels_and_done(in)));
    ASSERT_EQ("", srv_err);
    ASSERT_EQ("", rly_err);
    ASSERT_TRUE(outside.done && inside.done);
    ASSERT_EQ("", outside.err);
    ASSERT_EQ("", inside.err);
    ASSERT_TRUE(impi_rly_started(rly));

    /* outside: client 1 is the relay, one host of its 4 processes */
    const impi_layout_t &o = outside.layout;
    ASSERT_EQ(3, o.nhosts_total);
    ASSERT_EQ(7, o.nprocs_total);
    EXPECT_EQ(0, memcmp(o.hosts[2].addr, cfg.trunk[0].outside_addr, 16));
    EXPECT_EQ(6000u, o.hosts[2].port);
    EXPECT_EQ(4u, o.hosts[2].nprocs);
    EXPECT_EQ(3, o.hosts[2].first_rank);
    EXPECT_EQ(4u, o.hosts[2].ackmark) << "the smallest of the inside hosts'";
    for (int r = 3; r < 7; r++) {
        EXPECT_EQ(0, memcmp(o.procs[r].host, cfg.trunk[0].outside_addr, 16)) << r;
        EXPECT_EQ(r - 3, o.procs[r].pid) << r;
    }
    EXPECT_EQ(16384u, o.datalen) << "what is not about hosts goes by as it is";

    /* inside: client 0 is the persona, one host of its 3 processes; the
     * inside client's own hosts as it gave them */
    const impi_layout_t &i = inside.layout;
    ASSERT_EQ(4, i.nhosts_total);
    ASSERT_EQ(7, i.nprocs_total);
    EXPECT_EQ(0, memcmp(i.hosts[0].addr, cfg.trunk[0].inside_addr, 16));
    EXPECT_EQ(7000u, i.hosts[0].port);
    EXPECT_EQ(3u, i.hosts[0].nprocs);
    EXPECT_EQ(10u, i.hosts[0].ackmark);
    for (int h = 0; h < 3; h++)
        EXPECT_EQ(0, memcmp(i.hosts[1 + h].addr, in.hosts[(size_t) h].addr, 16)) << h;
    EXPECT_EQ(in.procs[3].pid, i.procs[6].pid);
    EXPECT_EQ(1, i.procs[1].pid);

    /* the relay's own two views are the ones the clients got */
    const impi_layout_t *ro = impi_rly_outside(rly), *ri = impi_rly_inside(rly);
    EXPECT_EQ(0, memcmp(ro->hosts, o.hosts, 3 * sizeof(impi_host_t)));
    EXPECT_EQ(0, memcmp(ri->procs, i.procs, 7 * sizeof(impi_proc_t)));
    EXPECT_EQ(o.ackmark, ri->ackmark);
    EXPECT_EQ(o.hiwater, ri->hiwater);

    /* FINI from the inside goes to the server */
    ASSERT_EQ(ICBC_OK, from_inside(cmd(IMPI_CMD_FINI)));
    EXPECT_TRUE(impi_rly_finished(rly));
    EXPECT_EQ("", srv_err);
}

/* A relay that gives each persona an address of its own (-persona-addrs:
 * a LAM/MPI client inside tells hosts apart by address): the inside sees
 * each persona, host and processes, at the address the relay gave it. */
uint32_t persona_port_own_addr(void *, int relay, int client, uint8_t *addr)
{
    addr[12] = 172, addr[13] = 16, addr[14] = (uint8_t) client, addr[15] = (uint8_t) (50 + relay);
    return 7000 + 100 * (uint32_t) relay + (uint32_t) client;
}

TEST_F(RelayStartup, PersonasAtAddressesOfTheirOwn)
{
    cfg.ntrunks = 2;
    cfg.persona_port = persona_port_own_addr;
    make_relay();
    Client out(0, { 1, 2 }, 0, 10), in(1, { 1, 2 }, 0, 4);
    ASSERT_NO_FATAL_FAILURE(start_job(out, in));
    ASSERT_TRUE(inside.done);
    const impi_layout_t &i = inside.layout, &o = outside.layout;
    ASSERT_EQ(2u, i.nhosts[0]);
    for (int j = 0; j < 2; j++) {
        const impi_host_t &h = i.hosts[j];
        uint8_t want[16] = { 0 };
        persona_port_own_addr(nullptr, j, 0, want);
        EXPECT_EQ(0, memcmp(h.addr, want, 16)) << j;
        EXPECT_NE(0, memcmp(h.addr, cfg.trunk[j].inside_addr, 16)) << j;
        for (int r = h.first_rank; r < h.first_rank + (int) h.nprocs; r++)
            EXPECT_EQ(0, memcmp(i.procs[r].host, want, 16)) << r;
    }
    /* outside, the relays are still their outside addresses */
    for (int j = 0; j < 2; j++)
        EXPECT_EQ(0, memcmp(o.hosts[o.first_host[1] + j].addr, cfg.trunk[j].outside_addr, 16));
}

/* Three relays (trunking): the inside client's 4 hosts are 3 relay hosts
 * outside, blocks of hosts {0}, {1}, {2, 3}; the outside client's 2 hosts
 * (3 processes) are 2 personas inside, blocks of processes {0}, {1, 2}. */
TEST_F(RelayStartup, ATrunkSplitsBothSidesInBlocksOfTheRelays)
{
    cfg.ntrunks = 3;
    make_relay();
    Client out(0, { 1, 2 }, 0, 10), in(1, { 1, 2, 1, 3 }, 0, 4);
    ASSERT_NO_FATAL_FAILURE(start_job(out, in));
    ASSERT_TRUE(outside.done && inside.done);
    ASSERT_EQ("", outside.err);
    ASSERT_EQ("", inside.err);
    const impi_layout_t &o = outside.layout, &i = inside.layout;
    ASSERT_EQ(3u, o.nhosts[1]);
    uint32_t want_out[3] = { 1, 2, 4 };
    for (int j = 0; j < 3; j++) {
        const impi_host_t &h = o.hosts[o.first_host[1] + j];
        EXPECT_EQ(want_out[j], h.nprocs) << j;
        EXPECT_EQ(0, memcmp(h.addr, cfg.trunk[j].outside_addr, 16)) << j;
        EXPECT_EQ(6000u + (uint32_t) j, h.port) << j;
        for (int r = h.first_rank; r < h.first_rank + (int) h.nprocs; r++)
            EXPECT_EQ(0, memcmp(o.procs[r].host, h.addr, 16)) << r;
    }
    ASSERT_EQ(2u, i.nhosts[0]);
    uint32_t want_in[2] = { 1, 2 };
    for (int j = 0; j < 2; j++) {
        const impi_host_t &h = i.hosts[j];
        EXPECT_EQ(want_in[j], h.nprocs) << j;
        EXPECT_EQ(0, memcmp(h.addr, cfg.trunk[j].inside_addr, 16)) << j;
        EXPECT_EQ(7000u + 100 * (uint32_t) j, h.port) << j;
    }
    EXPECT_EQ(4u, i.nhosts[1]) << "the inside client's own hosts as it gave them";
    EXPECT_EQ(o.nprocs_total, i.nprocs_total);

    /* a packet from inside rank 8 (inside host 3, relay block 2 outside) to
     * rank 1 (outside host 1; inside, persona block 1) goes out on relay
     * 2's connection to outside host 1; the answer comes back on persona
     * 1's connection (relay 1) to inside host 3 */
    impi_pkt_hdr_t hdr{}, out_hdr;
    impi_rx_pkt_t pkt = { &hdr, 8, 1, nullptr, 0 };
    int host, relay;
    impi_relay_route(&i, &o, 1, 1, &pkt, &out_hdr, &host, &relay);
    EXPECT_EQ(1, host);
    EXPECT_EQ(2, relay);
    EXPECT_EQ(0, memcmp(&out_hdr.src, &o.procs[8], sizeof(impi_proc_t)));
    EXPECT_EQ(0, memcmp(&out_hdr.dest, &o.procs[1], sizeof(impi_proc_t)));
    impi_rx_pkt_t back = { &hdr, 1, 8, nullptr, 0 };
    impi_relay_route(&i, &o, 1, 0, &back, &out_hdr, &host, &relay);
    EXPECT_EQ(5, host) << "inside host 3 is host 5 of the inside layout";
    EXPECT_EQ(1, relay);
    EXPECT_EQ(0, memcmp(&out_hdr.src, &i.procs[1], sizeof(impi_proc_t)));
    EXPECT_EQ(0, memcmp(&out_hdr.dest, &i.procs[8], sizeof(impi_proc_t)));
}

TEST_F(RelayStartup, TheKeyIsAskedInsideAndSentToTheServer)
{
    impi_srv_destroy(srv);
    impi_srv_config_t sc = { 2, 1, 4242 };
    ASSERT_EQ(ICBC_OK, impi_srv_create(&sc, &srv));
    a = impi_srv_accept(srv, "outside");
    b = impi_srv_accept(srv, "relay");
    cfg.require_key = 1;
    cfg.key = 4242;
    make_relay();
    Bytes key(8);
    icbc_put64(key.data(), 4242);
    Bytes auth = cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_KEY));
    ASSERT_EQ(ICBC_OK, from_inside(auth));
    ASSERT_EQ(8u, inside.in.size()) << "the relay's own AUTH answer";
    EXPECT_EQ((uint32_t) IMPI_AUTH_KEY, icbc_get32(inside.in.data()));
    Bytes rest = key, impi = cmd(IMPI_CMD_IMPI, u32(1));
    rest.insert(rest.end(), impi.begin(), impi.end());
    ASSERT_EQ(ICBC_OK, from_inside(rest));
    Bytes out_hello = cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_KEY));
    out_hello.insert(out_hello.end(), key.begin(), key.end());
    Bytes oi = cmd(IMPI_CMD_IMPI, u32(0));
    out_hello.insert(out_hello.end(), oi.begin(), oi.end());
    from_outside(out_hello);
    EXPECT_EQ("", srv_err);
    EXPECT_EQ(2, inside.nclients) << "the server took the relay's key";
}

TEST_F(RelayStartup, AWrongKeyInsideIsRefusedAndForgotten)
{
    cfg.require_key = 1;
    cfg.key = 4242;
    make_relay();
    Bytes b2 = cmd(IMPI_CMD_AUTH, u32(IMPI_AUTH_MASK_KEY)), key(8);
    icbc_put64(key.data(), 1);
    b2.insert(b2.end(), key.begin(), key.end());
    EXPECT_EQ(ICBC_ERR_AUTH, from_inside(b2));
    EXPECT_NE(std::string::npos, rly_err.find("wrong key")) << rly_err;
    EXPECT_FALSE(impi_rly_inside_known(rly));
    impi_rly_inside_reset(rly);
    size_t n;
    impi_rly_server_output(rly, &n);
    EXPECT_EQ(0u, n) << "nothing went to the server";
}

TEST_F(RelayStartup, HostileInsideCommandsAreRefusedWithTheReason)
{
    Client in(1, { 2, 1 });
    struct Case {
        const char *name;
        Bytes bytes;
        const char *promised;
    };
    Bytes nh = coll(IMPI_C_NHOSTS, u32(2)), np = coll(IMPI_C_NPROCS, u32(3));
    Bytes counts = nh;
    counts.insert(counts.end(), np.begin(), np.end());
    std::vector<Case> cases = {
        { "COLL before the IMPI answer", coll(IMPI_C_NHOSTS, u32(1)), "awaited" },
        { "H_IPV6 of the wrong size", coll(IMPI_H_IPV6, Bytes(16)), "before C_NHOSTS" },
        { "labels descend", coll(IMPI_C_NPROCS, u32(3)), "" },
        { "H_NPROCS that do not add up", coll(IMPI_H_NPROCS, Bytes(8)), "no process" },
        { "a port of 3 hosts for 2", coll(IMPI_H_PORT, Bytes(12)), "not 8" },
        { "C_NHOSTS 0", coll(IMPI_C_NHOSTS, u32(0)), "C_NHOSTS 0" },
        { "a malformed command", Bytes{ 'X', 'X', 'X', 'X', 0, 0, 0, 0 }, "malformed" },
    };
    for (size_t k = 0; k < cases.size(); k++) {
        SCOPED_TRACE(cases[k].name);
        TearDown();
        SetUp();
        make_relay();
        rly_err.clear();
        srv_err.clear();
        from_outside(hello(0));
        Bytes h = hello(1);
        if (k == 0) { /* the relay waits for the server's IMPI answer */
            impi_srv_destroy(srv);
            impi_srv_config_t sc = { 2, 0, 0 };
            ASSERT_EQ(ICBC_OK, impi_srv_create(&sc, &srv));
            a = impi_srv_accept(srv, "outside");
            b = impi_srv_accept(srv, "relay");
            h.insert(h.end(), cases[k].bytes.begin(), cases[k].bytes.end());
            EXPECT_EQ(ICBC_ERR_INVALID, from_inside(h));
            EXPECT_NE(std::string::npos, rly_err.find(cases[k].promised)) << rly_err;
            continue;
        }
        ASSERT_EQ(ICBC_OK, from_inside(h));
        ASSERT_EQ(2, inside.nclients);
        Bytes bytes;
        if (k == 2)
            bytes = coll(IMPI_C_NPROCS, u32(3));
        if (k == 3 || k == 4)
            bytes = counts;
        bytes.insert(bytes.end(), cases[k].bytes.begin(), cases[k].bytes.end());
        if (k == 2) {
            Bytes again = coll(IMPI_C_NHOSTS, u32(2));
            bytes.insert(bytes.end(), again.begin(), again.end());
        }
        EXPECT_EQ(ICBC_ERR_INVALID, from_inside(bytes));
        EXPECT_NE(std::string::npos, rly_err.find("the inside client")) << rly_err;
        if (k == 2)
            EXPECT_NE(std::string::npos, rly_err.find("must ascend")) << rly_err;
        else
            EXPECT_NE(std::string::npos, rly_err.find(cases[k].promised)) << rly_err;
    }
}

TEST_F(RelayStartup, AServerThatWantsAKeyTheRelayHasNotIsNamed)
{
    impi_srv_destroy(srv);
    impi_srv_config_t sc = { 2, 1, 4242 };
    ASSERT_EQ(ICBC_OK, impi_srv_create(&sc, &srv));
    a = impi_srv_accept(srv, "outside");
    b = impi_srv_accept(srv, "relay");
    make_relay();
    from_inside(hello(1));
    EXPECT_NE(std::string::npos, srv_err.find("not the key")) << srv_err;
}

/* ---- the data phase -------------------------------------------------------- */

/* RelayStartup's job (client 0 outside, client 1 behind the relay) through
 * start-up, then the relay's data phase on its layouts with socket pairs for
 * host connections. */
struct RelayData : RelayStartup {
    impi_relay_t *r = nullptr;
    std::vector<int> ends; /* the test's ends of the socket pairs */

    void start(Client out, Client in)
    {
        make_relay();
        start_job(out, in);
        ASSERT_TRUE(impi_rly_started(rly));
        r = (impi_relay_t *) calloc(1, sizeof(*r));
        ASSERT_NE(nullptr, r);
        r->in = impi_rly_inside(rly);
        r->out = impi_rly_outside(rly);
        r->client = impi_rly_client(rly);
        r->ntrunks = 1;
        ASSERT_EQ(ICBC_OK, relay_data_init(r));
    }
    void TearDown() override
    {
        if (r) {
            relay_data_free(r);
            free(r);
        }
        for (int fd : ends)
            close(fd);
        RelayStartup::TearDown();
    }
    /* Opens C as the relay's connection SELF -> PEER; the test's end. */
    int open(relay_conn_t *c, int side, int client, int self, int peer)
    {
        int sv[2];
        EXPECT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
        EXPECT_EQ(ICBC_OK, relay_conn_open(r, c, side, client, self, peer, sv[0]));
        ends.push_back(sv[1]);
        return sv[1];
    }
    /* The persona of outside client C toward the inside host H (inside
     * layout), and the relay toward outside host H (outside layout). */
    int open_inside(int c, int h)
    {
        return open(relay_inside_conn(r, c, h), RELAY_INSIDE, c, r->in->first_host[c], h);
    }
    int open_outside(int h)
    {
        return open(&r->outs[h], RELAY_OUTSIDE, r->out->hosts[h].client, r->self_out, h);
    }
    /* The relay's rounds until none has anything left to do. */
    void run()
    {
        for (int idle = 0; idle < 3 && !r->failed;)
            idle = bt_poller_wait(r->poller, 20) > 0 ? 0 : idle + 1;
        ASSERT_FALSE(r->failed) << r->why;
    }
    static void send_bytes(int fd, const Bytes &b, size_t from, size_t to)
    {
        while (from < to) {
            ssize_t n = send(fd, b.data() + from, to - from, MSG_NOSIGNAL);
            ASSERT_GT(n, 0) << strerror(errno);
            from += (size_t) n;
        }
    }
    void behind(int sa, int sb, int d, const impi_layout_t *from, int a_src, int b_src, int dest,
                const impi_layout_t *to, impi_rx_t *rx);
    static Bytes take(int fd)
    {
        Bytes got;
        uint8_t buf[65536];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
            got.insert(got.end(), buf, buf + n);
        return got;
    }
};

/* A DATA packet of LEN bytes from world rank SRC to DEST as LAYOUT names
 * them, the payload a pattern of SEED. */
Bytes data_packet(const impi_layout_t *layout, int src, int dest, uint32_t len, uint8_t seed)
{
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_DATA;
    h.len = len;
    h.src = layout->procs[src];
    h.dest = layout->procs[dest];
    h.srqid = 100u + (uint64_t) src;
    h.msglen = len;
    h.lsrank = src;
    h.tag = 7;
    Bytes b(IMPI_PKT_HDR_SIZE);
    impi_pkt_hdr_pack(&h, b.data());
    for (uint32_t i = 0; i < len; i++)
        b.push_back((uint8_t) (seed + i * 7));
    return b;
}

struct Received {
    int src;
    int64_t pid;
    Bytes payload;
};

void collect(void *arg, const impi_rx_pkt_t *pkt)
{
    ((std::vector<Received> *) arg)
        ->push_back({ pkt->src, pkt->hdr->src.pid, Bytes(pkt->payload, pkt->payload + pkt->len) });
}

/* The case of both tests below: packet A (world rank A_SRC to DEST, in the
 * ids of layout FROM, big) from the host at end SA, and B (B_SRC to DEST,
 * smaller) from the host at end SB, whose packets the relay hands on into
 * one connection, read by the host at end D as RX reads it (layout TO).
 * A is held half sent: its header and half go on at once (cut through),
 * and the connection belongs to it until its last byte. B, read meanwhile
 * in two pieces, waits behind it whole; D reads A whole, then B, never the
 * two mixed. Then a third packet finds the connection free again and is cut
 * through. */
void RelayData::behind(int sa, int sb, int d, const impi_layout_t *from, int a_src, int b_src,
                       int dest, const impi_layout_t *to, impi_rx_t *rx)
{
    const uint32_t big = 60000, small = 9000;
    ASSERT_GE(from->datalen, big);
    Bytes a = data_packet(from, a_src, dest, big, 1), b = data_packet(from, b_src, dest, small, 2);
    std::vector<Received> got;
    char err[256] = "";

    send_bytes(sa, a, 0, IMPI_PKT_HDR_SIZE + big / 2);
    run();
    Bytes first = take(d);
    EXPECT_EQ(IMPI_PKT_HDR_SIZE + big / 2, first.size()) << "the header and the half that came";
    EXPECT_EQ(1u, r->pkts_cut);

    send_bytes(sb, b, 0, IMPI_PKT_HDR_SIZE + small / 2);
    run();
    send_bytes(sb, b, IMPI_PKT_HDR_SIZE + small / 2, b.size());
    run();
    EXPECT_EQ(0u, take(d).size()) << "nothing of the second packet before the first's end";
    EXPECT_EQ(1u, r->pkts_cut) << "a packet for a connection in use is not cut through";
    EXPECT_EQ(1u, r->pkts_whole);
    EXPECT_EQ(1u, r->pkts_behind);

    send_bytes(sa, a, IMPI_PKT_HDR_SIZE + big / 2, a.size());
    run();
    Bytes rest = take(d);
    EXPECT_EQ(big / 2 + IMPI_PKT_HDR_SIZE + small, rest.size());
    ASSERT_EQ(ICBC_OK,
              impi_rx_feed(rx, first.data(), first.size(), collect, &got, err, sizeof(err)))
        << err;
    ASSERT_EQ(ICBC_OK, impi_rx_feed(rx, rest.data(), rest.size(), collect, &got, err, sizeof(err)))
        << err;
    ASSERT_EQ(2u, got.size());
    EXPECT_EQ(a_src, got[0].src);
    EXPECT_EQ(to->procs[a_src].pid, got[0].pid) << "the source as the next side knows it";
    EXPECT_TRUE(got[0].payload == Bytes(a.begin() + IMPI_PKT_HDR_SIZE, a.end()));
    EXPECT_EQ(b_src, got[1].src);
    EXPECT_TRUE(got[1].payload == Bytes(b.begin() + IMPI_PKT_HDR_SIZE, b.end()));

    Bytes c = data_packet(from, b_src, dest, big, 3);
    send_bytes(sb, c, 0, IMPI_PKT_HDR_SIZE + big / 2);
    run();
    EXPECT_EQ(2u, r->pkts_cut);
    EXPECT_EQ(IMPI_PKT_HDR_SIZE + big / 2, take(d).size());
}

/* Two inside hosts to the one outside host: the relay's connection to it. */
TEST_F(RelayData, APacketForAConnectionInUseWaitsBehindThePacketStreamingIntoIt)
{
    start(Client(0, { 1 }, 65536), Client(1, { 1, 1 }, 65536));
    /* inside layout: host 0 the persona of client 0 (rank 0), hosts 1 and 2
     * the inside client's (ranks 1 and 2); outside: host 0 client 0's,
     * host 1 the relay's */
    int in1 = open_inside(0, 1), in2 = open_inside(0, 2), out0 = open_outside(0);
    impi_rx_t rx;
    ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, r->out, 0, r->self_out));
    behind(in1, in2, out0, r->in, 1, 2, 0, r->out, &rx);
    impi_rx_free(&rx);
}

/* Two hosts of one outside client to the one inside host: the connection
 * of that client's persona to it. */
TEST_F(RelayData, APacketFromOutsideWaitsBehindOneStreamingIntoThePersonasConnection)
{
    start(Client(0, { 1, 1 }, 65536), Client(1, { 1 }, 65536));
    /* outside layout: hosts 0 and 1 client 0's (ranks 0 and 1), host 2 the
     * relay's (rank 2); inside: host 0 the persona, host 1 the inside host */
    int out0 = open_outside(0), out1 = open_outside(1), in1 = open_inside(0, 1);
    impi_rx_t rx;
    ASSERT_EQ(ICBC_OK, impi_rx_init(&rx, r->in, 1, r->in->first_host[0]));
    behind(out0, out1, in1, r->out, 0, 1, 2, r->in, &rx);
    impi_rx_free(&rx);
}

} // namespace
