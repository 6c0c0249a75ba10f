/*
 * The IMPI host of a node (src/impi/impi_agent.h): packets between local
 * links and host connections, hosts lost and why, the host's end with FINI,
 * a process that dies taking the host down, and the local frames alone.
 * The host connections and local links are socket pairs whose other ends
 * the tests hold.
 */
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "icbc_bytes.h"
#include "impi_agent.h"
#include "impi_test_layout.h"

namespace
{

/* Client 0: one host (0) of 3 processes, ranks 0..2, the agent's; client 1:
 * hosts 1 and 2 of one process each, ranks 3 and 4. */
class Agent : public ::testing::Test
{
  protected:
    impi_layout_t l{};
    impi_agent_t *agent = nullptr;
    int host_end[3] = { -1, -1, -1 };  /* the remote hosts' ends */
    int local_end[3] = { -1, -1, -1 }; /* the processes' ends */

    void SetUp() override
    {
        std::vector<Client> cl{ Client(0, { 3 }), Client(1, { 1, 1 }) };
        impi_test_layout(cl, &l);
        int host_fds[3] = { -1, -1, -1 }, local_fds[3];
        for (int h = 1; h < 3; h++)
            pair(&host_fds[h], &host_end[h]);
        for (int k = 0; k < 3; k++)
            pair(&local_fds[k], &local_end[k]);
        ASSERT_EQ(ICBC_OK, impi_agent_create(&l, 0, host_fds, local_fds, 2000, &agent));
    }
    void TearDown() override
    {
        impi_agent_destroy(agent);
        for (int fd : host_end)
            if (fd >= 0)
                close(fd);
        for (int fd : local_end)
            if (fd >= 0)
                close(fd);
        impi_layout_free(&l);
    }
    static void pair(int *a, int *b)
    {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        *a = sv[0];
        *b = sv[1];
        fcntl(*b, F_SETFL, O_NONBLOCK);
    }
    int pump(int rounds = 20)
    {
        int done = 0;
        for (int i = 0; i < rounds && !done; i++)
            done = impi_agent_poll(agent, 5);
        return done;
    }
    /* Everything the other end of FD has now; EOF sets *EOF_SEEN. */
    static Bytes drain(int fd, bool *eof_seen = nullptr)
    {
        Bytes b;
        uint8_t buf[4096];
        for (;;) {
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n > 0) {
                b.insert(b.end(), buf, buf + n);
                continue;
            }
            if (n == 0 && eof_seen)
                *eof_seen = true;
            return b;
        }
    }
    Bytes packet(uint32_t type, int src, int dest, const std::string &payload)
    {
        impi_pkt_hdr_t h{};
        h.type = type;
        h.len = (uint32_t) payload.size();
        h.src = l.procs[src];
        h.dest = l.procs[dest];
        h.msglen = payload.size();
        h.tag = 7;
        Bytes b(IMPI_PKT_HDR_SIZE);
        impi_pkt_hdr_pack(&h, b.data());
        b.insert(b.end(), payload.begin(), payload.end());
        return b;
    }
    static Bytes frame(uint32_t kind, uint32_t host, const Bytes &body)
    {
        Bytes b(IMPI_FRAME_HDR_SIZE);
        impi_frame_hdr_pack(kind, host, (uint32_t) body.size(), b.data());
        b.insert(b.end(), body.begin(), body.end());
        return b;
    }
    static void put(int fd, const Bytes &b)
    {
        ASSERT_EQ((ssize_t) b.size(), write(fd, b.data(), b.size()));
    }
    /* The frames in B, as (kind, host, body). */
    struct Frame {
        uint32_t kind, host;
        Bytes body;
    };
    static std::vector<Frame> frames(const Bytes &b)
    {
        impi_frames_t f;
        std::vector<Frame> out;
        char err[128];
        EXPECT_EQ(ICBC_OK, impi_frames_init(&f, 65536));
        EXPECT_EQ(ICBC_OK,
                  impi_frames_feed(
                      &f, b.data(), b.size(),
                      [](void *arg, uint32_t kind, uint32_t host, const uint8_t *body, size_t len) {
                          ((std::vector<Frame> *) arg)
                              ->push_back(Frame{ kind, host, Bytes(body, body + len) });
                      },
                      &out, err, sizeof(err)));
        impi_frames_free(&f);
        return out;
    }
};

TEST_F(Agent, PacketsTravelBetweenLinksAndHosts)
{
    Bytes out = packet(IMPI_PK_DATA, 1, 4, "from rank 1 to rank 4");
    put(local_end[1], frame(IMPI_FRAME_PACKET, 2, out));
    pump();
    EXPECT_EQ(out, drain(host_end[2])); /* the packet as it is, on host 2's connection */
    EXPECT_TRUE(drain(host_end[1]).empty());

    Bytes in = packet(IMPI_PK_DATA, 3, 2, "from rank 3 to rank 2");
    put(host_end[1], in);
    pump();
    auto f = frames(drain(local_end[2]));
    ASSERT_EQ(1u, f.size());
    EXPECT_EQ((uint32_t) IMPI_FRAME_PACKET, f[0].kind);
    EXPECT_EQ(1u, f[0].host); /* the host it came from */
    EXPECT_EQ(in, f[0].body);
    EXPECT_TRUE(drain(local_end[0]).empty());
    EXPECT_TRUE(drain(local_end[1]).empty());
}

TEST_F(Agent, APacketInPiecesArrivesWhole)
{
    Bytes in = packet(IMPI_PK_DATASYNC, 4, 0, std::string(3000, 'x'));
    for (size_t off = 0; off < in.size(); off += 1000) {
        put(host_end[2], Bytes(in.begin() + off, in.begin() + std::min(off + 1000, in.size())));
        pump(2);
    }
    auto f = frames(drain(local_end[0]));
    ASSERT_EQ(1u, f.size());
    EXPECT_EQ(in, f[0].body);
}

TEST_F(Agent, AHostThatBreaksTheLayoutIsLostForEveryProcess)
{
    /* rank 3 is host 1's process, not host 2's */
    put(host_end[2], packet(IMPI_PK_DATA, 3, 0, "spoofed"));
    pump();
    for (int k = 0; k < 3; k++) {
        auto f = frames(drain(local_end[k]));
        ASSERT_EQ(1u, f.size()) << "process " << k;
        EXPECT_EQ((uint32_t) IMPI_FRAME_LOST, f[0].kind);
        EXPECT_EQ(2u, f[0].host);
        std::string why(f[0].body.begin(), f[0].body.end());
        EXPECT_NE(std::string::npos, why.find("not one of that host's")) << why;
    }
    bool eof = false;
    drain(host_end[2], &eof);
    EXPECT_TRUE(eof); /* its connection closed */
    /* host 1 is untouched */
    put(host_end[1], packet(IMPI_PK_DATA, 3, 1, "still here"));
    pump();
    auto f = frames(drain(local_end[1]));
    ASSERT_EQ(1u, f.size());
    EXPECT_EQ((uint32_t) IMPI_FRAME_PACKET, f[0].kind);
}

TEST_F(Agent, AHostThatClosesIsLost)
{
    close(host_end[1]);
    host_end[1] = -1;
    pump();
    auto f = frames(drain(local_end[0]));
    ASSERT_EQ(1u, f.size());
    EXPECT_EQ((uint32_t) IMPI_FRAME_LOST, f[0].kind);
    EXPECT_EQ(1u, f[0].host);
    EXPECT_EQ("it closed its connection", std::string(f[0].body.begin(), f[0].body.end()));
}

TEST_F(Agent, TheHostEndsWithFiniBothWays)
{
    for (int k = 0; k < 2; k++)
        put(local_end[k], frame(IMPI_FRAME_DONE, 0, {}));
    EXPECT_EQ(0, pump());
    EXPECT_TRUE(drain(host_end[1]).empty()); /* process 2 is not done */
    put(local_end[2], frame(IMPI_FRAME_DONE, 0, {}));
    EXPECT_EQ(0, pump());
    for (int h = 1; h < 3; h++) {
        Bytes b = drain(host_end[h]);
        ASSERT_EQ((size_t) IMPI_PKT_HDR_SIZE, b.size());
        impi_pkt_hdr_t fini;
        ASSERT_EQ(ICBC_OK, impi_pkt_hdr_parse(b.data(), 65536, &fini));
        EXPECT_EQ((uint32_t) IMPI_PK_FINI, fini.type);
    }
    /* a packet for a process that is done is dropped */
    put(host_end[1], packet(IMPI_PK_DATA, 3, 0, "late"));
    Bytes fini(IMPI_PKT_HDR_SIZE);
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_FINI;
    impi_pkt_hdr_pack(&h, fini.data());
    put(host_end[1], fini);
    put(host_end[2], fini);
    EXPECT_EQ(1, pump());
    EXPECT_TRUE(drain(local_end[0]).empty());
    bool eof = false;
    drain(host_end[1], &eof);
    EXPECT_TRUE(eof);
}

TEST_F(Agent, AProcessThatDiesTakesTheHostDown)
{
    close(local_end[1]);
    local_end[1] = -1;
    pump();
    for (int h = 1; h < 3; h++) {
        bool eof = false;
        drain(host_end[h], &eof);
        EXPECT_TRUE(eof) << "host " << h;
    }
    auto f = frames(drain(local_end[0]));
    ASSERT_EQ(2u, f.size());
    for (auto &fr : f) {
        EXPECT_EQ((uint32_t) IMPI_FRAME_LOST, fr.kind);
        std::string why(fr.body.begin(), fr.body.end());
        EXPECT_NE(std::string::npos, why.find("process 1 of this node's IMPI host ended")) << why;
    }
    put(local_end[0], frame(IMPI_FRAME_DONE, 0, {}));
    put(local_end[2], frame(IMPI_FRAME_DONE, 0, {}));
    EXPECT_EQ(1, pump());
}

/* A host that does not read: the agent holds what it cannot write up to
 * IMPI_AGENT_QUEUE_MAX, then stops reading the process's link, so the
 * process's own writes stop; once the host reads, everything arrives, in
 * order, and the link is read again. */
TEST_F(Agent, AHostThatDoesNotReadStopsTheLinksThatFeedIt)
{
    const size_t piece = 60000;
    std::string body(piece, 'p');
    size_t written = 0, got = 0;
    uint64_t next = 0, seen = 0;
    int stuck_rounds = 0;
    Bytes tail;

    /* packets from rank 1 to rank 4 (host 2), numbered in their first bytes */
    auto numbered = [&](uint64_t i) {
        std::string b = body;
        memcpy(&b[0], &i, sizeof(i));
        return frame(IMPI_FRAME_PACKET, 2, packet(IMPI_PK_DATA, 1, 4, b));
    };
    Bytes cur = numbered(next);
    size_t cur_off = 0;
    while (stuck_rounds < 50) {
        ssize_t n = write(local_end[1], cur.data() + cur_off, cur.size() - cur_off);
        if (n > 0) {
            cur_off += (size_t) n;
            written += (size_t) n;
            stuck_rounds = 0;
            if (cur_off == cur.size()) {
                cur = numbered(++next);
                cur_off = 0;
            }
        } else {
            stuck_rounds++;
        }
        impi_agent_poll(agent, 0);
        ASSERT_LT(written, (size_t) 3 * IMPI_AGENT_QUEUE_MAX) << "the link is still read";
    }
    EXPECT_GT(written, (size_t) IMPI_AGENT_QUEUE_MAX);

    /* the host reads: the rest of the packets follow, whole and in order */
    size_t plen = IMPI_PKT_HDR_SIZE + piece;
    for (int round = 0; round < 100000 && (seen < next || cur_off != 0); round++) {
        if (cur_off != 0) {
            ssize_t n = write(local_end[1], cur.data() + cur_off, cur.size() - cur_off);
            if (n > 0 && (cur_off += (size_t) n) == cur.size())
                cur_off = 0, next++;
        }
        impi_agent_poll(agent, 1);
        Bytes b = drain(host_end[2]);
        tail.insert(tail.end(), b.begin(), b.end());
        while (tail.size() >= plen) {
            uint64_t i;
            memcpy(&i, tail.data() + IMPI_PKT_HDR_SIZE, sizeof(i));
            ASSERT_EQ(seen, i);
            seen++;
            got += plen;
            tail.erase(tail.begin(), tail.begin() + (long) plen);
        }
    }
    EXPECT_EQ(next, seen);
    EXPECT_TRUE(tail.empty());
    EXPECT_TRUE(drain(local_end[1]).empty()); /* nothing was lost or refused */
}

/* The other way: a process that does not read its link stops the agent
 * reading the host connections (TCP then slows the senders); once it reads,
 * every packet arrives, in order. */
TEST_F(Agent, AProcessThatDoesNotReadStopsTheHostConnections)
{
    const size_t piece = 60000;
    uint64_t next = 0, seen = 0;
    size_t written = 0;
    int stuck_rounds = 0;
    Bytes cur, got;

    auto numbered = [&](uint64_t i) {
        std::string b(piece, 'q');
        memcpy(&b[0], &i, sizeof(i));
        return packet(IMPI_PK_DATA, 3, 1, b);
    };
    size_t cur_off = 0;
    cur = numbered(next);
    while (stuck_rounds < 50) {
        ssize_t n = write(host_end[1], cur.data() + cur_off, cur.size() - cur_off);
        if (n > 0) {
            written += (size_t) n;
            stuck_rounds = 0;
            if ((cur_off += (size_t) n) == cur.size()) {
                cur = numbered(++next);
                cur_off = 0;
            }
        } else {
            stuck_rounds++;
        }
        impi_agent_poll(agent, 0);
        ASSERT_LT(written, (size_t) 3 * IMPI_AGENT_QUEUE_MAX) << "the host is still read";
    }
    EXPECT_GT(written, (size_t) IMPI_AGENT_QUEUE_MAX);

    size_t flen = IMPI_FRAME_HDR_SIZE + IMPI_PKT_HDR_SIZE + piece;
    for (int round = 0; round < 100000 && (seen < next || cur_off != 0); round++) {
        if (cur_off != 0) {
            ssize_t n = write(host_end[1], cur.data() + cur_off, cur.size() - cur_off);
            if (n > 0 && (cur_off += (size_t) n) == cur.size())
                cur_off = 0, next++;
        }
        impi_agent_poll(agent, 1);
        Bytes b = drain(local_end[1]);
        got.insert(got.end(), b.begin(), b.end());
        while (got.size() >= flen) {
            uint64_t i;
            memcpy(&i, got.data() + IMPI_FRAME_HDR_SIZE + IMPI_PKT_HDR_SIZE, sizeof(i));
            ASSERT_EQ(seen, i);
            seen++;
            got.erase(got.begin(), got.begin() + (long) flen);
        }
    }
    EXPECT_EQ(next, seen);
    EXPECT_TRUE(got.empty());
}

TEST(AgentInproc, TheCallersOwnProcessGoesInAndOutWithoutALink)
{
    std::vector<Client> cl{ Client(0, { 2 }), Client(1, { 1 }) };
    impi_layout_t l{};
    impi_test_layout(cl, &l);
    int sv[2], lk[2], host_fds[2] = { -1, -1 }, local_fds[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv)); /* host 1 */
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, lk)); /* process 1's link */
    host_fds[1] = sv[0];
    local_fds[0] = IMPI_AGENT_INPROC;
    local_fds[1] = lk[0];
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    impi_agent_t *a;
    ASSERT_EQ(ICBC_OK, impi_agent_create(&l, 0, host_fds, local_fds, 2000, &a));
    /* one descriptor for all: readable once host 1 or process 1's link is */
    struct pollfd pfd = { impi_agent_fd(a), POLLIN, 0 };
    EXPECT_EQ(0, poll(&pfd, 1, 0));

    /* process 0 (in-process) to rank 2 on host 1 */
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_DATA;
    h.len = 3;
    h.msglen = 3;
    h.src = l.procs[0];
    h.dest = l.procs[2];
    Bytes pkt(IMPI_PKT_HDR_SIZE + 3, 'z');
    impi_pkt_hdr_pack(&h, pkt.data());
    Bytes fr(IMPI_FRAME_HDR_SIZE);
    impi_frame_hdr_pack(IMPI_FRAME_PACKET, 1, (uint32_t) pkt.size(), fr.data());
    fr.insert(fr.end(), pkt.begin(), pkt.end());
    impi_agent_local_input(a, 0, fr.data(), 5); /* in pieces */
    impi_agent_local_input(a, 0, fr.data() + 5, fr.size() - 5);
    impi_agent_poll(a, 0);
    uint8_t got[4096];
    ASSERT_EQ((ssize_t) pkt.size(), read(sv[1], got, sizeof(got)));
    EXPECT_EQ(0, memcmp(got, pkt.data(), pkt.size()));

    /* rank 2 to process 0: waits in the agent until taken */
    h.src = l.procs[2];
    h.dest = l.procs[0];
    impi_pkt_hdr_pack(&h, pkt.data());
    ASSERT_EQ((ssize_t) pkt.size(), write(sv[1], pkt.data(), pkt.size()));
    EXPECT_EQ(1, poll(&pfd, 1, 1000));
    for (int i = 0; i < 20; i++)
        impi_agent_poll(a, 5);
    uint8_t *buf = nullptr;
    size_t cap = 0;
    size_t n = impi_agent_local_swap(a, 0, &buf, &cap);
    ASSERT_EQ(IMPI_FRAME_HDR_SIZE + pkt.size(), n);
    EXPECT_EQ(0, memcmp(buf + IMPI_FRAME_HDR_SIZE, pkt.data(), pkt.size()));
    EXPECT_EQ(0u, impi_agent_local_swap(a, 0, &buf, &cap)); /* nothing since */
    free(buf);

    /* the same both ways without frames or copies: a packet straight onto
     * the host connection, the frames for process 0 swapped out whole */
    h.src = l.procs[0];
    h.dest = l.procs[2];
    impi_pkt_hdr_pack(&h, pkt.data());
    ASSERT_EQ(ICBC_OK, impi_agent_local_packet(a, 1, pkt.data(), IMPI_PKT_HDR_SIZE,
                                               pkt.data() + IMPI_PKT_HDR_SIZE, 3));
    EXPECT_EQ(ICBC_ERR_INVALID,
              impi_agent_local_packet(a, 0, pkt.data(), IMPI_PKT_HDR_SIZE, nullptr, 0));
    ASSERT_EQ((ssize_t) pkt.size(), read(sv[1], got, sizeof(got)));
    EXPECT_EQ(0, memcmp(got, pkt.data(), pkt.size()));
    h.src = l.procs[2];
    h.dest = l.procs[0];
    impi_pkt_hdr_pack(&h, pkt.data());
    for (int k = 0; k < 2; k++)
        ASSERT_EQ((ssize_t) pkt.size(), write(sv[1], pkt.data(), pkt.size()));
    for (int i = 0; i < 20; i++)
        impi_agent_poll(a, 5);
    buf = nullptr;
    cap = 0;
    n = impi_agent_local_swap(a, 0, &buf, &cap);
    ASSERT_EQ(2 * (IMPI_FRAME_HDR_SIZE + pkt.size()), n);
    ASSERT_GE(cap, n);
    EXPECT_EQ(0, memcmp(buf + IMPI_FRAME_HDR_SIZE, pkt.data(), pkt.size()));
    EXPECT_EQ(0u, impi_agent_local_swap(a, 0, &buf, &cap)); /* nothing since */
    free(buf);

    /* DONE from both: FINI to host 1; its FINI ends the host */
    Bytes done(IMPI_FRAME_HDR_SIZE);
    impi_frame_hdr_pack(IMPI_FRAME_DONE, 0, 0, done.data());
    impi_agent_local_input(a, 0, done.data(), done.size());
    ASSERT_EQ((ssize_t) done.size(), write(lk[1], done.data(), done.size()));
    EXPECT_EQ(0, impi_agent_poll(a, 5));
    impi_agent_poll(a, 5);
    ASSERT_EQ(IMPI_PKT_HDR_SIZE, read(sv[1], got, sizeof(got)));
    impi_pkt_hdr_t fini{};
    fini.type = IMPI_PK_FINI;
    impi_pkt_hdr_pack(&fini, got);
    ASSERT_EQ(IMPI_PKT_HDR_SIZE, write(sv[1], got, IMPI_PKT_HDR_SIZE));
    int end = 0;
    for (int i = 0; i < 20 && !end; i++)
        end = impi_agent_poll(a, 5);
    EXPECT_EQ(1, end);
    impi_agent_destroy(a);
    close(sv[1]);
    close(lk[1]);
    impi_layout_free(&l);
}

TEST(ImpiFrames, PiecesAndBadFrames)
{
    impi_frames_t f;
    char err[128];
    int n = 0;
    auto count = [](void *arg, uint32_t, uint32_t, const uint8_t *, size_t) { ++*(int *) arg; };
    ASSERT_EQ(ICBC_OK, impi_frames_init(&f, 1024));
    Bytes b(IMPI_FRAME_HDR_SIZE + 5);
    impi_frame_hdr_pack(IMPI_FRAME_LOST, 1, 5, b.data());
    for (size_t i = 0; i < b.size(); i++)
        ASSERT_EQ(ICBC_OK, impi_frames_feed(&f, &b[i], 1, count, &n, err, sizeof(err)));
    EXPECT_EQ(1, n);
    impi_frame_hdr_pack(99, 0, 0, b.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              impi_frames_feed(&f, b.data(), IMPI_FRAME_HDR_SIZE, count, &n, err, sizeof(err)));
    impi_frames_free(&f);
    ASSERT_EQ(ICBC_OK, impi_frames_init(&f, 1024));
    impi_frame_hdr_pack(IMPI_FRAME_PACKET, 0, IMPI_PKT_HDR_SIZE + 1025, b.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              impi_frames_feed(&f, b.data(), IMPI_FRAME_HDR_SIZE, count, &n, err, sizeof(err)));
    impi_frame_hdr_pack(IMPI_FRAME_PACKET, 0, 10, b.data()); /* shorter than a header */
    impi_frames_free(&f);
    ASSERT_EQ(ICBC_OK, impi_frames_init(&f, 1024));
    EXPECT_EQ(ICBC_ERR_INVALID,
              impi_frames_feed(&f, b.data(), IMPI_FRAME_HDR_SIZE, count, &n, err, sizeof(err)));
    impi_frames_free(&f);
}

/* A packet of IMPI_AGENT_LEND_MIN bytes or more for the in-process process
 * reaches it by reference, its payload where the agent read it from the
 * host connection; the buffers go back to the agent at the next swap, so
 * that a steady stream needs no new one. */
TEST(AgentInproc, LargePacketsAreLentNotCopiedAndTheirBuffersComeBack)
{
    std::vector<Client> cl{ Client(0, { 1 }, 65536), Client(1, { 1 }, 65536) };
    impi_layout_t l{};
    impi_test_layout(cl, &l);
    int sv[2], host_fds[2] = { -1, -1 }, local_fds[1] = { IMPI_AGENT_INPROC };
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    host_fds[1] = sv[0];
    impi_agent_t *a;
    ASSERT_EQ(ICBC_OK, impi_agent_create(&l, 0, host_fds, local_fds, 2000, &a));
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_DATA;
    h.src = l.procs[1];
    h.dest = l.procs[0];
    const size_t sizes[] = { IMPI_AGENT_LEND_MIN - 1, IMPI_AGENT_LEND_MIN, 65536 };
    uint8_t *buf = nullptr;
    size_t cap = 0;
    int bufs_after_first = -1;
    for (int round = 0; round < 20; round++) {
        Bytes sent;
        for (size_t len : sizes) {
            h.len = (uint32_t) len;
            h.msglen = len;
            h.tag = round;
            Bytes pkt(IMPI_PKT_HDR_SIZE + len, (uint8_t) ('a' + round));
            impi_pkt_hdr_pack(&h, pkt.data());
            sent.insert(sent.end(), pkt.begin(), pkt.end());
        }
        size_t off = 0;
        while (off < sent.size()) { /* the socket pair holds less than a round */
            ssize_t w = write(sv[1], sent.data() + off, sent.size() - off);
            if (w > 0)
                off += (size_t) w;
            impi_agent_poll(a, 1);
        }
        for (int i = 0; i < 5; i++)
            impi_agent_poll(a, 1);
        size_t n = impi_agent_local_swap(a, 0, &buf, &cap);
        /* the small one copied into its frame, the two others lent */
        size_t at = 0;
        for (size_t k = 0; k < 3; k++) {
            ASSERT_LE(at + IMPI_FRAME_HDR_SIZE, n);
            uint32_t kind = icbc_get32(buf + at), len = icbc_get32(buf + at + 8);
            const uint8_t *body = buf + at + IMPI_FRAME_HDR_SIZE,
                          *payload = body + IMPI_PKT_HDR_SIZE;
            impi_pkt_hdr_t got{};
            ASSERT_EQ(ICBC_OK, impi_pkt_hdr_parse(body, 65536, &got));
            EXPECT_EQ(sizes[k], got.len);
            EXPECT_EQ(round, got.tag);
            if (k == 0) {
                EXPECT_EQ((uint32_t) IMPI_FRAME_PACKET, kind);
                EXPECT_EQ(IMPI_PKT_HDR_SIZE + sizes[k], len);
            } else {
                uintptr_t p;
                EXPECT_EQ((uint32_t) IMPI_FRAME_PACKET_AT, kind);
                ASSERT_EQ(IMPI_PKT_HDR_SIZE + sizeof(p), len);
                memcpy(&p, payload, sizeof(p));
                payload = (const uint8_t *) p;
            }
            for (size_t i = 0; i < sizes[k]; i++)
                ASSERT_EQ((uint8_t) ('a' + round), payload[i]) << "packet " << k << " byte " << i;
            at += IMPI_FRAME_HDR_SIZE + len;
        }
        EXPECT_EQ(n, at);
        if (round == 1)
            bufs_after_first = impi_agent_payload_buffers(a);
    }
    EXPECT_LE(bufs_after_first, 4);
    EXPECT_EQ(bufs_after_first, impi_agent_payload_buffers(a)); /* none made since */
    free(buf);
    impi_agent_destroy(a);
    close(sv[1]);
    impi_layout_free(&l);
}

/* The payloads lent to the in-process process count toward the bound of its
 * queue: while it does not take them (no swap), the agent stops reading the
 * host connection once about IMPI_AGENT_QUEUE_MAX bytes are lent, so it
 * makes no more buffers than that; once the process takes them, the rest
 * arrives, in order. */
TEST(AgentInproc, LentPayloadsAreBoundedLikeAQueue)
{
    const uint32_t datalen = 65536;
    std::vector<Client> cl{ Client(0, { 1 }, datalen), Client(1, { 1 }, datalen) };
    impi_layout_t l{};
    impi_test_layout(cl, &l);
    int sv[2], host_fds[2] = { -1, -1 }, local_fds[1] = { IMPI_AGENT_INPROC };
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    host_fds[1] = sv[0];
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    impi_agent_t *a;
    ASSERT_EQ(ICBC_OK, impi_agent_create(&l, 0, host_fds, local_fds, 2000, &a));
    const int npkts = 2 * (int) (IMPI_AGENT_QUEUE_MAX / datalen); /* twice the bound */
    Bytes all;
    impi_pkt_hdr_t h{};
    h.type = IMPI_PK_DATA;
    h.src = l.procs[1];
    h.dest = l.procs[0];
    h.len = datalen;
    h.msglen = datalen;
    for (int i = 0; i < npkts; i++) {
        h.tag = i;
        Bytes pkt(IMPI_PKT_HDR_SIZE + datalen, (uint8_t) i);
        impi_pkt_hdr_pack(&h, pkt.data());
        all.insert(all.end(), pkt.begin(), pkt.end());
    }
    size_t off = 0;
    auto pump = [&](int rounds) {
        for (int i = 0; i < rounds; i++) {
            ssize_t w = write(sv[1], all.data() + off, all.size() - off);
            if (w > 0)
                off += (size_t) w;
            impi_agent_poll(a, 1);
        }
    };
    pump(2000); /* nothing taken meanwhile */
    const int bound = (int) (IMPI_AGENT_QUEUE_MAX / datalen) + 2;
    EXPECT_LE(impi_agent_payload_buffers(a), bound);
    EXPECT_LT(off, all.size()); /* the host connection is not read any more */
    uint8_t *buf = nullptr;
    size_t cap = 0;
    int next = 0;
    for (int round = 0; round < 20000 && next < npkts; round++) {
        size_t n = impi_agent_local_swap(a, 0, &buf, &cap);
        for (size_t at = 0; at < n;) {
            uint32_t kind = icbc_get32(buf + at), len = icbc_get32(buf + at + 8);
            impi_pkt_hdr_t got{};
            ASSERT_EQ((uint32_t) IMPI_FRAME_PACKET_AT, kind);
            ASSERT_EQ(ICBC_OK, impi_pkt_hdr_parse(buf + at + IMPI_FRAME_HDR_SIZE, datalen, &got));
            ASSERT_EQ(next, got.tag);
            uintptr_t p;
            memcpy(&p, buf + at + IMPI_FRAME_HDR_SIZE + IMPI_PKT_HDR_SIZE, sizeof(p));
            ASSERT_EQ((uint8_t) next, ((const uint8_t *) p)[datalen - 1]);
            next++;
            at += IMPI_FRAME_HDR_SIZE + len;
        }
        pump(1);
    }
    EXPECT_EQ(npkts, next);
    EXPECT_LE(impi_agent_payload_buffers(a), bound);
    free(buf);
    impi_agent_destroy(a);
    close(sv[1]);
    impi_layout_free(&l);
}

/* impi_send_iov writes what the socket takes, from the caller's bytes, and
 * says where it stopped. */
TEST(ImpiSendIov, WritesWhatTheSocketTakesAndAdvancesTheVector)
{
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    Bytes a(100, 'a'), b(4 << 20, 'b');
    struct iovec iov[3] = { { a.data(), a.size() }, { nullptr, 0 }, { b.data(), b.size() } };
    ssize_t n = impi_send_iov(sv[0], iov, 3);
    ASSERT_GT(n, 100);
    ASSERT_LT((size_t) n, a.size() + b.size()); /* more than the pair holds */
    EXPECT_EQ(0u, iov[0].iov_len);
    EXPECT_EQ(a.size() + b.size() - (size_t) n, iov[2].iov_len);
    EXPECT_EQ(b.data() + (n - 100), iov[2].iov_base);
    Bytes got;
    while (got.size() < a.size() + b.size()) {
        uint8_t r[65536];
        ssize_t k = read(sv[1], r, sizeof(r));
        ASSERT_GT(k, 0);
        got.insert(got.end(), r, r + k);
        ASSERT_GE(impi_send_iov(sv[0], iov, 3), 0);
    }
    Bytes want(a);
    want.insert(want.end(), b.begin(), b.end());
    EXPECT_TRUE(want == got);
    close(sv[1]);
    struct iovec one = { a.data(), a.size() };
    EXPECT_EQ(-1, impi_send_iov(sv[0], &one, 1)); /* the peer closed */
    close(sv[0]);
}

/* A reader may receive a frame's body in place (impi_frames_body_room);
 * frames of the in-process kind are refused on a link. */
TEST(ImpiFrames, ABodyReadInPlaceAndNoInProcessFramesOnALink)
{
    impi_frames_t f;
    char err[128];
    std::vector<std::string> bodies;
    auto keep = [](void *arg, uint32_t, uint32_t, const uint8_t *body, size_t len) {
        ((std::vector<std::string> *) arg)->emplace_back((const char *) body, len);
    };
    ASSERT_EQ(ICBC_OK, impi_frames_init(&f, 1024));
    size_t want;
    EXPECT_EQ(nullptr, impi_frames_body_room(&f, &want));
    Bytes b(IMPI_FRAME_HDR_SIZE);
    impi_frame_hdr_pack(IMPI_FRAME_PACKET, 1, IMPI_PKT_HDR_SIZE + 100, b.data());
    ASSERT_EQ(ICBC_OK, impi_frames_feed(&f, b.data(), b.size(), keep, &bodies, err, sizeof(err)));
    uint8_t *room = impi_frames_body_room(&f, &want);
    ASSERT_NE(nullptr, room);
    ASSERT_EQ(IMPI_PKT_HDR_SIZE + 100u, want);
    memset(room, 'x', 60);
    impi_frames_body_filled(&f, 60, keep, &bodies);
    EXPECT_TRUE(bodies.empty());
    room = impi_frames_body_room(&f, &want);
    ASSERT_EQ(IMPI_PKT_HDR_SIZE + 40u, want);
    memset(room, 'y', want);
    impi_frames_body_filled(&f, want, keep, &bodies);
    ASSERT_EQ(1u, bodies.size());
    EXPECT_EQ(std::string(60, 'x') + std::string(IMPI_PKT_HDR_SIZE + 40, 'y'), bodies[0]);
    EXPECT_EQ(nullptr, impi_frames_body_room(&f, &want));
    impi_frame_hdr_pack(IMPI_FRAME_PACKET_AT, 1, IMPI_PKT_HDR_SIZE + 8, b.data());
    EXPECT_EQ(ICBC_ERR_INVALID,
              impi_frames_feed(&f, b.data(), b.size(), keep, &bodies, err, sizeof(err)));
    impi_frames_free(&f);
}

} // namespace
