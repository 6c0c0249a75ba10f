/*
 * icbc_latency: ping-pong latency between rank 0 and rank 1 (OSU osu_latency style), or
 * the two ranks of --pair A,B (A in rank 0's part: it times and prints).
 *
 * For each size: warm-up round trips, then `iters` timed round trips of MPI_Send/MPI_Recv,
 * each timed on rank 0; the reported value is half the mean round trip (OSU's definition),
 * or of the median or fastest one with --stat, in microseconds.
 * Other ranks, if any, only take part in the barriers and the final check.
 *
 * After the timed loop each side checks the payload it received last (byte count and
 * every byte against the sender's pattern), so a transport that drops or garbles data
 * fails instead of reporting a fast wrong answer.
 */
#include "bench_common.h"

#define TAG_PING 11
#define TAG_PONG 12

static const struct bench_desc desc = {
    .name = "icbc_latency",
    .summary = "Ping-pong between rank 0 and rank 1: MPI_Send/MPI_Recv round trips of one\n"
               "message size at a time; reports half the round-trip time in microseconds.",
    .csv_header = "size,latency_us",
    .accepted = BENCH_OPT_STAT | BENCH_OPT_PAIR,
    .min_ranks = 2,
    .even_ranks = 0,
};

/*
 * n round trips; FIRST (the timing rank) starts. `st` receives the status of the last
 * receive. If `rtt` is not NULL, the first stores the duration of each round trip in it.
 */
static void pingpong(int first, int peer, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                     int n, MPI_Status *st, double *rtt)
{
    double prev = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (first) {
            MPI_Send(sbuf, (int) size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int) size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, st);
            if (rtt) {
                double now = MPI_Wtime();
                rtt[i] = now - prev;
                prev = now;
            }
        } else {
            MPI_Recv(rbuf, (int) size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, st);
            MPI_Send(sbuf, (int) size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv)
{
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    struct bench_opts o = {
        .min_size = 1,
        .max_size = (size_t) 8 << 20,
        .iters = 1000,
        .warmup = 100,
        .window = 1,
        .large_size = 8192,
        .min_iters = 20,
        .corrupt = 0,
        .stat = BENCH_STAT_MEAN,
        .pair = { 0, 1 },
    };
    int rc = bench_parse(argc, argv, &desc, &o, rank);
    if (rc)
        return bench_finish(desc.name, rank, rc < 0 ? 1 : 0, rc < 0 ? "bad options" : NULL);
    if (bench_check_ranks(&desc, nranks, rank))
        return bench_finish(desc.name, rank, 1, "wrong number of ranks");
    bench_banner(&desc, &o, rank, nranks);

    if (o.pair[0] >= nranks || o.pair[1] >= nranks)
        return bench_finish(desc.name, rank, 1, "--pair names a rank beyond the world");
    int timer = rank == o.pair[0];
    int active = timer || rank == o.pair[1];
    int peer = timer ? o.pair[1] : o.pair[0];
    unsigned char *sbuf = bench_alloc(o.max_size, "send buffer", rank);
    unsigned char *rbuf = bench_alloc(o.max_size, "receive buffer", rank);
    double *rtt = bench_alloc((size_t) o.iters * sizeof(double), "round-trip times", rank);
    int failed = 0;

    if (timer) {
        printf("%s\n", desc.csv_header);
        fflush(stdout);
    }

    for (size_t size = bench_first_size(&o); size <= o.max_size; size = bench_next_size(&o, size)) {
        int iters = bench_iters_for(&o, o.iters, size);
        int warmup = bench_warmup_for(&o, size);
        size_t bad = 0;
        double rtt_stat = 0.0;
        MPI_Status st;

        if (active) {
            bench_fill(sbuf, size, rank, peer, 0);
            pingpong(timer, peer, sbuf, rbuf, size, warmup, &st, NULL);
            /* Clear what warm-up delivered: the check below sees only timed-loop data. */
            memset(rbuf, 0, size);
        }
        MPI_Barrier(MPI_COMM_WORLD);

        if (active) {
            pingpong(timer, peer, sbuf, rbuf, size, iters, &st, rtt);
            if (timer)
                rtt_stat = bench_stat_time(rtt, iters, o.stat);

            /* Untimed: check what the last receive delivered. */
            bad += bench_check_count(&st, size, desc.name, rank);
            if (o.corrupt && rank == o.pair[1] && size > 0)
                rbuf[size / 2] ^= 0x5a;
            bad += bench_verify(rbuf, size, peer, rank, 0, desc.name);
        }
        if (active)
            bench_count_sent(size, (long long) warmup + iters);
        if (!bench_agree_ok(bad, MPI_COMM_WORLD)) {
            failed = 1;
            break;
        }
        if (timer) {
            printf("%zu,%.3f\n", size, rtt_stat * 1e6 / 2.0);
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    free(rtt);
    return bench_finish(desc.name, rank, failed, failed ? "FAILED" : "all sizes done");
}
