/*
 * icbc_bw: uni-directional bandwidth from rank 0 to rank 1 (OSU osu_bw style).
 *
 * One iteration: rank 0 posts `window` MPI_Isend, rank 1 posts `window` MPI_Irecv, both
 * MPI_Waitall, then rank 1 returns a 4-byte ack. Each iteration is timed on rank 0;
 * bandwidth = size * window / t in MB/s (10^6 bytes per second, as OSU reports), where t is
 * the mean iteration time (OSU's total bytes / total time) or, with --stat, the median or
 * fastest one.
 *
 * Unlike osu_bw, every message of a window has its own buffer and its own pattern, on both
 * sides, and the receive buffers are cleared after warm-up: the untimed check after the
 * timed loop then proves that each of the `window` messages of the timed loop arrived
 * whole, in its own slot, in order. The cost is window * max_size bytes per side.
 */
#include "bench_common.h"

#define TAG_DATA 21
#define TAG_ACK 22

static const struct bench_desc desc = {
    .name = "icbc_bw",
    .summary = "Uni-directional bandwidth rank A -> rank B (--pair A,B; default 0,1): a window\n"
               "of MPI_Isend (the receiver posts as many MPI_Irecv), MPI_Waitall, a 4-byte ack;\n"
               "reports MB/s (10^6 B/s).",
    .csv_header = "size,bandwidth_mbps",
    .accepted = BENCH_OPT_WINDOW | BENCH_OPT_STAT | BENCH_OPT_PAIR,
    .min_ranks = 2,
    .even_ranks = 0,
};

/*
 * n window iterations between the sender and PEER. If `wt` is not NULL, the sender stores
 * the duration of each iteration (window sent, ack received) in it. Returns the number of
 * receives with a wrong byte count.
 */
static int run_windows(int sender, int peer, unsigned char *buf, size_t size, int window, int n,
                       MPI_Request *req, MPI_Status *sts, double *wt)
{
    int bad = 0;
    char ack[4] = { 0 };
    double prev = MPI_Wtime();
    for (int it = 0; it < n; it++) {
        if (sender) {
            for (int w = 0; w < window; w++)
                MPI_Isend(buf + (size_t) w * size, (int) size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(window, req, sts);
            MPI_Recv(ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (wt) {
                double now = MPI_Wtime();
                wt[it] = now - prev;
                prev = now;
            }
        } else {
            for (int w = 0; w < window; w++)
                MPI_Irecv(buf + (size_t) w * size, (int) size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(window, req, sts);
            MPI_Send(ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    if (!sender && n > 0)
        for (int w = 0; w < window; w++)
            bad += bench_check_count(&sts[w], size, desc.name, peer);
    return bad;
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
        .iters = 100,
        .warmup = 10,
        .window = 64,
        .large_size = 8192,
        .min_iters = 5,
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
    if ((double) o.window * (double) o.max_size > (double) BENCH_MAX_SIZE_LIMIT) {
        if (rank == 0)
            fprintf(stderr, "%s: --window x --max exceeds %zu bytes per rank\n", desc.name,
                    BENCH_MAX_SIZE_LIMIT);
        return bench_finish(desc.name, rank, 1, "bad options");
    }

    if (o.pair[0] >= nranks || o.pair[1] >= nranks)
        return bench_finish(desc.name, rank, 1, "--pair names a rank beyond the world");
    int sender = rank == o.pair[0], receiver = rank == o.pair[1], active = sender || receiver;
    int peer = sender ? o.pair[1] : o.pair[0];
    size_t span = active ? (size_t) o.window * o.max_size : 0;
    unsigned char *buf = bench_alloc(span, sender ? "send buffers" : "receive buffers", rank);
    MPI_Request *req = calloc((size_t) o.window, sizeof(*req));
    MPI_Status *sts = calloc((size_t) o.window, sizeof(*sts));
    double *wt = calloc((size_t) o.iters, sizeof(*wt));
    if (!req || !sts || !wt) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int failed = 0;

    if (sender) {
        printf("%s\n", desc.csv_header);
        fflush(stdout);
    }

    for (size_t size = bench_first_size(&o); size <= o.max_size; size = bench_next_size(&o, size)) {
        int iters = bench_iters_for(&o, o.iters, size);
        int warmup = bench_warmup_for(&o, size);
        size_t bad = 0;
        double wt_stat = 0.0;

        if (active) {
            if (sender)
                for (int w = 0; w < o.window; w++)
                    bench_fill(buf + (size_t) w * size, size, 0, 1, w);
            run_windows(sender, peer, buf, size, o.window, warmup, req, sts, NULL);
            if (receiver)
                memset(buf, 0, (size_t) o.window * size);
        }
        MPI_Barrier(MPI_COMM_WORLD);

        if (active) {
            bad += run_windows(sender, peer, buf, size, o.window, iters, req, sts, wt);
            if (sender)
                wt_stat = bench_stat_time(wt, iters, o.stat);

            if (receiver) {
                if (o.corrupt && size > 0)
                    buf[(size_t) (o.window - 1) * size + size / 2] ^= 0x5a;
                for (int w = 0; w < o.window; w++)
                    bad += bench_verify(buf + (size_t) w * size, size, 0, 1, w, desc.name);
            }
        }
        if (sender)
            bench_count_sent(size, ((long long) warmup + iters) * o.window);
        else if (receiver)
            bench_count_sent(4, (long long) warmup + iters);
        if (!bench_agree_ok(bad, MPI_COMM_WORLD)) {
            failed = 1;
            break;
        }
        if (sender) {
            double bytes = (double) size * (double) o.window;
            printf("%zu,%.3f\n", size, bytes / wt_stat / 1e6);
            fflush(stdout);
        }
    }

    free(buf);
    free(req);
    free(sts);
    free(wt);
    return bench_finish(desc.name, rank, failed, failed ? "FAILED" : "all sizes done");
}
