/*
 * icbc_alltoall: MPI_Alltoall time versus per-peer message size (OSU osu_alltoall style).
 *
 * `size` is the number of bytes each rank sends to each other rank (as in OSU). Each rank
 * times `iters` back-to-back MPI_Alltoall calls after warm-up; the reported value is the
 * largest per-rank mean time per call in microseconds (the time until the slowest rank is
 * done; OSU prints the mean over ranks instead).
 *
 * Every block sent from rank i to rank j carries its own pattern; the receive buffer is
 * cleared after warm-up and every received block is checked after the timed loop.
 * Memory per rank: 2 * N * max_size bytes.
 */
#include "bench_common.h"

static const struct bench_desc desc = {
    .name = "icbc_alltoall",
    .summary = "MPI_Alltoall on MPI_COMM_WORLD, `size` bytes to every rank; reports the time\n"
               "per call in microseconds (largest per-rank mean).",
    .csv_header = "size,alltoall_us",
    .accepted = 0,
    .min_ranks = 2,
    .even_ranks = 0,
};

int main(int argc, char **argv)
{
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    struct bench_opts o = {
        .min_size = 1,
        .max_size = (size_t) 1 << 20,
        .iters = 100,
        .warmup = 10,
        .window = 1,
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
    if ((double) nranks * (double) o.max_size > (double) BENCH_MAX_SIZE_LIMIT) {
        if (rank == 0)
            fprintf(stderr, "%s: ranks x --max exceeds %zu bytes per buffer\n", desc.name,
                    BENCH_MAX_SIZE_LIMIT);
        return bench_finish(desc.name, rank, 1, "bad options");
    }

    size_t span = (size_t) nranks * o.max_size;
    unsigned char *sbuf = bench_alloc(span, "send buffer", rank);
    unsigned char *rbuf = bench_alloc(span, "receive buffer", rank);
    int failed = 0;

    if (rank == 0) {
        printf("%s\n", desc.csv_header);
        fflush(stdout);
    }

    for (size_t size = bench_first_size(&o); size <= o.max_size; size = bench_next_size(&o, size)) {
        int iters = bench_iters_for(&o, o.iters, size);
        int warmup = bench_warmup_for(&o, size);
        size_t bad = 0;

        for (int j = 0; j < nranks; j++)
            bench_fill(sbuf + (size_t) j * size, size, rank, j, 0);
        for (int i = 0; i < warmup; i++)
            MPI_Alltoall(sbuf, (int) size, MPI_BYTE, rbuf, (int) size, MPI_BYTE, MPI_COMM_WORLD);
        memset(rbuf, 0, (size_t) nranks * size);

        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Alltoall(sbuf, (int) size, MPI_BYTE, rbuf, (int) size, MPI_BYTE, MPI_COMM_WORLD);
        double mine = (MPI_Wtime() - t0) / iters, worst = 0.0;
        MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

        if (o.corrupt && rank == nranks - 1 && size > 0)
            rbuf[size / 2] ^= 0x5a;
        for (int i = 0; i < nranks; i++)
            bad += bench_verify(rbuf + (size_t) i * size, size, i, rank, 0, desc.name);
        bench_count_sent(size, ((long long) warmup + iters) * (nranks - 1));
        if (!bench_agree_ok(bad, MPI_COMM_WORLD)) {
            failed = 1;
            break;
        }
        if (rank == 0) {
            printf("%zu,%.3f\n", size, worst * 1e6);
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    return bench_finish(desc.name, rank, failed, failed ? "FAILED" : "all sizes done");
}
