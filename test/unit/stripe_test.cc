/*
 * The striping engine between two processes, over fake lanes: each lane is
 * a queue the test delivers from in any order, refuses on demand (busy) or
 * breaks (dead). Rank 0 sends, rank 1 receives, each with its own engine.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "icbc_stripe.h"

namespace
{

struct Chunk {
    int lane;
    icbc_stripe_chunk_t c;
    const void *data;
    uint64_t token;
};

struct Done {
    void *user;
    icbc_status_t status;
    std::string why;
};

/* One process: an engine, its lanes and what its callbacks saw. */
struct Side {
    icbc_stripe_t *st = nullptr;
    int nlanes = 3;
    std::vector<bool> busy = std::vector<bool>(8, false);
    std::vector<bool> dead = std::vector<bool>(8, false);
    bool complete_inline = false; /* lanes report a chunk sent inside send_chunk */
    int fixed_lane = -1;          /* lane_for's answer (a policy with one router) */
    int home = -1;                /* home_lane's answer (the sender's own router) */
    std::vector<Chunk> wire;      /* chunks handed to lanes, in order */
    std::vector<Done> sends_done, recvs_done;
    std::vector<std::pair<uint64_t, size_t>> placed;
    std::vector<std::pair<int, uint64_t>> confirms; /* (peer, cookie) */
    std::vector<char> placed_bytes;
    /* hooks run from send_chunk and send_complete (re-entrancy tests) */
    std::function<void(Side &)> on_send_chunk, on_send_complete;

    static icbc_status_t send_chunk(void *ctx, int, int lane, const icbc_stripe_chunk_t *c,
                                    const void *data, uint64_t token)
    {
        Side *s = static_cast<Side *>(ctx);
        if (s->on_send_chunk) {
            auto hook = s->on_send_chunk;
            s->on_send_chunk = nullptr;
            hook(*s);
        }
        if (s->dead[lane])
            return ICBC_ERR_PEER_FAILED;
        if (s->busy[lane])
            return ICBC_ERR_BUSY;
        s->wire.push_back({ lane, *c, data, token });
        if (s->complete_inline)
            icbc_stripe_chunk_sent(s->st, token, 1, 0);
        return ICBC_OK;
    }
    static int lane_for(void *ctx, int)
    {
        return static_cast<Side *>(ctx)->fixed_lane;
    }
    static int home_lane(void *ctx, int)
    {
        return static_cast<Side *>(ctx)->home;
    }
    static int lanes(void *ctx, int)
    {
        return static_cast<Side *>(ctx)->nlanes;
    }
    static void send_complete(void *ctx, void *user, icbc_status_t st, const char *why)
    {
        Side *s = static_cast<Side *>(ctx);
        s->sends_done.push_back({ user, st, why ? why : "" });
        if (s->on_send_complete)
            s->on_send_complete(*s);
    }
    static void recv_complete(void *ctx, void *user, icbc_status_t st, const char *why)
    {
        static_cast<Side *>(ctx)->recvs_done.push_back({ user, st, why ? why : "" });
    }
    static void confirm(void *ctx, int peer, uint64_t cookie)
    {
        static_cast<Side *>(ctx)->confirms.push_back({ peer, cookie });
    }
    static void place(void *ctx, void *, uint64_t off, const void *data, size_t len)
    {
        Side *s = static_cast<Side *>(ctx);
        s->placed.push_back({ off, len });
        if (s->placed_bytes.size() < off + len)
            s->placed_bytes.resize(off + len);
        memcpy(&s->placed_bytes[off], data, len);
    }

    explicit Side(size_t chunk, double timeout = 10, uint32_t first_gen = 0, int failover = 0,
                  icbc_stripe_placement_t placement = ICBC_STRIPE_PLACE_WINDOW,
                  double rate_window = 0)
    {
        icbc_stripe_config_t cfg = {
            chunk, timeout, first_gen, failover, placement, rate_window, 0
        };
        icbc_stripe_ops_t ops = { send_chunk, lanes,   send_complete, recv_complete,
                                  place,      confirm, lane_for,      home_lane };
        EXPECT_EQ(ICBC_OK, icbc_stripe_create(&cfg, &ops, this, &st));
    }
    ~Side()
    {
        icbc_stripe_destroy(st);
    }
    icbc_stripe_stats_t stats() const
    {
        icbc_stripe_stats_t s;
        icbc_stripe_stats(st, &s);
        return s;
    }
};

std::vector<char> pattern(size_t n, unsigned seed = 1)
{
    std::vector<char> v(n);
    std::mt19937 rng(seed);
    for (auto &c : v)
        c = (char) rng();
    return v;
}

const int SENDER = 0, RECEIVER = 1;
const size_t CHUNK = 4096;

/* A transfer set up to the point where chunks flow: RTS (cookie) and CTS;
 * FAILOVER: both engines with failover on. */
template <int FAILOVER> struct TransferOver : ::testing::Test {
    Side tx{ CHUNK, 10, 0, FAILOVER }, rx{ CHUNK, 10, 0, FAILOVER };
    std::vector<char> src, dst;
    uint64_t cookie = 0;
    icbc_stripe_cts_t cts = {};
    int sreq = 0, rreq = 0; /* addresses stand for MPI requests */

    void start(size_t size, bool contiguous = true)
    {
        src = pattern(size);
        dst.assign(size, 0);
        ASSERT_EQ(ICBC_OK,
                  icbc_stripe_send_start(tx.st, RECEIVER, src.data(), size, &sreq, 0, &cookie));
        ASSERT_EQ(ICBC_OK,
                  icbc_stripe_recv_start(rx.st, SENDER, cookie, size,
                                         contiguous ? dst.data() : nullptr, &rreq, 0, &cts));
        EXPECT_EQ(CHUNK, cts.chunk_size);
    }
    void clear_to_send()
    {
        ASSERT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, RECEIVER, cookie, &cts, 0));
    }
    /* Delivers wire chunk K to the receiver and reports it sent. */
    icbc_status_t deliver(size_t k, double now = 0)
    {
        const Chunk &c = tx.wire[k];
        icbc_status_t rc = icbc_stripe_chunk_data(rx.st, SENDER, &c.c, c.data, now);
        icbc_stripe_chunk_sent(tx.st, c.token, 1, now);
        return rc;
    }
};
using Transfer = TransferOver<0>;

TEST_F(Transfer, ChunksCoverTheMessageOverEveryLane)
{
    start(10 * CHUNK + 100);
    clear_to_send();
    ASSERT_EQ(11u, tx.wire.size());
    std::vector<int> per_lane(3);
    size_t next = 0;
    for (const Chunk &c : tx.wire) {
        EXPECT_EQ(next, c.c.offset);
        EXPECT_EQ(cts.slot, c.c.slot);
        EXPECT_EQ(cts.gen, c.c.gen);
        per_lane[c.lane]++;
        next += c.c.len;
    }
    EXPECT_EQ(src.size(), next);
    EXPECT_EQ(100u, tx.wire.back().c.len);
    for (int n : per_lane)
        EXPECT_GE(n, 3);
    for (size_t k = 0; k < tx.wire.size(); k++)
        EXPECT_EQ(ICBC_OK, deliver(k));
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(&sreq, tx.sends_done[0].user);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_OK, rx.recvs_done[0].status);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(0, tx.stats().active_sends);
    EXPECT_EQ(0, rx.stats().active_slots);
}

/* A message of one chunk takes the home lane (the sender's own router);
 * one of more chunks is striped over every lane; a home lane that is down
 * leaves the one-chunk message to the other lanes. */
TEST_F(Transfer, OneChunkMessageTakesTheHomeLane)
{
    tx.home = 2;
    start(CHUNK);
    clear_to_send();
    ASSERT_EQ(1u, tx.wire.size());
    EXPECT_EQ(2, tx.wire[0].lane);
    EXPECT_EQ(ICBC_OK, deliver(0));
    EXPECT_EQ(src, dst);

    tx.wire.clear();
    start(3 * CHUNK);
    clear_to_send();
    ASSERT_EQ(3u, tx.wire.size());
    std::set<int> lanes;
    for (const Chunk &c : tx.wire)
        lanes.insert(c.lane);
    EXPECT_EQ(3u, lanes.size()) << "a striped message kept to the home lane";
    for (size_t k = 0; k < 3; k++)
        deliver(k);

    tx.wire.clear();
    tx.dead[2] = true;
    icbc_stripe_lane_lost(tx.st, 2, 0);
    start(CHUNK);
    clear_to_send();
    ASSERT_EQ(1u, tx.wire.size());
    EXPECT_NE(2, tx.wire[0].lane);
}

TEST_F(Transfer, ChunksInAnyOrderGiveTheSameBytes)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        tx.wire.clear();
        tx.sends_done.clear();
        rx.recvs_done.clear();
        start(7 * CHUNK + 1 + seed);
        clear_to_send();
        std::vector<size_t> order(tx.wire.size());
        for (size_t k = 0; k < order.size(); k++)
            order[k] = k;
        std::shuffle(order.begin(), order.end(), std::mt19937(seed));
        for (size_t k : order) {
            EXPECT_TRUE(rx.recvs_done.empty()) << "complete before its last chunk";
            EXPECT_EQ(ICBC_OK, deliver(k));
        }
        ASSERT_EQ(1u, rx.recvs_done.size()) << "seed " << seed;
        EXPECT_EQ(src, dst) << "seed " << seed;
        ASSERT_EQ(1u, tx.sends_done.size());
    }
}

TEST_F(Transfer, DuplicateChunkIsDroppedAndCountsOnce)
{
    start(4 * CHUNK);
    clear_to_send();
    EXPECT_EQ(ICBC_OK, deliver(1));
    /* the same chunk again, e.g. resent through another router */
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[1].c, tx.wire[1].data, 0));
    EXPECT_EQ(1u, rx.stats().duplicate_chunks);
    EXPECT_EQ(ICBC_OK, deliver(0));
    EXPECT_EQ(ICBC_OK, deliver(2));
    EXPECT_TRUE(rx.recvs_done.empty()) << "a duplicate counted as new bytes";
    EXPECT_EQ(ICBC_OK, deliver(3));
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(src, dst);
}

TEST_F(Transfer, ChunksOffTheGridOrOutsideTheMessageAreRejected)
{
    start(3 * CHUNK + 10);
    clear_to_send();
    const icbc_stripe_chunk_t good = tx.wire[0].c;
    std::vector<char> junk(2 * CHUNK, 'x');
    struct {
        uint64_t offset;
        size_t len;
        const char *what;
    } bad[] = {
        { 1, CHUNK, "unaligned offset" },
        { 0, CHUNK - 1, "short chunk that is not the last" },
        { 0, CHUNK + 1, "longer than the chunk size" },
        { 3 * CHUNK, 11, "last chunk past the end" },
        { 3 * CHUNK, 9, "last chunk too short" },
        { 4 * CHUNK, CHUNK, "offset past the end" },
        { UINT64_MAX - CHUNK + 1, CHUNK, "offset that wraps" },
        { 0, 0, "empty" },
    };
    for (const auto &b : bad) {
        icbc_stripe_chunk_t c = good;
        c.offset = b.offset;
        c.len = b.len;
        EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_chunk_data(rx.st, SENDER, &c, junk.data(), 0))
            << b.what;
    }
    for (size_t k = 0; k < tx.wire.size(); k++)
        EXPECT_EQ(ICBC_OK, deliver(k));
    EXPECT_EQ(src, dst) << "a rejected chunk wrote into the receive buffer";
    ASSERT_EQ(1u, rx.recvs_done.size());
}

TEST_F(Transfer, ForgedOrStaleSlotNamesNoReceive)
{
    start(2 * CHUNK);
    clear_to_send();
    std::vector<char> junk(CHUNK, 'x');
    icbc_stripe_chunk_t c = tx.wire[0].c;
    c.gen++;
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, icbc_stripe_chunk_data(rx.st, SENDER, &c, junk.data(), 0));
    c = tx.wire[0].c;
    c.slot = 1000000;
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, icbc_stripe_chunk_data(rx.st, SENDER, &c, junk.data(), 0));
    /* the right slot, from another process */
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, icbc_stripe_chunk_data(rx.st, 7, &tx.wire[0].c, junk.data(), 0));
    EXPECT_EQ(3u, rx.stats().dropped_chunks);
    EXPECT_EQ(ICBC_OK, deliver(0));
    EXPECT_EQ(ICBC_OK, deliver(1));
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(src, dst);
    /* a late copy after completion: the slot's generation moved on */
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[0].c, junk.data(), 0));
    icbc_stripe_cts_t again;
    ASSERT_EQ(ICBC_OK,
              icbc_stripe_recv_start(rx.st, SENDER, 0, CHUNK, dst.data(), &rreq, 0, &again));
    EXPECT_EQ(cts.slot, again.slot) << "a freed slot is reused";
    EXPECT_NE(cts.gen, again.gen);
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[0].c, junk.data(), 0));
}

TEST_F(Transfer, ForgedDuplicatedOrStaleCtsIsDropped)
{
    start(3 * CHUNK);
    icbc_stripe_cts_t bad = cts;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie + (1ull << 32), &cts, 0));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie + 1, &cts, 0));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, 5, cookie, &cts, 0)) << "another process";
    bad.chunk_size = 100;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie, &bad, 0));
    bad.chunk_size = (uint64_t) ICBC_STRIPE_CHUNK_MAX + 1;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie, &bad, 0));
    EXPECT_TRUE(tx.wire.empty()) << "a dropped CTS let chunks out";
    clear_to_send();
    EXPECT_EQ(3u, tx.wire.size());
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie, &cts, 0)) << "twice";
    EXPECT_EQ(3u, tx.wire.size());
    EXPECT_EQ(6u, tx.stats().dropped_cts);
    for (size_t k = 0; k < tx.wire.size(); k++)
        deliver(k);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie, &cts, 0)) << "stale";
    EXPECT_EQ(src, dst);
}

TEST_F(Transfer, DiscardingCtsCompletesTheSendWithoutChunks)
{
    start(3 * CHUNK);
    icbc_stripe_cts_t discard = { ICBC_STRIPE_SLOT_DISCARD, 0, 0 };
    EXPECT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, RECEIVER, cookie, &discard, 0));
    EXPECT_TRUE(tx.wire.empty());
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
}

TEST_F(Transfer, CancelledSendIgnoresItsCts)
{
    start(3 * CHUNK);
    icbc_stripe_send_cancel(tx.st, cookie);
    EXPECT_EQ(0, tx.stats().active_sends);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_cts(tx.st, RECEIVER, cookie, &cts, 0));
    EXPECT_TRUE(tx.sends_done.empty()) << "a cancelled send has no completion";
}

TEST_F(Transfer, BusyLaneHandsTheChunkToTheNext)
{
    tx.busy[0] = true;
    start(9 * CHUNK);
    clear_to_send();
    ASSERT_EQ(9u, tx.wire.size());
    for (const Chunk &c : tx.wire)
        EXPECT_NE(0, c.lane);
    EXPECT_EQ(0, tx.stats().blocked_sends);
}

TEST_F(Transfer, AllLanesBusyBlocksUntilProgressFindsOneFree)
{
    tx.busy[0] = tx.busy[1] = tx.busy[2] = true;
    start(5 * CHUNK);
    clear_to_send();
    EXPECT_TRUE(tx.wire.empty());
    EXPECT_EQ(1, tx.stats().blocked_sends);
    icbc_stripe_progress(tx.st, 0.1);
    EXPECT_TRUE(tx.wire.empty());
    EXPECT_EQ(1, tx.stats().blocked_sends);
    tx.busy[2] = false;
    icbc_stripe_progress(tx.st, 0.2);
    EXPECT_EQ(0, tx.stats().blocked_sends);
    ASSERT_EQ(5u, tx.wire.size());
    for (size_t k = 0; k < tx.wire.size(); k++)
        deliver(k);
    EXPECT_EQ(src, dst);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
}

TEST_F(Transfer, BlockedSendOfAFailedPeerLeavesTheQueue)
{
    tx.busy[0] = tx.busy[1] = tx.busy[2] = true;
    start(5 * CHUNK);
    clear_to_send();
    ASSERT_EQ(1, tx.stats().blocked_sends);
    icbc_stripe_peer_failed(tx.st, RECEIVER, "its router died");
    EXPECT_EQ(0, tx.stats().blocked_sends);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, tx.sends_done[0].status);
    EXPECT_EQ("its router died", tx.sends_done[0].why);
    tx.busy[0] = false;
    icbc_stripe_progress(tx.st, 0.1);
    EXPECT_TRUE(tx.wire.empty()) << "a failed send still sends";
}

TEST_F(Transfer, DeadLaneFailsTheSendOnceItsChunksAreBack)
{
    start(6 * CHUNK);
    clear_to_send();
    ASSERT_EQ(6u, tx.wire.size());
    tx.wire.clear();
    /* a second send whose lane dies after two chunks */
    uint64_t cookie2;
    icbc_stripe_cts_t cts2;
    std::vector<char> dst2(6 * CHUNK);
    ASSERT_EQ(ICBC_OK,
              icbc_stripe_send_start(tx.st, RECEIVER, src.data(), 6 * CHUNK, &rreq, 0, &cookie2));
    ASSERT_EQ(ICBC_OK,
              icbc_stripe_recv_start(rx.st, SENDER, 0, 6 * CHUNK, dst2.data(), nullptr, 0, &cts2));
    tx.dead[0] = tx.dead[1] = tx.dead[2] = true;
    ASSERT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, RECEIVER, cookie2, &cts2, 0));
    EXPECT_TRUE(tx.wire.empty());
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(&rreq, tx.sends_done[0].user);
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, tx.sends_done[0].status);
}

TEST_F(Transfer, LostChunkFailsTheSendAfterTheOthersReport)
{
    start(3 * CHUNK);
    clear_to_send();
    ASSERT_EQ(3u, tx.wire.size());
    icbc_stripe_chunk_sent(tx.st, tx.wire[1].token, 0, 0);
    EXPECT_TRUE(tx.sends_done.empty()) << "finished with chunks still on lanes";
    icbc_stripe_chunk_sent(tx.st, tx.wire[0].token, 1, 0);
    icbc_stripe_chunk_sent(tx.st, tx.wire[2].token, 1, 0);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, tx.sends_done[0].status);
    /* a lane reporting the same chunk again changes nothing */
    icbc_stripe_chunk_sent(tx.st, tx.wire[2].token, 1, 0);
    EXPECT_EQ(1u, tx.sends_done.size());
}

TEST_F(Transfer, StreamedChunkLostFailsTheReceive)
{
    start(2 * CHUNK);
    clear_to_send();
    icbc_stripe_rx_t r;
    void *where;
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[0].c, &r, &where));
    EXPECT_EQ(dst.data(), where);
    icbc_stripe_chunk_end(rx.st, &r, 0, 0);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, rx.recvs_done[0].status);
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[1].c, tx.wire[1].data, 0));
}

TEST_F(Transfer, ChunkStillStreamingWhenItsReceiveFailsIsDropped)
{
    start(2 * CHUNK, false);
    clear_to_send();
    icbc_stripe_rx_t r;
    void *where;
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[0].c, &r, &where));
    memcpy(where, tx.wire[0].data, CHUNK);
    icbc_stripe_peer_failed(rx.st, SENDER, "connection closed");
    ASSERT_EQ(1u, rx.recvs_done.size());
    icbc_stripe_chunk_end(rx.st, &r, 1, 0); /* frees its staging (ASan) */
    EXPECT_TRUE(rx.placed.empty());
    EXPECT_EQ(1u, rx.recvs_done.size());
}

TEST_F(Transfer, NonContiguousReceiveStagesOneChunkAtATime)
{
    start(5 * CHUNK + 7, false);
    clear_to_send();
    std::vector<size_t> order = { 4, 0, 5, 2, 1, 3 };
    for (size_t k : order)
        EXPECT_EQ(ICBC_OK, deliver(k));
    ASSERT_EQ(6u, rx.placed.size());
    for (size_t i = 0; i < order.size(); i++) {
        EXPECT_EQ(tx.wire[order[i]].c.offset, rx.placed[i].first);
        EXPECT_LE(rx.placed[i].second, CHUNK);
    }
    EXPECT_EQ(src, rx.placed_bytes);
    ASSERT_EQ(1u, rx.recvs_done.size());
}

TEST_F(Transfer, SilentPeerFailsAWaitingSendAndAReceiveAfterTheTimeout)
{
    start(3 * CHUNK); /* timeout 10 s */
    icbc_stripe_progress(tx.st, 5);
    icbc_stripe_progress(rx.st, 5);
    EXPECT_TRUE(tx.sends_done.empty());
    EXPECT_TRUE(rx.recvs_done.empty());
    /* the peer speaks (any message): the clock starts again */
    icbc_stripe_peer_seen(tx.st, RECEIVER, 9);
    icbc_stripe_progress(tx.st, 12);
    icbc_stripe_progress(rx.st, 12);
    EXPECT_TRUE(tx.sends_done.empty()) << "failed though its peer spoke 3 s ago";
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_ERR_TIMEOUT, rx.recvs_done[0].status);
    EXPECT_EQ(1u, rx.stats().stalled_recvs);
    icbc_stripe_progress(tx.st, 19.5);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_TIMEOUT, tx.sends_done[0].status);
    EXPECT_EQ(1u, tx.stats().stalled_sends);
}

TEST_F(Transfer, ChunksKeepAReceiveAlive)
{
    start(4 * CHUNK);
    clear_to_send();
    for (size_t k = 0; k < 3; k++) {
        deliver(k, 8.0 * (k + 1));
        icbc_stripe_progress(rx.st, 8.0 * (k + 1) + 5);
    }
    EXPECT_TRUE(rx.recvs_done.empty());
    icbc_stripe_progress(rx.st, 35);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_ERR_TIMEOUT, rx.recvs_done[0].status);
}

TEST(Stripe, TimeoutZeroNeverFails)
{
    Side s(CHUNK, 0);
    uint64_t cookie;
    char buf[8192];
    icbc_stripe_cts_t cts;
    ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 1, buf, sizeof(buf), nullptr, 0, &cookie));
    ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(s.st, 1, 0, sizeof(buf), buf, nullptr, 0, &cts));
    icbc_stripe_progress(s.st, 1e6);
    EXPECT_TRUE(s.sends_done.empty());
    EXPECT_TRUE(s.recvs_done.empty());
}

TEST(Stripe, GenerationsWrapAroundAndSkipZero)
{
    Side s(CHUNK, 10, UINT32_MAX - 1);
    char buf[CHUNK];
    std::vector<uint32_t> gens;
    for (int k = 0; k < 3; k++) {
        icbc_stripe_cts_t cts;
        ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(s.st, 1, 0, CHUNK, buf, nullptr, 0, &cts));
        EXPECT_EQ(0u, cts.slot);
        gens.push_back(cts.gen);
        icbc_stripe_chunk_t c = { cts.slot, cts.gen, 0, CHUNK };
        ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_data(s.st, 1, &c, buf, 0));
    }
    EXPECT_EQ((std::vector<uint32_t>{ UINT32_MAX - 1, UINT32_MAX, 1 }), gens);

    std::vector<uint32_t> send_gens;
    for (int k = 0; k < 3; k++) {
        uint64_t cookie;
        ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 1, buf, CHUNK, nullptr, 0, &cookie));
        EXPECT_EQ(0u, (uint32_t) cookie);
        send_gens.push_back((uint32_t) (cookie >> 32));
        icbc_stripe_send_cancel(s.st, cookie);
    }
    EXPECT_EQ((std::vector<uint32_t>{ UINT32_MAX - 1, UINT32_MAX, 1 }), send_gens);
}

TEST(Stripe, EmptyTransfersAreRefused)
{
    Side s(CHUNK);
    uint64_t cookie;
    icbc_stripe_cts_t cts;
    char b;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_send_start(s.st, 1, &b, 0, nullptr, 0, &cookie));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_recv_start(s.st, 1, 0, 0, &b, nullptr, 0, &cts));
}

TEST(Stripe, PeerFailureEndsOnlyThatPeersTransfers)
{
    Side s(CHUNK);
    char buf[CHUNK];
    uint64_t c1, c2;
    icbc_stripe_cts_t r1, r2;
    int u1, u2, u3, u4;
    ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 1, buf, CHUNK, &u1, 0, &c1));
    ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 2, buf, CHUNK, &u2, 0, &c2));
    ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(s.st, 1, 0, CHUNK, buf, &u3, 0, &r1));
    ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(s.st, 2, 0, CHUNK, buf, &u4, 0, &r2));
    icbc_stripe_peer_failed(s.st, 1, "lost");
    ASSERT_EQ(1u, s.sends_done.size());
    EXPECT_EQ(&u1, s.sends_done[0].user);
    ASSERT_EQ(1u, s.recvs_done.size());
    EXPECT_EQ(&u3, s.recvs_done[0].user);
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, s.recvs_done[0].status);
    EXPECT_EQ(1, s.stats().active_sends);
    EXPECT_EQ(1, s.stats().active_slots);
}

/* A lane that, inside send_chunk, reports an earlier send's last chunk
 * sent, whose completion starts many more sends: the send table grows
 * (moves) while the engine is inside its loop over the later send. ASan
 * catches a stale pointer. */
TEST(Stripe, CompletionsThatGrowTheTableInsideASend)
{
    Side s(CHUNK);
    std::vector<char> buf(3 * CHUNK, 'a');
    std::vector<uint64_t> started;
    s.on_send_complete = [&](Side &side) {
        if (!started.empty())
            return;
        for (int k = 0; k < 200; k++) {
            uint64_t ck;
            ASSERT_EQ(ICBC_OK,
                      icbc_stripe_send_start(side.st, 1, buf.data(), buf.size(), nullptr, 0, &ck));
            started.push_back(ck);
        }
    };
    uint64_t first, second;
    icbc_stripe_cts_t cts = { 0, 1, CHUNK };
    ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 1, buf.data(), CHUNK, nullptr, 0, &first));
    ASSERT_EQ(ICBC_OK, icbc_stripe_cts(s.st, 1, first, &cts, 0));
    ASSERT_EQ(1u, s.wire.size());
    uint64_t first_chunk = s.wire[0].token;
    s.on_send_chunk = [&](Side &side) { icbc_stripe_chunk_sent(side.st, first_chunk, 1, 0); };
    s.complete_inline = true;
    ASSERT_EQ(ICBC_OK,
              icbc_stripe_send_start(s.st, 1, buf.data(), buf.size(), nullptr, 0, &second));
    ASSERT_EQ(ICBC_OK, icbc_stripe_cts(s.st, 1, second, &cts, 0));
    ASSERT_EQ(200u, started.size()) << "the first send did not complete inside the second's";
    EXPECT_EQ(4u, s.wire.size());
    EXPECT_EQ(2u, s.sends_done.size());
    for (uint64_t ck : started)
        ASSERT_EQ(ICBC_OK, icbc_stripe_cts(s.st, 1, ck, &cts, 0));
    EXPECT_EQ(202u, s.sends_done.size());
    EXPECT_EQ(0, s.stats().active_sends);
}

TEST(Stripe, ManyTransfersAtOnceOverLanesThatRefuseAtRandom)
{
    Side tx(CHUNK), rx(CHUNK);
    std::mt19937 rng(7);
    const int N = 50;
    std::vector<std::vector<char>> srcs, dsts(N);
    std::vector<uint64_t> cookies(N);
    std::vector<icbc_stripe_cts_t> ctss(N);
    for (int k = 0; k < N; k++) {
        srcs.push_back(pattern(1 + rng() % (20 * CHUNK), k));
        dsts[k].assign(srcs[k].size(), 0);
        ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(tx.st, 1, srcs[k].data(), srcs[k].size(), nullptr,
                                                  0, &cookies[k]));
        ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(rx.st, 0, 0, srcs[k].size(), dsts[k].data(),
                                                  nullptr, 0, &ctss[k]));
    }
    for (int k = 0; k < N; k++) {
        for (int l = 0; l < 3; l++)
            tx.busy[l] = rng() % 2;
        ASSERT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, 1, cookies[k], &ctss[k], 0));
    }
    size_t delivered = 0;
    for (int round = 0; round < 1000 && rx.recvs_done.size() < (size_t) N; round++) {
        for (int l = 0; l < 3; l++)
            tx.busy[l] = rng() % 3 == 0;
        icbc_stripe_progress(tx.st, 0);
        std::vector<size_t> order;
        for (size_t k = delivered; k < tx.wire.size(); k++)
            order.push_back(k);
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t k : order) {
            const Chunk &c = tx.wire[k];
            ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_data(rx.st, 0, &c.c, c.data, 0));
            icbc_stripe_chunk_sent(tx.st, c.token, 1, 0);
        }
        delivered = tx.wire.size();
    }
    ASSERT_EQ((size_t) N, rx.recvs_done.size());
    EXPECT_EQ((size_t) N, tx.sends_done.size());
    for (int k = 0; k < N; k++)
        EXPECT_EQ(srcs[k], dsts[k]) << "transfer " << k;
    EXPECT_GT(tx.stats().chunks_sent, (uint64_t) N);
}

/* ---- failover ------------------------------------------------------------ */

struct Failover : TransferOver<1> {
    /* The receiver's confirmations reach the sender. */
    void confirm_back(double now = 0)
    {
        auto c = rx.confirms;
        rx.confirms.clear();
        for (auto &pc : c) {
            EXPECT_EQ(SENDER, pc.first);
            icbc_stripe_send_confirmed(tx.st, RECEIVER, pc.second, now);
        }
    }
    void report(size_t k, int ok, double now = 0)
    {
        icbc_stripe_chunk_sent(tx.st, tx.wire[k].token, ok, now);
    }
    std::vector<size_t> on_lane(int lane, size_t from = 0)
    {
        std::vector<size_t> v;
        for (size_t k = from; k < tx.wire.size(); k++)
            if (tx.wire[k].lane == lane)
                v.push_back(k);
        return v;
    }
};

TEST(Stripe, FailoverNeedsAConfirmOp)
{
    icbc_stripe_config_t cfg = { CHUNK, 10, 0, 1, ICBC_STRIPE_PLACE_WINDOW, 0, 0 };
    icbc_stripe_ops_t ops = { Side::send_chunk,
                              Side::lanes,
                              Side::send_complete,
                              Side::recv_complete,
                              Side::place,
                              nullptr,
                              nullptr,
                              nullptr };
    icbc_stripe_t *st = nullptr;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_create(&cfg, &ops, nullptr, &st));
    EXPECT_EQ(nullptr, st);
}

TEST_F(Failover, SendEndsOnlyWhenTheReceiverConfirms)
{
    start(4 * CHUNK);
    clear_to_send();
    for (size_t k = 0; k < tx.wire.size(); k++)
        EXPECT_EQ(ICBC_OK, deliver(k));
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_TRUE(tx.sends_done.empty()) << "ended before the receiver confirmed";
    ASSERT_EQ(1u, rx.confirms.size());
    EXPECT_EQ(cookie, rx.confirms[0].second);
    confirm_back();
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_send_confirmed(tx.st, RECEIVER, cookie, 0))
        << "a second confirmation named a send";
    EXPECT_EQ(src, dst);
}

TEST_F(Failover, ConfirmationBeforeTheLanesReportWaitsForThem)
{
    start(2 * CHUNK);
    clear_to_send();
    for (size_t k = 0; k < 2; k++)
        icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[k].c, tx.wire[k].data, 0);
    confirm_back();
    EXPECT_TRUE(tx.sends_done.empty()) << "ended while lanes hold its chunks";
    report(0, 1);
    report(1, 0); /* even a lane that says it lost it: the receiver has it */
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(2u, tx.wire.size()) << "a confirmed chunk went again";
}

TEST_F(Failover, ChunksOfALostLaneGoAgainOnTheOthers)
{
    start(9 * CHUNK);
    clear_to_send();
    ASSERT_EQ(9u, tx.wire.size());
    auto lost = on_lane(1);
    ASSERT_EQ(3u, lost.size());
    /* lane 1 took its chunks and reported them sent, then died before
     * they reached the receiver */
    for (size_t k = 0; k < 9; k++) {
        if (tx.wire[k].lane == 1)
            report(k, 1);
        else
            EXPECT_EQ(ICBC_OK, deliver(k));
    }
    EXPECT_TRUE(rx.recvs_done.empty());
    icbc_stripe_lane_lost(tx.st, 1, 1);
    EXPECT_EQ(9u, tx.wire.size()) << "sent again outside progress";
    icbc_stripe_progress(tx.st, 1);
    ASSERT_EQ(12u, tx.wire.size());
    std::vector<uint64_t> want, got;
    for (size_t k : lost)
        want.push_back(tx.wire[k].c.offset);
    for (size_t k = 9; k < 12; k++) {
        EXPECT_NE(1, tx.wire[k].lane) << "a chunk went to the lost lane";
        got.push_back(tx.wire[k].c.offset);
        EXPECT_EQ(ICBC_OK, deliver(k, 1));
    }
    EXPECT_EQ(want, got);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(src, dst);
    confirm_back(1);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(3u, tx.stats().chunks_resent);
    EXPECT_EQ(3u, tx.stats().chunks_lost);
    EXPECT_EQ(1u, tx.stats().lanes_lost);
}

TEST_F(Failover, ChunkStillWithTheLostLaneGoesAgainWhenReported)
{
    start(3 * CHUNK);
    clear_to_send();
    ASSERT_EQ(3u, tx.wire.size());
    deliver(0);
    deliver(2);
    icbc_stripe_lane_lost(tx.st, tx.wire[1].lane, 0);
    icbc_stripe_progress(tx.st, 0);
    EXPECT_EQ(3u, tx.wire.size()) << "sent again before its lane reported it";
    report(1, 0); /* the broken lane gives it back */
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(4u, tx.wire.size());
    EXPECT_EQ(tx.wire[1].c.offset, tx.wire[3].c.offset);
    EXPECT_NE(tx.wire[1].lane, tx.wire[3].lane);
    deliver(3);
    confirm_back();
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(src, dst);
}

TEST_F(Failover, DuplicateAfterResendIsWrittenOnce)
{
    start(3 * CHUNK, false);
    clear_to_send();
    report(1, 1);
    icbc_stripe_lane_lost(tx.st, tx.wire[1].lane, 0);
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(4u, tx.wire.size());
    deliver(3); /* the copy through another lane first */
    /* then the first copy, late through the lost lane's trunk */
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_stripe_chunk_data(rx.st, SENDER, &tx.wire[1].c, tx.wire[1].data, 0));
    deliver(0);
    deliver(2);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(3u, rx.placed.size()) << "a chunk was written twice";
    EXPECT_EQ(src, rx.placed_bytes);
    EXPECT_EQ(1u, rx.stats().duplicate_chunks);
}

TEST_F(Failover, ResendOfAResend)
{
    start(2 * CHUNK);
    clear_to_send();
    deliver(0);
    report(1, 0); /* lost on its lane (the lane lives on) */
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(3u, tx.wire.size());
    report(2, 0); /* and the second copy too */
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(4u, tx.wire.size());
    EXPECT_EQ(tx.wire[1].c.offset, tx.wire[3].c.offset);
    deliver(3);
    confirm_back();
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(2u, tx.stats().chunks_resent);
}

TEST_F(Failover, LaneThatLosesEverythingFailsTheSendInTheEnd)
{
    start(CHUNK);
    clear_to_send();
    for (int round = 0; round < 100 && tx.sends_done.empty(); round++) {
        report(tx.wire.size() - 1, 0);
        icbc_stripe_progress(tx.st, 0);
    }
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, tx.sends_done[0].status);
    EXPECT_NE(std::string::npos, tx.sends_done[0].why.find("again and again"));
}

TEST_F(Failover, RevivedLaneCarriesChunksAgain)
{
    icbc_stripe_lane_lost(tx.st, 1, 0);
    start(6 * CHUNK);
    clear_to_send();
    ASSERT_EQ(6u, tx.wire.size());
    EXPECT_TRUE(on_lane(1).empty()) << "a chunk went to a lost lane";
    for (size_t k = 0; k < 6; k++)
        deliver(k);
    confirm_back();
    icbc_stripe_lane_revived(tx.st, 1);
    tx.wire.clear();
    start(6 * CHUNK);
    clear_to_send();
    EXPECT_EQ(2u, on_lane(1).size());
}

/* Adaptive placement: a lane that stalled before it was lost measured a
 * rate of nothing. When it comes back (a restarted router), that figure
 * says nothing of it: it is offered chunks like a lane not measured yet. */
TEST(Stripe, ARevivedLaneIsMeasuredAfreshByAdaptivePlacement)
{
    Side tx{ CHUNK, 10, 0, 1, ICBC_STRIPE_PLACE_ADAPTIVE, 0.01 }, rx{ CHUNK, 10, 0, 1 };
    const size_t size = 60 * CHUNK;
    std::vector<char> src = pattern(size), dst(size);
    double now = 0.001;

    auto transfer = [&](bool lane2_stalls) {
        uint64_t cookie;
        icbc_stripe_cts_t cts;
        size_t from = tx.wire.size();
        ASSERT_EQ(ICBC_OK,
                  icbc_stripe_send_start(tx.st, RECEIVER, src.data(), size, nullptr, now, &cookie));
        ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(rx.st, SENDER, cookie, size, dst.data(), nullptr,
                                                  now, &cts));
        ASSERT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, RECEIVER, cookie, &cts, now));
        /* lanes 0 and 1 deliver a chunk every millisecond; lane 2, when it
         * stalls, nothing, until it is lost */
        for (int step = 0; step < 200 && tx.sends_done.size() < (lane2_stalls ? 1u : 2u); step++) {
            now += 0.001;
            for (size_t k = from; k < tx.wire.size(); k++) {
                Chunk &c = tx.wire[k];
                if (c.token == 0 || (lane2_stalls && c.lane == 2 && step < 50))
                    continue;
                if (lane2_stalls && c.lane == 2) {
                    icbc_stripe_chunk_sent(tx.st, c.token, 0, now); /* died with its lane */
                } else {
                    icbc_stripe_chunk_data(rx.st, SENDER, &c.c, c.data, now);
                    icbc_stripe_chunk_sent(tx.st, c.token, 1, now);
                }
                c.token = 0;
                break; /* one chunk per step */
            }
            if (lane2_stalls && step == 49)
                icbc_stripe_lane_lost(tx.st, 2, now);
            for (auto &pc : rx.confirms)
                icbc_stripe_send_confirmed(tx.st, RECEIVER, pc.second, now);
            rx.confirms.clear();
            icbc_stripe_progress(tx.st, now);
        }
    };
    transfer(true);
    ASSERT_EQ(1u, tx.sends_done.size());
    ASSERT_EQ(ICBC_OK, tx.sends_done[0].status);
    icbc_stripe_lane_stats_t ls;
    icbc_stripe_lane_stats(tx.st, 2, &ls);
    EXPECT_EQ(0, ls.rate) << "lane 2 moved nothing while it held chunks";
    EXPECT_EQ(src, dst);

    icbc_stripe_lane_revived(tx.st, 2);
    size_t from = tx.wire.size();
    std::fill(dst.begin(), dst.end(), 0);
    transfer(false);
    ASSERT_EQ(2u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[1].status);
    EXPECT_EQ(src, dst);
    size_t on2 = 0;
    for (size_t k = from; k < tx.wire.size(); k++)
        on2 += tx.wire[k].lane == 2;
    EXPECT_GT(on2, 0u) << "the revived lane was offered no chunk";
}

TEST_F(Failover, AFixedLaneCarriesEveryChunkAndMovesWhenLost)
{
    tx.fixed_lane = 2;
    start(6 * CHUNK);
    clear_to_send();
    ASSERT_EQ(6u, tx.wire.size());
    EXPECT_EQ(6u, on_lane(2).size()) << "a chunk left the fixed lane";
    for (size_t k = 0; k < 3; k++)
        deliver(k);
    for (size_t k = 3; k < 6; k++)
        report(k, 1);
    /* the fixed lane is lost; the caller moves the process to lane 0: every
     * chunk not confirmed goes again there (the receiver drops the three it
     * has as duplicates) */
    tx.fixed_lane = 0;
    icbc_stripe_lane_lost(tx.st, 2, 1);
    icbc_stripe_progress(tx.st, 1);
    ASSERT_EQ(12u, tx.wire.size());
    int dups = 0;
    for (size_t k = 6; k < 12; k++) {
        EXPECT_EQ(0, tx.wire[k].lane);
        dups += deliver(k, 1) == ICBC_ERR_INVALID;
    }
    EXPECT_EQ(3, dups);
    EXPECT_EQ(src, dst);
    confirm_back(1);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    /* a fixed lane that is down takes nothing, and the others are not used */
    tx.wire.clear();
    tx.fixed_lane = 2;
    start(2 * CHUNK);
    clear_to_send();
    EXPECT_TRUE(tx.wire.empty());
    ASSERT_EQ(2u, tx.sends_done.size());
    EXPECT_EQ("every lane is lost", tx.sends_done[1].why);
}

TEST_F(Failover, EveryLaneLostFailsTheSend)
{
    start(4 * CHUNK);
    clear_to_send();
    report(0, 1);
    for (int lane = 0; lane < 3; lane++)
        icbc_stripe_lane_lost(tx.st, lane, 0);
    for (size_t k = 1; k < 4; k++)
        report(k, 0);
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_PEER_FAILED, tx.sends_done[0].status);
    EXPECT_EQ("every lane is lost", tx.sends_done[0].why);
}

TEST_F(Failover, LateChunkOfACompletedReceiveIsConfirmedAgain)
{
    start(3 * CHUNK);
    clear_to_send();
    for (size_t k = 0; k < 3; k++)
        deliver(k);
    ASSERT_EQ(1u, rx.recvs_done.size());
    rx.confirms.clear(); /* the confirmation died with a router */
    icbc_stripe_lane_lost(tx.st, tx.wire[0].lane, 0);
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(4u, tx.wire.size());
    /* the slot is reused meanwhile: the late chunk must not land in it */
    std::vector<char> other(CHUNK, 'o');
    icbc_stripe_cts_t cts2;
    ASSERT_EQ(ICBC_OK,
              icbc_stripe_recv_start(rx.st, SENDER, 77, CHUNK, other.data(), nullptr, 0, &cts2));
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, deliver(3));
    EXPECT_EQ(std::vector<char>(CHUNK, 'o'), other);
    ASSERT_EQ(1u, rx.confirms.size());
    EXPECT_EQ(cookie, rx.confirms[0].second);
    confirm_back();
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(1u, rx.stats().late_chunks);
}

TEST_F(Failover, ChunkBrokenWhileStreamingWaitsForItsCopy)
{
    start(2 * CHUNK);
    clear_to_send();
    icbc_stripe_rx_t r;
    void *where;
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[0].c, &r, &where));
    memset(where, 'x', CHUNK / 2); /* half of it, then the connection broke */
    icbc_stripe_chunk_end(rx.st, &r, 0, 0);
    EXPECT_TRUE(rx.recvs_done.empty()) << "the receive failed with its chunk";
    report(0, 0);
    deliver(1);
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(3u, tx.wire.size());
    EXPECT_EQ(ICBC_OK, deliver(2));
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_OK, rx.recvs_done[0].status);
    EXPECT_EQ(src, dst);
}

/* The first copy hangs on a dying router while the sender already sent the
 * chunk again by another: the copy is taken, whichever ends whole first
 * counts, and the receive completes once. */
TEST_F(Failover, ACopyArrivingWhileTheFirstStillStreamsIsTaken)
{
    start(2 * CHUNK);
    clear_to_send();
    deliver(1);
    icbc_stripe_rx_t first, copy, late;
    void *w1, *w2, *w3;
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[0].c, &first, &w1));
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[0].c, &copy, &w2))
        << "a copy was refused while the first still streamed";
    icbc_stripe_chunk_end(rx.st, &first, 0, 0); /* the dying router's pull fails */
    EXPECT_TRUE(rx.recvs_done.empty());
    memcpy(w2, tx.wire[0].data, tx.wire[0].c.len);
    icbc_stripe_chunk_end(rx.st, &copy, 1, 0);
    ASSERT_EQ(1u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_OK, rx.recvs_done[0].status);
    EXPECT_EQ(src, dst);
    /* both copies whole: the second is a duplicate */
    start(2 * CHUNK);
    clear_to_send();
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[2].c, &first, &w1));
    ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[2].c, &copy, &w2));
    memcpy(w1, tx.wire[2].data, tx.wire[2].c.len);
    icbc_stripe_chunk_end(rx.st, &first, 1, 0);
    uint64_t dups = rx.stats().duplicate_chunks;
    memcpy(w2, tx.wire[2].data, tx.wire[2].c.len);
    icbc_stripe_chunk_end(rx.st, &copy, 1, 0);
    EXPECT_EQ(dups + 1, rx.stats().duplicate_chunks);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[2].c, &late, &w3))
        << "a copy of a chunk in place was taken";
    EXPECT_EQ(ICBC_OK, deliver(3));
    ASSERT_EQ(2u, rx.recvs_done.size());
    EXPECT_EQ(ICBC_OK, rx.recvs_done[1].status);
    EXPECT_EQ(src, dst);
}

/* The copy ends first and the rest of the message arrives while the first
 * copy still streams into the buffer: the receive completes only when that
 * copy ends (well or not), never while it may still write to the buffer;
 * one that says nothing for the timeout is given up, and the receive
 * completes with its bytes. */
TEST_F(Failover, ACopyStillStreamingHoldsTheReceiveUntilItEnds)
{
    enum { FAILS, ENDS_WELL, GOES_SILENT };
    for (int first = FAILS; first <= GOES_SILENT; first++) {
        SCOPED_TRACE(first == FAILS       ? "the first copy fails"
                     : first == ENDS_WELL ? "the first copy ends well"
                                          : "the first copy goes silent");
        size_t before = rx.recvs_done.size(), w0 = tx.wire.size();
        start(2 * CHUNK);
        clear_to_send();
        ASSERT_EQ(w0 + 2, tx.wire.size());
        icbc_stripe_rx_t first_rx, copy;
        void *w1, *w2;
        ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[w0].c, &first_rx, &w1));
        ASSERT_EQ(ICBC_OK, icbc_stripe_chunk_begin(rx.st, SENDER, &tx.wire[w0].c, &copy, &w2));
        memcpy(w2, tx.wire[w0].data, tx.wire[w0].c.len);
        icbc_stripe_chunk_end(rx.st, &copy, 1, 0);
        report(w0, 1);
        EXPECT_EQ(ICBC_OK, deliver(w0 + 1));
        EXPECT_EQ(before, rx.recvs_done.size()) << "completed while a copy still streamed";
        EXPECT_TRUE(rx.confirms.empty()) << "confirmed while a copy still streamed";
        if (first == GOES_SILENT) {
            icbc_stripe_progress(rx.st, 5);
            EXPECT_EQ(before, rx.recvs_done.size()) << "given up before the timeout";
            icbc_stripe_progress(rx.st, 11);
        } else {
            if (first == ENDS_WELL)
                memcpy(w1, tx.wire[w0].data, tx.wire[w0].c.len);
            icbc_stripe_chunk_end(rx.st, &first_rx, first == ENDS_WELL, 0);
        }
        ASSERT_EQ(before + 1, rx.recvs_done.size());
        EXPECT_EQ(ICBC_OK, rx.recvs_done.back().status);
        EXPECT_EQ(src, dst);
        confirm_back();
        ASSERT_FALSE(tx.sends_done.empty());
        EXPECT_EQ(ICBC_OK, tx.sends_done.back().status);
        if (first == GOES_SILENT) { /* the silent copy ends after all: nothing to do */
            icbc_stripe_chunk_end(rx.st, &first_rx, 1, 12);
            EXPECT_EQ(before + 1, rx.recvs_done.size());
        }
    }
}

/* A chunk to send again that finds every lane busy waits, however many
 * times progress finds them busy: only losses count towards the bound on
 * resends, not the tries. */
TEST_F(Failover, AResendWaitingForBusyLanesIsNotCountedAsLostAgain)
{
    start(CHUNK);
    clear_to_send();
    ASSERT_EQ(1u, tx.wire.size());
    for (int l = 0; l < 3; l++)
        tx.busy[l] = true;
    report(0, 0); /* lost: it goes again, but every lane is busy */
    for (int i = 0; i < 200; i++)
        icbc_stripe_progress(tx.st, 0);
    EXPECT_TRUE(tx.sends_done.empty()) << tx.sends_done[0].why;
    for (int l = 0; l < 3; l++)
        tx.busy[l] = false;
    icbc_stripe_progress(tx.st, 0);
    ASSERT_EQ(2u, tx.wire.size());
    EXPECT_EQ(ICBC_OK, deliver(1));
    confirm_back();
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_OK, tx.sends_done[0].status);
    EXPECT_EQ(src, dst);
}

TEST_F(Failover, NoConfirmationFailsTheSendAfterTheTimeout)
{
    start(2 * CHUNK); /* timeout 10 s */
    clear_to_send();
    deliver(0);
    deliver(1);
    rx.confirms.clear();
    icbc_stripe_progress(tx.st, 9);
    EXPECT_TRUE(tx.sends_done.empty());
    icbc_stripe_progress(tx.st, 11.5);
    ASSERT_EQ(1u, tx.sends_done.size());
    EXPECT_EQ(ICBC_ERR_TIMEOUT, tx.sends_done[0].status);
    EXPECT_EQ("no confirmation arrived in time", tx.sends_done[0].why);
}

/* Many transfers at once over four lanes that lose chunks, die and come
 * back, chunks delivered in any order: every byte arrives once, every
 * send and receive ends well. */
TEST(Stripe, FailoverUnderRandomLossesAndLaneDeaths)
{
    uint64_t resent = 0, lanes_lost = 0, duplicates = 0, late = 0;
    for (unsigned seed = 1; seed <= 30; seed++) {
        Side tx(CHUNK, 0, 0, 1), rx(CHUNK, 0, 0, 1);
        tx.nlanes = rx.nlanes = 4;
        std::mt19937 rng(seed);
        const int N = 8;
        std::vector<std::vector<char>> srcs(N), dsts(N);
        for (int k = 0; k < N; k++) {
            size_t size = 1 + rng() % (12 * CHUNK);
            srcs[k] = pattern(size, seed * 100 + k);
            dsts[k].assign(size, 0);
            uint64_t cookie;
            icbc_stripe_cts_t cts;
            ASSERT_EQ(ICBC_OK,
                      icbc_stripe_send_start(tx.st, 1, srcs[k].data(), size, nullptr, 0, &cookie));
            ASSERT_EQ(ICBC_OK, icbc_stripe_recv_start(rx.st, 0, cookie, size, dsts[k].data(),
                                                      nullptr, 0, &cts));
            ASSERT_EQ(ICBC_OK, icbc_stripe_cts(tx.st, 1, cookie, &cts, 0));
        }
        std::vector<bool> down(4, false);
        size_t done = 0; /* tx.wire[0 .. done) processed */
        std::vector<size_t> pending;
        int steps = 0;
        while ((tx.sends_done.size() < (size_t) N || rx.recvs_done.size() < (size_t) N) &&
               steps++ < 100000) {
            for (; done < tx.wire.size(); done++)
                pending.push_back(done);
            unsigned r = rng() % 100;
            if (r < 3) { /* a lane dies, if two others live */
                int lane = rng() % 4;
                if (!down[lane] && std::count(down.begin(), down.end(), false) > 2) {
                    down[lane] = true;
                    icbc_stripe_lane_lost(tx.st, lane, 0);
                }
            } else if (r < 5) { /* a lane comes back */
                int lane = rng() % 4;
                if (down[lane]) {
                    down[lane] = false;
                    icbc_stripe_lane_revived(tx.st, lane);
                }
            } else if (!pending.empty()) {
                size_t i = rng() % pending.size();
                const Chunk c = tx.wire[pending[i]];
                pending.erase(pending.begin() + i);
                if (down[c.lane] || rng() % 10 == 0) {
                    /* died with its router (which may have said it took it), or a lane
                     * that says it lost it */
                    icbc_stripe_chunk_sent(tx.st, c.token, down[c.lane] ? (int) (rng() % 2) : 0, 0);
                } else {
                    icbc_stripe_chunk_data(rx.st, 0, &c.c, c.data, 0);
                    icbc_stripe_chunk_sent(tx.st, c.token, 1, 0);
                }
            }
            auto confirms = rx.confirms;
            rx.confirms.clear();
            for (auto &pc : confirms)
                icbc_stripe_send_confirmed(tx.st, 1, pc.second, 0);
            icbc_stripe_progress(tx.st, 0);
        }
        ASSERT_EQ((size_t) N, tx.sends_done.size()) << "seed " << seed;
        ASSERT_EQ((size_t) N, rx.recvs_done.size()) << "seed " << seed;
        for (auto &d : tx.sends_done)
            EXPECT_EQ(ICBC_OK, d.status) << "seed " << seed << ": " << d.why;
        for (auto &d : rx.recvs_done)
            EXPECT_EQ(ICBC_OK, d.status) << "seed " << seed << ": " << d.why;
        for (int k = 0; k < N; k++)
            EXPECT_EQ(srcs[k], dsts[k]) << "seed " << seed << " transfer " << k;
        EXPECT_EQ(0, tx.stats().active_sends);
        EXPECT_EQ(0, rx.stats().active_slots);
        resent += tx.stats().chunks_resent;
        lanes_lost += tx.stats().lanes_lost;
        duplicates += rx.stats().duplicate_chunks;
        late += rx.stats().late_chunks;
    }
    /* the runs went through what they are here for */
    EXPECT_GT(lanes_lost, 10u);
    EXPECT_GT(resent, 100u);
    EXPECT_GT(duplicates, 0u);
    EXPECT_GT(late, 0u);
    printf("30 runs: %llu lanes lost, %llu chunks sent again, %llu duplicates dropped, %llu "
           "late chunks confirmed again\n",
           (unsigned long long) lanes_lost, (unsigned long long) resent,
           (unsigned long long) duplicates, (unsigned long long) late);
}

/* ---- placement ----------------------------------------------------------- */

/* Lanes that deliver at given rates in simulated time: each holds at most
 * WINDOW chunks (a router's window) and delivers the bytes at its head at
 * its rate; a chunk is reported sent when its last byte is delivered. */
struct Sim {
    std::vector<double> rate; /* bytes/s */
    size_t window = 8;
    std::vector<std::deque<std::pair<uint64_t, double>>> q; /* token, bytes left */
    std::vector<uint64_t> carried;                          /* bytes per lane */
    std::vector<std::vector<double>> handed;                /* when, per lane */
    /* lanes that are routers: each takes chunks at once (reports them sent)
     * while it holds less than this many bytes, and delivers them at its
     * rate; 0: a lane reports a chunk when it delivered it */
    size_t router_buffer = 0;
    int feedback = 0; /* the far end reports deliveries (icbc_stripe_lane_delivered) */
    std::vector<uint64_t> pulled;
    size_t delivered = 0;
    int stall_lane = -1;                 /* delivers nothing ... */
    double stall_from = 0, stall_to = 0; /* ... in this interval */
    icbc_stripe_t *st = nullptr;
    double now = 0;
    int done = 0;

    static icbc_status_t send_chunk(void *ctx, int, int lane, const icbc_stripe_chunk_t *c,
                                    const void *, uint64_t token)
    {
        Sim *s = static_cast<Sim *>(ctx);
        if (s->router_buffer ? s->queued(lane) + c->len > s->router_buffer
                             : s->q[lane].size() >= s->window)
            return ICBC_ERR_BUSY;
        s->q[lane].push_back({ token, (double) c->len });
        s->carried[lane] += c->len;
        s->handed[lane].push_back(s->now);
        if (s->router_buffer)
            s->pulled.push_back(token); /* reported sent at once: the router took it */
        return ICBC_OK;
    }
    static int lanes(void *ctx, int)
    {
        return (int) static_cast<Sim *>(ctx)->rate.size();
    }
    double queued(int lane) const
    {
        double b = 0;
        for (auto &h : q[lane])
            b += h.second;
        return b;
    }
    static void send_complete(void *ctx, void *, icbc_status_t st, const char *)
    {
        EXPECT_EQ(ICBC_OK, st);
        static_cast<Sim *>(ctx)->done++;
    }
    static void recv_complete(void *, void *, icbc_status_t, const char *)
    {
    }

    /* Bytes per second of one striped send of SIZE bytes. */
    /* Bytes per second of MESSAGES striped sends of SIZE bytes, one after
     * the other with GAP seconds of nothing between them (an application's
     * computation), counted over the last one. */
    double run(std::vector<double> rates, icbc_stripe_placement_t placement, size_t size,
               int messages = 1, double gap = 0)
    {
        rate = rates;
        q.assign(rate.size(), {});
        carried.assign(rate.size(), 0);
        handed.assign(rate.size(), {});
        icbc_stripe_config_t cfg = { 256 << 10, 0, 0, 0, placement, 0.02, feedback };
        icbc_stripe_ops_t ops = { send_chunk, lanes,   send_complete, recv_complete,
                                  nullptr,    nullptr, nullptr,       nullptr };
        EXPECT_EQ(ICBC_OK, icbc_stripe_create(&cfg, &ops, this, &st));
        std::vector<char> buf(size);
        const double dt = 0.0002;
        double start = 0;
        now = dt; /* the engine's clock starts with the run */
        bool all = true;
        for (int m = 0; m < messages && all; m++) {
            uint64_t cookie;
            icbc_stripe_cts_t cts = { (uint32_t) m, 1, 256 << 10 };
            if (m > 0)
                now += gap;
            start = now;
            done = 0;
            delivered = 0;
            if (m == messages - 1)
                carried.assign(rate.size(), 0);
            EXPECT_EQ(ICBC_OK,
                      icbc_stripe_send_start(st, 1, buf.data(), size, nullptr, now, &cookie));
            EXPECT_EQ(ICBC_OK, icbc_stripe_cts(st, 1, cookie, &cts, now));
            while ((router_buffer ? delivered < size : done == 0) && now < 100) {
                now += dt;
                for (uint64_t token : std::vector<uint64_t>(std::move(pulled)))
                    icbc_stripe_chunk_sent(st, token, 1, now);
                pulled.clear();
                for (size_t l = 0; l < q.size(); l++) {
                    bool stalled = (int) l == stall_lane && now >= stall_from && now < stall_to;
                    double budget = stalled ? 0 : rate[l] * dt;
                    while (budget > 0 && !q[l].empty()) {
                        auto &h = q[l].front();
                        double take = std::min(budget, h.second);
                        h.second -= take;
                        budget -= take;
                        if (h.second <= 0) {
                            uint64_t token = h.first;
                            q[l].pop_front();
                            if (!router_buffer) {
                                icbc_stripe_chunk_sent(st, token, 1, now);
                            } else {
                                delivered += 256 << 10;
                                icbc_stripe_lane_delivered(st, (int) l, 256 << 10, now);
                            }
                        }
                    }
                }
                icbc_stripe_progress(st, now);
            }
            all = router_buffer ? delivered >= size : done != 0;
            /* a router's lane reports the send done before the last bytes
             * leave it; the next message waits for them (as a receiver's
             * completion would) */
            while (router_buffer && !all && now < 100)
                now += dt;
        }
        icbc_stripe_destroy(st);
        return all ? size / (now - start + dt) : 0;
    }
};

const double MB = 1e6;

TEST(StripePlacement, NamesRoundTripAndOthersAreRefused)
{
    icbc_stripe_placement_t p = ICBC_STRIPE_PLACE_WINDOW;
    for (auto want :
         { ICBC_STRIPE_PLACE_WINDOW, ICBC_STRIPE_PLACE_ROUND_ROBIN, ICBC_STRIPE_PLACE_ADAPTIVE }) {
        ASSERT_EQ(ICBC_OK, icbc_stripe_placement_from_str(icbc_stripe_placement_str(want), &p));
        EXPECT_EQ(want, p);
    }
    for (const char *bad : { "", "Adaptive", "round_robin", "window ", "?" }) {
        p = ICBC_STRIPE_PLACE_ADAPTIVE;
        EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_placement_from_str(bad, &p)) << bad;
        EXPECT_EQ(ICBC_STRIPE_PLACE_ADAPTIVE, p) << bad;
    }
}

TEST(StripePlacement, AdaptiveFillsLanesOfUnequalRates)
{
    std::vector<double> rates = { 100 * MB, 100 * MB, 100 * MB, 25 * MB };
    Sim rr, win, ad;
    double r_rr = rr.run(rates, ICBC_STRIPE_PLACE_ROUND_ROBIN, 64 << 20);
    double r_win = win.run(rates, ICBC_STRIPE_PLACE_WINDOW, 64 << 20);
    double r_ad = ad.run(rates, ICBC_STRIPE_PLACE_ADAPTIVE, 64 << 20);
    printf("64 MiB over lanes of 100, 100, 100, 25 MB/s (sum 325): round-robin %.0f MB/s, "
           "window %.0f MB/s, adaptive %.0f MB/s; adaptive gave the slow lane %.1f%% of the "
           "bytes\n",
           r_rr / MB, r_win / MB, r_ad / MB, 100.0 * ad.carried[3] / (64 << 20));
    /* round-robin is held to 4 x the slowest lane */
    EXPECT_LE(r_rr, 1.02 * 4 * 25 * MB);
    EXPECT_GE(r_rr, 0.95 * 4 * 25 * MB);
    /* adaptive delivers close to the sum of the rates */
    EXPECT_GE(r_ad, 0.9 * 325 * MB);
    EXPECT_GT(r_ad, r_win);
    /* the slow lane's share is about a quarter of another's */
    double slow = (double) ad.carried[3], fast = (double) ad.carried[0];
    EXPECT_GT(slow / fast, 0.15);
    EXPECT_LT(slow / fast, 0.35);
}

/* Lanes that are routers: each takes 4 MiB at once (the sender sees its
 * chunks sent) and delivers at its rate. What the sender sees alone makes
 * the slow router look as fast as the others until its buffer is full,
 * and the message waits for the bytes queued there; with the far end
 * reporting what each lane delivered, adaptive placement counts those
 * bytes and keeps close to the sum of the rates. */
TEST(StripePlacement, AdaptiveWithFeedbackSeesBytesQueuedInARouter)
{
    std::vector<double> rates = { 100 * MB, 100 * MB, 100 * MB, 25 * MB };
    Sim blind, fed, rr;
    blind.router_buffer = fed.router_buffer = rr.router_buffer = 4 << 20;
    fed.feedback = 1;
    double r_rr = rr.run(rates, ICBC_STRIPE_PLACE_ROUND_ROBIN, 64 << 20);
    double r_blind = blind.run(rates, ICBC_STRIPE_PLACE_ADAPTIVE, 64 << 20);
    double r_fed = fed.run(rates, ICBC_STRIPE_PLACE_ADAPTIVE, 64 << 20);
    printf("64 MiB over routers of 100, 100, 100, 25 MB/s holding 4 MiB each: round-robin "
           "%.0f MB/s, adaptive without feedback %.0f MB/s, with %.0f MB/s (slow router "
           "%.1f%% of the bytes)\n",
           r_rr / MB, r_blind / MB, r_fed / MB, 100.0 * fed.carried[3] / (64 << 20));
    ASSERT_GT(r_rr, 0);
    ASSERT_GT(r_blind, 0);
    EXPECT_GE(r_fed, 0.9 * 325 * MB);
    EXPECT_GT(r_fed, 1.1 * r_blind);
}

/* Messages one after the other with a pause between them (what a
 * benchmark's window of sends, or an application's phases, look like): a
 * fast lane that runs dry early must not have its idle time counted as
 * slowness, or every lane looks as slow as the slowest and adaptive
 * placement falls back to round-robin. */
TEST(StripePlacement, AdaptiveMeasuresOnlyWhileALaneHasWork)
{
    std::vector<double> rates = { 100 * MB, 100 * MB, 100 * MB, 25 * MB };
    Sim fed, rr;
    fed.router_buffer = rr.router_buffer = 4 << 20;
    fed.feedback = 1;
    double r_rr = rr.run(rates, ICBC_STRIPE_PLACE_ROUND_ROBIN, 16 << 20, 6, 0.3);
    double r_fed = fed.run(rates, ICBC_STRIPE_PLACE_ADAPTIVE, 16 << 20, 6, 0.3);
    printf("6 messages of 16 MiB, 0.3 s apart, over routers of 100, 100, 100, 25 MB/s: the "
           "last at %.0f MB/s with round-robin, %.0f MB/s adaptive (slow router %.1f%% of its "
           "bytes)\n",
           r_rr / MB, r_fed / MB, 100.0 * fed.carried[3] / (16 << 20));
    EXPECT_GE(r_fed, 0.8 * 325 * MB);
    EXPECT_LT(fed.carried[3], (16u << 20) / 8);
}

TEST(StripePlacement, AdaptiveKeepsUpWithRoundRobinOverEqualLanes)
{
    std::vector<double> rates(4, 100 * MB);
    Sim rr, ad;
    double r_rr = rr.run(rates, ICBC_STRIPE_PLACE_ROUND_ROBIN, 64 << 20);
    double r_ad = ad.run(rates, ICBC_STRIPE_PLACE_ADAPTIVE, 64 << 20);
    printf("64 MiB over 4 lanes of 100 MB/s: round-robin %.0f MB/s, adaptive %.0f MB/s\n",
           r_rr / MB, r_ad / MB);
    EXPECT_GE(r_ad, 0.98 * r_rr);
}

TEST(StripePlacement, AStalledLaneGetsNoChunksUntilItMovesAgain)
{
    Sim s;
    s.stall_lane = 3;
    s.stall_from = 0.05;
    s.stall_to = 0.25;
    double r = s.run(std::vector<double>(4, 100 * MB), ICBC_STRIPE_PLACE_ADAPTIVE, 128 << 20);
    int during = 0, after = 0;
    for (double t : s.handed[3]) {
        /* its rate is measured in windows of 20 ms: two of them to see it stall */
        if (t > s.stall_from + 0.04 && t < s.stall_to)
            during++;
        if (t >= s.stall_to)
            after++;
    }
    printf("lane 3 stalled from 50 to 250 ms: %d chunks handed to it during the stall (after "
           "40 ms), %d after it; %.0f MB/s in all\n",
           during, after, r / MB);
    EXPECT_EQ(0, during);
    EXPECT_GT(after, 0) << "a lane that moves again is used again";
    EXPECT_GT(r, 0);
}

TEST(StripePlacement, LaneStatsAndNames)
{
    Sim s;
    s.run({ 50 * MB, 10 * MB }, ICBC_STRIPE_PLACE_ADAPTIVE, 8 << 20);
    EXPECT_STREQ("adaptive", icbc_stripe_placement_str(ICBC_STRIPE_PLACE_ADAPTIVE));
    EXPECT_STREQ("round-robin", icbc_stripe_placement_str(ICBC_STRIPE_PLACE_ROUND_ROBIN));
    EXPECT_STREQ("window", icbc_stripe_placement_str(ICBC_STRIPE_PLACE_WINDOW));
    icbc_stripe_config_t bad = { CHUNK, 0, 0, 0, (icbc_stripe_placement_t) 7, 0, 0 };
    icbc_stripe_ops_t ops = { Side::send_chunk,
                              Side::lanes,
                              Side::send_complete,
                              Side::recv_complete,
                              Side::place,
                              Side::confirm,
                              nullptr,
                              nullptr };
    icbc_stripe_t *st = nullptr;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_stripe_create(&bad, &ops, nullptr, &st));
}

#ifndef NDEBUG
TEST(Stripe, DumpNamesStatesAndRecentTransitions)
{
    Side s(CHUNK);
    char buf[2 * CHUNK];
    uint64_t cookie;
    icbc_stripe_cts_t cts = { 0, 1, CHUNK };
    ASSERT_EQ(ICBC_OK, icbc_stripe_send_start(s.st, 1, buf, sizeof(buf), nullptr, 0, &cookie));
    ASSERT_EQ(ICBC_OK, icbc_stripe_cts(s.st, 1, cookie, &cts, 0));
    char *text = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    icbc_stripe_dump(s.st, f, 1);
    fclose(f);
    std::string out(text, len);
    free(text);
    EXPECT_NE(std::string::npos,
              out.find("DRAINING, 8192 bytes, 8192 handed to lanes, 2 chunk(s) out"))
        << out;
    EXPECT_NE(std::string::npos, out.find("send 0.1 WAIT_CTS -> SENDING")) << out;
    EXPECT_NE(std::string::npos, out.find("send 0.1 SENDING -> DRAINING")) << out;
}
#endif

} // namespace
