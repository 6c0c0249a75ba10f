/*
 * icbc-router: the router daemon. Loads the router file, picks its own
 * 'router' entry, and runs the router core (router.h) until SIGTERM or
 * SIGINT, then prints a final stats line. docs/router.md is its manual.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "icbc_log.h"
#include "icbc_routerfile.h"
#include "router.h"

static icbc_router_t *the_router;

static void usage(FILE *f)
{
    fprintf(f,
"Usage: icbc-router [OPTION]...\n"
"Forward ICBC route messages between the compute processes of this cluster\n"
"(UCX fabric) and the routers of the other clusters (TCP trunks).\n"
"\n"
"  --routerfile F       router file (default: $ICBC_ROUTERFILE)\n"
"  --host H             which 'router' entry of the file this is (default: this\n"
"                       host's name: $ICBC_NODE, else gethostname())\n"
"  --max-memory BYTES   bound on buffered payload bytes (default 64Mi); suffixes\n"
"                       k, M, G (powers of 1000) and Ki, Mi, Gi (powers of 1024)\n"
"  --max-rss BYTES      bound on the router process's resident size: payloads\n"
"                       wait while taking them would exceed it (default: none)\n"
"  --streams N          TCP connections per trunk, 1..%d (default %d)\n"
"  --pulls N            rendezvous payloads pulled from processes at once,\n"
"                       1..1024 (default %d); more wait, so that each arrives\n"
"                       whole soon and the trunk is fed without a gap\n"
"  --pacing RATE        SO_MAX_PACING_RATE per stream: bytes/s, or with a unit\n"
"                       bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps, gbps\n"
"                       (bytes/s), e.g. 100mbit (default: off)\n"
"  --sndbuf BYTES       SO_SNDBUF of trunk sockets (default 4Mi; -1: kernel's)\n"
"  --rcvbuf BYTES       SO_RCVBUF of trunk sockets (default 4Mi; -1: kernel's)\n"
"  --stream-queue BYTES bytes a trunk stream may have queued in the router\n"
"                       before it counts as busy and the router pulls no more\n"
"                       payloads for it (default 1Mi)\n"
"  --notsent-lowat BYTES  TCP_NOTSENT_LOWAT of trunk sockets: written but unsent\n"
"                       bytes the kernel keeps per stream (default 256Ki; -1: off)\n"
"  --rndv-thresh BYTES  fabric payloads above this go by UCX rendezvous\n"
"                       (default 8Ki)\n"
"  --eager-window BYTES eager bytes (headers and payloads up to --rndv-thresh)\n"
"                       one process may have in the router at once; it sends\n"
"                       more as the router credits what it handed on\n"
"                       (default: --max-memory / 256, within 64Ki .. 4Mi)\n"
"  --register-timeout MS  a process must REGISTER within this time (default 5000);\n"
"                       a connection to the UCX ports from a host without a\n"
"                       registered process is shut down at this age\n"
"  --max-unregistered N such connections held at once; beyond it the oldest\n"
"                       are shut down (default 4096)\n"
"  --trunk-wait MS      how long a message waits for a trunk to its cluster to\n"
"                       come up before UNREACHABLE (default 10000; 0: no wait)\n"
"  --ucx-tls LIST       UCX transports when UCX_TLS is not set (default tcp)\n"
"  --device DEV         UCX network device(s), as UCX_NET_DEVICES (default: the\n"
"                       interface that holds the router's fabric address)\n"
"  --log-level L        error, warn, info or debug (default info; or\n"
"                       $ICBC_LOG_LEVEL)\n"
"  --stats-interval S   print a stats line every S seconds (default: only at exit)\n"
"  --daemon             detach from the terminal and run in the background\n"
"  --pidfile F          write the process id to F (removed at exit)\n"
"  --logfile F          append logs to F instead of stderr\n"
"  --help               this text\n"
"\n"
"SIGTERM or SIGINT stops the router cleanly with a final stats line.\n",
            ICBC_ROUTER_STREAMS_MAX, ICBC_ROUTER_STREAMS_DEFAULT, ICBC_ROUTER_MAX_PULLS_DEFAULT);
}

/* "64Mi", "100k", "4096" -> bytes. */
static int parse_size(const char *s, long long min, long long max, long long *out)
{
    char *end;
    long double v;
    long double mult = 1;

    errno = 0;
    v = strtold(s, &end);
    if (end == s || errno || v < 0) return -1;
    if (!strcmp(end, "") || !strcmp(end, "B")) mult = 1;
    else if (!strcasecmp(end, "k")) mult = 1e3;
    else if (!strcasecmp(end, "M")) mult = 1e6;
    else if (!strcasecmp(end, "G")) mult = 1e9;
    else if (!strcasecmp(end, "Ki")) mult = 1024.0L;
    else if (!strcasecmp(end, "Mi")) mult = 1024.0L * 1024;
    else if (!strcasecmp(end, "Gi")) mult = 1024.0L * 1024 * 1024;
    else return -1;
    v *= mult;
    if (v < min || v > max) return -1;
    *out = (long long) v;
    return 0;
}

/* A size from MIN to 1 GiB, or "-1": off / the kernel's default. */
static int parse_size_or_off(const char *s, long long min, long long *out)
{
    if (!strcmp(s, "-1")) {
        *out = -1;
        return 0;
    }
    return parse_size(s, min, 1LL << 30, out);
}

/* "100mbit" -> 12500000 bytes/s. */
static int parse_rate(const char *s, unsigned long long *out)
{
    static const struct { const char *unit; long double mult; } units[] = {
        { "", 1 }, { "bit", 1.0L / 8 }, { "kbit", 1e3L / 8 }, { "mbit", 1e6L / 8 },
        { "gbit", 1e9L / 8 }, { "bps", 1 }, { "kbps", 1e3L }, { "mbps", 1e6L }, { "gbps", 1e9L },
    };
    char *end;
    long double v;

    errno = 0;
    v = strtold(s, &end);
    if (end == s || errno || v <= 0) return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit)) continue;
        v *= units[i].mult;
        if (v < 1 || v > 1e15L) return -1;
        *out = (unsigned long long) v;
        return 0;
    }
    return -1;
}

static int parse_level(const char *s, icbc_log_level_t *out)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(s, names[i])) {
            *out = (icbc_log_level_t) i;
            return 0;
        }
    return -1;
}

static void on_signal(int sig)
{
    if (the_router) icbc_router_stop(the_router);
}

static void bad_option(const char *opt, const char *val, const char *what)
{
    fprintf(stderr, "icbc-router: bad %s '%s': %s\n", opt, val, what);
    exit(2);
}

/* Detach; the parent exits with the status the child reports through
 * FDS once the router is up (0) or failed to start (1). */
static int daemonize(int fds[2])
{
    pid_t pid;

    if (pipe(fds) < 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) {
        char c = 1;
        close(fds[1]);
        if (read(fds[0], &c, 1) != 1) c = 1;
        _exit(c);
    }
    close(fds[0]);
    if (setsid() < 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) _exit(0);
    if (chdir("/") < 0) return -1;
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        if (null > 2) close(null);
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum { O_RF = 256, O_HOST, O_MEM, O_STREAMS, O_PACING, O_SNDBUF, O_RCVBUF, O_LEVEL,
           O_DAEMON, O_PIDFILE, O_STATS, O_HELP, O_RNDV, O_REGTO, O_TLS, O_DEV, O_LOGFILE, O_TRUNKWAIT, O_PULLS,
           O_STREAMQ, O_LOWAT, O_EAGERWIN, O_MAXRSS, O_MAXUNREG };
    static const struct option opts[] = {
        { "routerfile", required_argument, NULL, O_RF },
        { "host", required_argument, NULL, O_HOST },
        { "max-memory", required_argument, NULL, O_MEM },
        { "max-rss", required_argument, NULL, O_MAXRSS },
        { "streams", required_argument, NULL, O_STREAMS },
        { "pulls", required_argument, NULL, O_PULLS },
        { "stream-queue", required_argument, NULL, O_STREAMQ },
        { "notsent-lowat", required_argument, NULL, O_LOWAT },
        { "pacing", required_argument, NULL, O_PACING },
        { "sndbuf", required_argument, NULL, O_SNDBUF },
        { "rcvbuf", required_argument, NULL, O_RCVBUF },
        { "rndv-thresh", required_argument, NULL, O_RNDV },
        { "eager-window", required_argument, NULL, O_EAGERWIN },
        { "register-timeout", required_argument, NULL, O_REGTO },
        { "max-unregistered", required_argument, NULL, O_MAXUNREG },
        { "trunk-wait", required_argument, NULL, O_TRUNKWAIT },
        { "ucx-tls", required_argument, NULL, O_TLS },
        { "device", required_argument, NULL, O_DEV },
        { "log-level", required_argument, NULL, O_LEVEL },
        { "stats-interval", required_argument, NULL, O_STATS },
        { "daemon", no_argument, NULL, O_DAEMON },
        { "pidfile", required_argument, NULL, O_PIDFILE },
        { "logfile", required_argument, NULL, O_LOGFILE },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    icbc_router_config_t cfg = { 0 };
    const char *rf_path = getenv("ICBC_ROUTERFILE");
    const char *pidfile = NULL, *logfile = NULL;
    int daemon_mode = 0, opt, fds[2] = { -1, -1 };
    icbc_log_level_t level = ICBC_LOG_INFO;
    icbc_routerfile_t *rf = NULL;
    char err[ICBC_RF_ERR_LEN];
    long long v;
    icbc_status_t st;

    if (getenv("ICBC_LOG_LEVEL") && parse_level(getenv("ICBC_LOG_LEVEL"), &level) < 0)
        level = ICBC_LOG_INFO;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case O_RF: rf_path = optarg; break;
        case O_HOST: cfg.host = optarg; break;
        case O_MEM:
            if (parse_size(optarg, 1, 1LL << 40, &v) < 0)
                bad_option("--max-memory", optarg, "want 1 byte .. 1 TiB, e.g. 64Mi");
            cfg.max_memory = (size_t) v;
            break;
        case O_MAXRSS:
            if (parse_size(optarg, 1 << 20, 1LL << 40, &v) < 0)
                bad_option("--max-rss", optarg, "want 1Mi .. 1 TiB, e.g. 64Mi");
            cfg.max_rss = (size_t) v;
            break;
        case O_STREAMS:
            if (parse_size(optarg, 1, ICBC_ROUTER_STREAMS_MAX, &v) < 0)
                bad_option("--streams", optarg, "want 1..64");
            cfg.streams = (int) v;
            break;
        case O_PULLS:
            if (parse_size(optarg, 1, 1024, &v) < 0)
                bad_option("--pulls", optarg, "want 1..1024");
            cfg.max_pulls = (int) v;
            break;
        case O_PACING: {
            unsigned long long rate;
            if (parse_rate(optarg, &rate) < 0)
                bad_option("--pacing", optarg, "want a rate such as 100mbit or 12500000");
            cfg.pacing_rate = rate;
            break;
        }
        case O_STREAMQ:
            if (parse_size(optarg, 4096, 1LL << 30, &v) < 0)
                bad_option("--stream-queue", optarg, "want 4096 .. 1Gi bytes");
            cfg.stream_queue = (size_t) v;
            break;
        case O_EAGERWIN:
            if (parse_size(optarg, 4096, 1LL << 30, &v) < 0)
                bad_option("--eager-window", optarg, "want 4096 .. 1Gi bytes");
            cfg.eager_window = (size_t) v;
            break;
        case O_LOWAT:
            if (parse_size_or_off(optarg, 1, &v) < 0)
                bad_option("--notsent-lowat", optarg, "want 1 .. 1Gi bytes, or -1");
            cfg.notsent_lowat = (int) v;
            break;
        case O_SNDBUF:
        case O_RCVBUF:
            if (parse_size_or_off(optarg, 4096, &v) < 0)
                bad_option(opt == O_SNDBUF ? "--sndbuf" : "--rcvbuf", optarg,
                           "want 4096 .. 1Gi bytes, or -1");
            if (opt == O_SNDBUF) cfg.sndbuf = (int) v;
            else cfg.rcvbuf = (int) v;
            break;
        case O_RNDV:
            if (parse_size(optarg, 0, 1LL << 30, &v) < 0)
                bad_option("--rndv-thresh", optarg, "want 0 .. 1Gi bytes");
            cfg.rndv_thresh = v ? (size_t) v : 1; /* 0: everything by rendezvous */
            break;
        case O_REGTO:
            if (parse_size(optarg, 1, 3600000, &v) < 0)
                bad_option("--register-timeout", optarg, "want 1 .. 3600000 ms");
            cfg.register_ms = (int) v;
            break;
        case O_MAXUNREG:
            if (parse_size(optarg, 1, 1 << 20, &v) < 0)
                bad_option("--max-unregistered", optarg, "want 1 .. 1048576");
            cfg.max_unregistered = (int) v;
            break;
        case O_TRUNKWAIT:
            if (parse_size(optarg, 0, 3600000, &v) < 0)
                bad_option("--trunk-wait", optarg, "want 0 .. 3600000 ms");
            cfg.trunk_wait_ms = v ? (int) v : -1;
            break;
        case O_TLS: cfg.ucx_tls = optarg; break;
        case O_DEV: cfg.ucx_devices = optarg; break;
        case O_LEVEL:
            if (parse_level(optarg, &level) < 0)
                bad_option("--log-level", optarg, "want error, warn, info or debug");
            break;
        case O_STATS: {
            char *end;
            double s = strtod(optarg, &end);
            if (end == optarg || *end || !(s > 0 && s <= 86400))
                bad_option("--stats-interval", optarg, "want seconds, 0 < S <= 86400");
            cfg.stats_interval = s;
            break;
        }
        case O_DAEMON: daemon_mode = 1; break;
        case O_PIDFILE: pidfile = optarg; break;
        case O_LOGFILE: logfile = optarg; break;
        case O_HELP:
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "icbc-router: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    icbc_log_set_level(level);
    if (rf_path == NULL || !*rf_path) {
        fprintf(stderr, "icbc-router: no router file: give --routerfile or set ICBC_ROUTERFILE\n");
        return 2;
    }
    st = icbc_routerfile_load(rf_path, &rf, err, sizeof(err));
    if (st != ICBC_OK) {
        fprintf(stderr, "icbc-router: %s\n", err);
        return 1;
    }
    if (logfile) {
        int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "icbc-router: cannot open --logfile %s: %s\n", logfile,
                    strerror(errno));
            return 1;
        }
        dup2(fd, 2);
        close(fd);
    }
    /* Fork before UCX starts its threads. */
    if (daemon_mode && daemonize(fds) < 0) {
        fprintf(stderr, "icbc-router: cannot daemonize: %s\n", strerror(errno));
        return 1;
    }

    char ident[64];
    snprintf(ident, sizeof(ident), "icbc-router %d", (int) getpid());
    icbc_log_set_ident(ident);
    signal(SIGPIPE, SIG_IGN);

    /* Room for --max-unregistered silent connections beside the processes
     * and trunks the router serves: the soft descriptor limit goes up to the
     * hard one. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }

    cfg.rf = rf;
    st = icbc_router_create(&cfg, &the_router, err, sizeof(err));
    if (st != ICBC_OK) {
        icbc_error("%s", err);
        icbc_routerfile_free(rf);
        return 1;
    }
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f == NULL || fprintf(f, "%d\n", (int) getpid()) < 0 || fclose(f) != 0) {
            icbc_error("cannot write --pidfile %s: %s", pidfile, strerror(errno));
            icbc_router_destroy(the_router);
            icbc_routerfile_free(rf);
            return 1;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (fds[1] >= 0) {
        char ok = 0;
        if (write(fds[1], &ok, 1) != 1) { /* the parent then reports failure */ }
        close(fds[1]);
    }

    st = icbc_router_run(the_router);
    icbc_router_t *r = the_router;
    the_router = NULL; /* a late signal finds nothing to stop */
    icbc_router_destroy(r);
    icbc_routerfile_free(rf);
    if (pidfile) unlink(pidfile);
    return st == ICBC_OK ? 0 : 1;
}
