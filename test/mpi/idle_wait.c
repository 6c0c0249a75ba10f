/* CPU use of a rank that waits: rank 0 blocks in MPI_Recv for about two
 * seconds while rank 1 sleeps, then checks the message and the CPU time its
 * own thread used meanwhile against --max-cpu (fraction of the wall time) or
 * --min-cpu. With yield-when-idle on, a waiting rank must leave the core to
 * others (routers, emulators, oversubscribed ranks); a busy-polling one uses
 * all of it, which --min-cpu shows the measurement can see. */
#define _GNU_SOURCE
#include "icbc_test.h"

#include <sys/resource.h>
#include <unistd.h>

static double thread_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv)
{
    double max_cpu = -1, min_cpu = -1, wait_s = 2.0;
    int rank, size;
    unsigned char buf[4096];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-cpu") && i + 1 < argc)
            max_cpu = atof(argv[++i]);
        else if (!strcmp(argv[i], "--min-cpu") && i + 1 < argc)
            min_cpu = atof(argv[++i]);
        else if (!strcmp(argv[i], "--wait") && i + 1 < argc)
            wait_s = atof(argv[++i]);
    }
    if (size < 2) {
        fprintf(stderr, "idle_wait needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        usleep((useconds_t) (wait_s * 1e6));
        fill_pattern(buf, sizeof(buf), 7);
        MPI_Send(buf, sizeof(buf), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    } else if (rank == 0) {
        double t0 = MPI_Wtime(), c0 = thread_cpu_seconds();
        memset(buf, 0, sizeof(buf));
        MPI_Recv(buf, sizeof(buf), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double wall = MPI_Wtime() - t0, cpu = thread_cpu_seconds() - c0;
        double frac = cpu / wall;

        CHECK(check_pattern(buf, sizeof(buf), 7) == (size_t) -1, "payload damaged");
        CHECK(wall >= wait_s * 0.9, "the receive returned after %.3f s, before the send", wall);
        printf("waited %.3f s, main thread CPU %.3f s (%.1f %%)\n", wall, cpu, 100 * frac);
        if (max_cpu >= 0)
            CHECK(frac <= max_cpu, "CPU use %.3f of the wait, limit %.3f", frac, max_cpu);
        if (min_cpu >= 0)
            CHECK(frac >= min_cpu, "CPU use %.3f of the wait, expected at least %.3f", frac,
                  min_cpu);
    }
    return icbc_test_finish();
}
