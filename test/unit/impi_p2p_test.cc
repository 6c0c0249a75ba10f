/*
 * Point-to-point messages between IMPI hosts (impi_p2p): two engines of one
 * job joined by a wire that carries packed packets and feeds them through
 * impi_rx_feed, as a host connection does. Short and long messages,
 * synchronous sends, the flow-control window, order, cancel, FINI, and the
 * packets a peer may not send.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "icbc_bytes.h"
#include "impi_p2p.h"
#include "impi_rx.h"
#include "impi_test_layout.h"

namespace
{

struct Host;

/* A packet on its way: to host TO, header and payload. */
struct Packet {
    int to;
    Bytes bytes;
};

struct Wire {
    std::deque<Packet> q;
    std::map<int, Host *> hosts;
    int data_in_flight = 0, max_data_in_flight = 0; /* window-counted packets A->B */
};

/* What one host's engine told its caller. */
struct Host {
    Wire *wire;
    int self;
    impi_p2p_t *p2p = nullptr;
    std::vector<impi_msg_t> heads;
    std::vector<Bytes> head_bytes;
    std::map<uint64_t, Bytes> longs; /* by drqid: the message as it fills */
    std::vector<uint64_t> done;      /* srqids, in completion order */
    std::vector<int> finis;
    std::vector<uint32_t> emitted; /* packet types, in order */
    int cancel_answer = 0;
    bool busy = false; /* the transport refuses DATA and DATASYNC */
    int refusals = 0;
    std::vector<uint64_t> cancel_asked;
    std::function<void(uint64_t)> on_done;

    Host(Wire *w, int h) : wire(w), self(h)
    {
    }

    static icbc_status_t emit(void *arg, int host, const uint8_t *hdr, const void *payload,
                              size_t len)
    {
        Host *h = static_cast<Host *>(arg);
        uint32_t type = icbc_get32(hdr);
        if (h->busy && (type == IMPI_PK_DATA || type == IMPI_PK_DATASYNC)) {
            h->refusals++;
            return ICBC_ERR_BUSY;
        }
        Packet p{ host, Bytes(hdr, hdr + IMPI_PKT_HDR_SIZE) };
        if (len)
            p.bytes.insert(p.bytes.end(), (const uint8_t *) payload,
                           (const uint8_t *) payload + len);
        h->emitted.push_back(type);
        h->wire->q.push_back(p);
        return ICBC_OK;
    }
    static void arrived(void *arg, const impi_msg_t *m)
    {
        Host *h = static_cast<Host *>(arg);
        h->heads.push_back(*m);
        h->head_bytes.emplace_back(m->payload, m->payload + m->len);
    }
    static void data(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *b, size_t len, int)
    {
        Host *h = static_cast<Host *>(arg);
        Bytes &msg = h->longs[drqid];
        ASSERT_LE(offset + len, msg.size());
        memcpy(msg.data() + offset, b, len);
    }
    static void send_done(void *arg, uint64_t srqid)
    {
        Host *h = static_cast<Host *>(arg);
        h->done.push_back(srqid);
        if (h->on_done)
            h->on_done(srqid);
    }
    static int cancel(void *arg, int, uint64_t srqid)
    {
        Host *h = static_cast<Host *>(arg);
        h->cancel_asked.push_back(srqid);
        return h->cancel_answer;
    }
    static void fini(void *arg, int host)
    {
        static_cast<Host *>(arg)->finis.push_back(host);
    }

    /* The head at index I was matched: a long message gets its buffer. */
    void match(size_t i)
    {
        uint64_t drqid = 0;
        const impi_msg_t &m = heads[i];
        ASSERT_EQ(ICBC_OK, impi_p2p_matched(p2p, &m, &drqid));
        if (m.kind == IMPI_MSG_LONG_HEAD) {
            Bytes msg(m.msglen);
            memcpy(msg.data(), head_bytes[i].data(), head_bytes[i].size());
            longs[drqid] = msg;
        }
    }
};

const impi_p2p_ops_t ops = { Host::emit,      Host::arrived, Host::data,
                             Host::send_done, Host::cancel,  Host::fini };

Bytes pattern(size_t n, int seed)
{
    Bytes b(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t) (i * 131 + (size_t) seed * 7 + (i >> 8));
    return b;
}

/* Client 0: one host, one process (world rank 0). Client 1: one host with
 * two processes (ranks 1, 2). DATALEN 1024; ACKMARK 2 and HIWATER 4 so that
 * a few packets fill the window. */
struct P2p : ::testing::Test {
    impi_layout_t l{};
    Wire wire;
    Host a{ &wire, 0 }, b{ &wire, 1 };
    impi_rx_t rx_at_a{}, rx_at_b{};
    std::string refused; /* the first reason a receiver gave */

    void SetUp() override
    {
        std::vector<Client> cl = { Client(0, { 1 }, 1024), Client(1, { 2 }, 1024) };
        impi_test_layout(cl, &l);
        ASSERT_EQ(1024u, l.datalen);
        l.ackmark = 2;
        l.hiwater = 4;
        wire.hosts[0] = &a;
        wire.hosts[1] = &b;
        ASSERT_EQ(ICBC_OK, impi_p2p_create(&l, 0, &ops, &a, &a.p2p));
        ASSERT_EQ(ICBC_OK, impi_p2p_create(&l, 1, &ops, &b, &b.p2p));
        ASSERT_EQ(ICBC_OK, impi_rx_init(&rx_at_a, &l, 0, 1));
        ASSERT_EQ(ICBC_OK, impi_rx_init(&rx_at_b, &l, 1, 0));
    }
    void TearDown() override
    {
        impi_p2p_destroy(a.p2p);
        impi_p2p_destroy(b.p2p);
        impi_rx_free(&rx_at_a);
        impi_rx_free(&rx_at_b);
        impi_layout_free(&l);
    }

    struct Feed {
        P2p *t;
        Host *to;
        int from;
    };
    static void on_pkt(void *arg, const impi_rx_pkt_t *pkt)
    {
        Feed *f = static_cast<Feed *>(arg);
        char err[256] = "";
        if (impi_p2p_packet(f->to->p2p, f->from, pkt, err, sizeof(err)) != ICBC_OK &&
            f->t->refused.empty())
            f->t->refused = err;
    }
    /* Delivers the packet at the front of the wire. */
    bool step()
    {
        if (wire.q.empty())
            return false;
        Packet p = wire.q.front();
        wire.q.pop_front();
        Host *to = wire.hosts[p.to];
        Feed f{ this, to, to == &a ? 1 : 0 };
        char err[256] = "";
        impi_rx_t *rx = to == &a ? &rx_at_a : &rx_at_b;
        if (impi_rx_feed(rx, p.bytes.data(), p.bytes.size(), on_pkt, &f, err, sizeof(err)) !=
                ICBC_OK &&
            refused.empty())
            refused = err;
        return true;
    }
    void pump()
    {
        while (step())
            ;
    }
    impi_send_t send(int src, int dest, const Bytes &buf, uint64_t srqid, int sync = 0, int tag = 7)
    {
        impi_send_t s{};
        s.src = src;
        s.dest = dest;
        s.lsrank = src;
        s.tag = tag;
        s.cid = 0;
        s.srqid = srqid;
        s.buf = buf.data();
        s.len = buf.size();
        s.sync = sync;
        return s;
    }
    /* A packet as a hostile peer host would write it, fed to host B (what B
     * answers stays on the wire). */
    void inject_at_b(uint32_t type, int src, int dest, uint64_t srqid, uint64_t drqid,
                     uint64_t msglen, const Bytes &payload)
    {
        impi_pkt_hdr_t h{};
        h.type = type;
        h.len = (uint32_t) payload.size();
        h.src = l.procs[src];
        h.dest = l.procs[dest];
        h.srqid = srqid;
        h.drqid = drqid;
        h.msglen = msglen;
        Packet p{ 1, Bytes(IMPI_PKT_HDR_SIZE) };
        impi_pkt_hdr_pack(&h, p.bytes.data());
        p.bytes.insert(p.bytes.end(), payload.begin(), payload.end());
        ASSERT_TRUE(wire.q.empty());
        wire.q.push_back(p);
        step();
    }
};

TEST_F(P2p, ShortAndLongMessagesArriveWhole)
{
    /* 0 and 1024 bytes are one packet; 1025 the first above DATALEN */
    std::vector<size_t> sizes = { 0, 1, 1000, 1024, 1025, 5000, 100000 };
    std::vector<Bytes> bufs;
    for (size_t i = 0; i < sizes.size(); i++)
        bufs.push_back(pattern(sizes[i], (int) i));
    for (size_t i = 0; i < sizes.size(); i++) {
        impi_send_t s = send(0, 1 + (int) (i % 2), bufs[i], 100 + i);
        ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
        pump();
        ASSERT_EQ(i + 1, b.heads.size());
        const impi_msg_t &m = b.heads[i];
        EXPECT_EQ(sizes[i] > 1024 ? IMPI_MSG_LONG_HEAD : IMPI_MSG_SHORT, m.kind) << sizes[i];
        EXPECT_EQ(0, m.src);
        EXPECT_EQ(1 + (int) (i % 2), m.dest);
        EXPECT_EQ(7, m.tag);
        EXPECT_EQ(sizes[i], m.msglen);
        if (m.kind == IMPI_MSG_LONG_HEAD) {
            EXPECT_EQ(1024u, m.len);
            /* the body waits for the receiver's match */
            EXPECT_EQ(0u, a.done.size() - i);
            b.match(i);
            pump();
            ASSERT_EQ(1u, b.longs.size());
            EXPECT_EQ(bufs[i], b.longs.begin()->second) << sizes[i];
            b.longs.clear();
        } else {
            EXPECT_EQ(bufs[i], b.head_bytes[i]) << sizes[i];
        }
        ASSERT_EQ(i + 1, a.done.size()) << sizes[i];
        EXPECT_EQ(100 + i, a.done[i]);
    }
    EXPECT_EQ("", refused);
    EXPECT_EQ(0u, impi_p2p_sends_pending(a.p2p));
}

TEST_F(P2p, SynchronousShortSendCompletesWhenMatched)
{
    Bytes buf = pattern(100, 1);
    impi_send_t s = send(0, 2, buf, 5, 1);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    pump();
    ASSERT_EQ(1u, b.heads.size());
    EXPECT_EQ(IMPI_MSG_SHORT_SYNC, b.heads[0].kind);
    EXPECT_EQ(buf, b.head_bytes[0]);
    EXPECT_TRUE(a.done.empty());
    b.match(0);
    pump();
    ASSERT_EQ(1u, a.done.size());
    EXPECT_EQ(5u, a.done[0]);
    EXPECT_EQ(IMPI_PK_SYNCACK, b.emitted.back());
    EXPECT_EQ("", refused);
}

TEST_F(P2p, TheWindowHoldsPacketsUntilProtoack)
{
    std::vector<Bytes> bufs;
    for (int i = 0; i < 10; i++)
        bufs.push_back(pattern(10, i));
    for (int i = 0; i < 10; i++) {
        impi_send_t s = send(0, 1, bufs[(size_t) i], (uint64_t) i);
        ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    }
    /* HIWATER 4: four packets go, six wait */
    EXPECT_EQ(4u, a.emitted.size());
    EXPECT_EQ(4u, a.done.size());
    EXPECT_EQ(6u, impi_p2p_sends_pending(a.p2p));
    pump();
    EXPECT_EQ(10u, a.done.size());
    ASSERT_EQ(10u, b.heads.size());
    for (int i = 0; i < 10; i++)
        EXPECT_EQ(bufs[(size_t) i], b.head_bytes[(size_t) i]) << "message " << i << " in order";
    /* ACKMARK 2: one PROTOACK per two packets */
    size_t acks = 0;
    for (uint32_t t : b.emitted)
        acks += t == IMPI_PK_PROTOACK;
    EXPECT_EQ(5u, acks);
    EXPECT_EQ("", refused);
}

TEST_F(P2p, ALongMessageLetsLaterMessagesPassInOrder)
{
    Bytes big = pattern(4000, 1), small1 = pattern(3, 2), small2 = pattern(30, 3);
    impi_send_t s1 = send(0, 1, big, 1), s2 = send(0, 1, small1, 2), s3 = send(0, 1, small2, 3);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s1));
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s2));
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s3));
    pump();
    /* heads in the order of the sends; the short ones are done already */
    ASSERT_EQ(3u, b.heads.size());
    EXPECT_EQ(1u, b.heads[0].srqid);
    EXPECT_EQ(2u, b.heads[1].srqid);
    EXPECT_EQ(3u, b.heads[2].srqid);
    EXPECT_EQ((std::vector<uint64_t>{ 2, 3 }), a.done);
    b.match(0);
    pump();
    EXPECT_EQ((std::vector<uint64_t>{ 2, 3, 1 }), a.done);
    ASSERT_EQ(1u, b.longs.size());
    EXPECT_EQ(big, b.longs.begin()->second);
    EXPECT_EQ("", refused);
}

TEST_F(P2p, SendDoneMayStartTheNextSend)
{
    std::vector<Bytes> bufs;
    for (int i = 0; i < 8; i++)
        bufs.push_back(pattern(2000, i)); /* long: done only after the match */
    a.on_done = [&](uint64_t srqid) {
        if (srqid + 1 < bufs.size()) {
            impi_send_t s = send(0, 1, bufs[srqid + 1], srqid + 1);
            ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
        }
    };
    impi_send_t s = send(0, 1, bufs[0], 0);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    for (size_t i = 0; i < bufs.size(); i++) {
        pump();
        ASSERT_EQ(i + 1, b.heads.size());
        b.match(i);
        pump();
        ASSERT_EQ(1u, b.longs.size());
        EXPECT_EQ(bufs[i], b.longs.begin()->second);
        b.longs.clear();
    }
    EXPECT_EQ(8u, a.done.size());
    EXPECT_EQ("", refused);
}

TEST_F(P2p, BothDirectionsAndBothProcessesOfAHost)
{
    Bytes x = pattern(3000, 1), y = pattern(50, 2), z = pattern(1500, 3);
    impi_send_t s1 = send(1, 0, x, 11), s2 = send(2, 0, y, 12, 1), s3 = send(0, 2, z, 13);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(b.p2p, &s1));
    ASSERT_EQ(ICBC_OK, impi_p2p_send(b.p2p, &s2));
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s3));
    pump();
    ASSERT_EQ(2u, a.heads.size());
    ASSERT_EQ(1u, b.heads.size());
    a.match(0);
    a.match(1);
    b.match(0);
    pump();
    EXPECT_EQ(2u, b.done.size());
    EXPECT_EQ(1u, a.done.size());
    EXPECT_EQ(x, a.longs.begin()->second);
    EXPECT_EQ(y, a.head_bytes[1]);
    EXPECT_EQ(z, b.longs.begin()->second);
    EXPECT_EQ("", refused);
}

TEST_F(P2p, CancelIsAnsweredAsTheCallerDecides)
{
    inject_at_b(IMPI_PK_CANCEL, 0, 1, 77, 0, 0, {});
    ASSERT_EQ(1u, b.cancel_asked.size());
    EXPECT_EQ(77u, b.cancel_asked[0]);
    EXPECT_EQ(IMPI_PK_CANCELNO, b.emitted.back());
    wire.q.clear();
    b.cancel_answer = 1;
    inject_at_b(IMPI_PK_CANCEL, 0, 1, 78, 0, 0, {});
    EXPECT_EQ(IMPI_PK_CANCELYES, b.emitted.back());
    EXPECT_EQ("", refused);
}

TEST_F(P2p, FiniReachesThePeer)
{
    ASSERT_EQ(ICBC_OK, impi_p2p_fini(a.p2p, 1));
    pump();
    EXPECT_EQ((std::vector<int>{ 0 }), b.finis);
    EXPECT_NE(ICBC_OK, impi_p2p_fini(a.p2p, 0)) << "no FINI to itself";
    EXPECT_EQ("", refused);
}

TEST_F(P2p, SendsThatCannotBeAreRefused)
{
    Bytes buf = pattern(10, 0);
    impi_send_t s = send(1, 0, buf, 1); /* rank 1 is not host A's */
    EXPECT_EQ(ICBC_ERR_INVALID, impi_p2p_send(a.p2p, &s));
    s = send(0, 3, buf, 1); /* no rank 3 */
    EXPECT_EQ(ICBC_ERR_INVALID, impi_p2p_send(a.p2p, &s));
    Bytes big = pattern(5000, 0);
    s = send(0, 1, big, 9);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    EXPECT_EQ(ICBC_ERR_INVALID, impi_p2p_send(a.p2p, &s)) << "srqid 9 is in flight";
}

TEST_F(P2p, PacketsTheTransportRefusesWaitInOrderForProgress)
{
    Bytes big = pattern(5000, 1), small = pattern(20, 2), other = pattern(30, 3);
    impi_send_t s1 = send(0, 1, big, 1), s2 = send(0, 1, small, 2), s3 = send(0, 2, other, 3);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s1));
    pump();
    ASSERT_EQ(1u, b.heads.size());
    a.busy = true;
    b.match(0); /* the SYNCACK comes back while the transport is full */
    pump();
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s2));
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s3));
    pump();
    EXPECT_GT(a.refusals, 0);
    EXPECT_EQ(2u, impi_p2p_held(a.p2p)) << "pairs 0-1 and 0-2";
    EXPECT_TRUE(a.done.empty());
    EXPECT_EQ(1u, b.heads.size());
    ASSERT_EQ(ICBC_OK, impi_p2p_progress(a.p2p)); /* still full: held again */
    EXPECT_EQ(2u, impi_p2p_held(a.p2p));
    a.busy = false;
    /* the window (HIWATER 4) lets some go each round; PROTOACKs open it */
    for (int round = 0; round < 20 && a.done.size() < 3; round++) {
        ASSERT_EQ(ICBC_OK, impi_p2p_progress(a.p2p));
        pump();
    }
    EXPECT_EQ(0u, impi_p2p_held(a.p2p));
    ASSERT_EQ(3u, a.done.size());
    std::vector<uint64_t> pair01;
    for (uint64_t id : a.done)
        if (id != 3)
            pair01.push_back(id);
    EXPECT_EQ((std::vector<uint64_t>{ 1, 2 }), pair01) << "pair 0-1 in order";
    ASSERT_EQ(3u, b.heads.size());
    EXPECT_EQ(big, b.longs.begin()->second);
    for (size_t i = 1; i < 3; i++)
        EXPECT_EQ(b.heads[i].srqid == 2 ? small : other, b.head_bytes[i]) << i;
    EXPECT_EQ("", refused);
}

/* Each hostile packet gets its own pair of engines: a refused packet ends
 * the connection. */
struct Hostile : P2p {
};

TEST_F(Hostile, SyncackForNoSend)
{
    inject_at_b(IMPI_PK_SYNCACK, 0, 1, 42, 0, 0, {});
    EXPECT_NE(std::string::npos, refused.find("SYNCACK for send 42")) << refused;
}

TEST_F(Hostile, SecondSyncack)
{
    Bytes buf = pattern(10, 0);
    impi_send_t s = send(1, 0, buf, 42, 1);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(b.p2p, &s));
    wire.q.clear();
    inject_at_b(IMPI_PK_SYNCACK, 0, 1, 42, 0, 0, {});
    EXPECT_EQ("", refused);
    EXPECT_EQ(1u, b.done.size());
    inject_at_b(IMPI_PK_SYNCACK, 0, 1, 42, 0, 0, {});
    EXPECT_NE(std::string::npos, refused.find("SYNCACK for send 42")) << refused;
}

TEST_F(Hostile, DataForNoLongMessage)
{
    inject_at_b(IMPI_PK_DATA, 0, 1, 0, 5, 3000, pattern(100, 0));
    EXPECT_NE(std::string::npos, refused.find("names no long message")) << refused;
}

TEST_F(Hostile, DataBeyondTheLongMessage)
{
    Bytes big = pattern(2000, 0);
    impi_send_t s = send(0, 1, big, 1);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    pump();
    b.match(0);
    wire.q.clear(); /* the SYNCACK and the true body are lost; a forged body comes */
    uint64_t drqid = b.longs.begin()->first;
    inject_at_b(IMPI_PK_DATA, 0, 1, 1, drqid, 2000, pattern(1000, 0));
    EXPECT_NE(std::string::npos, refused.find("beyond the end")) << refused;
}

TEST_F(Hostile, DataOfAnotherPairsLongMessage)
{
    Bytes big = pattern(2000, 0);
    impi_send_t s = send(0, 1, big, 1);
    ASSERT_EQ(ICBC_OK, impi_p2p_send(a.p2p, &s));
    pump();
    b.match(0);
    wire.q.clear();
    uint64_t drqid = b.longs.begin()->first;
    inject_at_b(IMPI_PK_DATA, 0, 2, 1, drqid, 2000, pattern(500, 0));
    EXPECT_NE(std::string::npos, refused.find("which is between 0 and 1")) << refused;
}

TEST_F(Hostile, ProtoackForNothingSent)
{
    inject_at_b(IMPI_PK_PROTOACK, 0, 1, 0, 0, 0, {});
    EXPECT_NE(std::string::npos, refused.find("PROTOACK from process 0 to 1")) << refused;
}

TEST_F(Hostile, AnswerToACancelNeverSent)
{
    inject_at_b(IMPI_PK_CANCELNO, 0, 1, 3, 0, 0, {});
    EXPECT_NE(std::string::npos, refused.find("CANCEL that was never sent")) << refused;
}

} // namespace
