/* Numbered ordered lanes (src/icbc/seq.c): what is kept, acknowledged,
 * resent, held and delivered once, in order. */
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "icbc_seq.h"
}

namespace
{

struct Seq {
    icbc_seq_t *q = nullptr;
    explicit Seq(int npeers, uint32_t ack_every = 4, double ack_delay = 0.5)
    {
        icbc_seq_config_t cfg = {};
        cfg.npeers = npeers;
        cfg.ack_every = ack_every;
        cfg.ack_delay = ack_delay;
        cfg.max_ahead = 1000;
        EXPECT_EQ(ICBC_OK, icbc_seq_create(&cfg, &q));
    }
    ~Seq()
    {
        icbc_seq_destroy(q);
    }
    icbc_seq_stats_t stats() const
    {
        icbc_seq_stats_t s;
        icbc_seq_stats(q, &s);
        return s;
    }
};

icbc_seq_msg_t *keep(Seq &s, int peer, int route, const std::string &payload)
{
    return icbc_seq_keep(s.q, peer, route, "h", 1, payload.data(), payload.size());
}

struct Resent {
    std::vector<uint32_t> seqs;
    int new_route = 9;
};

int resend_cb(void *arg, icbc_seq_msg_t *m)
{
    auto *r = static_cast<Resent *>(arg);
    r->seqs.push_back(m->seq);
    m->route = r->new_route;
    m->sends++;
    return 0;
}

} // namespace

TEST(Seq, NumbersFromOneAndKeepsACopyUntilAcknowledged)
{
    Seq s(2);
    std::string a = "alpha", b = "beta";
    icbc_seq_msg_t *m1 = keep(s, 1, 0, a);
    icbc_seq_msg_t *m2 = keep(s, 1, 0, b);
    ASSERT_TRUE(m1 && m2);
    EXPECT_EQ(1u, m1->seq);
    EXPECT_EQ(2u, m2->seq);
    a[0] = 'X'; /* the caller's buffer is free at once */
    EXPECT_EQ(0, memcmp(m1->payload, "alpha", 5));
    EXPECT_EQ(1u, icbc_seq_keep(s.q, 0, 0, nullptr, 0, nullptr, 0)->seq) << "numbers are per peer";
    EXPECT_EQ(2u, icbc_seq_kept_count(s.q, 1));
    icbc_seq_send_done(s.q, m1);
    icbc_seq_send_done(s.q, m2);
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(s.q, 1, 1));
    EXPECT_EQ(1u, icbc_seq_kept_count(s.q, 1));
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(s.q, 1, 2));
    EXPECT_EQ(0u, icbc_seq_kept_count(s.q, 1));
    EXPECT_EQ(1u, s.stats().kept) << "only peer 0's empty message is kept";
    EXPECT_EQ(0u, s.stats().kept_bytes);
}

TEST(Seq, AnAcknowledgementOfWhatWasNeverSentChangesNothing)
{
    Seq s(2);
    for (int i = 0; i < 3; i++)
        icbc_seq_send_done(s.q, keep(s, 0, 0, "x"));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_seq_acked(s.q, 0, 4));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_seq_acked(s.q, 0, 0));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_seq_acked(s.q, 1, 1)) << "nothing went to peer 1";
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_seq_acked(s.q, 5, 1)) << "no such peer";
    EXPECT_EQ(3u, icbc_seq_kept_count(s.q, 0));
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(s.q, 0, 3));
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(s.q, 0, 2)) << "an old acknowledgement is harmless";
    EXPECT_EQ(0u, icbc_seq_kept_count(s.q, 0));
    EXPECT_EQ(4u, s.stats().acks_invalid);
}

TEST(Seq, ALostRouteResendsItsMessagesInOrderAndOnlyThose)
{
    Seq s(1);
    for (int i = 0; i < 6; i++)
        icbc_seq_send_done(s.q, keep(s, 0, i % 2, "m"));
    Resent r;
    EXPECT_EQ(3, icbc_seq_for_each_kept(s.q, 0, 1, resend_cb, &r));
    EXPECT_EQ((std::vector<uint32_t>{ 2, 4, 6 }), r.seqs);
    r.seqs.clear();
    EXPECT_EQ(0, icbc_seq_for_each_kept(s.q, 0, 1, resend_cb, &r)) << "they moved to route 9";
    /* a resend of a resend: route 9 lost too */
    r.new_route = 3;
    EXPECT_EQ(3, icbc_seq_for_each_kept(s.q, 0, 9, resend_cb, &r));
    EXPECT_EQ((std::vector<uint32_t>{ 2, 4, 6 }), r.seqs);
    EXPECT_EQ(6u, s.stats().resent);
}

TEST(Seq, AMessageAcknowledgedWhileASendOfItIsOutLivesUntilTheSendCompletes)
{
    Seq s(1);
    icbc_seq_msg_t *m = keep(s, 0, 0, "payload");
    ASSERT_EQ(ICBC_OK, icbc_seq_acked(s.q, 0, 1));
    EXPECT_EQ(0u, icbc_seq_kept_count(s.q, 0));
    /* the send still reads it: still valid (ASan would object otherwise) */
    EXPECT_EQ(0, memcmp(m->payload, "payload", 7));
    icbc_seq_send_done(s.q, m);
}

TEST(Seq, TheReceiverDeliversEachNumberOnceInOrder)
{
    Seq s(1);
    std::vector<uint32_t> delivered;
    /* 1, then 3 and 4 early (took a new route), 2 resent, 3 again (dup) */
    const uint32_t arrivals[] = { 1, 3, 4, 2, 3, 1, 5 };
    for (uint32_t a : arrivals) {
        std::string body = "m" + std::to_string(a);
        switch (icbc_seq_arrived(s.q, 0, a, 0.0)) {
        case ICBC_SEQ_DELIVER:
            delivered.push_back(a);
            while (icbc_seq_msg_t *h = icbc_seq_ready(s.q, 0, 0.0)) {
                EXPECT_EQ("m" + std::to_string(h->seq), std::string((char *) h->payload, h->len));
                delivered.push_back(h->seq);
                icbc_seq_release(s.q, h);
            }
            break;
        case ICBC_SEQ_EARLY:
            ASSERT_EQ(ICBC_OK, icbc_seq_hold(s.q, 0, a, "h", 1, body.data(), body.size()));
            break;
        case ICBC_SEQ_DUPLICATE: break;
        case ICBC_SEQ_INVALID: ADD_FAILURE() << "number " << a << " refused"; break;
        }
    }
    EXPECT_EQ((std::vector<uint32_t>{ 1, 2, 3, 4, 5 }), delivered);
    EXPECT_EQ(2u, s.stats().duplicates);
    EXPECT_EQ(2u, s.stats().held);
    EXPECT_EQ(0u, s.stats().held_now);
}

TEST(Seq, AnEarlyMessageHeldTwiceIsKeptOnce)
{
    Seq s(1);
    ASSERT_EQ(ICBC_SEQ_EARLY, icbc_seq_arrived(s.q, 0, 3, 0.0));
    ASSERT_EQ(ICBC_OK, icbc_seq_hold(s.q, 0, 3, "", 0, "a", 1));
    ASSERT_EQ(ICBC_SEQ_EARLY, icbc_seq_arrived(s.q, 0, 3, 0.0));
    ASSERT_EQ(ICBC_OK, icbc_seq_hold(s.q, 0, 3, "", 0, "b", 1));
    EXPECT_EQ(1u, s.stats().held_now);
    EXPECT_EQ(nullptr, icbc_seq_ready(s.q, 0, 0.0)) << "1 and 2 are missing";
}

TEST(Seq, NumbersZeroAndFarAheadAreRefused)
{
    Seq s(1);
    EXPECT_EQ(ICBC_SEQ_INVALID, icbc_seq_arrived(s.q, 0, 0, 0.0));
    EXPECT_EQ(ICBC_SEQ_INVALID, icbc_seq_arrived(s.q, 0, 5000, 0.0)) << "beyond max_ahead";
    EXPECT_EQ(ICBC_SEQ_INVALID, icbc_seq_arrived(s.q, 3, 1, 0.0)) << "no such peer";
    EXPECT_EQ(ICBC_SEQ_EARLY, icbc_seq_arrived(s.q, 0, 1000, 0.0));
    EXPECT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(s.q, 0, 1, 0.0));
}

TEST(Seq, NumbersWrapPastTheTopToOne)
{
    icbc_seq_config_t cfg = {};
    cfg.npeers = 1;
    cfg.first = UINT32_MAX - 2;
    icbc_seq_t *tx, *rx;
    ASSERT_EQ(ICBC_OK, icbc_seq_create(&cfg, &tx));
    ASSERT_EQ(ICBC_OK, icbc_seq_create(&cfg, &rx));
    std::vector<uint32_t> sent;
    for (int i = 0; i < 6; i++) {
        icbc_seq_msg_t *m = icbc_seq_keep(tx, 0, 0, "", 0, "", 0);
        sent.push_back(m->seq);
        icbc_seq_send_done(tx, m);
    }
    EXPECT_EQ((std::vector<uint32_t>{ UINT32_MAX - 2, UINT32_MAX - 1, UINT32_MAX, 1, 2, 3 }), sent);
    /* the receiver: the last two before the top arrive after the wrap */
    EXPECT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(rx, 0, UINT32_MAX - 2, 0.0));
    EXPECT_EQ(ICBC_SEQ_EARLY, icbc_seq_arrived(rx, 0, 1, 0.0));
    ASSERT_EQ(ICBC_OK, icbc_seq_hold(rx, 0, 1, "", 0, "", 0));
    EXPECT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(rx, 0, UINT32_MAX - 1, 0.0));
    EXPECT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(rx, 0, UINT32_MAX, 0.0));
    icbc_seq_msg_t *h = icbc_seq_ready(rx, 0, 0.0);
    ASSERT_NE(nullptr, h);
    EXPECT_EQ(1u, h->seq);
    icbc_seq_release(rx, h);
    EXPECT_EQ(ICBC_SEQ_DUPLICATE, icbc_seq_arrived(rx, 0, UINT32_MAX, 0.0));
    EXPECT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(rx, 0, 2, 0.0));
    /* acknowledgements across the wrap free what they cover */
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(tx, 0, UINT32_MAX));
    EXPECT_EQ(3u, icbc_seq_kept_count(tx, 0));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_seq_acked(tx, 0, 4)) << "4 was never sent";
    EXPECT_EQ(ICBC_OK, icbc_seq_acked(tx, 0, 3));
    EXPECT_EQ(0u, icbc_seq_kept_count(tx, 0));
    icbc_seq_destroy(tx);
    icbc_seq_destroy(rx);
}

TEST(Seq, AcknowledgementsComeEveryNMessagesOrAfterTheDelay)
{
    Seq s(3, 4, 0.5);
    int peer;
    uint32_t upto;
    for (uint32_t n = 1; n <= 3; n++)
        ASSERT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(s.q, 2, n, 10.0));
    EXPECT_EQ(0, icbc_seq_take_ack(s.q, 10.1, &peer, &upto)) << "3 of 4, 0.1 s of 0.5";
    ASSERT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(s.q, 2, 4, 10.1));
    ASSERT_EQ(1, icbc_seq_take_ack(s.q, 10.1, &peer, &upto));
    EXPECT_EQ(2, peer);
    EXPECT_EQ(4u, upto);
    EXPECT_EQ(0, icbc_seq_take_ack(s.q, 10.1, &peer, &upto));
    ASSERT_EQ(ICBC_SEQ_DELIVER, icbc_seq_arrived(s.q, 2, 5, 11.0));
    EXPECT_EQ(0, icbc_seq_take_ack(s.q, 11.2, &peer, &upto));
    ASSERT_EQ(1, icbc_seq_take_ack(s.q, 11.6, &peer, &upto));
    EXPECT_EQ(5u, upto);
    EXPECT_EQ(2u, s.stats().acks_sent);
}

TEST(Seq, APeerResetDropsWhatWasKeptAndHeld)
{
    Seq s(2);
    icbc_seq_msg_t *out = keep(s, 1, 0, "still sending");
    icbc_seq_send_done(s.q, keep(s, 1, 0, "done"));
    ASSERT_EQ(ICBC_SEQ_EARLY, icbc_seq_arrived(s.q, 1, 2, 0.0));
    ASSERT_EQ(ICBC_OK, icbc_seq_hold(s.q, 1, 2, "", 0, "x", 1));
    icbc_seq_peer_reset(s.q, 1);
    EXPECT_EQ(0u, icbc_seq_kept_count(s.q, 1));
    EXPECT_EQ(0u, s.stats().held_now);
    EXPECT_EQ(0, memcmp(out->payload, "still sending", 13));
    icbc_seq_send_done(s.q, out); /* freed now */
}
