/*
 * icbc-router's option table: every option parses what its row allows,
 * refuses what it does not with a message naming it, and the manual's
 * SYNOPSIS and OPTIONS are exactly what the table prints.
 */
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "router_opts.h"

namespace
{

struct Parsed {
    int rc;
    rt_cli_t cli;
    std::string err;
    /* the arguments, alive as long as CLI points into them */
    std::shared_ptr<std::vector<std::string>> args;
};

Parsed parse(std::vector<std::string> argl)
{
    Parsed p;
    p.args = std::make_shared<std::vector<std::string>>(std::move(argl));
    auto &args = *p.args;
    std::vector<char *> argv;
    args.insert(args.begin(), "icbc-router");
    for (auto &a : args)
        argv.push_back(&a[0]);
    argv.push_back(nullptr);
    char err[256] = "";
    p.rc = rt_cli_parse((int) args.size(), argv.data(), &p.cli, err, sizeof(err));
    p.err = err;
    return p;
}

std::string printed(void (*fn)(FILE *))
{
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f);
    fclose(f);
    std::string s(buf, len);
    free(buf);
    return s;
}

TEST(RouterOptions, GoodValuesAreStored)
{
    Parsed p = parse({ "--max-memory",
                       "16Mi",
                       "--max-rss",
                       "24Mi",
                       "--streams",
                       "8",
                       "--pulls",
                       "16",
                       "--pacing",
                       "100mbit",
                       "--sndbuf",
                       "-1",
                       "--rcvbuf",
                       "1Mi",
                       "--rndv-thresh",
                       "0",
                       "--trunk-wait",
                       "0",
                       "--stats-interval",
                       "0.5",
                       "--log-level",
                       "debug",
                       "--daemon",
                       "--host",
                       "a0",
                       "--notsent-lowat",
                       "-1",
                       "--eager-window",
                       "64Ki" });
    ASSERT_EQ(0, p.rc) << p.err;
    EXPECT_EQ(16u << 20, p.cli.cfg.max_memory);
    EXPECT_EQ(24u << 20, p.cli.cfg.max_rss);
    EXPECT_EQ(8, p.cli.cfg.streams);
    EXPECT_EQ(16, p.cli.cfg.max_pulls);
    EXPECT_EQ(12500000u, p.cli.cfg.pacing_rate);
    EXPECT_EQ(-1, p.cli.cfg.sndbuf);
    EXPECT_EQ(1 << 20, p.cli.cfg.rcvbuf);
    EXPECT_EQ(1u, p.cli.cfg.rndv_thresh) << "0 means: everything by rendezvous";
    EXPECT_EQ(-1, p.cli.cfg.trunk_wait_ms) << "0 means: no wait";
    EXPECT_DOUBLE_EQ(0.5, p.cli.cfg.stats_interval);
    EXPECT_EQ(ICBC_LOG_DEBUG, p.cli.level);
    EXPECT_EQ(1, p.cli.daemon);
    EXPECT_STREQ("a0", p.cli.cfg.host);
    EXPECT_EQ(-1, p.cli.cfg.notsent_lowat);
    EXPECT_EQ(64u << 10, p.cli.cfg.eager_window);
    EXPECT_EQ(0, p.cli.help);
}

TEST(RouterOptions, BadValuesNameTheOptionAndWhatIsWanted)
{
    struct {
        std::vector<std::string> args;
        const char *msg;
    } bad[] = {
        { { "--streams", "0" }, "bad --streams '0': want 1..64" },
        { { "--streams", "65" }, "bad --streams '65': want 1..64" },
        { { "--max-memory", "12Q" }, "bad --max-memory '12Q'" },
        { { "--max-rss", "1000" }, "bad --max-rss '1000': want 1Mi" },
        { { "--pacing", "fast" }, "bad --pacing 'fast'" },
        { { "--sndbuf", "-2" }, "bad --sndbuf '-2'" },
        { { "--stats-interval", "0" }, "bad --stats-interval '0'" },
        { { "--log-level", "loud" }, "bad --log-level 'loud': want error, warn, info or debug" },
        { { "--trunk-wait", "3600001" }, "bad --trunk-wait '3600001'" },
        { { "--no-such-option" }, "unknown option" },
        { { "--streams" }, "missing value" },
        { { "extra" }, "unexpected argument 'extra'" },
    };
    for (const auto &b : bad) {
        Parsed p = parse(b.args);
        EXPECT_EQ(2, p.rc) << b.args[0];
        EXPECT_NE(std::string::npos, p.err.find(b.msg)) << p.err;
    }
}

TEST(RouterOptions, HelpListsEveryOptionOfTheManual)
{
    EXPECT_EQ(1, parse({ "--help" }).cli.help);
    EXPECT_EQ(2, parse({ "--help-markdown" }).cli.help);
    std::string usage = printed(rt_cli_usage), md = printed(rt_cli_markdown);
    std::istringstream rows(md.substr(md.find("|---|")));
    std::string line;
    int n = 0;
    while (std::getline(rows, line)) {
        if (line.rfind("| `--", 0) != 0)
            continue;
        std::string opt = line.substr(3, line.find('`', 3) - 3);
        opt = opt.substr(0, opt.find(' '));
        EXPECT_NE(std::string::npos, usage.find("  " + opt)) << opt << " missing from --help";
        n++;
    }
    EXPECT_GE(n, 20);
    /* --help fits 80 columns */
    std::istringstream u(usage);
    while (std::getline(u, line))
        EXPECT_LE(line.size(), 80u) << line;
}

TEST(RouterOptions, ManualSynopsisAndOptionsAreTheTable)
{
    std::ifstream in(std::string(ICBC_DOCS_DIR) + "/router.md");
    ASSERT_TRUE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string doc = ss.str();
    size_t a = doc.find("## SYNOPSIS"), b = doc.find("## DESCRIPTION");
    size_t c = doc.find("## OPTIONS");
    ASSERT_NE(std::string::npos, a);
    ASSERT_NE(std::string::npos, b);
    ASSERT_NE(std::string::npos, c);
    std::string md = printed(rt_cli_markdown);
    size_t split = md.find("## OPTIONS");
    EXPECT_EQ(md.substr(0, split), doc.substr(a, b - a))
        << "docs/router.md SYNOPSIS differs from the table: regenerate it with "
           "icbc-router --help-markdown";
    std::string table = md.substr(split);
    EXPECT_EQ(table, doc.substr(c, table.size()))
        << "docs/router.md OPTIONS differs from the table: regenerate it with "
           "icbc-router --help-markdown";
}

} // namespace
