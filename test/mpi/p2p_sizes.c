/*
 * Point-to-point across the eager/rendezvous boundary: every size from 0 B to
 * 8 MiB that matters, contiguous and strided datatypes, expected and
 * unexpected arrival, MPI_ANY_SOURCE, synchronous sends, probe/mprobe of
 * rendezvous messages and truncation. Payloads are checked byte by byte.
 * Run with an even number of ranks; rank i talks to rank i^1, or with --half
 * to rank i + n/2 (mod n): across clusters when a host file lists one
 * cluster after the other.
 */
#include "icbc_test.h"

static const size_t sizes[] = { 0,     1,     7,     64,     1024,    16383,       16384,  16385,
                                32768, 65536, 65537, 262144, 1048576, 4194304 + 3, 8388608 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void contiguous(int peer, int lower, int unexpected, int any_source, int sync)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        unsigned char *buf = malloc(n + 1);
        int seed = (int) (k * 131 + unexpected * 7 + any_source * 3 + sync);
        if (lower) {
            fill_pattern(buf, n, seed);
            if (unexpected)
                MPI_Barrier(MPI_COMM_WORLD);
            if (sync)
                MPI_Ssend(buf, (int) n, MPI_BYTE, peer, (int) k, MPI_COMM_WORLD);
            else
                MPI_Send(buf, (int) n, MPI_BYTE, peer, (int) k, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            int count;
            memset(buf, 0, n + 1);
            if (unexpected) {
                /* let the message arrive before the receive is posted */
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                int flag = 0;
                while (!flag && MPI_Wtime() - t < 0.2)
                    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                               MPI_STATUS_IGNORE);
            }
            MPI_Recv(buf, (int) n, MPI_BYTE, any_source ? MPI_ANY_SOURCE : peer, (int) k,
                     MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK((size_t) count == n, "size %zu: count %d", n, count);
            CHECK(st.MPI_SOURCE == peer, "size %zu: source %d", n, st.MPI_SOURCE);
            size_t bad = check_pattern(buf, n, seed);
            CHECK(bad == (size_t) -1, "size %zu (unexp %d any %d sync %d): byte %zu wrong", n,
                  unexpected, any_source, sync, bad);
        }
        free(buf);
    }
}

/* Every other 8-byte element of a buffer, sent as a vector type. */
static void strided(int peer, int lower)
{
    const int counts[] = { 1, 1000, 3000, 100000, 600000 };
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        int n = counts[k];
        MPI_Datatype vec;
        MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        double *buf = calloc((size_t) 2 * n, sizeof(double));
        if (lower) {
            for (int i = 0; i < 2 * n; i++)
                buf[i] = (i % 2) ? -1.0 : i * 0.5 + k;
            MPI_Send(buf, 1, vec, peer, 77, MPI_COMM_WORLD);
            /* and receive a contiguous reply of the packed elements */
            double *flat = calloc(n, sizeof(double));
            MPI_Recv(flat, n, MPI_DOUBLE, peer, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = -1;
            for (int i = 0; i < n && bad < 0; i++)
                if (flat[i] != 2 * i * 0.5 + k + 1)
                    bad = i;
            CHECK(bad < 0, "strided reply count %d: element %d wrong", n, bad);
            free(flat);
        } else {
            for (int i = 0; i < 2 * n; i++)
                buf[i] = 12345.0;
            MPI_Recv(buf, 1, vec, peer, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int bad = -1;
            for (int i = 0; i < 2 * n && bad < 0; i++) {
                double want = (i % 2) ? 12345.0 : i * 0.5 + k;
                if (buf[i] != want)
                    bad = i;
            }
            CHECK(bad < 0, "strided count %d: element %d wrong", n, bad);
            for (int i = 0; i < 2 * n; i += 2)
                buf[i] += 1;
            MPI_Send(buf, 1, vec, peer, 78, MPI_COMM_WORLD);
        }
        free(buf);
        MPI_Type_free(&vec);
    }
}

static void probe_and_truncate(int peer, int lower)
{
    const size_t n = 3 * 1048576 + 5;
    unsigned char *buf = malloc(n);
    if (lower) {
        fill_pattern(buf, n, 99);
        MPI_Send(buf, (int) n, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        MPI_Send(buf, (int) n, MPI_BYTE, peer, 6, MPI_COMM_WORLD);
        MPI_Send(buf, (int) n, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        MPI_Message msg;
        int count;
        MPI_Probe(peer, 5, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK((size_t) count == n, "probe count %d", count);
        memset(buf, 0, n);
        MPI_Recv(buf, count, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(check_pattern(buf, n, 99) == (size_t) -1, "probed message corrupt");

        MPI_Mprobe(peer, 6, MPI_COMM_WORLD, &msg, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK((size_t) count == n, "mprobe count %d", count);
        memset(buf, 0, n);
        MPI_Mrecv(buf, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        CHECK(check_pattern(buf, n, 99) == (size_t) -1, "mprobed message corrupt");

        /* receive buffer too small: MPI_ERR_TRUNCATE, nothing written past it */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        memset(buf, 0xee, n);
        int err = MPI_Recv(buf, 1024, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &st);
        int cls = MPI_SUCCESS;
        MPI_Error_class(err, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "truncation gave error class %d", cls);
        CHECK(buf[1024] == 0xee && buf[n - 1] == 0xee, "truncated receive wrote past the buffer");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2) {
        if (rank == 0)
            fprintf(stderr, "p2p_sizes needs an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int peer = rank ^ 1, lower = !(rank & 1);
    if (argc > 1 && !strcmp(argv[1], "--half")) {
        peer = (rank + size / 2) % size;
        lower = rank < size / 2;
    }
    contiguous(peer, lower, 0, 0, 0);
    contiguous(peer, lower, 1, 0, 0);
    contiguous(peer, lower, 0, 1, 0);
    contiguous(peer, lower, 1, 1, 1);
    strided(peer, lower);
    probe_and_truncate(peer, lower);
    return icbc_test_finish();
}
