/*
 * The interval trace (one CSV row per interval, 1 ms by default) and the
 * cumulative stats file.
 *
 * CSV columns: time_s (start of the interval, seconds since the emulator
 * started), then for every direction S_D (from cluster S to cluster D):
 * bytes_S_D (frame bytes delivered), drops_S_D (frames dropped at the
 * bottleneck buffer), pkts_S_D, qmax_S_D (largest backlog of the bottleneck
 * buffer in the interval, in bytes) and payload_S_D (TCP/UDP payload
 * bytes delivered). A frame is counted in the interval of its delivery time
 * in the model, so bytes_S_D never exceeds rate * interval by more than one
 * frame.
 *
 * The rows of the last TRACE_WINDOW_NS stay open: when the emulator was not
 * scheduled for a while, the frames that arrived meanwhile are read late but
 * carry their kernel arrival time, and their model delivery times fall in
 * rows that are still open. Only a frame older than the window is counted in
 * the oldest open row (the stats file's late_rows counts them).
 */
#define _GNU_SOURCE
#include "wanemu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icbc_log.h"

#define TRACE_FLUSH_ROWS 100
#define TRACE_WINDOW_NS 250000000LL

static struct wanemu_counters *slot(struct wanemu_trace *t, uint64_t row)
{
    return t->ring + (size_t) (row % (uint64_t) t->nslots) * (size_t) t->ndirs;
}

icbc_status_t wanemu_trace_open(struct wanemu_trace *t, const char *path, int64_t interval_ns,
                                int64_t now_ns, const struct wanemu_port *ports,
                                struct wanemu_dir *dirs, int ndirs)
{
    static const char *cols[] = { "bytes", "drops", "pkts", "qmax", "payload" };
    size_t c;
    int i;

    memset(t, 0, sizeof(*t));
    t->interval_ns = interval_ns;
    t->start_ns = now_ns;
    t->dirs = dirs;
    t->ndirs = ndirs;
    t->nslots = (int) (TRACE_WINDOW_NS / interval_ns) + 2;
    t->ring = calloc((size_t) t->nslots * (size_t) ndirs, sizeof(*t->ring));
    if (t->ring == NULL) {
        icbc_error("cannot allocate the trace window (%d rows)", t->nslots);
        return ICBC_ERR_NO_MEMORY;
    }
    t->opened = 1; /* row 0, empty backlog */
    if (path == NULL) return ICBC_OK;
    t->csv = fopen(path, "w");
    if (t->csv == NULL) {
        icbc_error("cannot open trace file %s: %s", path, strerror(errno));
        return ICBC_ERR_IO;
    }
    setvbuf(t->csv, NULL, _IOFBF, 1 << 16);
    fputs("time_s", t->csv);
    for (c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
        for (i = 0; i < ndirs; i++)
            fprintf(t->csv, ",%s_%s_%s", cols[c], ports[dirs[i].src].name, ports[dirs[i].dst].name);
    fputc('\n', t->csv);
    fflush(t->csv);
    return ICBC_OK;
}

static void write_row(struct wanemu_trace *t)
{
    const struct wanemu_counters *r = slot(t, t->written);
    int64_t start = (int64_t) t->written * t->interval_ns;
    int i, n = t->ndirs;

    if (t->csv != NULL) {
        fprintf(t->csv, "%lld.%06lld", (long long) (start / 1000000000),
                (long long) (start % 1000000000 / 1000));
        for (i = 0; i < n; i++) fprintf(t->csv, ",%llu", (unsigned long long) r[i].bytes);
        for (i = 0; i < n; i++) fprintf(t->csv, ",%llu", (unsigned long long) r[i].drops);
        for (i = 0; i < n; i++) fprintf(t->csv, ",%llu", (unsigned long long) r[i].pkts);
        for (i = 0; i < n; i++) fprintf(t->csv, ",%llu", (unsigned long long) r[i].qmax);
        for (i = 0; i < n; i++) fprintf(t->csv, ",%llu", (unsigned long long) r[i].payload);
        fputc('\n', t->csv);
        if ((t->written + 1) % TRACE_FLUSH_ROWS == 0) fflush(t->csv);
    }
    t->written++;
}

/* Open the rows up to the one holding time_ns, writing the rows that leave
 * the window. A row's qmax starts at the backlog at its start: the backlog
 * only grows at arrivals, so its largest value in the row is the larger of
 * that and its value after each arrival. */
static void open_rows(struct wanemu_trace *t, int64_t time_ns)
{
    uint64_t row = (uint64_t) ((time_ns - t->start_ns) / t->interval_ns);
    int i;

    while (t->opened <= row) {
        struct wanemu_counters *r;

        if (t->opened - t->written >= (uint64_t) t->nslots) write_row(t);
        r = slot(t, t->opened);
        memset(r, 0, sizeof(*r) * (size_t) t->ndirs);
        for (i = 0; i < t->ndirs; i++)
            r[i].qmax = wanemu_link_backlog(&t->dirs[i].link,
                                            t->start_ns + (int64_t) t->opened * t->interval_ns);
        t->opened++;
    }
}

struct wanemu_counters *wanemu_trace_at(struct wanemu_trace *t, int64_t time_ns, int dir)
{
    uint64_t row;

    if (time_ns < t->start_ns) time_ns = t->start_ns;
    open_rows(t, time_ns);
    row = (uint64_t) ((time_ns - t->start_ns) / t->interval_ns);
    if (row < t->written) {
        row = t->written;
        t->late_rows++;
    }
    return slot(t, row) + dir;
}

void wanemu_trace_advance(struct wanemu_trace *t, int64_t now_ns)
{
    if (now_ns < t->start_ns) return;
    open_rows(t, now_ns);
    /* Rows that ended more than the window ago are final. */
    while (t->written < t->opened &&
           t->start_ns + (int64_t) (t->written + 1) * t->interval_ns + TRACE_WINDOW_NS <= now_ns)
        write_row(t);
}

void wanemu_trace_close(struct wanemu_trace *t, int64_t now_ns)
{
    /* Every row that has ended, the current one not. */
    uint64_t end = (uint64_t) ((now_ns - t->start_ns) / t->interval_ns);

    while (t->written < t->opened && t->written < end) write_row(t);
    if (t->csv != NULL && fclose(t->csv) != 0)
        icbc_error("writing the trace failed: %s", strerror(errno));
    t->csv = NULL;
    free(t->ring);
    t->ring = NULL;
}

icbc_status_t wanemu_stats_write(const char *path, int64_t uptime_ns,
                                 const struct wanemu_port *ports, int nports,
                                 const struct wanemu_dir *dirs, int ndirs, uint64_t late_rows)
{
    char tmp[4096];
    FILE *f;
    int i;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int) sizeof(tmp)) return ICBC_ERR_INVALID;
    f = fopen(tmp, "w");
    if (f == NULL) {
        icbc_error("cannot write stats file %s: %s", tmp, strerror(errno));
        return ICBC_ERR_IO;
    }
    fprintf(f, "uptime_s=%.3f late_rows=%llu\n", (double) uptime_ns / 1e9,
            (unsigned long long) late_rows);
    for (i = 0; i < ndirs; i++) {
        const struct wanemu_dir *d = &dirs[i];
        fprintf(f,
                "dir %s_%s rate_bps=%llu delay_ns=%lld buffer=%llu pkts=%llu bytes=%llu "
                "payload=%llu drops=%llu ring_drops=%llu qmax=%llu late_max_us=%.1f "
                "late_avg_us=%.1f\n",
                ports[d->src].name, ports[d->dst].name,
                (unsigned long long) d->link.conf.rate_bps, (long long) d->link.conf.delay_ns,
                (unsigned long long) d->link.conf.buffer_bytes,
                (unsigned long long) d->total.pkts, (unsigned long long) d->total.bytes,
                (unsigned long long) d->total.payload, (unsigned long long) d->total.drops,
                (unsigned long long) d->link.ring_drops, (unsigned long long) d->total.qmax,
                (double) d->late_max_ns / 1e3,
                d->late_n ? (double) d->late_sum_ns / (double) d->late_n / 1e3 : 0.0);
    }
    for (i = 0; i < nports; i++) {
        const struct wanemu_port *p = &ports[i];
        fprintf(f,
                "port %s ifname=%s rx=%llu rx_bytes=%llu tx=%llu tx_bytes=%llu tx_errors=%llu "
                "truncated=%llu kernel_drops=%llu\n",
                p->name, p->ifname, (unsigned long long) p->st.rx,
                (unsigned long long) p->st.rx_bytes, (unsigned long long) p->st.tx,
                (unsigned long long) p->st.tx_bytes, (unsigned long long) p->st.tx_errors,
                (unsigned long long) p->st.truncated, (unsigned long long) p->st.kernel_drops);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        icbc_error("cannot write stats file %s: %s", path, strerror(errno));
        unlink(tmp);
        return ICBC_ERR_IO;
    }
    return ICBC_OK;
}
