/*
 * icbc_mbw_mr: aggregate multi-pair bandwidth and message rate (OSU osu_mbw_mr style).
 *
 * N ranks form N/2 pairs: rank i (i < N/2) sends to rank i + N/2. With block placement
 * (ranks 0..N/2-1 on one cluster, the rest on the other) every pair crosses between the two
 * halves, which is what the inter-cluster runs need. One iteration per pair: a window of
 * MPI_Isend / MPI_Irecv, MPI_Waitall, a 4-byte ack. All ranks start after a barrier and the
 * clock stops after a closing barrier, so the time covers the slowest pair.
 *
 * Output: size, aggregate MB/s over all pairs (10^6 B/s), aggregate messages per second.
 * Each message of a window has its own buffer and pattern; the receive buffers are cleared
 * after warm-up and checked after the timed loop.
 */
#include "bench_common.h"

#define TAG_DATA 31
#define TAG_ACK 32

static const struct bench_desc desc = {
    .name = "icbc_mbw_mr",
    .summary = "Multi-pair bandwidth and message rate: rank i sends to rank i+N/2, a window of\n"
               "MPI_Isend per iteration, all pairs at once; reports aggregate MB/s (10^6 B/s)\n"
               "and aggregate messages/s.",
    .csv_header = "size,bandwidth_mbps,messages_per_s",
    .accepted = BENCH_OPT_WINDOW,
    .min_ranks = 2,
    .even_ranks = 1,
};

/* n window iterations between this rank and `peer`. Returns receives with a wrong byte count. */
static int run_windows(int rank, int sender, int peer, unsigned char *buf, size_t size, int window,
                       int n, MPI_Request *req, MPI_Status *sts)
{
    int bad = 0;
    char ack[4] = { 0 };
    for (int it = 0; it < n; it++) {
        if (sender) {
            for (int w = 0; w < window; w++)
                MPI_Isend(buf + (size_t) w * size, (int) size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(window, req, sts);
            MPI_Recv(ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
            bad += bench_check_count(&sts[w], size, desc.name, rank);
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

    int pairs = nranks / 2;
    int sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    int src = sender ? rank : peer;
    int dst = sender ? peer : rank;
    unsigned char *buf = bench_alloc((size_t) o.window * o.max_size,
                                     sender ? "send buffers" : "receive buffers", rank);
    MPI_Request *req = calloc((size_t) o.window, sizeof(*req));
    MPI_Status *sts = calloc((size_t) o.window, sizeof(*sts));
    if (!req || !sts) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int failed = 0;

    if (rank == 0) {
        printf("%s\n", desc.csv_header);
        fflush(stdout);
    }

    for (size_t size = bench_first_size(&o); size <= o.max_size; size = bench_next_size(&o, size)) {
        int iters = bench_iters_for(&o, o.iters, size);
        int warmup = bench_warmup_for(&o, size);
        size_t bad = 0;

        if (sender)
            for (int w = 0; w < o.window; w++)
                bench_fill(buf + (size_t) w * size, size, src, dst, w);
        run_windows(rank, sender, peer, buf, size, o.window, warmup, req, sts);
        if (!sender)
            memset(buf, 0, (size_t) o.window * size);

        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        bad += run_windows(rank, sender, peer, buf, size, o.window, iters, req, sts);
        MPI_Barrier(MPI_COMM_WORLD);
        double elapsed = MPI_Wtime() - t0;

        if (!sender) {
            if (o.corrupt && rank == nranks - 1 && size > 0)
                buf[size / 2] ^= 0x5a;
            for (int w = 0; w < o.window; w++)
                bad += bench_verify(buf + (size_t) w * size, size, src, dst, w, desc.name);
        }
        if (sender)
            bench_count_sent(size, ((long long) warmup + iters) * o.window);
        else
            bench_count_sent(4, (long long) warmup + iters);
        if (!bench_agree_ok(bad, MPI_COMM_WORLD)) {
            failed = 1;
            break;
        }
        if (rank == 0) {
            double msgs = (double) pairs * (double) o.window * (double) iters;
            printf("%zu,%.3f,%.1f\n", size, msgs * (double) size / elapsed / 1e6, msgs / elapsed);
            fflush(stdout);
        }
    }

    free(buf);
    free(req);
    free(sts);
    return bench_finish(desc.name, rank, failed, failed ? "FAILED" : "all sizes done");
}
