/*
 * Unit tests of icbc-wanemu's pure parts: unit parsing, frame inspection,
 * the link model (drop-tail buffer, serialisation, delay, ring wrap-around)
 * and the interval trace (rows by model time, late frames in open rows).
 * No network access; run by `make check`.
 */
#include "wanemu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond)                                                            \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                      \
    } while (0)

static void test_units(void)
{
    uint64_t u;
    int64_t t;

    CHECK(wanemu_parse_rate("100mbit", &u) == ICBC_OK && u == 100000000ULL);
    CHECK(wanemu_parse_rate("400Mbit", &u) == ICBC_OK && u == 400000000ULL);
    CHECK(wanemu_parse_rate("1gbit", &u) == ICBC_OK && u == 1000000000ULL);
    CHECK(wanemu_parse_rate("1.5gbit", &u) == ICBC_OK && u == 1500000000ULL);
    CHECK(wanemu_parse_rate("10mbps", &u) == ICBC_OK && u == 80000000ULL);
    CHECK(wanemu_parse_rate("0", &u) == ICBC_OK && u == 0);
    CHECK(wanemu_parse_rate("0bit", &u) == ICBC_OK && u == 0);
    CHECK(wanemu_parse_rate("100", &u) != ICBC_OK);
    CHECK(wanemu_parse_rate("100xbit", &u) != ICBC_OK);
    CHECK(wanemu_parse_rate("-1mbit", &u) != ICBC_OK);
    CHECK(wanemu_parse_rate("mbit", &u) != ICBC_OK);
    CHECK(wanemu_parse_rate("1.mbit", &u) != ICBC_OK);
    CHECK(wanemu_parse_rate("", &u) != ICBC_OK);

    CHECK(wanemu_parse_time("5ms", &t) == ICBC_OK && t == 5000000);
    CHECK(wanemu_parse_time("0ms", &t) == ICBC_OK && t == 0);
    CHECK(wanemu_parse_time("250us", &t) == ICBC_OK && t == 250000);
    CHECK(wanemu_parse_time("1.5s", &t) == ICBC_OK && t == 1500000000);
    CHECK(wanemu_parse_time("0", &t) == ICBC_OK && t == 0);
    CHECK(wanemu_parse_time("5", &t) != ICBC_OK);
    CHECK(wanemu_parse_time("5MS", &t) != ICBC_OK);
    CHECK(wanemu_parse_time("5 ms", &t) != ICBC_OK);

    CHECK(wanemu_parse_size("256KiB", &u) == ICBC_OK && u == 262144);
    CHECK(wanemu_parse_size("1MiB", &u) == ICBC_OK && u == 1048576);
    CHECK(wanemu_parse_size("64k", &u) == ICBC_OK && u == 65536);
    CHECK(wanemu_parse_size("1MB", &u) == ICBC_OK && u == 1000000);
    CHECK(wanemu_parse_size("1500", &u) == ICBC_OK && u == 1500);
    CHECK(wanemu_parse_size("1XiB", &u) != ICBC_OK);
    CHECK(wanemu_parse_size("KiB", &u) != ICBC_OK);
}

/* Ethernet + IPv4 + TCP (20-byte header + 12 bytes options) + payload. */
static size_t make_tcp(uint8_t *f, uint32_t payload)
{
    uint32_t iplen = 20 + 32 + payload;

    memset(f, 0, 14 + iplen);
    f[12] = 0x08;
    f[13] = 0x00;
    f[14] = 0x45;
    f[16] = (uint8_t) (iplen >> 8);
    f[17] = (uint8_t) iplen;
    f[23] = 6;
    f[14 + 20 + 12] = 8 << 4; /* data offset: 8 words */
    return 14 + iplen;
}

static void test_frame(void)
{
    uint8_t f[2048];
    size_t n;

    n = make_tcp(f, 1448);
    CHECK(n == 1514);
    CHECK(wanemu_frame_payload(f, n) == 1448);
    CHECK(wanemu_frame_payload(f, 30) == 0); /* truncated */
    n = make_tcp(f, 0);
    CHECK(wanemu_frame_payload(f, n) == 0);
    f[23] = 17; /* UDP: 8-byte header */
    n = make_tcp(f, 100);
    f[23] = 17;
    CHECK(wanemu_frame_payload(f, n) == 32 + 100 - 8);
    f[12] = 0x08;
    f[13] = 0x06; /* ARP */
    CHECK(wanemu_frame_payload(f, 60) == 0);
}

static struct wanemu_link_conf conf(uint64_t rate, int64_t delay, uint64_t buffer)
{
    struct wanemu_link_conf c = { rate, delay, buffer, 0, 64u << 20 };
    return c;
}

static void test_link_timing(void)
{
    struct wanemu_link l;
    struct wanemu_counters c = { 0 };
    struct wanemu_frame f;
    uint8_t fr[1500] = { 1, 2, 3 };
    int64_t due;

    /* 100 Mbit/s: 1250 bytes take 100 us; delay 5 ms. */
    CHECK(wanemu_link_init(&l, &(struct wanemu_link_conf) { 100000000, 5000000, 10000, 0, 64u << 20 },
                           1000000) == ICBC_OK);
    CHECK(wanemu_link_offer(&l, 1000000, fr, 1250, 0, &c, &due) == ICBC_OK);
    CHECK(due == 1000000 + 100000 + 5000000);
    /* Second frame waits for the first: backlog 1250 bytes. */
    CHECK(wanemu_link_backlog(&l, 1000000) == 1250);
    CHECK(wanemu_link_offer(&l, 1000000, fr, 1250, 0, &c, &due) == ICBC_OK);
    CHECK(due == 1000000 + 200000 + 5000000);
    CHECK(c.qmax == 2500);
    /* Half-way through the first frame, 1875 bytes are waiting. */
    CHECK(wanemu_link_backlog(&l, 1050000) == 1875);
    CHECK(wanemu_link_next_due(&l) == 6100000);
    CHECK(wanemu_link_pop(&l, 6099999, &f) == 0);
    CHECK(wanemu_link_pop(&l, 6100000, &f) == 1 && f.len == 1250 && f.data[2] == 3);
    CHECK(wanemu_link_pop(&l, 6100000, &f) == 0);
    CHECK(wanemu_link_pop(&l, 7000000, &f) == 1 && f.due_ns == 6200000);
    CHECK(wanemu_link_next_due(&l) == INT64_MAX);
    /* Idle link: a new frame starts at once. */
    CHECK(wanemu_link_offer(&l, 9000000, fr, 125, 0, &c, &due) == ICBC_OK);
    CHECK(due == 9000000 + 10000 + 5000000);
    wanemu_link_fini(&l);
}

static void test_link_droptail(void)
{
    struct wanemu_link l;
    struct wanemu_counters c = { 0 };
    struct wanemu_link_conf cf = conf(8000000, 0, 10000); /* 1 byte per us */
    uint8_t fr[1000] = { 0 };
    int64_t due;
    int i, ok = 0;

    CHECK(wanemu_link_init(&l, &cf, 0) == ICBC_OK);
    /* A burst of 20 x 1000 bytes at t=0 into a 10000-byte buffer. */
    for (i = 0; i < 20; i++)
        if (wanemu_link_offer(&l, 0, fr, 1000, 0, &c, &due) == ICBC_OK) ok++;
    CHECK(ok == 10);
    CHECK(c.drops == 10);
    CHECK(c.qmax == 10000);
    /* The last accepted frame leaves after buffer / rate = 10 ms. */
    CHECK(due == 10000000);
    /* After 1 ms, room for exactly one more frame. */
    CHECK(wanemu_link_offer(&l, 1000000, fr, 1000, 0, &c, &due) == ICBC_OK);
    CHECK(wanemu_link_offer(&l, 1000000, fr, 1000, 0, &c, &due) == ICBC_ERR_BUSY);
    wanemu_link_fini(&l);
}

/* Many frames of varying size through a ring that wraps many times: every
 * frame comes out intact and in order. */
static void test_link_ring(void)
{
    struct wanemu_link l;
    struct wanemu_counters c = { 0 };
    struct wanemu_link_conf cf = conf(100000000, 2000000, 64 * 1024);
    struct wanemu_frame f;
    uint8_t fr[WANEMU_MAX_FRAME];
    uint32_t next_in = 0, next_out = 0, bad = 0;
    int64_t now = 0, due;
    int step;

    CHECK(wanemu_link_init(&l, &cf, 0) == ICBC_OK);
    for (step = 0; step < 200000; step++) {
        uint32_t len = 60 + (next_in * 7919u) % 1455u;
        memset(fr, 0, 8);
        memcpy(fr, &next_in, sizeof(next_in));
        if (wanemu_link_offer(&l, now, fr, len, 0, &c, &due) == ICBC_OK) next_in++;
        now += 60000 + (step % 7) * 20000; /* offered load near the link rate */
        while (wanemu_link_pop(&l, now, &f)) {
            uint32_t seq;
            memcpy(&seq, f.data, sizeof(seq));
            if (seq != next_out || f.len != 60 + (seq * 7919u) % 1455u) bad++;
            next_out++;
        }
    }
    CHECK(bad == 0);
    CHECK(next_out > 150000);
    CHECK(l.ring_drops == 0);
    wanemu_link_fini(&l);
}

static void test_link_unlimited(void)
{
    struct wanemu_link l;
    struct wanemu_counters c = { 0 };
    struct wanemu_link_conf cf = conf(0, 1000000, 0);
    uint8_t fr[1500] = { 0 };
    int64_t due;
    int i, ok = 0;

    cf.max_mem = 1 << 20;
    CHECK(wanemu_link_init(&l, &cf, 0) == ICBC_OK);
    CHECK(wanemu_link_offer(&l, 5, fr, 1500, 0, &c, &due) == ICBC_OK && due == 1000005);
    /* The memory bound is the only limit: about 1 MiB of frames. */
    for (i = 0; i < 2000; i++)
        if (wanemu_link_offer(&l, 5, fr, 1500, 0, &c, &due) == ICBC_OK) ok++;
    CHECK(ok > 600 && ok < 700);
    CHECK(l.ring_drops == (uint64_t) (2000 - ok));
    wanemu_link_fini(&l);
}

/* Sum of column col (1-based) over the rows of a trace CSV; *rows gets the
 * row count. */
static unsigned long long column_sum(const char *path, int col, int *rows, unsigned long long *max)
{
    char line[512];
    unsigned long long sum = 0;
    FILE *f = fopen(path, "r");

    *rows = 0;
    *max = 0;
    if (f == NULL) return 0;
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p = line;
        unsigned long long v;
        int i;

        for (i = 0; i < col && p != NULL; i++) {
            p = strchr(p, ',');
            if (p != NULL) p++;
        }
        if (p == NULL) continue;
        v = strtoull(p, NULL, 10);
        sum += v;
        if (v > *max) *max = v;
        (*rows)++;
    }
    fclose(f);
    return sum;
}

static void test_trace(void)
{
    struct wanemu_port ports[2] = { { .name = "a" }, { .name = "b" } };
    struct wanemu_dir dirs[2];
    struct wanemu_trace t;
    char path[] = "/tmp/wanemu_trace_XXXXXX";
    const int64_t ms = 1000000, start = 5 * ms;
    unsigned long long sum, max;
    int fd = mkstemp(path), rows, i;

    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    memset(dirs, 0, sizeof(dirs));
    dirs[0].src = 0, dirs[0].dst = 1;
    dirs[1].src = 1, dirs[1].dst = 0;
    for (i = 0; i < 2; i++)
        CHECK(wanemu_link_init(&dirs[i].link, &(struct wanemu_link_conf) { 100000000, 5 * ms, 65536, 0, 64u << 20 },
                               start) == ICBC_OK);
    CHECK(wanemu_trace_open(&t, path, ms, start, ports, dirs, 2) == ICBC_OK);
    /* On time: 1000 bytes due in row 3. */
    wanemu_trace_advance(&t, start + 3 * ms);
    wanemu_trace_at(&t, start + 3 * ms + 10, 0)->bytes += 1000;
    /* The emulator was away for 40 ms: frames due in rows 4..43 are counted
     * at once, each in its own row, not all in the current one. */
    wanemu_trace_advance(&t, start + 44 * ms);
    for (i = 4; i < 44; i++) wanemu_trace_at(&t, start + i * ms + 500, 0)->bytes += 12500;
    CHECK(t.late_rows == 0);
    /* A second later the early rows are written; a count for one of them
     * goes to the oldest open row and is counted as late. */
    wanemu_trace_advance(&t, start + 1000 * ms);
    CHECK(t.written >= 700 && t.written <= 760);
    wanemu_trace_at(&t, start + 10 * ms, 1)->bytes += 7;
    CHECK(t.late_rows == 1);
    wanemu_trace_close(&t, start + 1001 * ms);
    /* Column 1: bytes_a_b; column 2: bytes_b_a. */
    sum = column_sum(path, 1, &rows, &max);
    CHECK(rows == 1001);
    CHECK(sum == 1000 + 40 * 12500ULL);
    CHECK(max == 12500);
    sum = column_sum(path, 2, &rows, &max);
    CHECK(sum == 7);
    unlink(path);
    for (i = 0; i < 2; i++) wanemu_link_fini(&dirs[i].link);
}

int main(void)
{
    test_units();
    test_frame();
    test_link_timing();
    test_link_droptail();
    test_link_ring();
    test_link_unlimited();
    test_trace();
    printf("%s: wanemu unit tests: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks,
           failures);
    return failures ? 1 : 0;
}
