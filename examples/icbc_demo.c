/*
 * ICBC demo: where every rank runs, then a ring and a ping-pong between rank 0
 * and the first rank on another node, with timings and verified payloads.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void node_name(char *buf, int len)
{
    const char *n = getenv("ICBC_NODE");
    if (n && *n)
        snprintf(buf, len, "%s", n);
    else
        gethostname(buf, len);
    buf[len - 1] = '\0';
}

int main(int argc, char **argv)
{
    int rank, size;
    char node[64], *all;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    node_name(node, sizeof(node));
    all = malloc((size_t) 64 * size);
    MPI_Allgather(node, 64, MPI_CHAR, all, 64, MPI_CHAR, MPI_COMM_WORLD);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl)
            *nl = '\0';
        printf("%s\n", lib);
        printf("%d ranks:", size);
        for (int r = 0; r < size; r++)
            printf(" %d@%s", r, all + 64 * r);
        printf("\n");
    }

    /* ring: every rank adds its rank to a token */
    long token = 0;
    if (size > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_LONG, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_LONG, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("ring: token %ld (expected %ld) %s\n", token, (long) size * (size - 1) / 2,
               token == (long) size * (size - 1) / 2 ? "ok" : "WRONG");

    /* ping-pong with the first rank on another node */
    int peer = -1;
    for (int r = 1; r < size && peer < 0; r++)
        if (strcmp(all, all + 64 * r) != 0)
            peer = r;
    MPI_Bcast(&peer, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int bad = 0;
    if (peer > 0 && (rank == 0 || rank == peer)) {
        const int sizes[] = { 8, 65536, 4 << 20 };
        unsigned char *buf = malloc(4 << 20);
        if (rank == 0)
            printf("ping-pong rank 0 (%s) <-> rank %d (%s), inter-node through the icbc netmod:\n",
                   all, peer, all + 64 * peer);
        for (int k = 0; k < 3; k++) {
            int n = sizes[k], iters = n > 100000 ? 20 : 200;
            int other = rank == 0 ? peer : 0;
            for (int i = 0; i < n; i++)
                buf[i] = (unsigned char) (i * 7 + k);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int it = 0; it < iters; it++) {
                if (rank == 0) {
                    MPI_Send(buf, n, MPI_BYTE, other, k, MPI_COMM_WORLD);
                    MPI_Recv(buf, n, MPI_BYTE, other, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, n, MPI_BYTE, other, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, n, MPI_BYTE, other, k, MPI_COMM_WORLD);
                }
            }
            double t = (MPI_Wtime() - t0) / iters / 2;
            for (int i = 0; i < n; i++)
                if (buf[i] != (unsigned char) (i * 7 + k)) {
                    bad++;
                    break;
                }
            if (rank == 0)
                printf("  %8d B  %9.1f us one-way  %8.1f MB/s  payload %s\n", n, t * 1e6,
                       n / t / 1e6, bad ? "CORRUPT" : "verified");
        }
        free(buf);
    } else {
        /* the Barrier calls above are collective: match them */
        if (peer > 0)
            for (int k = 0; k < 3; k++)
                MPI_Barrier(MPI_COMM_WORLD);
    }
    int total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("demo %s\n",
               total == 0 && token == (long) size * (size - 1) / 2 ? "succeeded" : "FAILED");
    free(all);
    MPI_Finalize();
    return total != 0;
}
