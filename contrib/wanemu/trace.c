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
 */
#define _GNU_SOURCE
#include "wanemu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "icbc_log.h"

#define TRACE_FLUSH_ROWS 100

icbc_status_t wanemu_trace_open(struct wanemu_trace *t, const char *path, int64_t interval_ns,
                                int64_t now_ns, const struct wanemu_port *ports,
                                const struct wanemu_dir *dirs, int ndirs)
{
    static const char *cols[] = { "bytes", "drops", "pkts", "qmax", "payload" };
    size_t c;
    int i;

    t->csv = NULL;
    t->interval_ns = interval_ns;
    t->start_ns = now_ns;
    t->next_ns = now_ns + interval_ns;
    t->rows = 0;
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

static void write_row(struct wanemu_trace *t, struct wanemu_dir *dirs, int ndirs)
{
    int64_t start = t->next_ns - t->interval_ns - t->start_ns;
    int i;

    if (t->csv != NULL) {
        fprintf(t->csv, "%lld.%06lld", (long long) (start / 1000000000),
                (long long) (start % 1000000000 / 1000));
        for (i = 0; i < ndirs; i++) fprintf(t->csv, ",%llu", (unsigned long long) dirs[i].now.bytes);
        for (i = 0; i < ndirs; i++) fprintf(t->csv, ",%llu", (unsigned long long) dirs[i].now.drops);
        for (i = 0; i < ndirs; i++) fprintf(t->csv, ",%llu", (unsigned long long) dirs[i].now.pkts);
        for (i = 0; i < ndirs; i++) fprintf(t->csv, ",%llu", (unsigned long long) dirs[i].now.qmax);
        for (i = 0; i < ndirs; i++)
            fprintf(t->csv, ",%llu", (unsigned long long) dirs[i].now.payload);
        fputc('\n', t->csv);
        if (++t->rows % TRACE_FLUSH_ROWS == 0) fflush(t->csv);
    }
    /* The backlog only grows at arrivals, so the largest in the next
     * interval is the larger of its value at the start and after each
     * arrival. */
    for (i = 0; i < ndirs; i++) {
        memset(&dirs[i].now, 0, sizeof(dirs[i].now));
        dirs[i].now.qmax = wanemu_link_backlog(&dirs[i].link, t->next_ns);
    }
}

void wanemu_trace_advance(struct wanemu_trace *t, int64_t now_ns, struct wanemu_dir *dirs, int ndirs)
{
    while (t->next_ns <= now_ns) {
        write_row(t, dirs, ndirs);
        t->next_ns += t->interval_ns;
    }
}

void wanemu_trace_close(struct wanemu_trace *t)
{
    if (t->csv == NULL) return;
    if (fclose(t->csv) != 0) icbc_error("writing the trace failed: %s", strerror(errno));
    t->csv = NULL;
}

icbc_status_t wanemu_stats_write(const char *path, int64_t uptime_ns,
                                 const struct wanemu_port *ports, int nports,
                                 const struct wanemu_dir *dirs, int ndirs)
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
    fprintf(f, "uptime_s=%.3f\n", (double) uptime_ns / 1e9);
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
