/*
 * icbc-wanemu main: options, forwarding between ports and the event loop.
 *
 * Forwarding is that of a learning switch: a frame goes to the port where its
 * destination MAC was last seen as a source, or to every other port when the
 * destination is unknown, broadcast (ARP requests) or multicast. Each copy
 * enters the link of its direction (source port -> destination port).
 *
 * The loop waits in epoll_pwait2 on the ports and a signalfd, with a
 * nanosecond timeout that ends when the next frame is due (an hrtimer, so
 * wake-ups are precise to the timer's resolution rather than a polling
 * period). Frames due within --batch of a wake-up leave together: one
 * wake-up per frame would cost more CPU than the forwarding itself.
 */
#define _GNU_SOURCE
#include "wanemu.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "icbc_log.h"

#define MAC_TABLE_SIZE 1024 /* power of two */
#define RX_BATCH 64
#define RX_BATCHES_PER_WAKE 8
#define STATS_PERIOD_NS 100000000LL
#define WAKE_ADV_MAX_NS 200000LL

struct mac_entry {
    uint8_t mac[6];
    int8_t port; /* -1: free */
};

/* A per-direction option value given as [SRC:DST=]VALUE. */
struct dir_opt {
    char kind; /* 'r' rate, 'd' delay, 'b' buffer */
    char src[WANEMU_NAME_LEN], dst[WANEMU_NAME_LEN];
    const char *value;
};

struct emu {
    struct wanemu_port ports[WANEMU_MAX_PORTS];
    int nports;
    struct wanemu_dir *dirs;
    int ndirs;
    int dir_of[WANEMU_MAX_PORTS][WANEMU_MAX_PORTS];
    struct mac_entry macs[MAC_TABLE_SIZE];
    struct wanemu_trace trace;
    const char *stats_path;
    int64_t start_ns, next_stats_ns;
    int64_t batch_ns;  /* frames due within this of now are sent now */
    int64_t wake_adv_ns; /* learned wake-up latency: sleep this much less */
    int64_t rx_poll_ns;  /* > 0: read the ports this often instead of on events */
    int rx_events;       /* --rx-events: always wake up for each arriving frame */
    int64_t last_at[WANEMU_MAX_PORTS]; /* arrival time of each port's last frame */
    int epfd, sfd;
    uint8_t (*rxbuf)[WANEMU_MAX_FRAME + 1];
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void usage(FILE *f)
{
    fputs("Usage: icbc-wanemu --port NAME=IFACE --port NAME=IFACE [...] [options]\n"
          "\n"
          "Forwards Ethernet frames between the interfaces (AF_PACKET, promiscuous),\n"
          "emulating a WAN: per direction a drop-tail bottleneck buffer, serialisation\n"
          "at the WAN rate and a one-way delay. Needs root (CAP_NET_RAW).\n"
          "\n"
          "Options (RATE: 400mbit, 1gbit, 0 = unlimited; TIME: 5ms, 250us; SIZE: 256KiB):\n"
          "  -p, --port NAME=IFACE   a cluster's switch port (2 to 26; NAME: 1-15 of [a-z0-9])\n"
          "  -r, --rate [S:D=]RATE   WAN rate; with S:D= only for direction S->D (default 0)\n"
          "  -d, --delay [S:D=]TIME  one-way delay (default 0ms)\n"
          "  -b, --buffer [S:D=]SIZE bottleneck buffer, bytes waiting for the link (default 256KiB)\n"
          "  -o, --overhead BYTES    bytes added to each frame for serialisation, e.g. 24 for\n"
          "                          preamble, FCS and inter-frame gap (default 0)\n"
          "  -t, --trace PATH        CSV with one row per interval and direction columns\n"
          "                          bytes_S_D, drops_S_D, pkts_S_D, qmax_S_D, payload_S_D\n"
          "  -i, --interval TIME     trace interval (default 1ms)\n"
          "  -B, --batch TIME        send frames due within TIME of a wake-up together, up to\n"
          "                          TIME early (default 50us; 0: one wake-up per due time)\n"
          "  -E, --rx-events         wake up for every arriving frame; by default, with a delay\n"
          "                          of 400us or more, the ports are read every delay/4\n"
          "                          (at most 500us) and frames keep their kernel arrival time\n"
          "  -s, --stats PATH        cumulative counters, rewritten every 100 ms and at exit\n"
          "  -m, --max-mem SIZE      per-direction ring limit (default 64MiB)\n"
          "  -P, --pidfile PATH      written once the ports are open (readiness signal)\n"
          "  -R, --realtime          run under SCHED_FIFO with locked memory\n"
          "  -h, --help              this text\n"
          "Environment: ICBC_LOG_LEVEL=error|warn|info|debug.\n"
          "SIGTERM/SIGINT: write the last trace rows and the stats, then exit.\n",
          f);
}

static int port_index(const struct emu *e, const char *name)
{
    int i;

    for (i = 0; i < e->nports; i++)
        if (!strcmp(e->ports[i].name, name)) return i;
    return -1;
}

static int valid_name(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len >= WANEMU_NAME_LEN) return 0;
    for (i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) return 0;
    return 1;
}

static icbc_status_t add_port(struct emu *e, const char *arg)
{
    const char *eq = strchr(arg, '=');
    struct wanemu_port *p;

    if (eq == NULL || !valid_name(arg, (size_t) (eq - arg)) || eq[1] == '\0' ||
        strlen(eq + 1) >= WANEMU_NAME_LEN) {
        icbc_error("malformed --port '%s' (expected NAME=IFACE, e.g. a=sw-a)", arg);
        return ICBC_ERR_INVALID;
    }
    if (e->nports == WANEMU_MAX_PORTS) {
        icbc_error("at most %d ports", WANEMU_MAX_PORTS);
        return ICBC_ERR_INVALID;
    }
    p = &e->ports[e->nports];
    memset(p, 0, sizeof(*p));
    memcpy(p->name, arg, (size_t) (eq - arg));
    strcpy(p->ifname, eq + 1);
    p->fd = -1;
    if (port_index(e, p->name) >= 0) {
        icbc_error("port name '%s' given twice", p->name);
        return ICBC_ERR_INVALID;
    }
    e->nports++;
    return ICBC_OK;
}

/* Split [S:D=]VALUE. */
static icbc_status_t parse_dir_opt(char kind, const char *arg, struct dir_opt *o)
{
    const char *eq = strchr(arg, '='), *colon;

    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->value = arg;
    if (eq == NULL) return ICBC_OK;
    colon = memchr(arg, ':', (size_t) (eq - arg));
    if (colon == NULL || !valid_name(arg, (size_t) (colon - arg)) ||
        !valid_name(colon + 1, (size_t) (eq - colon - 1))) {
        icbc_error("malformed direction in '%s' (expected SRC:DST=VALUE, e.g. a:b=10ms)", arg);
        return ICBC_ERR_INVALID;
    }
    memcpy(o->src, arg, (size_t) (colon - arg));
    memcpy(o->dst, colon + 1, (size_t) (eq - colon - 1));
    o->value = eq + 1;
    return ICBC_OK;
}

static icbc_status_t apply_dir_opt(const struct dir_opt *o, struct wanemu_link_conf *conf)
{
    icbc_status_t st = ICBC_OK;

    switch (o->kind) {
    case 'r':
        st = wanemu_parse_rate(o->value, &conf->rate_bps);
        if (st != ICBC_OK) icbc_error("malformed rate '%s' (e.g. 400mbit, 1gbit, 0)", o->value);
        break;
    case 'd':
        st = wanemu_parse_time(o->value, &conf->delay_ns);
        if (st != ICBC_OK) icbc_error("malformed delay '%s' (e.g. 5ms, 250us, 0ms)", o->value);
        break;
    case 'b':
        st = wanemu_parse_size(o->value, &conf->buffer_bytes);
        if (st != ICBC_OK) icbc_error("malformed buffer size '%s' (e.g. 256KiB, 1MiB)", o->value);
        else if (conf->buffer_bytes < 64) {
            icbc_error("buffer '%s' is smaller than a frame", o->value);
            st = ICBC_ERR_INVALID;
        }
        break;
    }
    return st;
}

/* ---- forwarding ----------------------------------------------------------------- */

static unsigned mac_hash(const uint8_t *mac)
{
    unsigned h = 2166136261u;
    int i;

    for (i = 0; i < 6; i++) h = (h ^ mac[i]) * 16777619u;
    return h & (MAC_TABLE_SIZE - 1);
}

/* Remember that mac lives behind port; the table is a small direct-mapped
 * cache, so a collision only costs a flood. */
static void mac_learn(struct emu *e, const uint8_t *mac, int port)
{
    struct mac_entry *m;

    if (mac[0] & 1) return;
    m = &e->macs[mac_hash(mac)];
    memcpy(m->mac, mac, 6);
    m->port = (int8_t) port;
}

static int mac_lookup(const struct emu *e, const uint8_t *mac)
{
    const struct mac_entry *m;

    if (mac[0] & 1) return -1;
    m = &e->macs[mac_hash(mac)];
    return (m->port >= 0 && !memcmp(m->mac, mac, 6)) ? m->port : -1;
}

static void offer(struct emu *e, int src, int dst, int64_t now, const uint8_t *frame,
                  uint32_t len, uint32_t payload)
{
    int k = e->dir_of[src][dst];
    struct wanemu_dir *d = &e->dirs[k];
    struct wanemu_counters *row = wanemu_trace_at(&e->trace, now, k);
    int64_t due;

    if (wanemu_link_offer(&d->link, now, frame, len, payload, row, &due) != ICBC_OK)
        d->total.drops++;
    if (row->qmax > d->total.qmax) d->total.qmax = row->qmax;
}

/* Deliver every frame due at or before until, in due order across
 * directions, each counted in the trace row of its due time; now is the time
 * of sending. */
static void deliver(struct emu *e, int64_t until, int64_t now)
{
    for (;;) {
        int64_t best = INT64_MAX;
        int i, bi = -1;
        struct wanemu_frame f;
        struct wanemu_counters *row;
        struct wanemu_dir *d;

        for (i = 0; i < e->ndirs; i++) {
            int64_t due = wanemu_link_next_due(&e->dirs[i].link);
            if (due < best) {
                best = due;
                bi = i;
            }
        }
        if (bi < 0 || best > until) break;
        d = &e->dirs[bi];
        if (!wanemu_link_pop(&d->link, until, &f)) break;
        if (wanemu_port_send(&e->ports[d->dst], f.data, f.len) != ICBC_OK) continue;
        row = wanemu_trace_at(&e->trace, f.due_ns, bi);
        row->bytes += f.len;
        row->pkts++;
        row->payload += f.payload;
        d->total.bytes += f.len;
        d->total.pkts++;
        d->total.payload += f.payload;
        if (now - f.due_ns > d->late_max_ns) d->late_max_ns = now - f.due_ns;
        d->late_sum_ns += now - f.due_ns; /* negative when sent early */
        d->late_n++;
    }
}

/* Bring the model up to now: deliver what is due, close ended intervals. */
static int64_t sync_now(struct emu *e)
{
    int64_t now = mono_ns();

    deliver(e, now + e->batch_ns, now);
    wanemu_trace_advance(&e->trace, now);
    return now;
}

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, to map kernel receive stamps. */
static int64_t real_minus_mono(void)
{
    struct timespec r, m;

    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m);
    return ((int64_t) r.tv_sec - m.tv_sec) * 1000000000LL + (r.tv_nsec - m.tv_nsec);
}

/* Read and forward the frames waiting at port src, in arrival order, each
 * after the deliveries that precede its arrival. Returns
 * 1 when frames may be left (the per-call bound was reached). */
static int port_input(struct emu *e, int src)
{
    static uint32_t lens[RX_BATCH];
    static int64_t stamps[RX_BATCH];
    int b, n, i, j, dst;

    for (b = 0; b < RX_BATCHES_PER_WAKE; b++) {
        n = wanemu_port_recv(&e->ports[src], e->rxbuf, lens, stamps, RX_BATCH);
        if (n == 0) return 0;
        int64_t now = mono_ns(), offset = real_minus_mono();
        for (i = 0; i < n; i++) {
            const uint8_t *fr = e->rxbuf[i];
            uint32_t payload;
            /* Arrival: the kernel's stamp when it is plausible (not in the
             * future, not older than 100 ms), else the read time; never
             * before the previous frame of this port. */
            int64_t at = stamps[i] ? stamps[i] - offset : now;

            if (at > now || at < now - 100000000LL) at = now;
            if (at < e->last_at[src]) at = e->last_at[src];
            e->last_at[src] = at;
            deliver(e, at, now);
            if (lens[i] < 14) continue;
            mac_learn(e, fr + 6, src);
            payload = wanemu_frame_payload(fr, lens[i]);
            dst = mac_lookup(e, fr);
            if (dst == src) continue; /* the local switch should have kept it */
            if (dst >= 0) {
                offer(e, src, dst, at, fr, lens[i], payload);
                continue;
            }
            for (j = 0; j < e->nports; j++)
                if (j != src) offer(e, src, j, at, fr, lens[i], payload);
        }
        if (n < RX_BATCH) return 0;
    }
    return 1;
}

static void write_stats(struct emu *e, int64_t now)
{
    int i;

    for (i = 0; i < e->nports; i++) wanemu_port_poll_stats(&e->ports[i]);
    if (e->trace.csv != NULL) fflush(e->trace.csv);
    if (e->stats_path != NULL)
        wanemu_stats_write(e->stats_path, now - e->start_ns, e->ports, e->nports, e->dirs,
                           e->ndirs, e->trace.late_rows);
}

static int run(struct emu *e)
{
    struct epoll_event ev[WANEMU_MAX_PORTS + 1];
    struct timespec timeout;
    int stop = 0, i, n;

    while (!stop) {
        int64_t now, next, wait;
        int more = 0;

        for (i = 0; i < e->nports; i++) more |= port_input(e, i);
        now = sync_now(e);

        if (now + e->batch_ns >= e->next_stats_ns) {
            write_stats(e, now);
            e->next_stats_ns += STATS_PERIOD_NS;
            if (e->next_stats_ns <= now) e->next_stats_ns = now + STATS_PERIOD_NS;
        }
        next = e->next_stats_ns;
        for (i = 0; i < e->ndirs; i++) {
            int64_t due = wanemu_link_next_due(&e->dirs[i].link);
            if (due < next) next = due;
        }
        if (e->rx_poll_ns > 0 && now + e->rx_poll_ns < next) next = now + e->rx_poll_ns;
        if (more) next = now;
        /* Wake up early by the latency the last wake-ups had, so that
         * frames leave on time rather than one scheduler latency late. Once
         * that point has passed (the wake-up was quicker), sleep until the
         * batch window reaches the deadline: never spin. */
        now = mono_ns();
        if (next - e->wake_adv_ns > now)
            next -= e->wake_adv_ns;
        else if (next - e->batch_ns > now)
            next -= e->batch_ns;
        wait = next > now ? next - now : 0;
        timeout.tv_sec = wait / 1000000000LL;
        timeout.tv_nsec = wait % 1000000000LL;
        n = epoll_pwait2(e->epfd, ev, WANEMU_MAX_PORTS + 1, &timeout, NULL);
        if (n < 0 && errno != EINTR) {
            icbc_error("epoll_pwait2: %s (Linux 5.11 or later is needed)", strerror(errno));
            return 1;
        }
        if (n == 0 && wait > 0 && !more) {
            int64_t lat = mono_ns() - next;
            if (lat < 0) lat = 0;
            if (lat > WAKE_ADV_MAX_NS) lat = WAKE_ADV_MAX_NS;
            e->wake_adv_ns += (lat - e->wake_adv_ns) / 8;
        }
        for (i = 0; i < n; i++) {
            /* Port events only end the wait; the ports are read at the top. */
            if ((int) ev[i].data.u32 == WANEMU_MAX_PORTS) {
                struct signalfd_siginfo si;
                if (read(e->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                    icbc_info("signal %u: exiting", si.ssi_signo);
                    stop = 1;
                }
            }
        }
    }
    write_stats(e, sync_now(e));
    return 0;
}

static icbc_status_t setup(struct emu *e, const struct wanemu_link_conf *base,
                           const struct dir_opt *opts, int nopts, const char *trace_path,
                           int64_t interval_ns)
{
    struct epoll_event ev;
    sigset_t sigs;
    int i, j, k;

    e->start_ns = mono_ns();
    e->ndirs = e->nports * (e->nports - 1);
    e->dirs = calloc((size_t) e->ndirs, sizeof(*e->dirs));
    e->rxbuf = malloc(sizeof(*e->rxbuf) * RX_BATCH);
    if (e->dirs == NULL || e->rxbuf == NULL) {
        icbc_error("out of memory");
        return ICBC_ERR_NO_MEMORY;
    }
    for (i = 0; i < MAC_TABLE_SIZE; i++) e->macs[i].port = -1;
    for (i = 0; i < e->nports; i++) e->last_at[i] = e->start_ns;
    for (i = 0; i < nopts; i++) {
        if (opts[i].src[0] == '\0') continue;
        if (port_index(e, opts[i].src) < 0 || port_index(e, opts[i].dst) < 0 ||
            !strcmp(opts[i].src, opts[i].dst)) {
            icbc_error("direction %s:%s: both must be different port names given with --port",
                       opts[i].src, opts[i].dst);
            return ICBC_ERR_INVALID;
        }
    }
    k = 0;
    for (i = 0; i < e->nports; i++) {
        for (j = 0; j < e->nports; j++) {
            struct wanemu_link_conf conf = *base;
            struct wanemu_dir *d;
            int o;

            if (i == j) continue;
            /* Options for all directions first, then those for this one. */
            for (o = 0; o < nopts; o++)
                if (opts[o].src[0] == '\0' && apply_dir_opt(&opts[o], &conf) != ICBC_OK)
                    return ICBC_ERR_INVALID;
            for (o = 0; o < nopts; o++)
                if (!strcmp(opts[o].src, e->ports[i].name) &&
                    !strcmp(opts[o].dst, e->ports[j].name) &&
                    apply_dir_opt(&opts[o], &conf) != ICBC_OK)
                    return ICBC_ERR_INVALID;
            d = &e->dirs[k];
            d->src = i;
            d->dst = j;
            e->dir_of[i][j] = k++;
            if (wanemu_link_init(&d->link, &conf, e->start_ns) != ICBC_OK)
                return ICBC_ERR_INVALID;
            icbc_info("%s->%s: rate %llu bit/s, delay %lld ns, buffer %llu bytes, ring %zu bytes",
                      e->ports[i].name, e->ports[j].name, (unsigned long long) conf.rate_bps,
                      (long long) conf.delay_ns, (unsigned long long) conf.buffer_bytes,
                      d->link.cap);
        }
    }

    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    e->sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->sfd < 0 || e->epfd < 0) {
        icbc_error("signalfd/epoll: %s", strerror(errno));
        return ICBC_ERR_IO;
    }
    /* Frames carry their kernel arrival time, and none can be due before
     * arrival + delay; with a delay of 400 us or more the ports are read
     * every delay/4 (at most 500 us) instead of waking up for each frame. */
    e->rx_poll_ns = INT64_MAX;
    for (i = 0; i < e->ndirs; i++)
        if (e->dirs[i].link.conf.delay_ns / 4 < e->rx_poll_ns)
            e->rx_poll_ns = e->dirs[i].link.conf.delay_ns / 4;
    if (e->rx_poll_ns < 100000 || e->rx_events) e->rx_poll_ns = 0;
    if (e->rx_poll_ns > 500000) e->rx_poll_ns = 500000;
    for (i = 0; i < e->nports; i++) {
        if (wanemu_port_open(&e->ports[i]) != ICBC_OK) return ICBC_ERR_IO;
        if (e->rx_poll_ns > 0) continue;
        ev.events = EPOLLIN;
        ev.data.u64 = 0;
        ev.data.u32 = (uint32_t) i;
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->ports[i].fd, &ev) < 0) goto epoll_fail;
    }
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    ev.data.u32 = WANEMU_MAX_PORTS;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->sfd, &ev) < 0) goto epoll_fail;
    if (wanemu_trace_open(&e->trace, trace_path, interval_ns, e->start_ns, e->ports, e->dirs,
                          e->ndirs) != ICBC_OK)
        return ICBC_ERR_IO;
    e->next_stats_ns = e->start_ns;
    return ICBC_OK;

epoll_fail:
    icbc_error("epoll_ctl: %s", strerror(errno));
    return ICBC_ERR_IO;
}

static void teardown(struct emu *e)
{
    int i;

    wanemu_trace_close(&e->trace, mono_ns());
    for (i = 0; i < e->nports; i++) wanemu_port_close(&e->ports[i]);
    for (i = 0; i < e->ndirs; i++) wanemu_link_fini(&e->dirs[i].link);
    free(e->dirs);
    free(e->rxbuf);
}

static icbc_status_t write_pidfile(const char *path)
{
    FILE *f;
    char tmp[4096];

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int) sizeof(tmp)) return ICBC_ERR_INVALID;
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", (int) getpid()) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        icbc_error("cannot write pid file %s: %s", path, strerror(errno));
        return ICBC_ERR_IO;
    }
    return ICBC_OK;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "port", required_argument, NULL, 'p' },     { "rate", required_argument, NULL, 'r' },
        { "delay", required_argument, NULL, 'd' },    { "buffer", required_argument, NULL, 'b' },
        { "overhead", required_argument, NULL, 'o' }, { "trace", required_argument, NULL, 't' },
        { "interval", required_argument, NULL, 'i' }, { "stats", required_argument, NULL, 's' },
        { "max-mem", required_argument, NULL, 'm' },  { "pidfile", required_argument, NULL, 'P' },
        { "realtime", no_argument, NULL, 'R' },       { "help", no_argument, NULL, 'h' },
        { "batch", required_argument, NULL, 'B' },   { "rx-events", no_argument, NULL, 'E' },
        { NULL, 0, NULL, 0 },
    };
    static struct emu emu = { .batch_ns = 50000 };
    struct dir_opt opts[3 * WANEMU_MAX_PORTS * WANEMU_MAX_PORTS + 8];
    struct wanemu_link_conf base = { 0, 0, 256 * 1024, 0, 64u << 20 };
    const char *trace_path = NULL, *pidfile = NULL;
    int64_t interval_ns = 1000000;
    int nopts = 0, realtime = 0, c, rc;
    char *end;

    icbc_log_set_ident("icbc-wanemu");
    while ((c = getopt_long(argc, argv, "p:r:d:b:o:t:i:s:m:P:RB:Eh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (add_port(&emu, optarg) != ICBC_OK) return 2;
            break;
        case 'r':
        case 'd':
        case 'b':
            if (nopts == (int) (sizeof(opts) / sizeof(opts[0]))) {
                icbc_error("too many --rate/--delay/--buffer options");
                return 2;
            }
            if (parse_dir_opt((char) c, optarg, &opts[nopts++]) != ICBC_OK) return 2;
            break;
        case 'o': {
            long v;
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || v < 0 || v > 1000) {
                icbc_error("malformed --overhead '%s' (bytes, 0-1000)", optarg);
                return 2;
            }
            base.overhead = (uint32_t) v;
            break;
        }
        case 't':
            trace_path = optarg;
            break;
        case 'i':
            if (wanemu_parse_time(optarg, &interval_ns) != ICBC_OK || interval_ns < 10000) {
                icbc_error("malformed --interval '%s' (at least 10us, e.g. 1ms)", optarg);
                return 2;
            }
            break;
        case 'B':
            if (wanemu_parse_time(optarg, &emu.batch_ns) != ICBC_OK || emu.batch_ns > 1000000) {
                icbc_error("malformed --batch '%s' (0 to 1ms, e.g. 20us)", optarg);
                return 2;
            }
            break;
        case 'E':
            emu.rx_events = 1;
            break;
        case 's':
            emu.stats_path = optarg;
            break;
        case 'm':
            if (wanemu_parse_size(optarg, &base.max_mem) != ICBC_OK || base.max_mem < (1 << 20)) {
                icbc_error("malformed --max-mem '%s' (at least 1MiB)", optarg);
                return 2;
            }
            break;
        case 'P':
            pidfile = optarg;
            break;
        case 'R':
            realtime = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        icbc_error("unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (emu.nports < 2) {
        icbc_error("at least two --port NAME=IFACE are needed (see --help)");
        return 2;
    }
    /* Check every option value before touching the network. */
    for (c = 0; c < nopts; c++) {
        struct wanemu_link_conf scratch = base;
        if (apply_dir_opt(&opts[c], &scratch) != ICBC_OK) return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (realtime) {
        struct sched_param sp = { .sched_priority = 10 };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
            icbc_warn("SCHED_FIFO: %s; continuing with normal scheduling", strerror(errno));
        if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
            icbc_warn("mlockall: %s", strerror(errno));
    }
    if (setup(&emu, &base, opts, nopts, trace_path, interval_ns) != ICBC_OK) {
        teardown(&emu);
        return 1;
    }
    if (pidfile != NULL && write_pidfile(pidfile) != ICBC_OK) {
        teardown(&emu);
        return 1;
    }
    if (emu.rx_poll_ns > 0)
        icbc_info("forwarding between %d ports; reading them every %lld us", emu.nports,
                  (long long) emu.rx_poll_ns / 1000);
    else
        icbc_info("forwarding between %d ports; reading them on arrival", emu.nports);
    rc = run(&emu);
    teardown(&emu);
    if (pidfile != NULL) unlink(pidfile);
    return rc;
}
