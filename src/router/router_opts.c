/*
 * icbc-router's options, declared once: each row gives the option, its
 * argument, its default as the manual states it, one sentence of help, and
 * how its value is checked and stored. The parser, --help and the manual's
 * SYNOPSIS and OPTIONS tables are all printed from these rows.
 */
#include "router_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
    OPT_STRING,      /* stored as const char * */
    OPT_SIZE,        /* bytes or a count with optional suffix, MIN .. MAX */
    OPT_SIZE_OR_OFF, /* as OPT_SIZE, or -1 */
    OPT_RATE,        /* a rate: bytes/s or with a bit/byte unit */
    OPT_SECONDS,     /* a positive number of seconds up to MAX */
    OPT_LEVEL,       /* a log level */
    OPT_FLAG,        /* no argument: stores 1 */
    OPT_HELP,        /* no argument: stores the row's MIN */
} opt_kind_t;

typedef enum { T_STR, T_INT, T_SIZE, T_U64, T_DOUBLE, T_LEVEL } opt_type_t;

typedef struct {
    const char *name; /* without the leading -- */
    const char *arg;  /* argument name; NULL: none */
    const char *dflt; /* the default, as the manual says it */
    const char *help; /* one sentence (or two) */
    opt_kind_t kind;
    long long min, max;
    long long if_zero; /* stored instead of 0 (a 0 that means something else) */
    opt_type_t type;
    size_t offset;    /* into rt_cli_t */
    const char *want; /* what a good value looks like, for an error */
} opt_t;

#define CFG(field) offsetof(rt_cli_t, cfg.field)
#define CLI(field) offsetof(rt_cli_t, field)
#define STR_(x) #x
#define STR(x) STR_(x)

static const opt_t opts[] = {
    { "routerfile", "F", "`$ICBC_ROUTERFILE`", "router file", OPT_STRING, 0, 0, 0, T_STR,
      CLI(rf_path), NULL },
    { "host", "H", "`$ICBC_NODE`, else `gethostname()`",
      "which `router` entry of the file this router is", OPT_STRING, 0, 0, 0, T_STR, CFG(host),
      NULL },
    { "max-memory", "BYTES", "64Mi",
      "bound on buffered payload bytes; suffixes k, M, G (powers of 1000) and Ki, Mi, Gi "
      "(powers of 1024)",
      OPT_SIZE, 1, 1LL << 40, 0, T_SIZE, CFG(max_memory), "want 1 byte .. 1 TiB, e.g. 64Mi" },
    { "max-rss", "BYTES", "none",
      "bound on the router process's resident size: payloads wait while taking them would "
      "come within a sixteenth of it",
      OPT_SIZE, 1 << 20, 1LL << 40, 0, T_SIZE, CFG(max_rss), "want 1Mi .. 1 TiB, e.g. 64Mi" },
    { "streams", "N", STR(ICBC_ROUTER_STREAMS_DEFAULT),
      "TCP connections per trunk, 1.." STR(
          ICBC_ROUTER_STREAMS_MAX) " (the acceptor follows the connector)",
      OPT_SIZE, 1, ICBC_ROUTER_STREAMS_MAX, 0, T_INT, CFG(streams),
      "want 1.." STR(ICBC_ROUTER_STREAMS_MAX) },
    { "pulls", "N", STR(ICBC_ROUTER_MAX_PULLS_DEFAULT),
      "rendezvous payloads pulled from processes at once, 1..1024; the others wait their "
      "turn, so that each arrives whole soon and the trunk is fed without a gap",
      OPT_SIZE, 1, 1024, 0, T_INT, CFG(max_pulls), "want 1..1024" },
    { "stream-queue", "BYTES", "1Mi",
      "bytes queued on a trunk stream in the router before it counts as busy and the "
      "router pulls no more payloads for it",
      OPT_SIZE, 4096, 1LL << 30, 0, T_SIZE, CFG(stream_queue), "want 4096 .. 1Gi bytes" },
    { "notsent-lowat", "BYTES", "256Ki",
      "`TCP_NOTSENT_LOWAT` of trunk sockets: written but unsent bytes the kernel keeps per "
      "stream; -1: off",
      OPT_SIZE_OR_OFF, 1, 1LL << 30, 0, T_INT, CFG(notsent_lowat), "want 1 .. 1Gi bytes, or -1" },
    { "pacing", "RATE", "off",
      "`SO_MAX_PACING_RATE` per stream: bytes/s, or with a unit bit, kbit, mbit, gbit "
      "(bits/s) or bps, kbps, mbps, gbps (bytes/s), e.g. 100mbit",
      OPT_RATE, 1, 1000000000000000LL, 0, T_U64, CFG(pacing_rate),
      "want a rate such as 100mbit or 12500000" },
    { "sndbuf", "BYTES", "4Mi", "`SO_SNDBUF` of trunk sockets; -1: the kernel's default",
      OPT_SIZE_OR_OFF, 4096, 1LL << 30, 0, T_INT, CFG(sndbuf), "want 4096 .. 1Gi bytes, or -1" },
    { "rcvbuf", "BYTES", "4Mi", "`SO_RCVBUF` of trunk sockets; -1: the kernel's default",
      OPT_SIZE_OR_OFF, 4096, 1LL << 30, 0, T_INT, CFG(rcvbuf), "want 4096 .. 1Gi bytes, or -1" },
    { "rndv-thresh", "BYTES", "8Ki",
      "fabric payloads above this are sent to processes by the fabric's rendezvous; 0: all "
      "of them",
      OPT_SIZE, 0, 1LL << 30, 1, T_SIZE, CFG(rndv_thresh), "want 0 .. 1Gi bytes" },
    { "eager-window", "BYTES", "`--max-memory`/256, 64Ki..4Mi",
      "eager bytes (headers and payloads up to the process's rendezvous threshold) one "
      "process may have in the router at once; it sends more as the router credits what it "
      "handed on",
      OPT_SIZE, 4096, 1LL << 30, 0, T_SIZE, CFG(eager_window), "want 4096 .. 1Gi bytes" },
    { "register-timeout", "MS", STR(ICBC_ROUTER_REGISTER_MS_DEFAULT),
      "a process must REGISTER within this time after connecting; a connection to the fabric "
      "ports from a host without a registered process is shut down at this age (SECURITY)",
      OPT_SIZE, 1, 3600000, 0, T_INT, CFG(register_ms), "want 1 .. 3600000 ms" },
    { "max-unregistered", "N", STR(ICBC_ROUTER_MAX_UNREGISTERED_DEFAULT),
      "such connections held at once; beyond it the oldest are shut down (the daemon raises "
      "its descriptor limit to the hard limit at start)",
      OPT_SIZE, 1, 1 << 20, 0, T_INT, CFG(max_unregistered), "want 1 .. 1048576" },
    { "trunk-wait", "MS", STR(ICBC_ROUTER_TRUNK_WAIT_MS_DEFAULT),
      "how long a message waits for a trunk to its cluster to come up before the router "
      "reports it UNREACHABLE; 0: not at all",
      OPT_SIZE, 0, 3600000, -1, T_INT, CFG(trunk_wait_ms), "want 0 .. 3600000 ms" },
    { "bind", "WHERE", "none",
      "auto: a core near the NIC of the WAN address (hwloc's I/O topology; the last core of the "
      "host when the NIC has no known place), memory there too; none: where the system puts it; "
      "or a CPU list such as 3 or 2-3",
      OPT_STRING, 0, 0, 0, T_STR, CFG(bind), NULL },
    { "fabric-api", "API", "the cluster's `fabric-api` in the router file, else ucx",
      "the fabric API the cluster's processes speak: ucx or ofi (libfabric)", OPT_STRING, 0, 0, 0,
      T_STR, CFG(fabric_api), NULL },
    { "ofi-provider", "NAME", "`$FI_PROVIDER`, else tcp;ofi_rxm",
      "libfabric provider (FI_EP_RDM) when the fabric API is ofi", OPT_STRING, 0, 0, 0, T_STR,
      CFG(ofi_provider), NULL },
    { "ucx-tls", "LIST", "tcp", "UCX transports, used when `UCX_TLS` is not set", OPT_STRING, 0, 0,
      0, T_STR, CFG(ucx_tls), NULL },
    { "device", "DEV", "the interface of the `fabric=` address",
      "UCX network device(s) (`UCX_NET_DEVICES`); see SECURITY before widening it", OPT_STRING, 0,
      0, 0, T_STR, CFG(ucx_devices), NULL },
    { "log-level", "L", "info (or `$ICBC_LOG_LEVEL`)", "error, warn, info or debug", OPT_LEVEL, 0,
      0, 0, T_LEVEL, CLI(level), "want error, warn, info or debug" },
    { "stats-interval", "S", "none", "print a stats line every S seconds", OPT_SECONDS, 0, 86400, 0,
      T_DOUBLE, CFG(stats_interval), "want seconds, 0 < S <= 86400" },
    { "daemon", NULL, "foreground",
      "detach; the parent exits 0 once the router is up, 1 if it failed to start", OPT_FLAG, 0, 0,
      0, T_INT, CLI(daemon), NULL },
    { "pidfile", "F", "none", "write the process id to F (removed at exit)", OPT_STRING, 0, 0, 0,
      T_STR, CLI(pidfile), NULL },
    { "logfile", "F", "stderr", "append the log to F", OPT_STRING, 0, 0, 0, T_STR, CLI(logfile),
      NULL },
    { "help", NULL, "", "this text", OPT_HELP, 1, 0, 0, T_INT, CLI(help), NULL },
    { "help-markdown", NULL, "",
      "the SYNOPSIS and OPTIONS sections of the manual "
      "(docs/router.md)",
      OPT_HELP, 2, 0, 0, T_INT, CLI(help), NULL },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* "64Mi", "100k", "4096" -> a number. */
static int parse_size(const char *s, long long min, long long max, long long *out)
{
    static const struct {
        const char *suffix;
        long double mult;
    } units[] = {
        { "", 1 },
        { "B", 1 },
        { "k", 1e3L },
        { "M", 1e6L },
        { "G", 1e9L },
        { "Ki", 1024.0L },
        { "Mi", 1024.0L * 1024 },
        { "Gi", 1024.0L * 1024 * 1024 },
    };
    char *end;
    long double v;

    errno = 0;
    v = strtold(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].suffix))
            continue;
        v *= units[i].mult;
        if (v < min || v > max)
            return -1;
        *out = (long long) v;
        return 0;
    }
    return -1;
}

/* "100mbit" -> 12500000 bytes/s. */
static int parse_rate(const char *s, long long max, long long *out)
{
    static const struct {
        const char *unit;
        long double mult;
    } units[] = {
        { "", 1 },
        { "bit", 1.0L / 8 },
        { "kbit", 1e3L / 8 },
        { "mbit", 1e6L / 8 },
        { "gbit", 1e9L / 8 },
        { "bps", 1 },
        { "kbps", 1e3L },
        { "mbps", 1e6L },
        { "gbps", 1e9L },
    };
    char *end;
    long double v;

    errno = 0;
    v = strtold(s, &end);
    if (end == s || errno || v <= 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit))
            continue;
        v *= units[i].mult;
        if (v < 1 || v > max)
            return -1;
        *out = (long long) v;
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

static void store(rt_cli_t *cli, const opt_t *o, long long v, double d, const char *s)
{
    char *field = (char *) cli + o->offset;

    if (v == 0 && o->if_zero)
        v = o->if_zero;
    switch (o->type) {
    case T_STR: *(const char **) field = s; break;
    case T_INT: *(int *) field = (int) v; break;
    case T_SIZE: *(size_t *) field = (size_t) v; break;
    case T_U64: *(uint64_t *) field = (uint64_t) v; break;
    case T_DOUBLE: *(double *) field = d; break;
    case T_LEVEL: *(icbc_log_level_t *) field = (icbc_log_level_t) v; break;
    }
}

/* One option's value: 0, or -1 when it is not one the row allows. */
static int take(rt_cli_t *cli, const opt_t *o, const char *val)
{
    long long v = 0;
    double d = 0;

    switch (o->kind) {
    case OPT_STRING: break;
    case OPT_SIZE_OR_OFF:
        if (!strcmp(val, "-1")) {
            v = -1;
            break;
        }
        /* fall through */
    case OPT_SIZE:
        if (parse_size(val, o->min, o->max, &v) < 0)
            return -1;
        break;
    case OPT_RATE:
        if (parse_rate(val, o->max, &v) < 0)
            return -1;
        break;
    case OPT_SECONDS: {
        char *end;
        d = strtod(val, &end);
        if (end == val || *end || !(d > 0 && d <= o->max))
            return -1;
        break;
    }
    case OPT_LEVEL: {
        icbc_log_level_t l;
        if (parse_level(val, &l) < 0)
            return -1;
        v = l;
        break;
    }
    case OPT_FLAG: v = 1; break;
    case OPT_HELP: v = o->min; break;
    }
    store(cli, o, v, d, val);
    return 0;
}

int rt_cli_parse(int argc, char **argv, rt_cli_t *cli, char *err, size_t errlen)
{
    struct option lopts[NOPTS + 1];
    int opt;

    memset(cli, 0, sizeof(*cli));
    cli->rf_path = getenv("ICBC_ROUTERFILE");
    cli->level = ICBC_LOG_INFO;
    if (getenv("ICBC_LOG_LEVEL") && parse_level(getenv("ICBC_LOG_LEVEL"), &cli->level) < 0)
        cli->level = ICBC_LOG_INFO;
    for (size_t i = 0; i < NOPTS; i++) {
        lopts[i].name = opts[i].name;
        lopts[i].has_arg = opts[i].arg ? required_argument : no_argument;
        lopts[i].flag = NULL;
        lopts[i].val = 256 + (int) i;
    }
    memset(&lopts[NOPTS], 0, sizeof(lopts[NOPTS]));
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        if (opt == 'h') {
            cli->help = 1;
            continue;
        }
        if (opt < 256 || opt >= 256 + (int) NOPTS) {
            snprintf(err, errlen,
                     "icbc-router: unknown option or missing value '%s' (see "
                     "--help)",
                     argv[optind - 1]);
            return 2;
        }
        const opt_t *o = &opts[opt - 256];
        if (take(cli, o, optarg) < 0) {
            snprintf(err, errlen, "icbc-router: bad --%s '%s': %s", o->name, optarg, o->want);
            return 2;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "icbc-router: unexpected argument '%s' (see --help)", argv[optind]);
        return 2;
    }
    return 0;
}

/* Wraps WORDS to 80 columns, continuing lines at column INDENT. */
static void put_wrapped(FILE *f, const char *words, int col, int indent)
{
    const char *p = words;

    while (*p) {
        const char *e = strchr(p, ' ');
        int len = e ? (int) (e - p) : (int) strlen(p), shown = 0;
        for (int k = 0; k < len; k++)
            shown += p[k] != '`';
        if (col + 1 + shown > 80 && col > indent) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        for (int k = 0; k < len; k++)
            if (p[k] != '`')
                fputc(p[k], f);
        col += shown;
        p += len;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

void rt_cli_usage(FILE *f)
{
    fputs("Usage: icbc-router [OPTION]...\n"
          "Forward ICBC route messages between the compute processes of this cluster\n"
          "(UCX fabric) and the routers of the other clusters (TCP trunks).\n\n",
          f);
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_t *o = &opts[i];
        char head[64], text[512];
        int n = snprintf(head, sizeof(head), "  --%s%s%s", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
        if (o->dflt[0] && strcmp(o->dflt, "none"))
            snprintf(text, sizeof(text), "%s (default: %s)", o->help, o->dflt);
        else
            snprintf(text, sizeof(text), "%s", o->help);
        fputs(head, f);
        if (n >= 23) {
            fputc('\n', f);
            n = 0;
        }
        fprintf(f, "%*s", 23 - n, "");
        put_wrapped(f, text, 23, 23);
    }
    fputs("\nSIGTERM or SIGINT stops the router cleanly with a final stats line;\n"
          "SIGUSR1 prints a stats line at once.\n",
          f);
}

void rt_cli_markdown(FILE *f)
{
    int col;

    fputs("## SYNOPSIS\n\n```\nicbc-router", f);
    col = (int) strlen("icbc-router");
    for (size_t i = 0; i < NOPTS; i++) {
        char item[64];
        int n = snprintf(item, sizeof(item), "[--%s%s%s]", opts[i].name, opts[i].arg ? " " : "",
                         opts[i].arg ? opts[i].arg : "");
        if (col + 1 + n > 92) {
            fputs("\n           ", f);
            col = 11;
        }
        fprintf(f, " %s", item);
        col += 1 + n;
    }
    fputs("\n```\n\n", f);
    fputs("## OPTIONS\n\n| option | default | meaning |\n|---|---|---|\n", f);
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_t *o = &opts[i];
        fprintf(f, "| `--%s%s%s` | %s | %s |\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "",
                o->dflt, o->help);
    }
    fputs("\n", f);
}
