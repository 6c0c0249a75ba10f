/*
 * Shared helpers of the ICBC MPI micro-benchmarks: command-line options, the size
 * sequence, iteration scaling, buffer allocation and the payload check.
 *
 * Header-only on purpose: every benchmark is one .c file that any MPI's own mpicc
 * compiles with no build system (`mpicc -O2 -I benchmarks/src icbc_latency.c`).
 *
 * Output convention (all benchmarks): CSV on stdout, one header line, then one row
 * per message size, first column `size` (bytes). Diagnostics go to stderr.
 */
#ifndef ICBC_BENCH_COMMON_H
#define ICBC_BENCH_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#endif

#include <mpi.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_SIZE_LIMIT ((size_t)1 << 30)

/* Which options a benchmark accepts (bit set). */
enum {
    BENCH_OPT_WINDOW = 1 << 0,
    BENCH_OPT_STAT = 1 << 1,
    BENCH_OPT_PAIR = 1 << 2,
};

/* How per-iteration times become the reported value (--stat). */
enum bench_stat {
    BENCH_STAT_MEAN,   /* total time / iterations, as OSU reports */
    BENCH_STAT_MEDIAN, /* median iteration: robust against preemption on a busy host */
    BENCH_STAT_BEST,   /* fastest iteration */
    BENCH_STAT_P99,    /* 99th percentile: the tail a busy or badly placed process makes */
};

static inline const char *bench_stat_name(enum bench_stat stat)
{
    return stat == BENCH_STAT_MEDIAN ? "median"
           : stat == BENCH_STAT_BEST ? "best"
           : stat == BENCH_STAT_P99  ? "p99"
                                     : "mean";
}

struct bench_opts {
    size_t min_size;        /* first message size; 0 allowed */
    size_t max_size;        /* last message size (inclusive) */
    int iters;              /* timed iterations for sizes <= large_size */
    int warmup;             /* untimed iterations before the timed ones */
    int window;             /* messages in flight per iteration (bandwidth benchmarks) */
    size_t large_size;      /* above this size, iterations scale down as 1/size */
    int min_iters;          /* lower bound of the scaled iteration count */
    int corrupt;            /* flip one received byte before the check (tests the check) */
    enum bench_stat stat;   /* statistic over per-iteration times (BENCH_OPT_STAT) */
    int pair[2];            /* the two ranks that talk (BENCH_OPT_PAIR; default 0 and 1) */
};

struct bench_desc {
    const char *name;       /* program name shown in --help */
    const char *summary;    /* one paragraph: what it measures */
    const char *csv_header; /* header line of the CSV output */
    unsigned accepted;      /* BENCH_OPT_* bits */
    int min_ranks;          /* smallest communicator size that makes sense */
    int even_ranks;         /* 1: needs an even number of ranks */
};

/* Parse "4096", "64K", "8M", "1G" (binary multiples). Returns 0 on success. */
static inline int bench_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned long long mul = 1;
    if (*end) {
        switch (*end) {
            case 'k': case 'K': mul = 1ULL << 10; break;
            case 'm': case 'M': mul = 1ULL << 20; break;
            case 'g': case 'G': mul = 1ULL << 30; break;
            default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -1;
    }
    if (v > BENCH_MAX_SIZE_LIMIT / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static inline int bench_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static inline void bench_usage(const struct bench_desc *d, const struct bench_opts *o,
                               FILE *f)
{
    fprintf(f, "Usage: mpiexec -n N %s [options]\n\n%s\n\n", d->name, d->summary);
    fprintf(f, "Output: CSV on stdout, header \"%s\", one row per size.\n\n", d->csv_header);
    fprintf(f, "Options (sizes accept K/M/G suffixes, binary multiples):\n");
    fprintf(f, "  --min SIZE      smallest message size in bytes, 0 allowed (default %zu)\n",
            o->min_size);
    fprintf(f, "  --max SIZE      largest message size in bytes (default %zu)\n", o->max_size);
    fprintf(f, "  --iters N       timed iterations per size up to --large (default %d)\n",
            o->iters);
    fprintf(f, "  --warmup N      untimed iterations before each size (default %d)\n",
            o->warmup);
    if (d->accepted & BENCH_OPT_WINDOW)
        fprintf(f, "  --window N      messages in flight per iteration (default %d)\n",
                o->window);
    if (d->accepted & BENCH_OPT_STAT)
        fprintf(f, "  --stat S        mean | median | best | p99: statistic over the per-iteration\n"
                   "                  times (default mean, as OSU; median resists preemption)\n");
    if (d->accepted & BENCH_OPT_PAIR)
        fprintf(f, "  --pair A,B      the two ranks that talk, A timing (default 0,1)\n");
    fprintf(f, "  --large SIZE    above this size iterations scale down as 1/size (default %zu)\n",
            o->large_size);
    fprintf(f, "  --min-iters N   lower bound of the scaled iteration count (default %d)\n",
            o->min_iters);
    fprintf(f, "  --corrupt       flip one received byte before the payload check, to show the\n"
               "                  check works (the run must then fail)\n");
    fprintf(f, "  --help          this text\n\n");
    fprintf(f, "Sizes are the powers of two from --min to --max (plus 0 first if --min is 0).\n"
               "After the timed loop of each size the received payload is compared with the\n"
               "expected pattern; any mismatch stops the run with exit status 1.\n");
}

/*
 * Parse argv on every rank (all ranks see the same argv under mpiexec). Returns 0 to run,
 * 1 when --help was printed, -1 on a bad option (message printed by rank 0).
 */
static inline int bench_parse(int argc, char **argv, const struct bench_desc *d,
                              struct bench_opts *o, int rank)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        int bad = 0, used = 1;
        int known = !strcmp(a, "--min") || !strcmp(a, "--max") || !strcmp(a, "--large") ||
                    !strcmp(a, "--iters") || !strcmp(a, "--warmup") ||
                    !strcmp(a, "--min-iters") || !strcmp(a, "--help") || !strcmp(a, "-h") ||
                    !strcmp(a, "--corrupt") ||
                    (!strcmp(a, "--stat") && (d->accepted & BENCH_OPT_STAT)) ||
                    (!strcmp(a, "--window") && (d->accepted & BENCH_OPT_WINDOW)) ||
                    (!strcmp(a, "--pair") && (d->accepted & BENCH_OPT_PAIR));
        if (!known) {
            if (rank == 0)
                fprintf(stderr, "%s: unknown option '%s' (try --help)\n", d->name, a);
            return -1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0)
                bench_usage(d, o, stdout);
            return 1;
        } else if (!strcmp(a, "--corrupt")) {
            o->corrupt = 1;
            used = 0;
        } else if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--min")) {
            bad = bench_parse_size(v, &o->min_size);
        } else if (!strcmp(a, "--max")) {
            bad = bench_parse_size(v, &o->max_size);
        } else if (!strcmp(a, "--large")) {
            bad = bench_parse_size(v, &o->large_size);
        } else if (!strcmp(a, "--iters")) {
            bad = bench_parse_int(v, 1, 10000000, &o->iters);
        } else if (!strcmp(a, "--warmup")) {
            bad = bench_parse_int(v, 0, 100000000, &o->warmup);
        } else if (!strcmp(a, "--min-iters")) {
            bad = bench_parse_int(v, 1, 100000000, &o->min_iters);
        } else if (!strcmp(a, "--stat")) {
            if (!strcmp(v, "mean"))
                o->stat = BENCH_STAT_MEAN;
            else if (!strcmp(v, "median"))
                o->stat = BENCH_STAT_MEDIAN;
            else if (!strcmp(v, "best"))
                o->stat = BENCH_STAT_BEST;
            else if (!strcmp(v, "p99"))
                o->stat = BENCH_STAT_P99;
            else
                bad = 1;
        } else if (!strcmp(a, "--window") && (d->accepted & BENCH_OPT_WINDOW)) {
            bad = bench_parse_int(v, 1, 4096, &o->window);
        } else if (!strcmp(a, "--pair")) {
            char *end = NULL;
            long x = strtol(v, &end, 10), y = -1;
            if (end != v && *end == ',')
                y = strtol(end + 1, &end, 10);
            bad = *end || x < 0 || y < 0 || x == y || x > 1 << 20 || y > 1 << 20;
            o->pair[0] = (int) x;
            o->pair[1] = (int) y;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "%s: option %s needs a valid value%s%s\n", d->name, a,
                        v ? ", got " : "", v ? v : "");
            return -1;
        }
        i += used;
    }
    if (o->max_size < o->min_size || o->max_size == 0) {
        if (rank == 0)
            fprintf(stderr, "%s: need 0 <= --min <= --max and --max > 0\n", d->name);
        return -1;
    }
    if (o->min_iters > o->iters)
        o->min_iters = o->iters;
    return 0;
}

/* Check the communicator size; rank 0 explains a mismatch. Returns 0 when usable. */
static inline int bench_check_ranks(const struct bench_desc *d, int nranks, int rank)
{
    if (nranks < d->min_ranks || (d->even_ranks && nranks % 2)) {
        if (rank == 0)
            fprintf(stderr, "%s: needs %sat least %d ranks, got %d\n", d->name,
                    d->even_ranks ? "an even number of ranks, " : "", d->min_ranks, nranks);
        return -1;
    }
    return 0;
}

/*
 * Rank 0 names the MPI library on stderr, one line: the first line of
 * MPI_Get_library_version and, for MPICH, its "Device" line (e.g. ch4:ucx or ch4:icbc),
 * so a runner can check which build really ran; then the statistic, if the benchmark has one.
 */
static inline void bench_banner(const struct bench_desc *d, const struct bench_opts *o, int rank,
                                int nranks)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {0};
    int len = 0;
    if (rank != 0)
        return;
    MPI_Get_library_version(lib, &len);
    for (char *c = lib; *c; c++)
        if (*c == '\t')
            *c = ' ';
    const char *dev = strstr(lib, "Device:");
    int flen = (int)strcspn(lib, "\n");
    int dlen = 7;
    if (dev) {
        dev += strlen("Device:");
        dev += strspn(dev, " ");
        dlen = (int)strcspn(dev, "\n ");
    } else {
        dev = "unknown";
    }
    fprintf(stderr, "%s: %d ranks; library: %.*s; device: %.*s", d->name, nranks, flen, lib,
            dlen, dev);
    if (d->accepted & BENCH_OPT_STAT)
        fprintf(stderr, "; statistic: %s", bench_stat_name(o->stat));
    fprintf(stderr, "\n");
}

/* Size sequence: 0 (only if min is 0), then powers of two from max(min,1) to max. */
static inline size_t bench_first_size(const struct bench_opts *o)
{
    return o->min_size;
}

static inline size_t bench_next_size(const struct bench_opts *o, size_t s)
{
    (void)o;
    if (s == 0)
        return 1;
    size_t p = 1;
    while (p <= s)
        p <<= 1;
    return p;
}

/* Iterations for one size: constant up to `large_size`, then scaled down as 1/size. */
static inline int bench_iters_for(const struct bench_opts *o, int base, size_t size)
{
    if (size <= o->large_size || size == 0)
        return base;
    double scaled = (double)base * (double)o->large_size / (double)size;
    int n = (int)scaled;
    int floor_ = o->min_iters < base ? o->min_iters : base;
    return n < floor_ ? floor_ : n;
}

/* Warm-up iterations for one size: scaled like the timed ones, at least 1 if any. */
static inline int bench_warmup_for(const struct bench_opts *o, size_t size)
{
    if (o->warmup <= 0)
        return 0;
    if (size <= o->large_size || size == 0)
        return o->warmup;
    int n = (int)((double)o->warmup * (double)o->large_size / (double)size);
    return n < 1 ? 1 : n;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The chosen statistic of n > 0 per-iteration times (sorts t in place). */
static inline double bench_stat_time(double *t, int n, enum bench_stat stat)
{
    double sum = 0.0;
    switch (stat) {
        case BENCH_STAT_MEDIAN:
            qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
            return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        case BENCH_STAT_BEST:
            qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
            return t[0];
        case BENCH_STAT_P99:
            qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
            return t[(n * 99 + 99) / 100 - 1]; /* the smallest t with 99 % at or below */
        case BENCH_STAT_MEAN:
        default:
            for (int i = 0; i < n; i++)
                sum += t[i];
            return sum / n;
    }
}

static inline void *bench_alloc(size_t bytes, const char *what, int rank)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (posix_memalign(&p, 4096, bytes)) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes for %s\n", rank, bytes, what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, 0, bytes);
    return p;
}

/*
 * Payload pattern: byte i of the message identified by (size, src, dst, slot). Never 0, so a
 * buffer the transport did not write (zero-filled before the loop) is detected.
 */
static inline unsigned char bench_pattern_byte(size_t size, int src, int dst, int slot, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ULL;
    x ^= (uint64_t)size * 0xC2B2AE3D27D4EB4FULL;
    x ^= ((uint64_t)(unsigned)src << 40) ^ ((uint64_t)(unsigned)dst << 20);
    x ^= (uint64_t)(unsigned)slot;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return (unsigned char)(x % 255u + 1u);
}

static inline void bench_fill(unsigned char *buf, size_t size, int src, int dst, int slot)
{
    for (size_t i = 0; i < size; i++)
        buf[i] = bench_pattern_byte(size, src, dst, slot, i);
}

/*
 * Compare a received buffer with the expected pattern. Returns the number of bad bytes and
 * prints the first one (rank, peer, slot, offset) to stderr.
 */
static inline size_t bench_verify(const unsigned char *buf, size_t size, int src, int dst,
                                  int slot, const char *name)
{
    size_t bad = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char want = bench_pattern_byte(size, src, dst, slot, i);
        if (buf[i] != want) {
            if (!bad)
                fprintf(stderr,
                        "%s: payload check FAILED: size %zu, from rank %d to rank %d, slot %d, "
                        "offset %zu: expected 0x%02x, got 0x%02x\n",
                        name, size, src, dst, slot, i, want, buf[i]);
            bad++;
        }
    }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu bytes wrong (size %zu, from %d to %d, slot %d)\n", name,
                bad, size, size, src, dst, slot);
    return bad;
}

/* Every rank reports its mismatch count; all ranks learn whether the run is bad. */
static inline int bench_agree_ok(size_t local_bad, MPI_Comm comm)
{
    unsigned long long mine = (unsigned long long)local_bad, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
    return total == 0;
}

/* Check the byte count of a completed receive. Returns 1 if it is wrong. */
static inline int bench_check_count(const MPI_Status *st, size_t want, const char *name,
                                    int rank)
{
    int got = -1;
    MPI_Get_count(st, MPI_BYTE, &got);
    if (got < 0 || (size_t)got != want) {
        fprintf(stderr, "%s: rank %d received %d bytes, expected %zu\n", name, rank, got, want);
        return 1;
    }
    return 0;
}

/*
 * Payload bytes this rank handed to MPI send calls (timed and warm-up). bench_finish sums
 * them over all ranks, so a runner can compare them with the byte counters of the network
 * interface that should have carried them.
 */
static unsigned long long bench_bytes_sent;

static inline void bench_count_sent(size_t msg_bytes, long long count)
{
    bench_bytes_sent += (unsigned long long)msg_bytes * (unsigned long long)count;
}

/*
 * Final words: rank 0 tells stderr that MPI_Finalize starts, so a runner can tell a hang in
 * MPI_Finalize from one in the measurement. `what` is NULL for a quiet exit (--help).
 */
static inline int bench_finish(const char *name, int rank, int status, const char *what)
{
    unsigned long long total = 0;
    fflush(stdout);
    if (what) {
        MPI_Reduce(&bench_bytes_sent, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
                   MPI_COMM_WORLD);
        if (rank == 0)
            fprintf(stderr, "%s: payload bytes sent by all ranks: %llu\n", name, total);
    }
    if (rank == 0 && what)
        fprintf(stderr, "%s: %s, entering MPI_Finalize\n", name, what);
    fflush(stderr);
    MPI_Finalize();
    return status;
}

#endif /* ICBC_BENCH_COMMON_H */
