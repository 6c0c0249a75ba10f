/*
 * The global phase of IMPI collectives (impi_coll): every rank's steps run
 * together in a simulation with buffered sends, for groups of 1 to 12
 * clients (linear up to 4 masters, a tree above), clients interleaved in
 * rank order, every root. A schedule must end without deadlock with every
 * message received; a barrier's master 0 hears from every master before it
 * answers; a bcast gives every master the root's value; a reduce brings
 * every client's part to the root exactly once.
 */
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <vector>

#include "impi_coll.h"

namespace
{

/* What a message carries in the simulation: the set of clients whose parts
 * it holds (reduce), or a value (bcast). */
struct Payload {
    std::set<int> parts;
    int value = -1;
};

struct Sim {
    std::vector<int> client;
    impi_coll_group_t g{};
    std::vector<std::vector<impi_coll_step_t>> steps;
    std::vector<Payload> state;
    std::map<std::pair<int, int>, std::deque<Payload>> wire; /* (from, to) */
    std::vector<int> order_of_events;                        /* ranks, as steps complete */

    explicit Sim(std::vector<int> c, int maxlinear = 4) : client(std::move(c))
    {
        g.size = (int) client.size();
        g.client = client.data();
        g.maxlinear = maxlinear;
    }
    template <typename F> void plan(F schedule)
    {
        steps.assign(client.size(), {});
        for (int r = 0; r < g.size; r++) {
            impi_coll_step_t s[IMPI_COLL_STEPS_MAX];
            int n = schedule(r, s);
            ASSERT_GE(n, 0);
            steps[(size_t) r].assign(s, s + n);
        }
    }
    /* Runs every rank until all are done; false on a deadlock. */
    bool run()
    {
        std::vector<size_t> pc(client.size(), 0);
        for (;;) {
            bool moved = false, all_done = true;
            for (int r = 0; r < g.size; r++) {
                auto &st = steps[(size_t) r];
                while (pc[(size_t) r] < st.size()) {
                    const impi_coll_step_t &s = st[pc[(size_t) r]];
                    if (s.op == IMPI_COLL_SEND) {
                        wire[{ r, s.peer }].push_back(state[(size_t) r]);
                    } else {
                        auto &q = wire[{ s.peer, r }];
                        if (q.empty())
                            break;
                        Payload p = q.front();
                        q.pop_front();
                        if (s.op == IMPI_COLL_RECV) {
                            state[(size_t) r].value = p.value;
                        } else {
                            for (int c : p.parts) {
                                EXPECT_EQ(0u, state[(size_t) r].parts.count(c))
                                    << "client " << c << "'s part reduced twice at rank " << r;
                                state[(size_t) r].parts.insert(c);
                            }
                        }
                    }
                    order_of_events.push_back(r);
                    pc[(size_t) r]++;
                    moved = true;
                }
                all_done &= pc[(size_t) r] == st.size();
            }
            if (all_done)
                break;
            if (!moved)
                return false;
        }
        for (auto &w : wire)
            if (!w.second.empty())
                return false;
        return true;
    }
};

/* Groups: NCLIENTS clients (NRANKS >= NCLIENTS), the ranks dealt to them
 * in blocks, every other block backwards: clients interleave and their
 * masters are not in client order (rank 0 is the last client's). */
std::vector<int> group(int nclients, int nranks)
{
    std::vector<int> c;
    for (int r = 0; r < nranks; r++) {
        int k = r % nclients;
        c.push_back((r / nclients) % 2 == 0 ? nclients - 1 - k : k);
    }
    return c;
}

class ImpiColl : public ::testing::TestWithParam<int>
{
};

TEST_P(ImpiColl, MastersAreTheLowestRankOfEachClientInClientOrder)
{
    int nc = GetParam();
    Sim s(group(nc, 3 * nc + 1));
    ASSERT_EQ(nc, impi_coll_nmasters(&s.g));
    int prev_client = -1;
    for (int k = 0; k < nc; k++) {
        int m = impi_coll_master_rank(&s.g, k);
        ASSERT_GE(m, 0);
        EXPECT_GT(s.client[(size_t) m], prev_client);
        prev_client = s.client[(size_t) m];
        EXPECT_EQ(m, impi_coll_local_master(&s.g, m));
        EXPECT_EQ(k, impi_coll_master_num(&s.g, m));
        for (int r = 0; r < m; r++)
            EXPECT_NE(s.client[(size_t) r], s.client[(size_t) m]);
    }
    EXPECT_EQ(-1, impi_coll_master_rank(&s.g, nc));
}

TEST_P(ImpiColl, BarrierMasterZeroHearsFromEveryMasterBeforeAnswering)
{
    int nc = GetParam();
    Sim s(group(nc, 2 * nc + 1));
    s.state.assign(s.client.size(), {});
    s.plan([&](int r, impi_coll_step_t *st) { return impi_coll_barrier(&s.g, r, st); });
    ASSERT_TRUE(s.run()) << nc << " clients: deadlock or messages left over";
    /* the barrier's causality: a master finishes only after every master
     * started; with buffered sends, every master's first step comes before
     * any master's last */
    std::map<int, size_t> first, last;
    for (size_t i = 0; i < s.order_of_events.size(); i++) {
        int r = s.order_of_events[i];
        if (!first.count(r))
            first[r] = i;
        last[r] = i;
    }
    EXPECT_EQ((size_t) (nc > 1 ? nc : 0), first.size());
    for (auto &f : first)
        for (auto &l : last)
            EXPECT_LT(f.second, l.second)
                << "rank " << l.first << " left before rank " << f.first << " arrived";
}

TEST_P(ImpiColl, BcastGivesEveryMasterTheRootsValue)
{
    int nc = GetParam();
    std::vector<int> c = group(nc, 2 * nc + 2);
    for (int root = 0; root < (int) c.size(); root++) {
        Sim s(c);
        s.state.assign(c.size(), {});
        s.state[(size_t) root].value = 1000 + root;
        s.plan([&](int r, impi_coll_step_t *st) { return impi_coll_bcast(&s.g, r, root, st); });
        ASSERT_TRUE(s.run()) << nc << " clients, root " << root;
        for (int k = 0; k < nc; k++) {
            int m = impi_coll_master_rank(&s.g, k);
            if (c[(size_t) m] == c[(size_t) root])
                continue; /* the root's client: its local phase */
            EXPECT_EQ(1000 + root, s.state[(size_t) m].value)
                << nc << " clients, root " << root << ", master " << m;
        }
    }
}

TEST_P(ImpiColl, ReduceBringsEveryClientsPartToTheRootOnce)
{
    int nc = GetParam();
    std::vector<int> c = group(nc, 2 * nc + 2);
    for (int root = 0; root < (int) c.size(); root++) {
        Sim s(c);
        s.state.assign(c.size(), {});
        /* after the local phase: the root holds its client's part, every
         * other client's master its own */
        s.state[(size_t) root].parts = { c[(size_t) root] };
        for (int k = 0; k < nc; k++) {
            int m = impi_coll_master_rank(&s.g, k);
            if (c[(size_t) m] != c[(size_t) root])
                s.state[(size_t) m].parts = { c[(size_t) m] };
        }
        s.plan([&](int r, impi_coll_step_t *st) { return impi_coll_reduce(&s.g, r, root, st); });
        ASSERT_TRUE(s.run()) << nc << " clients, root " << root;
        EXPECT_EQ((size_t) nc, s.state[(size_t) root].parts.size())
            << nc << " clients, root " << root;
    }
}

INSTANTIATE_TEST_SUITE_P(Clients, ImpiColl, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16),
                         [](const ::testing::TestParamInfo<int> &i) {
                             return std::to_string(i.param) + "clients";
                         });

TEST(ImpiCollBounds, RanksOutsideTheGroupAreRefused)
{
    std::vector<int> c = { 0, 1 };
    impi_coll_group_t g = { 2, c.data(), 4 };
    impi_coll_step_t st[IMPI_COLL_STEPS_MAX];
    EXPECT_EQ(-1, impi_coll_barrier(&g, 2, st));
    EXPECT_EQ(-1, impi_coll_bcast(&g, 0, 2, st));
    EXPECT_EQ(-1, impi_coll_reduce(&g, -1, 0, st));
}

} // namespace
