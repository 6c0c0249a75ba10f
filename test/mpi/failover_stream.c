/*
 * A stream of messages in both directions between rank r and rank r ^ 1
 * (in different clusters with the testbed's alternating hosts), every byte
 * checked, for router failover tests: routers are killed and restarted
 * while it runs.
 *
 *   failover_stream [--size BYTES] [--count N] [--window W] [--seed S]
 *                   [--vary] [--seconds T]
 *
 * --vary: message i has 16 .. BYTES bytes, drawn from (seed, i), the same
 * on both sides. --seconds T: as many batches as fit in T seconds (rank 0
 * decides after each batch and broadcasts it) instead of --count.
 *
 * Message i of a sender carries (sender, i) in its first 16 bytes and a
 * pattern of (seed, sender, i) after them, so the receiver finds a wrong
 * byte, a message out of order, a duplicate (the next one would not be the
 * expected i) and an extra message at the end (probed for a second). W
 * messages travel at once each way. MPI errors are returned, reported with
 * the seconds since the start, and end the run with exit status 2.
 *
 * Each rank prints its figures: messages, seconds, MB/s received, the
 * longest wait for a batch of W (the time a failover cost).
 */
#include "icbc_test.h"

#include <stdint.h>

static double t0;

static void die_mpi(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, rank;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "[rank %d] MPI error after %.1f s in %s: %s\n", rank, MPI_Wtime() - t0, what,
            msg);
    fflush(stderr);
    exit(2);
}

static void fill(unsigned char *buf, size_t size, int sender, uint64_t i, int seed)
{
    uint64_t head[2] = { (uint64_t) sender, i };
    size_t n = size < sizeof(head) ? size : sizeof(head);

    memcpy(buf, head, n);
    if (size > sizeof(head))
        fill_pattern(buf + sizeof(head), size - sizeof(head), seed ^ (int) (i * 7919) ^ sender);
}

/* 0 when BUF is message I of SENDER; a description of the fault otherwise. */
static const char *check(const unsigned char *buf, size_t size, int sender, uint64_t i, int seed)
{
    uint64_t head[2] = { 0, 0 };
    size_t n = size < sizeof(head) ? size : sizeof(head);

    memcpy(head, buf, n);
    if (n == sizeof(head) && (head[0] != (uint64_t) sender || head[1] != i))
        return head[1] < i ? "an earlier message again (duplicate)" : "a message out of order";
    if (size > sizeof(head) && check_pattern(buf + sizeof(head), size - sizeof(head),
                                             seed ^ (int) (i * 7919) ^ sender) != (size_t) -1)
        return "a wrong byte";
    return NULL;
}

/* Bytes of message I: SIZE, or with VARY 16 .. SIZE from (SEED, I). */
static size_t msg_size(size_t size, int vary, int seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t) seed * 0xbf58476d1ce4e5b9ull;

    if (!vary)
        return size;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    /* sizes spread over the scales: below and above the stripe threshold */
    size_t top = (size_t) 16 << (x % 64 % 28);
    if (top > size)
        top = size;
    return 16 + (size_t) ((x >> 8) % (top - 15));
}

int main(int argc, char **argv)
{
    size_t size = 64u << 20;
    long count = 16, window = 2;
    int seed = 1, rank, nprocs, rc, vary = 0;
    double seconds = 0;

    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : "";
        if (!strcmp(argv[a], "--vary")) {
            vary = 1;
            continue;
        }
        if (!strcmp(argv[a], "--size"))
            size = strtoull(v, NULL, 0);
        else if (!strcmp(argv[a], "--count"))
            count = strtol(v, NULL, 0);
        else if (!strcmp(argv[a], "--window"))
            window = strtol(v, NULL, 0);
        else if (!strcmp(argv[a], "--seed"))
            seed = atoi(v);
        else if (!strcmp(argv[a], "--seconds"))
            seconds = atof(v);
        else
            continue; /* MPI's own arguments */
        a++;
    }
    if (seconds > 0)
        count = 1L << 40;
    MPI_Init(&argc, &argv);
    t0 = MPI_Wtime();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs % 2 || size < 16 || window < 1 || count < 1) {
        if (rank == 0)
            fprintf(stderr, "failover_stream: an even number of ranks, --size >= 16\n");
        MPI_Finalize();
        return 1;
    }
    int peer = rank ^ 1;
    unsigned char **sbuf = calloc(window, sizeof(*sbuf)), **rbuf = calloc(window, sizeof(*rbuf));
    MPI_Request *req = calloc(2 * window, sizeof(*req));
    for (long w = 0; w < window; w++) {
        sbuf[w] = malloc(size);
        rbuf[w] = malloc(size);
        if (!sbuf[w] || !rbuf[w]) {
            fprintf(stderr, "[rank %d] out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double longest = 0, start = MPI_Wtime();
    uint64_t next = 0, bytes = 0;
    while ((long) next < count) {
        long n = count - (long) next < window ? count - (long) next : window;
        double b0 = MPI_Wtime();
        for (long w = 0; w < n; w++) {
            size_t len = msg_size(size, vary, seed, next + w);
            fill(sbuf[w], len, rank, next + w, seed);
            if ((rc = MPI_Irecv(rbuf[w], (int) size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w])))
                die_mpi(rc, "MPI_Irecv");
            if ((rc = MPI_Isend(sbuf[w], (int) len, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                                &req[window + w])))
                die_mpi(rc, "MPI_Isend");
        }
        for (long w = 0; w < n; w++) {
            MPI_Status st;
            if ((rc = MPI_Wait(&req[w], &st)))
                die_mpi(rc, "MPI_Wait (receive)");
            if ((rc = MPI_Wait(&req[window + w], MPI_STATUS_IGNORE)))
                die_mpi(rc, "MPI_Wait (send)");
            int got;
            size_t len = msg_size(size, vary, seed, next + w);
            MPI_Get_count(&st, MPI_BYTE, &got);
            CHECK((size_t) got == len, "message %llu: %d bytes, not %zu",
                  (unsigned long long) (next + w), got, len);
            bytes += len;
            const char *bad = check(rbuf[w], len, peer, next + w, seed);
            CHECK(bad == NULL, "message %llu from rank %d: %s", (unsigned long long) (next + w),
                  peer, bad);
        }
        double dt = MPI_Wtime() - b0;
        if (dt > longest)
            longest = dt;
        next += (uint64_t) n;
        if (seconds > 0) {
            int go = MPI_Wtime() - start < seconds;
            if ((rc = MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD)))
                die_mpi(rc, "MPI_Bcast");
            if (!go)
                break;
        }
    }
    count = (long) next;
    double secs = MPI_Wtime() - start;
    /* nothing more may arrive: a late duplicate would show here */
    double until = MPI_Wtime() + 1.0;
    while (MPI_Wtime() < until) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        CHECK(!flag, "a message from rank %d after the last one (duplicate)", peer);
        if (flag)
            break;
    }
    printf("rank %d: %ld messages of %s%zu bytes received intact and in order from rank %d in "
           "%.2f s (%.1f MB/s); longest batch of %ld: %.2f s\n",
           rank, count, vary ? "up to " : "", size, peer, secs, (double) bytes / secs / 1e6, window,
           longest);
    fflush(stdout);
    if ((rc = MPI_Barrier(MPI_COMM_WORLD)))
        die_mpi(rc, "MPI_Barrier");
    for (long w = 0; w < window; w++) {
        free(sbuf[w]);
        free(rbuf[w]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    return icbc_test_finish();
}
