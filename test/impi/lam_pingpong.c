/*
 * The LAM/MPI side of test/impi/impi_pingpong.c, compiled with LAM's mpicc
 * and started as one client of an IMPI job (test/pytest/test_impi_lam.py).
 *
 *   lam_pingpong ME PEER SIZES ITERS SYNC
 *
 * World rank ME ping-pongs with world rank PEER (in the other client) with
 * the same protocol and data as impi_pingpong; ME and PEER may be lists of
 * as many ranks ("0,1" "4,5"), each pair at the same time (a rank in either
 * list takes the other of its pair). For each size and
 * iteration the lower rank sends first, pattern(size, it) one way and
 * pattern(size, it + 1000) back, every byte checked; SYNC 1: the first
 * send of each iteration is MPI_Ssend. Every other rank only takes part in
 * MPI_Init and MPI_Finalize. Prints "ok" and exits 0, or names the size
 * and iteration with wrong data and aborts.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 17

static void pattern(unsigned char *b, size_t n, int seed)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = (unsigned char) (i * 131 + (size_t) seed * 7 + (i >> 8));
}

int main(int argc, char **argv)
{
    int rank, size, me = -1, peer = -1, iters, sync, it;
    char *sizes, *tok, *ms, *ps;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 6) {
        fprintf(stderr, "usage: lam_pingpong ME PEER SIZES ITERS SYNC\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* this rank's pair */
    for (ms = argv[1], ps = argv[2]; *ms && *ps;) {
        char *m0 = ms, *p0 = ps;
        int a = (int) strtol(m0, &ms, 10), b = (int) strtol(p0, &ps, 10);
        if (ms == m0 || ps == p0 || a >= size || b >= size) {
            fprintf(stderr, "lam_pingpong: ranks %d and %d in a world of %d\n", a, b, size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (rank == a || rank == b) {
            me = rank;
            peer = rank == a ? b : a;
        }
        if (*ms == ',')
            ms++;
        if (*ps == ',')
            ps++;
    }
    sizes = argv[3];
    iters = atoi(argv[4]);
    sync = atoi(argv[5]);
    if (me >= 0) {
        for (tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
            int n = atoi(tok);
            unsigned char *out = malloc(n + 1), *in = malloc(n + 1), *want = malloc(n + 1);
            for (it = 0; it < iters; it++) {
                MPI_Status st;
                if (rank < peer) {
                    pattern(out, n, it);
                    if (sync)
                        MPI_Ssend(out, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                    else
                        MPI_Send(out, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                    MPI_Recv(in, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &st);
                    pattern(want, n, it + 1000);
                } else {
                    MPI_Recv(in, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &st);
                    pattern(want, n, it);
                }
                if (memcmp(in, want, n) != 0) {
                    fprintf(stderr,
                            "lam_pingpong: %d bytes from rank %d, iteration %d: wrong data\n", n,
                            peer, it);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                if (rank > peer) {
                    pattern(out, n, it + 1000);
                    if (sync)
                        MPI_Ssend(out, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                    else
                        MPI_Send(out, n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                }
            }
            printf("rank %d: %d bytes x %d with rank %d: ok\n", rank, n, iters, peer);
            fflush(stdout);
            free(out);
            free(in);
            free(want);
        }
    }
    MPI_Finalize();
    return 0;
}
