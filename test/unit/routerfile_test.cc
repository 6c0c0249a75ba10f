// Unit tests of the router file parser (src/icbc/routerfile.c, docs/routerfile.md):
// good files, one test per error with its exact "file:line: message", caps,
// the key file, the host identity, the checker tool, and a seeded mutation run.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "icbc_routerfile.h"

namespace
{

const std::string kData = std::string(ICBC_TEST_DATA_DIR) + "/routerfile";

// A string literal that may hold NUL bytes.
#define BIN(lit) std::string(lit, sizeof(lit) - 1)

// A token as error messages quote it: cut after 48 characters.
std::string Cut(const std::string &tok)
{
    return tok.size() > 48 ? tok.substr(0, 48) + "..." : tok;
}

std::string ReadFile(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void WriteFile(const std::string &path, const std::string &data, mode_t mode)
{
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(static_cast<ssize_t>(data.size()), write(fd, data.data(), data.size()));
    ASSERT_EQ(0, fchmod(fd, mode));
    close(fd);
}

// Restores (or removes) an environment variable when it goes out of scope.
class EnvGuard
{
  public:
    explicit EnvGuard(const char *name) : name_(name)
    {
        const char *v = getenv(name);
        had_ = v != nullptr;
        if (had_)
            old_ = v;
    }
    ~EnvGuard()
    {
        if (had_)
            setenv(name_, old_.c_str(), 1);
        else
            unsetenv(name_);
    }

  private:
    const char *name_;
    bool had_;
    std::string old_;
};

// Each test gets a private directory holding the key files the router files name.
class RouterFile : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/icbc-rf-test-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(tmpl));
        dir_ = tmpl;
        key_ = BIN("0123456789abcdef\x01\x02\x00\xff-secret");
        WriteFile(dir_ + "/routers.key", key_, 0600);
        WriteFile(dir_ + "/empty.key", "", 0600);
        WriteFile(dir_ + "/open.key", "secret", 0644);
        WriteFile(dir_ + "/group.key", "secret", 0620);
        WriteFile(dir_ + "/big.key", std::string(ICBC_RF_KEY_MAX + 1, 'k'), 0600);
        WriteFile(dir_ + "/max.key", std::string(ICBC_RF_KEY_MAX, 'k'), 0600);
        ASSERT_EQ(0, mkdir((dir_ + "/dir.key").c_str(), 0700));
    }

    void TearDown() override
    {
        for (const char *f : { "routers.key", "empty.key", "open.key", "group.key", "big.key",
                               "max.key", "noread.key", "t.conf", "good-2x4.conf", "tool.conf" })
            unlink((dir_ + "/" + f).c_str());
        rmdir((dir_ + "/dir.key").c_str());
        rmdir(dir_.c_str());
        icbc_routerfile_free(rf_);
    }

    // Parses TEXT as "t.conf" with key paths relative to the test directory.
    icbc_status_t Parse(const std::string &text)
    {
        icbc_routerfile_free(rf_);
        rf_ = nullptr;
        err_[0] = '\0';
        return icbc_routerfile_parse(text.data(), text.size(), "t.conf", dir_.c_str(), &rf_, err_,
                                     sizeof(err_));
    }

    // Parses TEXT, expects ICBC_ERR_INVALID, and returns the message.
    std::string Err(const std::string &text)
    {
        icbc_status_t st = Parse(text);
        EXPECT_EQ(ICBC_ERR_INVALID, st) << "parsed: " << text;
        EXPECT_EQ(nullptr, rf_);
        return err_;
    }

    void ExpectOk(const std::string &text)
    {
        ASSERT_EQ(ICBC_OK, Parse(text)) << err_;
        ASSERT_NE(nullptr, rf_);
    }

    std::string dir_, key_;
    icbc_routerfile_t *rf_ = nullptr;
    char err_[ICBC_RF_ERR_LEN];
};

// A valid two-cluster file; line numbers: key 1, cluster a 2, hosts 3,
// router a0 4, router a1 5, cluster b 6, hosts 7, router b0 8.
const std::string kTwo = "key routers.key\n"
                         "cluster a\n"
                         "  hosts a0 a1 a2 a3\n"
                         "  router a0 fabric=10.11.0.1:7100 wan=10.100.0.1:7200\n"
                         "  router a1 fabric=10.11.0.2:7100 wan=10.100.0.2:7200\n"
                         "cluster b\n"
                         "  hosts b0 b1 b2 b3\n"
                         "  router b0 fabric=10.12.0.1:7100 wan=10.100.1.1:7200\n";

// One cluster without routers (no key needed) followed by LINE at line 3.
std::string OneCluster(const std::string &line)
{
    return "cluster a\n  hosts a0 a1\n" + line + "\n";
}

// A router line in cluster a (hosts a0 a1) at line 3, key at line 4.
std::string WithRouter(const std::string &router)
{
    return "cluster a\n  hosts a0 a1\n" + router + "\nkey routers.key\n";
}

std::string AddrText(const icbc_rf_addr_t &a)
{
    char buf[INET6_ADDRSTRLEN];
    if (a.sa.ss_family == AF_INET) {
        auto *sin = reinterpret_cast<const struct sockaddr_in *>(&a.sa);
        inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
        return std::string(buf) + ":" + std::to_string(ntohs(sin->sin_port));
    }
    auto *sin6 = reinterpret_cast<const struct sockaddr_in6 *>(&a.sa);
    inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(sin6->sin6_port));
}

// ---- good files ---------------------------------------------------------------------------------

TEST_F(RouterFile, FixtureTwoClustersEveryAccessor)
{
    ExpectOk(ReadFile(kData + "/good-2x4.conf"));
    EXPECT_STREQ("t.conf", icbc_routerfile_name(rf_));
    EXPECT_EQ(ICBC_RF_POLICY_AGGREGATE, icbc_routerfile_policy(rf_));
    EXPECT_EQ(dir_ + "/routers.key", icbc_routerfile_key_path(rf_));
    ASSERT_EQ(2u, icbc_routerfile_num_clusters(rf_));
    EXPECT_EQ(8u, icbc_routerfile_num_hosts(rf_));

    const icbc_rf_cluster_t *a = icbc_routerfile_cluster(rf_, 0);
    ASSERT_NE(nullptr, a);
    EXPECT_STREQ("a", a->name);
    EXPECT_EQ(5, a->line);
    ASSERT_EQ(4u, a->nhosts);
    EXPECT_STREQ("a0", a->hosts[0]);
    EXPECT_STREQ("a3", a->hosts[3]);
    ASSERT_EQ(2u, a->nrouters);
    EXPECT_STREQ("a0", a->routers[0].host);
    EXPECT_EQ(7, a->routers[0].line);
    EXPECT_STREQ("10.11.0.1:7100", a->routers[0].fabric.text);
    EXPECT_STREQ("10.100.0.1:7200", a->routers[0].wan.text);
    EXPECT_EQ(AF_INET, a->routers[0].fabric.sa.ss_family);
    EXPECT_EQ(sizeof(struct sockaddr_in), a->routers[0].fabric.salen);
    EXPECT_EQ("10.11.0.1:7100", AddrText(a->routers[0].fabric));
    EXPECT_EQ("10.100.0.2:7200", AddrText(a->routers[1].wan));
    EXPECT_EQ(8, a->routers[1].line);

    const icbc_rf_cluster_t *b = icbc_routerfile_cluster(rf_, 1);
    ASSERT_NE(nullptr, b);
    EXPECT_STREQ("b", b->name);
    EXPECT_EQ(9, b->line);
    EXPECT_EQ(4u, b->nhosts);
    ASSERT_EQ(1u, b->nrouters);
    EXPECT_EQ("10.12.0.1:7100", AddrText(b->routers[0].fabric));
    EXPECT_EQ(nullptr, icbc_routerfile_cluster(rf_, 2));

    ASSERT_EQ(1u, icbc_routerfile_num_impi(rf_));
    const icbc_rf_impi_t *c = icbc_routerfile_impi(rf_, 0);
    EXPECT_STREQ("c", c->name);
    EXPECT_EQ(12, c->line);
    EXPECT_STREQ("10.100.9.1:9000", c->server.text);
    EXPECT_EQ("10.100.9.1:9000", AddrText(c->server));
    EXPECT_EQ(nullptr, icbc_routerfile_impi(rf_, 1));

    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, "a2"));
    EXPECT_EQ(1, icbc_routerfile_find_host(rf_, "b3"));
    EXPECT_EQ(-1, icbc_routerfile_find_host(rf_, "c0"));
    EXPECT_EQ(-1, icbc_routerfile_find_host(rf_, "a"));
    EXPECT_EQ(0, icbc_routerfile_find_cluster(rf_, "a"));
    EXPECT_EQ(1, icbc_routerfile_find_cluster(rf_, "b"));
    EXPECT_EQ(-1, icbc_routerfile_find_cluster(rf_, "c"));
    EXPECT_EQ(0, icbc_routerfile_find_impi(rf_, "c"));
    EXPECT_EQ(-1, icbc_routerfile_find_impi(rf_, "a"));

    int ci = -1;
    const icbc_rf_router_t *r = icbc_routerfile_find_router(rf_, "a1", &ci);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(0, ci);
    EXPECT_STREQ("10.11.0.2:7100", r->fabric.text);
    r = icbc_routerfile_find_router(rf_, "b0", &ci);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(1, ci);
    EXPECT_EQ(nullptr, icbc_routerfile_find_router(rf_, "a2", &ci));
    EXPECT_EQ(nullptr, icbc_routerfile_find_router(rf_, "zz", nullptr));
    EXPECT_EQ(-1, icbc_routerfile_find_host(rf_, nullptr));
    EXPECT_EQ(-1, icbc_routerfile_find_cluster(rf_, nullptr));
    EXPECT_EQ(-1, icbc_routerfile_find_impi(rf_, nullptr));
    EXPECT_EQ(nullptr, icbc_routerfile_find_router(rf_, nullptr, nullptr));
}

TEST_F(RouterFile, FixtureIpv6TabsUtf8CommentsReusedFabric)
{
    ExpectOk(ReadFile(kData + "/good-ipv6.conf"));
    EXPECT_EQ(ICBC_RF_POLICY_STATIC, icbc_routerfile_policy(rf_));
    const icbc_rf_cluster_t *n = icbc_routerfile_cluster(rf_, 0);
    EXPECT_STREQ("nord", n->name);
    EXPECT_EQ(3u, n->nhosts);
    ASSERT_EQ(1u, n->nrouters);
    EXPECT_STREQ("n-rtr.example.org", n->routers[0].host);
    EXPECT_EQ(AF_INET6, n->routers[0].fabric.sa.ss_family);
    EXPECT_EQ(sizeof(struct sockaddr_in6), n->routers[0].fabric.salen);
    EXPECT_EQ("[fd00:11::1]:7100", AddrText(n->routers[0].fabric));
    EXPECT_EQ("[2001:db8::1]:7200", AddrText(n->routers[0].wan));
    const icbc_rf_cluster_t *s = icbc_routerfile_cluster(rf_, 1);
    EXPECT_STREQ("sud_2", s->name);
    EXPECT_EQ("192.0.2.7:7200", AddrText(s->routers[0].wan));
    EXPECT_EQ("[2001:db8:ffff::9]:9000", AddrText(icbc_routerfile_impi(rf_, 0)->server));
    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, "n-rtr.example.org"));
}

TEST_F(RouterFile, FixtureWithoutRoutersNeedsNoKey)
{
    icbc_routerfile_t *rf = nullptr;
    std::string path = kData + "/good-norouters.conf";
    ASSERT_EQ(ICBC_OK, icbc_routerfile_load(path.c_str(), &rf, err_, sizeof(err_))) << err_;
    EXPECT_EQ(ICBC_RF_POLICY_TCP, icbc_routerfile_policy(rf));
    EXPECT_EQ(nullptr, icbc_routerfile_key_path(rf));
    EXPECT_EQ(1u, icbc_routerfile_num_clusters(rf));
    EXPECT_EQ(3u, icbc_routerfile_num_hosts(rf));
    EXPECT_EQ(0u, icbc_routerfile_num_impi(rf));
    unsigned char key[16];
    size_t len = 0;
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_routerfile_read_key(rf, key, sizeof(key), &len, err_, sizeof(err_)));
    EXPECT_EQ(path + ": no 'key' line in the file", err_);
    icbc_routerfile_free(rf);
}

TEST_F(RouterFile, LoadResolvesKeyNextToTheFile)
{
    std::string path = dir_ + "/good-2x4.conf";
    WriteFile(path, ReadFile(kData + "/good-2x4.conf"), 0644);
    ASSERT_EQ(ICBC_OK, icbc_routerfile_load(path.c_str(), &rf_, err_, sizeof(err_))) << err_;
    EXPECT_EQ(path, icbc_routerfile_name(rf_));
    EXPECT_EQ(dir_ + "/routers.key", icbc_routerfile_key_path(rf_));
}

TEST_F(RouterFile, RelativeNameGivesAbsoluteKeyPath)
{
    std::string text = "cluster a\n hosts a0\n router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
                       "key routers.key\n";
    char cwd[4096];
    ASSERT_NE(nullptr, getcwd(cwd, sizeof(cwd)));
    ASSERT_EQ(0, chdir(dir_.c_str()));
    icbc_status_t st = icbc_routerfile_parse(text.data(), text.size(), "t.conf", nullptr, &rf_,
                                             err_, sizeof(err_));
    ASSERT_EQ(0, chdir(cwd));
    ASSERT_EQ(ICBC_OK, st) << err_;
    EXPECT_EQ(dir_ + "/routers.key", icbc_routerfile_key_path(rf_));
}

TEST_F(RouterFile, ReadKeyReturnsTheFileBytes)
{
    ExpectOk(kTwo);
    unsigned char buf[ICBC_RF_KEY_MAX];
    size_t len = 0;
    ASSERT_EQ(ICBC_OK, icbc_routerfile_read_key(rf_, buf, sizeof(buf), &len, err_, sizeof(err_)))
        << err_;
    EXPECT_EQ(key_, std::string(reinterpret_cast<char *>(buf), len));
    EXPECT_EQ(ICBC_ERR_TRUNCATED, icbc_routerfile_read_key(rf_, buf, 10, &len, err_, sizeof(err_)));
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/routers.key': 27 bytes, buffer holds 10", err_);
    // The key is re-checked when read: a key made world-readable later is refused.
    ASSERT_EQ(0, chmod((dir_ + "/routers.key").c_str(), 0604));
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_routerfile_read_key(rf_, buf, sizeof(buf), &len, err_, sizeof(err_)));
    EXPECT_EQ("t.conf:1: key file '" + dir_ +
                  "/routers.key': accessible by group or others (mode 0604); make it private "
                  "with chmod 600",
              err_);
}

TEST_F(RouterFile, KeyOfExactlyMaxBytesIsAccepted)
{
    ExpectOk("cluster a\n hosts a0\n router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\nkey max.key\n");
    std::vector<unsigned char> buf(ICBC_RF_KEY_MAX);
    size_t len = 0;
    ASSERT_EQ(ICBC_OK,
              icbc_routerfile_read_key(rf_, buf.data(), buf.size(), &len, err_, sizeof(err_)));
    EXPECT_EQ(static_cast<size_t>(ICBC_RF_KEY_MAX), len);
}

TEST_F(RouterFile, CrlfLineEndsAndNoFinalNewline)
{
    ExpectOk("policy alltoall\r\ncluster a\r\n hosts a0 a1\r\ncluster b\r\n hosts b0");
    EXPECT_EQ(ICBC_RF_POLICY_ALLTOALL, icbc_routerfile_policy(rf_));
    EXPECT_EQ(1, icbc_routerfile_find_host(rf_, "b0"));
}

TEST_F(RouterFile, EveryPolicyValue)
{
    const char *names[] = { "aggregate", "static", "alltoall", "tcp" };
    for (int i = 0; i < 4; i++) {
        ExpectOk(std::string("policy ") + names[i] + "\ncluster a\n hosts a0\n");
        EXPECT_EQ(static_cast<icbc_rf_policy_t>(i), icbc_routerfile_policy(rf_));
        EXPECT_STREQ(names[i], icbc_rf_policy_name(static_cast<icbc_rf_policy_t>(i)));
        icbc_rf_policy_t p;
        EXPECT_EQ(ICBC_OK, icbc_rf_policy_from_string(names[i], &p));
        EXPECT_EQ(static_cast<icbc_rf_policy_t>(i), p);
    }
    icbc_rf_policy_t p;
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_rf_policy_from_string("Aggregate", &p));
    EXPECT_STREQ("unknown", icbc_rf_policy_name(static_cast<icbc_rf_policy_t>(9)));
}

TEST_F(RouterFile, DefaultPolicyIsAggregate)
{
    ExpectOk("cluster a\n hosts a0\n");
    EXPECT_EQ(ICBC_RF_POLICY_AGGREGATE, icbc_routerfile_policy(rf_));
}

TEST_F(RouterFile, RouterBeforeItsHostsLine)
{
    ExpectOk("key routers.key\ncluster a\n router a3 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
             " hosts a0\n hosts a1 a2 a3\n");
    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, "a3"));
}

TEST_F(RouterFile, PolicyAndKeyMayFollowClusters)
{
    ExpectOk("cluster a\n hosts a0\n router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
             "policy static\n hosts a1\nkey routers.key\n");
    EXPECT_EQ(2u, icbc_routerfile_cluster(rf_, 0)->nhosts);
    EXPECT_EQ(ICBC_RF_POLICY_STATIC, icbc_routerfile_policy(rf_));
}

TEST_F(RouterFile, KeyFileNotCheckedWithoutRouters)
{
    ExpectOk("key missing.key\ncluster a\n hosts a0\n");
    EXPECT_EQ(dir_ + "/missing.key", icbc_routerfile_key_path(rf_));
    unsigned char buf[64];
    size_t len;
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_routerfile_read_key(rf_, buf, sizeof(buf), &len, err_, sizeof(err_)));
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/missing.key': No such file or directory", err_);
}

TEST_F(RouterFile, AbsoluteKeyPath)
{
    ExpectOk("key " + dir_ +
             "/routers.key\ncluster a\n hosts a0\n"
             " router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n");
    EXPECT_EQ(dir_ + "/routers.key", icbc_routerfile_key_path(rf_));
}

TEST_F(RouterFile, FabricAddressMayRepeatInAnotherCluster)
{
    ExpectOk("key routers.key\n"
             "cluster a\n hosts a0\n router a0 fabric=192.168.0.1:7100 wan=10.1.0.1:7200\n"
             "cluster b\n hosts b0\n router b0 fabric=192.168.0.1:7100 wan=10.1.0.2:7200\n");
}

TEST_F(RouterFile, LongestLineAndNamesAccepted)
{
    std::string comment = "#" + std::string(ICBC_RF_LINE_MAX - 1, 'x');
    std::string name(ICBC_RF_NAME_MAX, 'n');
    std::string host = "h" + std::string(ICBC_RF_HOST_MAX - 1, 'o');
    ExpectOk(comment + "\ncluster " + name + "\n hosts " + host + "\n");
    EXPECT_EQ(0, icbc_routerfile_find_cluster(rf_, name.c_str()));
    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, host.c_str()));
}

TEST_F(RouterFile, PortBoundsAccepted)
{
    ExpectOk(WithRouter("router a0 fabric=10.0.0.1:1 wan=[::1]:65535"));
    EXPECT_EQ("[::1]:65535", AddrText(icbc_routerfile_cluster(rf_, 0)->routers[0].wan));
}

// ---- caps ---------------------------------------------------------------------------------------

std::string ManyClusters(int n)
{
    std::string s = "policy tcp\n";
    for (int i = 0; i < n; i++)
        s += "cluster c" + std::to_string(i) + "\n hosts h" + std::to_string(i) + "\n";
    return s;
}

TEST_F(RouterFile, MaxClustersAccepted)
{
    ExpectOk(ManyClusters(ICBC_RF_MAX_CLUSTERS));
    EXPECT_EQ(static_cast<size_t>(ICBC_RF_MAX_CLUSTERS), icbc_routerfile_num_clusters(rf_));
}

TEST_F(RouterFile, TooManyClusters)
{
    // cluster k is on line 2 + 2k; the 65th (k = 64) on line 130.
    EXPECT_EQ("t.conf:130: too many clusters (at most 64)", Err(ManyClusters(65)));
}

std::string ManyHosts(int n)
{
    std::string s = "cluster a\n";
    for (int i = 0; i < n; i += 100) {
        s += "hosts";
        for (int j = i; j < n && j < i + 100; j++)
            s += " h" + std::to_string(j);
        s += "\n";
    }
    return s;
}

TEST_F(RouterFile, MaxHostsAccepted)
{
    ExpectOk(ManyHosts(ICBC_RF_MAX_HOSTS));
    EXPECT_EQ(static_cast<size_t>(ICBC_RF_MAX_HOSTS), icbc_routerfile_num_hosts(rf_));
    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, "h65535"));
    EXPECT_EQ(0, icbc_routerfile_find_host(rf_, "h0"));
    EXPECT_EQ(-1, icbc_routerfile_find_host(rf_, "h65536"));
}

TEST_F(RouterFile, TooManyHosts)
{
    // host i is on line 2 + i / 100; host 65536 on line 657.
    EXPECT_EQ("t.conf:657: cluster 'a': too many hosts (at most 65536)", Err(ManyHosts(65537)));
}

std::string ManyRouters(int n)
{
    std::string s = "key routers.key\ncluster a\nhosts";
    for (int i = 0; i < n; i++)
        s += " r" + std::to_string(i);
    s += "\n";
    for (int i = 0; i < n; i++)
        s += "router r" + std::to_string(i) + " fabric=10.0.0." + std::to_string(i + 1) +
             ":7100 wan=10.1.0." + std::to_string(i + 1) + ":7200\n";
    return s;
}

TEST_F(RouterFile, MaxRoutersAccepted)
{
    ExpectOk(ManyRouters(ICBC_RF_MAX_ROUTERS));
    EXPECT_EQ(static_cast<size_t>(ICBC_RF_MAX_ROUTERS), icbc_routerfile_cluster(rf_, 0)->nrouters);
}

TEST_F(RouterFile, TooManyRouters)
{
    // router k on line 4 + k; the 65th on line 68.
    EXPECT_EQ("t.conf:68: cluster 'a': too many routers (at most 64)", Err(ManyRouters(65)));
}

TEST_F(RouterFile, TooManyImpi)
{
    std::string s = "cluster a\n hosts a0\n";
    for (int i = 0; i < 65; i++)
        s += "impi i" + std::to_string(i) + " server=10.9.0." + std::to_string(i + 1) + ":9000\n";
    // impi k on line 3 + k; the 65th on line 67.
    EXPECT_EQ("t.conf:67: too many impi entries (at most 64)", Err(s));
}

TEST_F(RouterFile, LineTooLong)
{
    std::string line = "#" + std::string(ICBC_RF_LINE_MAX, 'x');
    EXPECT_EQ("t.conf:2: line longer than 1023 bytes", Err("cluster a\n" + line + "\n hosts a\n"));
}

TEST_F(RouterFile, FileTooLarge)
{
    std::string big(static_cast<size_t>(ICBC_RF_FILE_MAX) + 1, '\n');
    EXPECT_EQ("t.conf: larger than 67108864 bytes", Err(big));
}

// ---- bytes --------------------------------------------------------------------------------------

TEST_F(RouterFile, NulByte)
{
    EXPECT_EQ("t.conf:2: NUL byte at column 9", Err(BIN("cluster a\n hosts a\0b\n")));
}

TEST_F(RouterFile, NulByteInComment)
{
    EXPECT_EQ("t.conf:1: NUL byte at column 3", Err(BIN("# \0\ncluster a\n hosts a\n")));
}

TEST_F(RouterFile, ControlByte)
{
    EXPECT_EQ("t.conf:3: non-printable byte 0x01 at column 8", Err(OneCluster(" hosts \x01"
                                                                              "b")));
}

TEST_F(RouterFile, ControlByteInComment)
{
    EXPECT_EQ("t.conf:1: non-printable byte 0x1b at column 6",
              Err("# red\x1b[0m\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, DeleteByte)
{
    EXPECT_EQ("t.conf:3: non-printable byte 0x7f at column 7", Err(OneCluster(" hosts\x7f"
                                                                              "b")));
}

TEST_F(RouterFile, CarriageReturnInsideLine)
{
    EXPECT_EQ("t.conf:1: non-printable byte 0x0d at column 10", Err("cluster a\r\r\n hosts a0\n"));
}

TEST_F(RouterFile, NonAsciiOutsideComment)
{
    EXPECT_EQ("t.conf:2: non-ASCII byte 0xc3 at column 9 (only comments may hold it)",
              Err("cluster a\n hosts n\xc3\xa9ud\n"));
}

// ---- keywords and sections ----------------------------------------------------------------------

TEST_F(RouterFile, UnknownKeyword)
{
    EXPECT_EQ("t.conf:3: unknown keyword 'host'", Err(OneCluster("  host a2")));
}

TEST_F(RouterFile, UnknownKeywordIsCaseSensitive)
{
    EXPECT_EQ("t.conf:1: unknown keyword 'Cluster'", Err("Cluster a\n hosts a0\n"));
}

TEST_F(RouterFile, LongTokenIsCutInMessages)
{
    std::string tok(100, 'z');
    EXPECT_EQ("t.conf:3: unknown keyword '" + std::string(48, 'z') + "...'", Err(OneCluster(tok)));
}

TEST_F(RouterFile, HostsBeforeAnyCluster)
{
    EXPECT_EQ("t.conf:2: 'hosts' outside a cluster section (no 'cluster' line before it)",
              Err("policy tcp\nhosts a0\ncluster a\n hosts a1\n"));
}

TEST_F(RouterFile, RouterBeforeAnyCluster)
{
    EXPECT_EQ("t.conf:1: 'router' outside a cluster section (no 'cluster' line before it)",
              Err("router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, HostsAfterImpiFixture)
{
    icbc_routerfile_t *rf = nullptr;
    std::string path = kData + "/bad-hosts-after-impi.conf";
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_load(path.c_str(), &rf, err_, sizeof(err_)));
    EXPECT_EQ(nullptr, rf);
    EXPECT_EQ(path + ":4: 'hosts' outside a cluster section (cluster 'a' ended at the 'impi' "
                     "entry on line 3)",
              err_);
}

TEST_F(RouterFile, RouterAfterImpi)
{
    EXPECT_EQ("t.conf:4: 'router' outside a cluster section (cluster 'a' ended at the 'impi' "
              "entry on line 3)",
              Err("cluster a\n hosts a0\nimpi c server=10.9.0.1:9000\n"
                  " router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"));
}

TEST_F(RouterFile, NoCluster)
{
    EXPECT_EQ("t.conf:3: no 'cluster' section in the file",
              Err("# nothing but\npolicy tcp\nimpi c server=10.9.0.1:9000\n"));
}

TEST_F(RouterFile, EmptyFile)
{
    EXPECT_EQ("t.conf:1: no 'cluster' section in the file", Err(""));
}

TEST_F(RouterFile, ClusterWithoutHosts)
{
    EXPECT_EQ("t.conf:1: cluster 'a' has no hosts", Err("cluster a\ncluster b\n hosts b0\n"));
}

TEST_F(RouterFile, LastClusterWithoutHosts)
{
    EXPECT_EQ("t.conf:3: cluster 'b' has no hosts", Err("cluster a\n hosts a0\ncluster b\n"));
}

TEST_F(RouterFile, ClusterBeforeImpiWithoutHosts)
{
    EXPECT_EQ("t.conf:1: cluster 'a' has no hosts", Err("cluster a\nimpi c server=10.9.0.1:9\n"));
}

TEST_F(RouterFile, ClusterWithoutName)
{
    EXPECT_EQ("t.conf:1: 'cluster' takes one name", Err("cluster\n"));
}

TEST_F(RouterFile, ClusterWithTwoNames)
{
    EXPECT_EQ("t.conf:1: 'cluster' takes one name", Err("cluster a b\n hosts a0\n"));
}

TEST_F(RouterFile, ClusterNameBadCharacter)
{
    EXPECT_EQ("t.conf:1: bad cluster name 'a.b' (use 1-31 letters, digits, '_' or '-')",
              Err("cluster a.b\n hosts a0\n"));
}

TEST_F(RouterFile, ClusterNameTooLong)
{
    std::string name(ICBC_RF_NAME_MAX + 1, 'n');
    EXPECT_EQ("t.conf:1: bad cluster name '" + name + "' (use 1-31 letters, digits, '_' or '-')",
              Err("cluster " + name + "\n hosts a0\n"));
}

TEST_F(RouterFile, DuplicateCluster)
{
    EXPECT_EQ("t.conf:3: duplicate cluster name 'a' (first on line 1)",
              Err("cluster a\n hosts a0\ncluster a\n hosts a1\n"));
}

TEST_F(RouterFile, ClusterNamedLikeImpi)
{
    EXPECT_EQ("t.conf:2: duplicate cluster name 'c' (first on line 1)",
              Err("impi c server=10.9.0.1:9000\ncluster c\n hosts a0\n"));
}

TEST_F(RouterFile, ImpiNamedLikeCluster)
{
    EXPECT_EQ("t.conf:3: duplicate cluster name 'a' (first on line 1)",
              Err(OneCluster("impi a server=10.9.0.1:9000")));
}

TEST_F(RouterFile, DuplicateImpi)
{
    EXPECT_EQ("t.conf:4: duplicate cluster name 'c' (first on line 3)",
              Err(OneCluster("impi c server=10.9.0.1:9000\nimpi c server=10.9.0.2:9000")));
}

TEST_F(RouterFile, HostsWithoutNames)
{
    EXPECT_EQ("t.conf:2: 'hosts' needs at least one host name", Err("cluster a\n hosts\n"));
}

TEST_F(RouterFile, HostNameBadCharacter)
{
    EXPECT_EQ("t.conf:2: bad host name 'a/b' (use up to 255 letters, digits, '.', '_' or '-', "
              "starting with a letter or digit)",
              Err("cluster a\n hosts a0 a/b\n"));
}

TEST_F(RouterFile, HostNameBadStart)
{
    EXPECT_EQ("t.conf:2: bad host name '-a' (use up to 255 letters, digits, '.', '_' or '-', "
              "starting with a letter or digit)",
              Err("cluster a\n hosts -a\n"));
}

TEST_F(RouterFile, HostNameTooLong)
{
    std::string host = "h" + std::string(ICBC_RF_HOST_MAX, 'o');
    EXPECT_EQ("t.conf:2: bad host name '" + host.substr(0, 48) +
                  "...' (use up to 255 letters, digits, '.', '_' or '-', starting with a letter "
                  "or digit)",
              Err("cluster a\n hosts " + host + "\n"));
}

TEST_F(RouterFile, HostTwiceInCluster)
{
    EXPECT_EQ("t.conf:3: host 'a1' is listed twice in cluster 'a' (first on line 2)",
              Err(OneCluster(" hosts a2 a1")));
}

TEST_F(RouterFile, HostTwiceOnOneLine)
{
    EXPECT_EQ("t.conf:2: host 'a0' is listed twice in cluster 'a' (first on line 2)",
              Err("cluster a\n hosts a0 a1 a0\n"));
}

TEST_F(RouterFile, HostInTwoClusters)
{
    EXPECT_EQ("t.conf:4: host 'a1' already belongs to cluster 'a' (line 2)",
              Err(OneCluster("cluster b\n hosts b0 a1")));
}

// ---- policy and key lines -----------------------------------------------------------------------

TEST_F(RouterFile, PolicyWithoutValue)
{
    EXPECT_EQ("t.conf:1: 'policy' takes one value (aggregate, static, alltoall or tcp)",
              Err("policy\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, PolicyWithTwoValues)
{
    EXPECT_EQ("t.conf:1: 'policy' takes one value (aggregate, static, alltoall or tcp)",
              Err("policy static tcp\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, UnknownPolicy)
{
    EXPECT_EQ("t.conf:1: unknown policy 'striped' (use aggregate, static, alltoall or tcp)",
              Err("policy striped\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, DuplicatePolicy)
{
    EXPECT_EQ("t.conf:3: duplicate 'policy' (first on line 1)",
              Err("policy tcp\ncluster a\npolicy tcp\n hosts a0\n"));
}

TEST_F(RouterFile, WanRateIsOptionalAndInBitsPerSecond)
{
    ExpectOk("cluster a\n hosts a0\n");
    EXPECT_EQ(0u, icbc_routerfile_wan_rate(rf_));
    ExpectOk("cluster a\n hosts a0\nwan-rate 400mbit   # anywhere, like policy\n");
    EXPECT_EQ(400000000u, icbc_routerfile_wan_rate(rf_));
    ExpectOk("wan-rate 2.5gbit\ncluster a\n hosts a0\n");
    EXPECT_EQ(2500000000u, icbc_routerfile_wan_rate(rf_));
    ExpectOk("wan-rate 400\ncluster a\n hosts a0\n"); /* a plain number: bits/s */
    EXPECT_EQ(400u, icbc_routerfile_wan_rate(rf_));
}

TEST_F(RouterFile, BadWanRate)
{
    for (const char *bad : { "0", "-1mbit", "400Mbit", "400mbps", "fast", "1e9" })
        EXPECT_EQ(std::string("t.conf:1: bad wan-rate '") + bad +
                      "' (a rate above 0 in bit, kbit, mbit or gbit, e.g. 400mbit)",
                  Err(std::string("wan-rate ") + bad + "\ncluster a\n hosts a0\n"));
    EXPECT_EQ("t.conf:1: 'wan-rate' takes one rate (bits/s, e.g. 400mbit)",
              Err("wan-rate 400 mbit\ncluster a\n hosts a0\n"));
    EXPECT_EQ("t.conf:4: duplicate 'wan-rate' (first on line 1)",
              Err("wan-rate 1gbit\ncluster a\n hosts a0\nwan-rate 1gbit\n"));
}

TEST_F(RouterFile, KeyWithoutPath)
{
    EXPECT_EQ("t.conf:1: 'key' takes one path", Err("key\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, KeyWithTwoPaths)
{
    EXPECT_EQ("t.conf:1: 'key' takes one path", Err("key a b\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, DuplicateKey)
{
    EXPECT_EQ("t.conf:2: duplicate 'key' (first on line 1)",
              Err("key routers.key\nkey routers.key\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, KeyPathTooLong)
{
    std::string base(4090, 'd');
    std::string text = "key routers.key\ncluster a\n hosts a0\n";
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_parse(text.data(), text.size(), "t.conf",
                                                      base.c_str(), &rf_, err_, sizeof(err_)));
    EXPECT_STREQ("t.conf:1: key path 'routers.key' is too long", err_);
}

TEST_F(RouterFile, RoutersWithoutKeyLine)
{
    EXPECT_EQ("t.conf:3: router 'a0': no 'key' line in the file; routers need a key file",
              Err(OneCluster(" router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
                             " router a1 fabric=10.0.0.2:1 wan=10.1.0.2:1")));
}

TEST_F(RouterFile, RoutersWithoutKeyLineNamesFirstRouter)
{
    EXPECT_EQ("t.conf:5: router 'b0': no 'key' line in the file; routers need a key file",
              Err("policy tcp\ncluster a\n hosts a0\ncluster b\n router b0 fabric=10.0.0.1:1 "
                  "wan=10.1.0.1:1\n hosts b0\n"));
}

std::string KeyFile(const std::string &key)
{
    return "key " + key + "\ncluster a\n hosts a0\n router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n";
}

TEST_F(RouterFile, KeyFileMissing)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/none.key': No such file or directory",
              Err(KeyFile("none.key")));
}

TEST_F(RouterFile, KeyFileEmpty)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/empty.key': empty", Err(KeyFile("empty.key")));
}

TEST_F(RouterFile, KeyFileIsADirectory)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/dir.key': not a regular file",
              Err(KeyFile("dir.key")));
}

TEST_F(RouterFile, KeyFileReadableByOthers)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ +
                  "/open.key': accessible by group or others (mode 0644); make it private with "
                  "chmod 600",
              Err(KeyFile("open.key")));
}

TEST_F(RouterFile, KeyFileWritableByGroup)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ +
                  "/group.key': accessible by group or others (mode 0620); make it private with "
                  "chmod 600",
              Err(KeyFile("group.key")));
}

TEST_F(RouterFile, KeyFileTooLarge)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/big.key': larger than 4096 bytes",
              Err(KeyFile("big.key")));
}

TEST_F(RouterFile, KeyFileIsAFifoDoesNotHang)
{
    std::string fifo = dir_ + "/fifo.key";
    ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
    std::string e = Err(KeyFile("fifo.key"));
    unlink(fifo.c_str());
    EXPECT_EQ("t.conf:1: key file '" + fifo + "': not a regular file", e);
}

TEST_F(RouterFile, KeyFileUnderAFile)
{
    EXPECT_EQ("t.conf:1: key file '" + dir_ + "/routers.key/x': Not a directory",
              Err(KeyFile("routers.key/x")));
}

TEST_F(RouterFile, KeyFileUnreadable)
{
    const std::string want = "t.conf:1: key file '" + dir_ + "/noread.key': Permission denied";

    WriteFile(dir_ + "/noread.key", "secret", 0200);
    if (geteuid() != 0) {
        EXPECT_EQ(want, Err(KeyFile("noread.key")));
        return;
    }
    // Root reads files of any mode: the parse runs in a child as the user
    // nobody, which may pass through the test directory but not read the key.
    struct passwd *pw = getpwnam("nobody");
    ASSERT_NE(nullptr, pw);
    ASSERT_EQ(0, chmod(dir_.c_str(), 0711));
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        if (setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            _exit(2);
        icbc_status_t st = Parse(KeyFile("noread.key"));
        ssize_t n = write(fds[1], err_, strlen(err_));
        _exit(st == ICBC_ERR_INVALID && n >= 0 ? 0 : 1);
    }
    close(fds[1]);
    std::string got;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;)
        got.append(buf, (size_t) n);
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "2: could not become nobody; 1: the parse succeeded";
    EXPECT_EQ(want, got);
}

// ---- router and impi entries --------------------------------------------------------------------

TEST_F(RouterFile, RouterWithoutArguments)
{
    EXPECT_EQ("t.conf:3: 'router' needs a host name, fabric=ADDR and wan=ADDR",
              Err(WithRouter(" router")));
}

TEST_F(RouterFile, RouterBadHostName)
{
    EXPECT_EQ("t.conf:3: router: bad host name 'a:0'",
              Err(WithRouter(" router a:0 fabric=10.0.0.1:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterHostNotInCluster)
{
    EXPECT_EQ("t.conf:3: router 'a5': host is not in cluster 'a'",
              Err(WithRouter(" router a5 fabric=10.0.0.1:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterHostNotInClusterFixture)
{
    icbc_routerfile_t *rf = nullptr;
    std::string path = kData + "/bad-router-host.conf";
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_load(path.c_str(), &rf, err_, sizeof(err_)));
    EXPECT_EQ(path + ":12: router 'a5': host is not in cluster 'a'", err_);
}

TEST_F(RouterFile, RouterHostInOtherCluster)
{
    EXPECT_EQ("t.conf:4: router 'a0': host is not in cluster 'b' (it belongs to cluster 'a')",
              Err("cluster a\n hosts a0\ncluster b\n router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
                  " hosts b0\nkey routers.key\n"));
}

TEST_F(RouterFile, TwoRoutersOnOneHost)
{
    EXPECT_EQ("t.conf:4: router 'a0': host already has a router (line 3)",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
                             " router a0 fabric=10.0.0.1:2 wan=10.1.0.1:2")));
}

TEST_F(RouterFile, RouterMissingWan)
{
    EXPECT_EQ("t.conf:3: router 'a0': missing attribute 'wan='",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1")));
}

TEST_F(RouterFile, RouterMissingFabric)
{
    EXPECT_EQ("t.conf:3: router 'a0': missing attribute 'fabric='",
              Err(WithRouter(" router a0 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterUnknownAttribute)
{
    EXPECT_EQ("t.conf:3: router 'a0': unknown attribute 'lan'",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1 lan=10.2.0.1:1")));
}

TEST_F(RouterFile, RouterAttributeIsCaseSensitive)
{
    EXPECT_EQ("t.conf:3: router 'a0': unknown attribute 'WAN'",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 WAN=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterDuplicateAttribute)
{
    EXPECT_EQ("t.conf:3: router 'a0': duplicate attribute 'fabric'",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 fabric=10.0.0.2:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterTokenWithoutEquals)
{
    EXPECT_EQ("t.conf:3: router 'a0': expected ATTRIBUTE=VALUE, got '10.0.0.1:1'",
              Err(WithRouter(" router a0 10.0.0.1:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterAttributeWithoutName)
{
    EXPECT_EQ("t.conf:3: router 'a0': expected ATTRIBUTE=VALUE, got '=10.0.0.1:1'",
              Err(WithRouter(" router a0 =10.0.0.1:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterSpaceAfterEquals)
{
    EXPECT_EQ("t.conf:3: router 'a0': expected ATTRIBUTE=VALUE, got '10.0.0.1:1'",
              Err(WithRouter(" router a0 fabric= 10.0.0.1:1 wan=10.1.0.1:1")));
}

TEST_F(RouterFile, RouterEmptyAttributeValue)
{
    EXPECT_EQ("t.conf:3: router 'a0': bad fabric address '': empty",
              Err(WithRouter(" router a0 fabric= wan=10.1.0.1:1")));
}

// Address errors: the fabric value of a router on line 3.
struct BadAddr {
    const char *text;
    const char *why;
};

const BadAddr kBadAddrs[] = {
    { "10.0.0.1", "missing ':PORT'" },
    { "10.0.0.1:", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:0", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:65536", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:07100", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:+80", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:80x", "the port must be a number from 1 to 65535" },
    { "10.0.0.1:100000", "the port must be a number from 1 to 65535" },
    { "10.0.0.256:80", "not a numeric IPv4 address (host names are not resolved)" },
    { "10.1:80", "not a numeric IPv4 address (host names are not resolved)" },
    { "010.0.0.1:80", "not a numeric IPv4 address (host names are not resolved)" },
    { "a0:7100", "not a numeric IPv4 address (host names are not resolved)" },
    { ":80", "not a numeric IPv4 address (host names are not resolved)" },
    { "0.0.0.0:80", "the unspecified address cannot be connected to" },
    { "224.0.0.1:80", "multicast and broadcast addresses are not allowed" },
    { "255.255.255.255:80", "multicast and broadcast addresses are not allowed" },
    { "fd00::1:80", "an IPv6 address must be written as [ADDR]:PORT" },
    { "[fd00::1]", "missing ':PORT' after ']'" },
    { "[fd00::1]80", "missing ':PORT' after ']'" },
    { "[fd00::1:80", "missing ']'" },
    { "[fd00::1]:0", "the port must be a number from 1 to 65535" },
    { "[fe80::1%eth0]:80", "IPv6 zone indexes are not supported" },
    { "[fd00::g]:80", "not a numeric IPv6 address" },
    { "[10.0.0.1]:80", "not a numeric IPv6 address" },
    { "[::]:80", "the unspecified address cannot be connected to" },
    { "[ff02::1]:80", "multicast addresses are not allowed" },
    { "[1111:2222:3333:4444:5555:6666:7777:8888]:65535xxxxxxxxxxxxxxxxx", "too long" },
};

TEST_F(RouterFile, RouterBadAddresses)
{
    for (const BadAddr &b : kBadAddrs) {
        std::string want =
            "t.conf:3: router 'a0': bad fabric address '" + Cut(b.text) + "': " + b.why;
        EXPECT_EQ(want,
                  Err(WithRouter(std::string(" router a0 fabric=") + b.text + " wan=10.1.0.1:1")));
    }
}

TEST_F(RouterFile, RouterBadWanAddress)
{
    EXPECT_EQ("t.conf:3: router 'a0': bad wan address 'b0.example.org:7200': not a numeric IPv4 "
              "address (host names are not resolved)",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=b0.example.org:7200")));
}

TEST_F(RouterFile, DuplicateFabricAddressInCluster)
{
    EXPECT_EQ("t.conf:4: router 'a1': fabric address '10.0.0.1:1' is already the fabric address "
              "of router 'a0' (line 3)",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1\n"
                             " router a1 fabric=10.0.0.1:1 wan=10.1.0.2:1")));
}

TEST_F(RouterFile, DuplicateWanAddressAcrossClusters)
{
    std::string text = kTwo;
    text.replace(text.find("wan=10.100.1.1:7200"), 19, "wan=10.100.0.2:7200");
    EXPECT_EQ("t.conf:8: router 'b0': wan address '10.100.0.2:7200' is already the wan address of "
              "router 'a1' (line 5)",
              Err(text));
}

TEST_F(RouterFile, DuplicateAddressWrittenDifferently)
{
    EXPECT_EQ("t.conf:4: router 'a1': wan address '[fd00:0::1]:1' is already the wan address of "
              "router 'a0' (line 3)",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=[fd00::1]:1\n"
                             " router a1 fabric=10.0.0.2:1 wan=[fd00:0::1]:1")));
}

TEST_F(RouterFile, FabricEqualsWanOfSameRouter)
{
    EXPECT_EQ("t.conf:3: router 'a0': wan address '10.0.0.1:1' is already the fabric address of "
              "router 'a0' (line 3)",
              Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=10.0.0.1:1")));
}

TEST_F(RouterFile, FabricEqualsWanOfOtherCluster)
{
    std::string text = kTwo;
    text.replace(text.find("fabric=10.12.0.1:7100"), 21, "fabric=10.100.0.1:7200");
    EXPECT_EQ("t.conf:8: router 'b0': fabric address '10.100.0.1:7200' is already the wan address "
              "of router 'a0' (line 4)",
              Err(text));
}

TEST_F(RouterFile, ImpiServerEqualsRouterWan)
{
    EXPECT_EQ("t.conf:9: impi 'c': server address '10.100.1.1:7200' is already the wan address "
              "of router 'b0' (line 8)",
              Err(kTwo + "impi c server=10.100.1.1:7200\n"));
}

TEST_F(RouterFile, RouterWanEqualsImpiServer)
{
    EXPECT_EQ("t.conf:4: router 'a0': wan address '10.9.0.1:9000' is already the server address "
              "of impi 'c' (line 1)",
              Err("impi c server=10.9.0.1:9000\ncluster a\n hosts a0\n"
                  " router a0 fabric=10.0.0.1:1 wan=10.9.0.1:9000\nkey routers.key\n"));
}

TEST_F(RouterFile, ImpiEntriesShareTheirServer)
{
    /* the foreign clients of one IMPI job */
    ExpectOk(OneCluster("impi c server=10.9.0.1:9000\nimpi d server=10.9.0.1:9000"));
    ASSERT_EQ(2u, icbc_routerfile_num_impi(rf_));
    EXPECT_STREQ("d", icbc_routerfile_impi(rf_, 1)->name);
    EXPECT_STREQ("10.9.0.1:9000", icbc_routerfile_impi(rf_, 1)->server.text);
}

TEST_F(RouterFile, ImpiServerStillDiffersFromRouters)
{
    EXPECT_EQ("t.conf:5: router 'a0': wan address '10.9.0.1:9000' is already the server address "
              "of impi 'c' (line 1)",
              Err("impi c server=10.9.0.1:9000\nimpi d server=10.9.0.1:9000\ncluster a\n hosts a0\n"
                  " router a0 fabric=10.0.0.1:1 wan=10.9.0.1:9000\nkey routers.key\n"));
}

TEST_F(RouterFile, ImpiWithoutArguments)
{
    EXPECT_EQ("t.conf:3: 'impi' needs a name and server=ADDR", Err(OneCluster("impi")));
}

TEST_F(RouterFile, ImpiBadName)
{
    EXPECT_EQ("t.conf:3: bad impi name 'c!' (use 1-31 letters, digits, '_' or '-')",
              Err(OneCluster("impi c! server=10.9.0.1:9000")));
}

TEST_F(RouterFile, ImpiMissingServer)
{
    EXPECT_EQ("t.conf:3: impi 'c': missing attribute 'server='", Err(OneCluster("impi c")));
}

TEST_F(RouterFile, ImpiUnknownAttribute)
{
    EXPECT_EQ("t.conf:3: impi 'c': unknown attribute 'port'",
              Err(OneCluster("impi c server=10.9.0.1:9000 port=9001")));
}

TEST_F(RouterFile, ImpiDuplicateAttribute)
{
    EXPECT_EQ("t.conf:3: impi 'c': duplicate attribute 'server'",
              Err(OneCluster("impi c server=10.9.0.1:9000 server=10.9.0.2:9000")));
}

TEST_F(RouterFile, ImpiBadServerAddress)
{
    EXPECT_EQ("t.conf:3: impi 'c': bad server address 'impi.example.org:9000': not a numeric IPv4 "
              "address (host names are not resolved)",
              Err(OneCluster("impi c server=impi.example.org:9000")));
}

// ---- policy against clusters --------------------------------------------------------------------

TEST_F(RouterFile, AggregateNeedsRouterInEveryCluster)
{
    EXPECT_EQ(
        "t.conf:5: cluster 'b' has no router, but policy 'aggregate' routes between clusters "
        "through routers (add a 'router' line or use policy alltoall or tcp)",
        Err(WithRouter(" router a0 fabric=10.0.0.1:1 wan=10.1.0.1:1") + "cluster b\n hosts b0\n"));
}

TEST_F(RouterFile, StaticNeedsRouterInEveryCluster)
{
    EXPECT_EQ("t.conf:2: cluster 'a' has no router, but policy 'static' routes between clusters "
              "through routers (add a 'router' line or use policy alltoall or tcp)",
              Err("policy static\ncluster a\n hosts a0\ncluster b\n hosts b0\n"));
}

TEST_F(RouterFile, CheckPolicyOverride)
{
    ExpectOk("policy alltoall\ncluster a\n hosts a0\ncluster b\n hosts b0\n");
    EXPECT_EQ(ICBC_OK, icbc_routerfile_check_policy(rf_, ICBC_RF_POLICY_TCP, err_, sizeof(err_)));
    EXPECT_EQ(ICBC_ERR_INVALID,
              icbc_routerfile_check_policy(rf_, ICBC_RF_POLICY_AGGREGATE, err_, sizeof(err_)));
    EXPECT_STREQ("t.conf:2: cluster 'a' has no router, but policy 'aggregate' routes between "
                 "clusters through routers (add a 'router' line or use policy alltoall or tcp)",
                 err_);
}

// ---- loading ------------------------------------------------------------------------------------

TEST_F(RouterFile, LoadMissingFile)
{
    std::string path = dir_ + "/absent.conf";
    EXPECT_EQ(ICBC_ERR_IO, icbc_routerfile_load(path.c_str(), &rf_, err_, sizeof(err_)));
    EXPECT_EQ(nullptr, rf_);
    EXPECT_EQ(path + ": cannot open: No such file or directory", err_);
}

TEST_F(RouterFile, LoadDirectory)
{
    EXPECT_EQ(ICBC_ERR_IO, icbc_routerfile_load(dir_.c_str(), &rf_, err_, sizeof(err_)));
    EXPECT_EQ(dir_ + ": not a regular file", err_);
}

TEST_F(RouterFile, LoadEnv)
{
    EnvGuard g("ICBC_ROUTERFILE");
    unsetenv("ICBC_ROUTERFILE");
    EXPECT_EQ(ICBC_ERR_NOT_FOUND, icbc_routerfile_load_env(&rf_, err_, sizeof(err_)));
    EXPECT_STREQ("ICBC_ROUTERFILE is not set (it names the router file)", err_);
    std::string path = kData + "/good-norouters.conf";
    setenv("ICBC_ROUTERFILE", path.c_str(), 1);
    ASSERT_EQ(ICBC_OK, icbc_routerfile_load_env(&rf_, err_, sizeof(err_))) << err_;
    EXPECT_EQ(path, icbc_routerfile_name(rf_));
}

TEST_F(RouterFile, SmallErrorBufferIsTerminated)
{
    char small[12];
    std::string text = "bogus\n";
    memset(small, 'X', sizeof(small));
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_parse(text.data(), text.size(), "t.conf",
                                                      dir_.c_str(), &rf_, small, sizeof(small)));
    EXPECT_STREQ("t.conf:1: u", small);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_parse(text.data(), text.size(), "t.conf",
                                                      dir_.c_str(), &rf_, nullptr, 0));
}

// ---- this host ----------------------------------------------------------------------------------

TEST_F(RouterFile, SelfHostFromEnvironment)
{
    EnvGuard g("ICBC_NODE");
    char buf[ICBC_RF_HOST_MAX + 1];
    setenv("ICBC_NODE", "a2", 1);
    ASSERT_EQ(ICBC_OK, icbc_routerfile_self_host(buf, sizeof(buf)));
    EXPECT_STREQ("a2", buf);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_self_host(buf, 2));
    setenv("ICBC_NODE", "bad name", 1);
    EXPECT_EQ(ICBC_ERR_INVALID, icbc_routerfile_self_host(buf, sizeof(buf)));
}

TEST_F(RouterFile, SelfHostFromGethostname)
{
    EnvGuard g("ICBC_NODE");
    char buf[ICBC_RF_HOST_MAX + 1], want[ICBC_RF_HOST_MAX + 1] = "";
    unsetenv("ICBC_NODE");
    ASSERT_EQ(0, gethostname(want, sizeof(want) - 1));
    ASSERT_EQ(ICBC_OK, icbc_routerfile_self_host(buf, sizeof(buf)));
    EXPECT_STREQ(want, buf);
    setenv("ICBC_NODE", "", 1); // empty counts as unset
    ASSERT_EQ(ICBC_OK, icbc_routerfile_self_host(buf, sizeof(buf)));
    EXPECT_STREQ(want, buf);
}

TEST_F(RouterFile, SelfCluster)
{
    EnvGuard g("ICBC_NODE");
    ExpectOk(kTwo);
    char host[64];
    int ci = -1;
    setenv("ICBC_NODE", "b2", 1);
    ASSERT_EQ(ICBC_OK,
              icbc_routerfile_self_cluster(rf_, &ci, host, sizeof(host), err_, sizeof(err_)));
    EXPECT_EQ(1, ci);
    EXPECT_STREQ("b2", host);
    setenv("ICBC_NODE", "z9", 1);
    EXPECT_EQ(ICBC_ERR_NOT_FOUND,
              icbc_routerfile_self_cluster(rf_, &ci, host, sizeof(host), err_, sizeof(err_)));
    EXPECT_STREQ("t.conf: this host 'z9' (from ICBC_NODE) is not listed in any cluster", err_);
}

TEST_F(RouterFile, SelfClusterShortHostName)
{
    EnvGuard g("ICBC_NODE");
    char full[ICBC_RF_HOST_MAX + 1] = "";
    unsetenv("ICBC_NODE");
    ASSERT_EQ(0, gethostname(full, sizeof(full) - 1));
    std::string first(full, strcspn(full, "."));
    // List only the first label: a fully qualified gethostname() still matches it.
    ExpectOk("cluster a\n hosts " + first + "\n");
    int ci = -1;
    char host[ICBC_RF_HOST_MAX + 1];
    ASSERT_EQ(ICBC_OK,
              icbc_routerfile_self_cluster(rf_, &ci, host, sizeof(host), err_, sizeof(err_)))
        << err_;
    EXPECT_EQ(0, ci);
    EXPECT_EQ(first, host);
}

// ---- the checker tool ---------------------------------------------------------------------------

#ifdef ICBC_ROUTERFILE_TOOL
// Runs the tool with ARGS (a shell fragment); returns its exit status and output.
int RunTool(const std::string &args, std::string *out)
{
    std::string cmd = std::string(ICBC_ROUTERFILE_TOOL) + " " + args + " 2>&1";
    FILE *f = popen(cmd.c_str(), "r");
    if (f == nullptr)
        return -1;
    char buf[4096];
    size_t n;
    out->clear();
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        out->append(buf, n);
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST_F(RouterFile, ToolSummaryCheckSelfAndErrors)
{
    std::string path = dir_ + "/tool.conf", out;
    WriteFile(path, ReadFile(kData + "/good-2x4.conf"), 0644);

    ASSERT_EQ(0, RunTool(path, &out)) << out;
    EXPECT_NE(std::string::npos, out.find(path + ": OK\n")) << out;
    EXPECT_NE(std::string::npos, out.find("policy    aggregate\n")) << out;
    EXPECT_NE(std::string::npos, out.find("clusters  2 (8 hosts)\n")) << out;
    EXPECT_NE(std::string::npos, out.find("  cluster a: 4 hosts, 2 routers\n")) << out;
    EXPECT_NE(std::string::npos,
              out.find("    router b0 fabric=10.12.0.1:7100 wan=10.100.1.1:7200\n"))
        << out;
    EXPECT_NE(std::string::npos, out.find("  impi c server=10.100.9.1:9000\n")) << out;

    ASSERT_EQ(0, RunTool("--check " + path, &out)) << out;
    EXPECT_EQ(path + ": OK\n", out);

    EXPECT_EQ(2, RunTool("--check " + path + " " + path, &out)) << out;

    std::string bad = kData + "/bad-router-host.conf";
    EXPECT_EQ(1, RunTool(bad, &out));
    EXPECT_EQ("[icbc-routerfile] error: " + bad + ":12: router 'a5': host is not in cluster 'a'\n",
              out);
    EXPECT_EQ(1, RunTool(dir_ + "/absent.conf", &out));
    EXPECT_EQ(2, RunTool("--bogus", &out));
    EXPECT_EQ(0, RunTool("--help", &out));
    EXPECT_NE(std::string::npos, out.find("Usage: icbc-routerfile")) << out;
}

TEST_F(RouterFile, ToolSelf)
{
    std::string path = dir_ + "/tool.conf", out;
    WriteFile(path, ReadFile(kData + "/good-2x4.conf"), 0644);
    std::string cmd = "--check --self " + path;
    std::string env = "env ICBC_NODE=a1 ";
    FILE *f = popen((env + ICBC_ROUTERFILE_TOOL + " " + cmd + " 2>&1").c_str(), "r");
    ASSERT_NE(nullptr, f);
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf), f);
    int st = pclose(f);
    out.assign(buf, n);
    EXPECT_EQ(0, WEXITSTATUS(st)) << out;
    EXPECT_EQ(path + ": OK\nself      a1 in cluster a, router fabric=10.11.0.2:7100 "
                     "wan=10.100.0.2:7200 (line 8)\n",
              out);
    std::string cmd2 =
        "env ICBC_NODE=q7 " + std::string(ICBC_ROUTERFILE_TOOL) + " " + cmd + " 2>&1";
    f = popen(cmd2.c_str(), "r");
    ASSERT_NE(nullptr, f);
    n = fread(buf, 1, sizeof(buf), f);
    st = pclose(f);
    out.assign(buf, n);
    EXPECT_EQ(1, WEXITSTATUS(st)) << out;
    EXPECT_NE(std::string::npos, out.find("this host 'q7' (from ICBC_NODE) is not listed")) << out;
}
#endif

// ---- mutations ----------------------------------------------------------------------------------

// Checks what a successful parse promises: caps held, lookups agree with the tables.
void CheckInvariants(const icbc_routerfile_t *rf)
{
    size_t nc = icbc_routerfile_num_clusters(rf), total = 0;
    ASSERT_GE(nc, 1u);
    ASSERT_LE(nc, static_cast<size_t>(ICBC_RF_MAX_CLUSTERS));
    for (size_t i = 0; i < nc; i++) {
        const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf, i);
        ASSERT_NE(nullptr, c);
        EXPECT_EQ(static_cast<int>(i), icbc_routerfile_find_cluster(rf, c->name));
        ASSERT_GE(c->nhosts, 1u);
        ASSERT_LE(c->nhosts, static_cast<size_t>(ICBC_RF_MAX_HOSTS));
        total += c->nhosts;
        for (size_t j = 0; j < c->nhosts; j++)
            EXPECT_EQ(static_cast<int>(i), icbc_routerfile_find_host(rf, c->hosts[j]));
        ASSERT_LE(c->nrouters, static_cast<size_t>(ICBC_RF_MAX_ROUTERS));
        for (size_t j = 0; j < c->nrouters; j++) {
            const icbc_rf_router_t *r = &c->routers[j];
            EXPECT_EQ(static_cast<int>(i), icbc_routerfile_find_host(rf, r->host));
            EXPECT_EQ(r, icbc_routerfile_find_router(rf, r->host, nullptr));
            EXPECT_TRUE(r->fabric.sa.ss_family == AF_INET || r->fabric.sa.ss_family == AF_INET6);
            EXPECT_TRUE(r->wan.sa.ss_family == AF_INET || r->wan.sa.ss_family == AF_INET6);
        }
    }
    EXPECT_EQ(total, icbc_routerfile_num_hosts(rf));
    for (size_t i = 0; i < icbc_routerfile_num_impi(rf); i++)
        EXPECT_EQ(static_cast<int>(i),
                  icbc_routerfile_find_impi(rf, icbc_routerfile_impi(rf, i)->name));
}

std::vector<std::string> SplitLines(const std::string &s)
{
    std::vector<std::string> v;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t nl = s.find('\n', pos);
        if (nl == std::string::npos)
            nl = s.size();
        v.push_back(s.substr(pos, nl - pos));
        pos = nl + 1;
    }
    return v;
}

std::string JoinLines(const std::vector<std::string> &v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); i++)
        s += v[i] + (i + 1 < v.size() ? "\n" : "");
    return s;
}

TEST_F(RouterFile, SeededMutationsNeverCrash)
{
    // ICBC_RF_FUZZ_SEED and ICBC_RF_FUZZ_ITERATIONS override the defaults for longer runs;
    // the bounds on parsed/rejected counts below hold for the default seed.
    const char *env_seed = getenv("ICBC_RF_FUZZ_SEED");
    const char *env_iter = getenv("ICBC_RF_FUZZ_ITERATIONS");
    const unsigned seed =
        env_seed ? static_cast<unsigned>(strtoul(env_seed, nullptr, 10)) : 20240605u;
    const int iterations = env_iter ? atoi(env_iter) : 20000;
    std::mt19937 rng(seed);
    const std::string good = ReadFile(kData + "/good-2x4.conf");
    const char *words[] = { "cluster",
                            "hosts",
                            "router",
                            "impi",
                            "policy",
                            "key",
                            "fabric=",
                            "wan=",
                            "server=",
                            "=",
                            ":",
                            "[",
                            "]",
                            "#",
                            " ",
                            "\t",
                            "\n",
                            "\r\n",
                            "a0",
                            "b0",
                            "a",
                            "b",
                            "c",
                            "routers.key",
                            "empty.key",
                            "open.key",
                            "10.11.0.1:7100",
                            "[::1]:1",
                            "[fd00::1]:7100",
                            "0:0",
                            "65535",
                            "static",
                            "tcp" };
    const int nwords = sizeof(words) / sizeof(words[0]);
    auto rnd = [&](size_t n) { return n == 0 ? size_t(0) : size_t(rng() % n); };
    int ok = 0, invalid = 0;

    for (int it = 0; it < iterations; it++) {
        std::string s = good;
        int kind = static_cast<int>(rng() % 8);
        int rounds = 1 + static_cast<int>(rng() % 4);
        for (int r = 0; r < rounds; r++) {
            switch (kind) {
            case 0: // overwrite bytes with any value
                if (!s.empty())
                    s[rnd(s.size())] = static_cast<char>(rng());
                break;
            case 1: // insert bytes
                s.insert(rnd(s.size() + 1), 1 + rnd(3), static_cast<char>(rng()));
                break;
            case 2: // delete a range
                if (!s.empty()) {
                    size_t at = rnd(s.size());
                    s.erase(at, 1 + rnd(40));
                }
                break;
            case 3: { // delete, duplicate or swap lines
                std::vector<std::string> v = SplitLines(s);
                size_t i = rnd(v.size()), j = rnd(v.size());
                int op = static_cast<int>(rng() % 3);
                if (op == 0)
                    v.erase(v.begin() + i);
                else if (op == 1)
                    v.insert(v.begin() + i, v[j]);
                else
                    std::swap(v[i], v[j]);
                s = JoinLines(v);
                break;
            }
            case 4: { // insert a word of the format
                const char *w = words[rnd(nwords)];
                s.insert(rnd(s.size() + 1), w);
                break;
            }
            case 5: // truncate
                s.resize(rnd(s.size() + 1));
                break;
            case 6: // random bytes
                s.assign(rnd(600), '\0');
                for (char &c : s)
                    c = static_cast<char>(rng());
                break;
            default: { // random printable lines made of format words
                s.clear();
                size_t n = rnd(60);
                for (size_t k = 0; k < n; k++) {
                    const char *w = words[rnd(nwords)];
                    s += w;
                    s += (rng() % 4) ? " " : "\n";
                }
                break;
            }
            }
        }
        icbc_status_t st = Parse(s);
        if (st == ICBC_OK) {
            ok++;
            ASSERT_NE(nullptr, rf_);
            CheckInvariants(rf_);
            if (HasFatalFailure())
                FAIL() << "seed " << seed << " iteration " << it;
        } else {
            ASSERT_EQ(ICBC_ERR_INVALID, st) << "seed " << seed << " iteration " << it;
            invalid++;
            ASSERT_EQ(nullptr, rf_);
            // Every error names the file and, except for the size cap, a line.
            std::string e = err_;
            ASSERT_EQ(0u, e.find("t.conf:")) << e;
            size_t k = 7;
            while (k < e.size() && isdigit(static_cast<unsigned char>(e[k])))
                k++;
            ASSERT_GT(k, 7u) << e;
            ASSERT_EQ(": ", e.substr(k, 2)) << e;
            long line = strtol(e.c_str() + 7, nullptr, 10);
            ASSERT_GE(line, 1);
            ASSERT_LE(static_cast<size_t>(line), SplitLines(s).size()) << e;
        }
    }
    printf("mutations: seed %u, %d iterations, %d parsed, %d rejected\n", seed, iterations, ok,
           invalid);
    EXPECT_GT(ok, iterations / 200);
    EXPECT_GT(invalid, iterations / 2);
}

} // namespace

TEST_F(RouterFile, FabricNetworkOfACluster)
{
    ExpectOk(OneCluster("  fabric 10.11.0.0/24") + "cluster b\n  hosts b0\n  fabric fd00:11::/64\n"
                                                   "policy tcp\n");
    const icbc_rf_cluster_t *a = icbc_routerfile_cluster(rf_, 0);
    const icbc_rf_cluster_t *b = icbc_routerfile_cluster(rf_, 1);
    EXPECT_EQ(3, a->fabric_line);
    EXPECT_EQ(24, a->fabric_prefix);
    ASSERT_EQ(AF_INET, a->fabric_net.ss_family);
    char text[64];
    inet_ntop(AF_INET, &((const sockaddr_in *) &a->fabric_net)->sin_addr, text, sizeof(text));
    EXPECT_STREQ("10.11.0.0", text);
    EXPECT_EQ(6, b->fabric_line);
    EXPECT_EQ(64, b->fabric_prefix);
    EXPECT_EQ(AF_INET6, b->fabric_net.ss_family);
}

TEST_F(RouterFile, FabricNetworkIsOptional)
{
    ExpectOk(OneCluster("  hosts a2"));
    EXPECT_EQ(0, icbc_routerfile_cluster(rf_, 0)->fabric_line);
}

TEST_F(RouterFile, FabricApiOfACluster)
{
    ExpectOk(OneCluster("  fabric-api ofi"));
    EXPECT_EQ(ICBC_RF_FABRIC_OFI, icbc_routerfile_cluster(rf_, 0)->fabric_api);
    EXPECT_EQ(3, icbc_routerfile_cluster(rf_, 0)->fabric_api_line);
    ExpectOk(OneCluster("  fabric-api ucx"));
    EXPECT_EQ(ICBC_RF_FABRIC_UCX, icbc_routerfile_cluster(rf_, 0)->fabric_api);
    ExpectOk(OneCluster("  hosts a2"));
    EXPECT_EQ(ICBC_RF_FABRIC_UCX, icbc_routerfile_cluster(rf_, 0)->fabric_api);
    EXPECT_EQ(0, icbc_routerfile_cluster(rf_, 0)->fabric_api_line);
    const std::pair<const char *, const char *> cases[] = {
        { "  fabric-api", "t.conf:3: 'fabric-api' takes ucx or ofi" },
        { "  fabric-api verbs", "t.conf:3: 'fabric-api' takes ucx or ofi" },
        { "  fabric-api ucx ofi", "t.conf:3: 'fabric-api' takes ucx or ofi" },
        { "  fabric-api ofi\n  fabric-api ucx",
          "t.conf:4: cluster 'a' has a 'fabric-api' line already (line 3)" },
    };
    for (const auto &c : cases)
        EXPECT_EQ(c.second, Err(OneCluster(c.first))) << c.first;
    EXPECT_EQ("t.conf:1: 'fabric-api' outside a cluster section (no 'cluster' line before it)",
              Err("fabric-api ofi\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, RouterBindOfACluster)
{
    ExpectOk(OneCluster("  router-bind auto"));
    EXPECT_STREQ("auto", icbc_routerfile_cluster(rf_, 0)->router_bind);
    EXPECT_EQ(3, icbc_routerfile_cluster(rf_, 0)->router_bind_line);
    ExpectOk(OneCluster("  router-bind 2-3,6"));
    EXPECT_STREQ("2-3,6", icbc_routerfile_cluster(rf_, 0)->router_bind);
    ExpectOk(OneCluster("  hosts a2"));
    EXPECT_STREQ("", icbc_routerfile_cluster(rf_, 0)->router_bind);
    EXPECT_EQ(0, icbc_routerfile_cluster(rf_, 0)->router_bind_line);
    const std::pair<const char *, const char *> cases[] = {
        { "  router-bind", "t.conf:3: 'router-bind' takes auto, none or a CPU list (e.g. 3)" },
        { "  router-bind auto none",
          "t.conf:3: 'router-bind' takes auto, none or a CPU list (e.g. 3)" },
        { "  router-bind fast",
          "t.conf:3: 'router-bind' takes auto, none or a CPU list (e.g. 3), not 'fast'" },
        { "  router-bind 1-x",
          "t.conf:3: 'router-bind' takes auto, none or a CPU list (e.g. 3), not '1-x'" },
        { "  router-bind auto\n  router-bind 3",
          "t.conf:4: cluster 'a' has a 'router-bind' line already (line 3)" },
    };
    for (const auto &c : cases)
        EXPECT_EQ(c.second, Err(OneCluster(c.first))) << c.first;
    EXPECT_EQ("t.conf:1: 'router-bind' outside a cluster section (no 'cluster' line before it)",
              Err("router-bind auto\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, ImpiRelayOfAPrivateCluster)
{
    const std::string router = "  router a0 fabric=10.100.0.1:7100 wan=10.200.0.1:7200";
    ExpectOk(WithRouter(router + "\n  impi-relay server=10.200.1.1:7400 port=7300"));
    const icbc_rf_cluster_t *c = icbc_routerfile_cluster(rf_, 0);
    EXPECT_EQ("10.200.1.1:7400", AddrText(c->relay_server));
    EXPECT_EQ(7300, c->relay_port);
    EXPECT_EQ(4, c->relay_line);
    EXPECT_EQ(nullptr, c->relay_key_path);
    ExpectOk(WithRouter(router + "\n  impi-relay server=10.200.1.1:7400 port=7300 auth=none"));
    EXPECT_EQ(nullptr, icbc_routerfile_cluster(rf_, 0)->relay_key_path);
    ExpectOk(
        WithRouter(router + "\n  impi-relay server=10.200.1.1:7400 port=7300 auth=key:impi.key"));
    ASSERT_NE(nullptr, icbc_routerfile_cluster(rf_, 0)->relay_key_path);
    EXPECT_EQ(dir_ + "/impi.key", std::string(icbc_routerfile_cluster(rf_, 0)->relay_key_path));
    ExpectOk(WithRouter(router + "\n  impi-relay auth=key:/etc/impi.key port=7300 "
                                 "server=10.200.1.1:7400"));
    EXPECT_STREQ("/etc/impi.key", icbc_routerfile_cluster(rf_, 0)->relay_key_path);
    ExpectOk(WithRouter(router));
    EXPECT_EQ(0, icbc_routerfile_cluster(rf_, 0)->relay_line);
    const std::pair<std::string, const char *> cases[] = {
        { router + "\n  impi-relay server=10.200.1.1:7400",
          "t.conf:4: impi-relay: missing attribute 'port='" },
        { router + "\n  impi-relay port=7300",
          "t.conf:4: impi-relay: missing attribute 'server='" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7300 key=k",
          "t.conf:4: impi-relay: unknown attribute 'key'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7300 auth=k",
          "t.conf:4: impi-relay: auth= takes none or key:FILE, not 'k'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7300 auth=key:",
          "t.conf:4: impi-relay: auth= takes none or key:FILE, not 'key:'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7300 auth=none auth=none",
          "t.conf:4: impi-relay: duplicate attribute 'auth'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=0",
          "t.conf:4: impi-relay: port= takes the start-up port inside, 1-65535, not '0'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=70000",
          "t.conf:4: impi-relay: port= takes the start-up port inside, 1-65535, not '70000'" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=73x",
          "t.conf:4: impi-relay: port= takes the start-up port inside, 1-65535, not '73x'" },
        { router + "\n  impi-relay server=[fd00::1]:7400 port=7300",
          "t.conf:4: impi-relay: server '[fd00::1]:7400' is not an IPv4 address (IMPI's are)" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7100",
          "t.conf:4: impi-relay: port 7100 is the fabric port of router 'a0' already" },
        { router + "\n  impi-relay server=10.200.1.1:7400 port=7300\n  impi-relay "
                   "server=10.200.1.1:7400 port=7301",
          "t.conf:5: cluster 'a' has an 'impi-relay' line already (line 4)" },
    };
    for (const auto &c : cases)
        EXPECT_EQ(c.second, Err(WithRouter(c.first))) << c.first;
    EXPECT_EQ("t.conf:3: impi-relay: cluster 'a' has no router to run it",
              Err(OneCluster("  impi-relay server=10.200.1.1:7400 port=7300")));
    EXPECT_EQ("t.conf:1: 'impi-relay' outside a cluster section (no 'cluster' line before it)",
              Err("impi-relay server=10.200.1.1:7400 port=7300\ncluster a\n hosts a0\n"));
}

TEST_F(RouterFile, BadFabricNetworks)
{
    const std::pair<const char *, const char *> cases[] = {
        { "  fabric", "t.conf:3: 'fabric' takes one network, e.g. 10.11.0.0/24" },
        { "  fabric 10.0.0.0/8 10.1.0.0/16",
          "t.conf:3: 'fabric' takes one network, e.g. 10.11.0.0/24" },
        { "  fabric 10.11.0.0",
          "t.conf:3: bad fabric network '10.11.0.0' (want ADDRESS/PREFIX, e.g. 10.11.0.0/24)" },
        { "  fabric a0/24",
          "t.conf:3: bad fabric network 'a0/24': 'a0' is not an IPv4 or IPv6 address" },
        { "  fabric 10.11.0.0/33",
          "t.conf:3: bad fabric network '10.11.0.0/33': prefix must be 0..32" },
        { "  fabric 10.11.0.0/-1",
          "t.conf:3: bad fabric network '10.11.0.0/-1': prefix must be 0..32" },
        { "  fabric 10.11.0.0/",
          "t.conf:3: bad fabric network '10.11.0.0/': prefix must be 0..32" },
        { "  fabric 10.11.0.0/2x",
          "t.conf:3: bad fabric network '10.11.0.0/2x': prefix must be 0..32" },
        { "  fabric fd00::/129",
          "t.conf:3: bad fabric network 'fd00::/129': prefix must be 0..128" },
        { "  fabric 10.11.0.1/24",
          "t.conf:3: bad fabric network '10.11.0.1/24': host bits are set beyond /24" },
        { "  fabric 10.11.0.0/24\n  fabric 10.12.0.0/24",
          "t.conf:4: cluster 'a' has a 'fabric' line already (line 3)" },
    };
    for (const auto &c : cases)
        EXPECT_EQ(c.second, Err(OneCluster(c.first))) << c.first;
    EXPECT_EQ("t.conf:1: 'fabric' outside a cluster section (no 'cluster' line before it)",
              Err("fabric 10.0.0.0/8\ncluster a\n hosts a0\n"));
}
