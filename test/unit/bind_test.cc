// Router placement (icbc_bind.h) on this host's real topology.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "icbc_bind.h"

namespace
{

int ncpus()
{
    cpu_set_t s;
    sched_getaffinity(0, sizeof(s), &s);
    return CPU_COUNT(&s);
}

std::string check(const char *spec)
{
    char err[256] = "";
    return icbc_bind_check(spec, err, sizeof(err)) == ICBC_OK ? "ok" : err;
}

} // namespace

TEST(Bind, SpecsAreCheckedBeforeAnythingIsBound)
{
    EXPECT_EQ("ok", check("auto"));
    EXPECT_EQ("ok", check("none"));
    EXPECT_EQ("ok", check("0"));
    EXPECT_EQ("ok", check("0-1,3"));
    EXPECT_NE(std::string::npos, check("fast").find("'fast' is not auto, none or a CPU list"));
    EXPECT_NE(std::string::npos, check("").find("is not auto, none or a CPU list"));
    EXPECT_NE(std::string::npos, check("1-x").find("is not auto, none or a CPU list"));
}

TEST(Bind, NoneLeavesTheThreadWhereItIsAndTellsTheTopology)
{
    icbc_bind_t b;
    char err[256] = "";
    ASSERT_EQ(ICBC_OK, icbc_bind_apply("none", "lo", 1, &b, err, sizeof(err))) << err;
    EXPECT_EQ(0, b.bound);
    EXPECT_STREQ("", b.cpus);
    EXPECT_NE(nullptr, strstr(b.topology, "core(s)")) << b.topology;
}

// A thread of its own, so that the test process keeps its mask.
TEST(Bind, AutoBindsTheThreadToTheLastCoreOfAVirtualInterfacesHost)
{
    char why[256] = "";
    int cpu = icbc_bind_auto_cpu("lo", why, sizeof(why));
    ASSERT_GE(cpu, 0) << why;
    EXPECT_NE(nullptr, strstr(why, "no place in the I/O topology")) << why;
    EXPECT_LT(cpu, CPU_SETSIZE);
    icbc_bind_t b;
    char err[256] = "";
    icbc_status_t st = ICBC_ERR_INVALID;
    cpu_set_t after;
    CPU_ZERO(&after);
    std::thread th([&] {
        st = icbc_bind_apply("auto", "lo", 1, &b, err, sizeof(err));
        sched_getaffinity(0, sizeof(after), &after);
    });
    th.join();
    ASSERT_EQ(ICBC_OK, st) << err;
    EXPECT_EQ(1, b.bound);
    EXPECT_EQ(std::to_string(cpu), b.cpus);
    EXPECT_EQ(1, CPU_COUNT(&after));
    EXPECT_TRUE(CPU_ISSET(cpu, &after));
}

TEST(Bind, ACpuListBeyondTheHostIsRefused)
{
    icbc_bind_t b;
    char err[256] = "";
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_bind_apply("4000", "lo", 1, &b, err, sizeof(err)));
    EXPECT_NE(nullptr, strstr(err, "names CPUs this host does not have")) << err;
    EXPECT_EQ(0, b.bound);
}

// In a child process: an unbound process gives the router's CPU up; one
// its user bound stays where it is.
TEST(Bind, AnUnboundProcessLeavesTheRoutersCpu)
{
    if (ncpus() < 2)
        GTEST_SKIP() << "hardware: one CPU";
    char why[256];
    int cpu = icbc_bind_auto_cpu("lo", why, sizeof(why));
    ASSERT_GE(cpu, 0);
    pid_t pid = fork();
    if (pid == 0) {
        char where[64];
        int moved = icbc_bind_avoid("auto", "lo", where, sizeof(where));
        cpu_set_t s;
        sched_getaffinity(0, sizeof(s), &s);
        if (moved != 1 || CPU_ISSET(cpu, &s) || std::string(where).empty())
            _exit(1);
        if (icbc_bind_avoid("none", "lo", where, sizeof(where)) != 0)
            _exit(4);
        // now bound (by the call above): a second call leaves it alone
        cpu_set_t before = s;
        if (icbc_bind_avoid(cpu == 0 ? "1" : "0", "lo", where, sizeof(where)) != 0)
            _exit(2);
        sched_getaffinity(0, sizeof(s), &s);
        _exit(CPU_EQUAL(&s, &before) ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status));
}
