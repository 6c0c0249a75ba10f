/*
 * icbc_latency: ping-pong latency between rank 0 and rank 1 (OSU osu_latency style).
 *
 * For each size: warm-up round trips, then `iters` timed round trips of MPI_Send/MPI_Recv;
 * the reported value is the half round trip in microseconds, as measured on rank 0.
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
    .accepted = 0,
    .min_ranks = 2,
    .even_ranks = 0,
};

/* n round trips; rank 0 starts. `st` receives the status of the last receive. */
static void pingpong(int rank, int peer, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                     int n, MPI_Status *st)
{
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, st);
        } else {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, st);
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
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
        .min_size = 1, .max_size = (size_t)8 << 20, .iters = 1000, .warmup = 100,
        .window = 1, .large_size = 8192, .min_iters = 20, .corrupt = 0,
    };
    int rc = bench_parse(argc, argv, &desc, &o, rank);
    if (rc)
        return bench_finish(desc.name, rank, rc < 0 ? 1 : 0, rc < 0 ? "bad options" : NULL);
    if (bench_check_ranks(&desc, nranks, rank))
        return bench_finish(desc.name, rank, 1, "wrong number of ranks");
    bench_banner(&desc, rank, nranks);

    int peer = rank == 0 ? 1 : 0;
    int active = rank < 2;
    unsigned char *sbuf = bench_alloc(o.max_size, "send buffer", rank);
    unsigned char *rbuf = bench_alloc(o.max_size, "receive buffer", rank);
    int failed = 0;

    if (rank == 0) {
        printf("%s\n", desc.csv_header);
        fflush(stdout);
    }

    for (size_t size = bench_first_size(&o); size <= o.max_size; size = bench_next_size(&o, size)) {
        int iters = bench_iters_for(&o, o.iters, size);
        int warmup = bench_warmup_for(&o, size);
        size_t bad = 0;
        double elapsed = 0.0;
        MPI_Status st;

        if (active) {
            bench_fill(sbuf, size, rank, peer, 0);
            pingpong(rank, peer, sbuf, rbuf, size, warmup, &st);
            /* Clear what warm-up delivered: the check below sees only timed-loop data. */
            memset(rbuf, 0, size);
        }
        MPI_Barrier(MPI_COMM_WORLD);

        if (active) {
            double t0 = MPI_Wtime();
            pingpong(rank, peer, sbuf, rbuf, size, iters, &st);
            elapsed = MPI_Wtime() - t0;

            /* Untimed: check what the last receive delivered. */
            bad += bench_check_count(&st, size, desc.name, rank);
            if (o.corrupt && rank == 1 && size > 0)
                rbuf[size / 2] ^= 0x5a;
            bad += bench_verify(rbuf, size, peer, rank, 0, desc.name);
        }
        if (!bench_agree_ok(bad, MPI_COMM_WORLD)) {
            failed = 1;
            break;
        }
        if (rank == 0) {
            printf("%zu,%.3f\n", size, elapsed * 1e6 / (2.0 * iters));
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    return bench_finish(desc.name, rank, failed, failed ? "FAILED" : "all sizes done");
}
