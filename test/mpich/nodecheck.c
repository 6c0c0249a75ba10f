/*
 * nodecheck: checks that an MPI job really spans several emulated nodes.
 *
 * Every rank reports its network namespace (/proc/self/ns/net); rank 0
 * counts the distinct ones.  Rank 0 then sends a buffer to the first rank
 * found in another namespace, which returns it; the data is verified.
 * The run-testsuite.sh runner compares the fab0 byte counters of the nodes
 * before and after this program to tell whether inter-node traffic crossed
 * the namespace network or took a shared-memory shortcut.
 *
 * Usage: mpiexec -n N nodecheck [BYTES]   (default 4 MiB)
 * Prints "nodecheck: R ranks on M nodes, exchanged B bytes with rank P: ok"
 * and exits 0 when M >= 2 and the data came back intact, 1 otherwise.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NS_LEN 64

int main(int argc, char *argv[])
{
    int rank, size, i, peer = -1, nodes = 0, ok = 1;
    char ns[NS_LEN];
    char *all = NULL;
    long bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
    unsigned char *buf;
    ssize_t n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    memset(ns, 0, sizeof(ns));
    n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    if (n < 0)
        snprintf(ns, sizeof(ns), "unknown");

    if (rank == 0)
        all = calloc((size_t) size, NS_LEN);
    MPI_Gather(ns, NS_LEN, MPI_CHAR, all, NS_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        for (i = 0; i < size; i++) {
            int j, seen = 0;
            for (j = 0; j < i; j++)
                if (strcmp(all + (size_t) i * NS_LEN, all + (size_t) j * NS_LEN) == 0)
                    seen = 1;
            if (!seen)
                nodes++;
            if (peer < 0 && strcmp(all + (size_t) i * NS_LEN, ns) != 0)
                peer = i;
        }
    }
    MPI_Bcast(&peer, 1, MPI_INT, 0, MPI_COMM_WORLD);

    if (bytes < 1)
        bytes = 1;
    buf = malloc((size_t) bytes);
    if (buf == NULL) {
        fprintf(stderr, "nodecheck: cannot allocate %ld bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (peer > 0) {
        if (rank == 0) {
            for (i = 0; i < bytes; i++)
                buf[i] = (unsigned char) (i * 7 + 3);
            MPI_Send(buf, (int) bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            memset(buf, 0, (size_t) bytes);
            MPI_Recv(buf, (int) bytes, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (i = 0; i < bytes; i++)
                if (buf[i] != (unsigned char) (i * 7 + 3)) {
                    ok = 0;
                    break;
                }
        } else if (rank == peer) {
            MPI_Recv(buf, (int) bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int) bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        if (nodes < 2)
            ok = 0;
        printf("nodecheck: %d ranks on %d nodes, exchanged %ld bytes with rank %d: %s\n",
               size, nodes, peer > 0 ? bytes : 0L, peer, ok ? "ok" : "FAILED");
        fflush(stdout);
    }
    free(buf);
    free(all);
    MPI_Finalize();
    return rank == 0 && !ok ? 1 : 0;
}
