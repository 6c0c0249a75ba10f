/* Traffic for a given time: every rank exchanges checked messages of 1 B to
 * 1 MiB with the rank half the world away (across clusters when ranks
 * alternate or fill one cluster after the other), round after round, until
 * --seconds have passed on rank 0, or until the file given with --until
 * exists. A job that must stay alive while something else happens (a port
 * scan, hostile connections) runs it.
 *
 *   soak [--seconds S] [--until FILE]   (default 20 s)      prints "No Errors" */
#include "icbc_test.h"

#include <unistd.h>

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 1, 1000, 40000, 300000, 1 << 20 };
    double seconds = 20;
    const char *until = NULL;
    int rank, size, rounds = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--until"))
            until = argv[i + 1];

    size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    unsigned char *sbuf = malloc(max), *rbuf = malloc(max);
    int peer = (rank + size / 2) % size;
    double t0 = MPI_Wtime();
    int go = 1;

    while (go) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && size > 1; k++) {
            size_t n = sizes[k];
            int seed = rounds * 31 + (int) k * 7 + rank;
            int rseed = rounds * 31 + (int) k * 7 + peer;
            fill_pattern(sbuf, n, seed);
            memset(rbuf, 0, n);
            MPI_Sendrecv(sbuf, (int) n, MPI_BYTE, peer, (int) k, rbuf, (int) n, MPI_BYTE, peer,
                         (int) k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            size_t bad = check_pattern(rbuf, n, rseed);
            CHECK(bad == (size_t) -1, "round %d: %zu bytes from rank %d wrong at byte %zu", rounds,
                  n, peer, bad);
        }
        rounds++;
        go = until ? access(until, F_OK) != 0 : MPI_Wtime() - t0 < seconds;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("soak: %d rounds in %.1f s\n", rounds, MPI_Wtime() - t0);
    free(sbuf);
    free(rbuf);
    return icbc_test_finish();
}
