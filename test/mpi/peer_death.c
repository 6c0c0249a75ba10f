/*
 * A peer dies in the middle of a transfer. The job must end with an error
 * that names what happened — it must not hang. Rank 1 kills itself while
 * rank 0 waits for a large message from it; the test driver checks that
 * mpiexec returns non-zero well within its time limit.
 *
 * --send: rank 0 keeps sending to rank 1 after its death, with
 * MPI_ERRORS_RETURN, and prints the MPI error it gets, which must name the
 * lost rank (MPIR_CVAR_CH4_ICBC_PEER_ERRORS=1, and mpiexec
 * -disable-auto-cleanup so that rank 0 outlives rank 1). Exit code 3 after
 * the error, 4 when every send succeeded for 60 s.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int send_to_the_dead(void)
{
    char small[1024] = { 0 };

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < 600; i++) {
        int rc = MPI_Send(small, sizeof(small), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, text, &len);
            for (char *c = text; *c; c++) /* the error stack on one line */
                if (*c == '\n')
                    *c = ' ';
            printf("rank 0: MPI_Send to the dead rank 1 failed: %s\n", text);
            fflush(stdout);
            return 3;
        }
        usleep(100000);
    }
    printf("rank 0: every send to the dead rank 1 succeeded for 60 s\n");
    return 4;
}

int main(int argc, char **argv)
{
    int rank, send_mode = argc > 1 && strcmp(argv[1], "--send") == 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t n = 8 << 20;
    char *buf = malloc(n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        usleep(200000);
        kill(getpid(), SIGKILL);
    } else if (rank == 0 && send_mode) {
        /* no MPI_Finalize: its barrier would wait for the dead rank */
        _exit(send_to_the_dead());
    } else if (rank == 0) {
        MPI_Recv(buf, (int) n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("rank 0 received a message from a dead peer\n");
    }
    MPI_Finalize();
    return 0;
}
