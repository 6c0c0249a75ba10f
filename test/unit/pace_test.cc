/* Pacing (src/icbc/pace.c): the token bucket's rate, burst and debt, and
 * the rate syntax of the router file's wan-rate and the pacing CVARs. */
#include <gtest/gtest.h>

extern "C" {
#include "icbc_pace.h"
}

namespace
{

/* Sends of LEN bytes whenever the bucket lets them, for SECONDS in steps of
 * DT: the bytes that left. */
double sent_in(icbc_pace_t *p, size_t len, double seconds, double dt = 1e-5)
{
    double bytes = 0;
    for (double t = 0; t < seconds; t += dt) {
        while (icbc_pace_may_send(p, t)) {
            icbc_pace_charge(p, len);
            bytes += len;
        }
    }
    return bytes;
}

TEST(Pace, OffLetsEverySendGo)
{
    icbc_pace_t p;
    icbc_pace_init(&p);
    EXPECT_FALSE(icbc_pace_on(&p));
    for (int i = 0; i < 1000; i++) {
        ASSERT_TRUE(icbc_pace_may_send(&p, 0));
        icbc_pace_charge(&p, 1 << 20);
    }
    EXPECT_EQ(p.waits, 0u);
    EXPECT_EQ(p.bytes, 1000u << 20);
    EXPECT_EQ(icbc_pace_wait(&p, 0), 0);
}

TEST(Pace, HoldsTheRateForSmallAndLargeSends)
{
    for (size_t len : { (size_t) 64, (size_t) 65536, (size_t) 4 << 20 }) {
        icbc_pace_t p;
        icbc_pace_init(&p);
        icbc_pace_set_rate(&p, 400000000, 0); /* 50 MB/s */
        ASSERT_TRUE(icbc_pace_on(&p));
        double bytes = sent_in(&p, len, 1.0);
        /* 50 MB on the wire in one second, give or take the burst and one
         * message: 50 MB x 1448 / 1538 of payload */
        EXPECT_NEAR(bytes, 50e6 * ICBC_PACE_SEGMENT_PAYLOAD / ICBC_PACE_WIRE_BYTES,
                    p.burst + len + 1)
            << len;
        EXPECT_GT(p.waits, 0u) << len;
    }
}

TEST(Pace, ALargeSendPutsTheBucketInDebtUntilRepaid)
{
    icbc_pace_t p;
    icbc_pace_init(&p);
    icbc_pace_set_rate(&p, 8000000, 0); /* 1 MB/s */
    ASSERT_TRUE(icbc_pace_may_send(&p, 0));
    /* half a second of sending, on the wire */
    icbc_pace_charge(&p, (size_t) (500000 * ICBC_PACE_SEGMENT_PAYLOAD / ICBC_PACE_WIRE_BYTES));
    EXPECT_FALSE(icbc_pace_may_send(&p, 0.25));
    EXPECT_NEAR(icbc_pace_wait(&p, 0.25), 0.25, 1e-5);
    EXPECT_TRUE(icbc_pace_may_send(&p, 0.5));
    EXPECT_EQ(icbc_pace_wait(&p, 0.5), 0);
}

TEST(Pace, IdleTimeEarnsNoMoreThanTheBurst)
{
    icbc_pace_t p;
    icbc_pace_init(&p);
    icbc_pace_set_rate(&p, 80000000, 0); /* 10 MB/s: burst 20 kB */
    EXPECT_DOUBLE_EQ(p.burst, 10e6 * ICBC_PACE_BURST_SECONDS);
    /* ten seconds idle, then as fast as allowed at one instant */
    size_t sent = 0;
    while (icbc_pace_may_send(&p, 10.0)) {
        icbc_pace_charge(&p, 1000);
        sent += 1000;
    }
    double payload = p.burst * ICBC_PACE_SEGMENT_PAYLOAD / ICBC_PACE_WIRE_BYTES;
    EXPECT_LE(sent, payload + 1000);
    EXPECT_GE(sent, payload);
}

TEST(Pace, ASmallRateKeepsAFrameOfBurst)
{
    icbc_pace_t p;
    icbc_pace_init(&p);
    icbc_pace_set_rate(&p, 1000000, 0); /* 125 kB/s: 2 ms would be 250 B */
    EXPECT_DOUBLE_EQ(p.burst, ICBC_PACE_BURST_MIN);
}

TEST(Pace, ChangingTheRateKeepsTheDebtAndOffForgetsIt)
{
    icbc_pace_t p;
    icbc_pace_init(&p);
    icbc_pace_set_rate(&p, 8000000, 0);
    /* 1 s of debt at 1 MB/s on the wire */
    icbc_pace_charge(&p, (size_t) (1000000 * ICBC_PACE_SEGMENT_PAYLOAD / ICBC_PACE_WIRE_BYTES));
    icbc_pace_set_rate(&p, 16000000, 0); /* now 2 MB/s: repaid in 0.5 s */
    EXPECT_NEAR(icbc_pace_wait(&p, 0), 0.5, 1e-5);
    EXPECT_EQ(icbc_pace_rate(&p), 16000000u);
    icbc_pace_set_rate(&p, 0, 0.1);
    EXPECT_FALSE(icbc_pace_on(&p));
    EXPECT_TRUE(icbc_pace_may_send(&p, 0.1));
    EXPECT_EQ(icbc_pace_rate(&p), 0u);
}

TEST(Pace, ADebtLeftWhenGoingOffIsRepaidAfter)
{
    /* a collective paced at 1 MB/s ends in debt; the next, 0.1 s later,
     * starts with the rest of it */
    icbc_pace_t p;
    icbc_pace_init(&p);
    icbc_pace_set_rate(&p, 8000000, 1.0);
    ASSERT_TRUE(icbc_pace_may_send(&p, 1.0));
    icbc_pace_charge(&p, (size_t) (500000 * ICBC_PACE_SEGMENT_PAYLOAD / ICBC_PACE_WIRE_BYTES));
    icbc_pace_set_rate(&p, 0, 1.0);
    EXPECT_TRUE(icbc_pace_may_send(&p, 1.0)); /* off: anything goes */
    icbc_pace_set_rate(&p, 8000000, 1.1);
    EXPECT_FALSE(icbc_pace_may_send(&p, 1.1));
    EXPECT_NEAR(icbc_pace_wait(&p, 1.1), 0.4, 1e-5);
    EXPECT_TRUE(icbc_pace_may_send(&p, 1.5));
}

/* The kernel counts IP packets at SO_MAX_PACING_RATE; full segments at the
 * socket rate are the wire rate in Ethernet frames. */
TEST(Pace, TheSocketRatePutsTheWireRateOnTheWire)
{
    const uint64_t wire = 50000000; /* 50 Mbit/s */
    uint64_t socket = icbc_pace_socket_rate(wire);
    double packets_per_s = socket / ICBC_PACE_PACKET_BYTES;

    EXPECT_NEAR(packets_per_s * ICBC_PACE_WIRE_BYTES * 8, (double) wire, 16.0);
    EXPECT_LT(socket, wire / 8);
    EXPECT_EQ(icbc_pace_socket_rate(0), 0u);
}

TEST(PaceRate, UnitsAreBitsInPowersOfAThousand)
{
    struct {
        const char *text;
        uint64_t bits;
    } good[] = { { "0", 0 },
                 { "1", 1 },
                 { "400mbit", 400000000 },
                 { "1.5gbit", 1500000000 },
                 { "50000kbit", 50000000 },
                 { "12bit", 12 },
                 { "0.5mbit", 500000 },
                 { "1000000gbit", 1000000000000000ull } };
    for (auto &g : good) {
        uint64_t v = 7;
        ASSERT_EQ(icbc_pace_parse_rate(g.text, &v), ICBC_OK) << g.text;
        EXPECT_EQ(v, g.bits) << g.text;
    }
}

TEST(PaceRate, AnythingElseIsRefused)
{
    for (const char *bad : { "", "mbit", "-1", "+5", "1e9", "0x10", "400 mbit", "400Mbit", "400mb",
                             "400mbps", "1.2.3", ".", "1000001gbit", "123456789012345678901" }) {
        uint64_t v = 7;
        EXPECT_EQ(icbc_pace_parse_rate(bad, &v), ICBC_ERR_INVALID) << bad;
        EXPECT_EQ(v, 7u) << bad;
    }
    uint64_t v;
    EXPECT_EQ(icbc_pace_parse_rate(nullptr, &v), ICBC_ERR_INVALID);
}

} // namespace
