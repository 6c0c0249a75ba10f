/* Which fabric library a rank has loaded: after a message to and from
 * every other rank (so every path it uses is open), each rank prints
 * "rank R on NODE: libfabric loaded|not loaded" from its own memory map.
 * A rank of a cluster on UCX never opens libfabric (it is opened at run
 * time, by the first fabric of that API: src/mx_router/ofi_lib.h); a rank
 * of a cluster on libfabric has it. */
#include "icbc_test.h"

static int mapped(const char *name)
{
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    int found = 0;

    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    int rank, size, lib;
    char node[MPI_MAX_PROCESSOR_NAME];
    int len;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(node, &len);
    for (int peer = 0; peer < size; peer++) {
        int out = rank, in = -1;
        if (peer == rank)
            continue;
        MPI_Sendrecv(&out, 1, MPI_INT, peer, 0, &in, 1, MPI_INT, peer, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        CHECK(in == peer, "from rank %d: %d", peer, in);
    }
    lib = mapped("libfabric.so");
    CHECK(lib >= 0, "cannot read /proc/self/maps");
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            printf("rank %d on %s: libfabric %s\n", rank, node, lib ? "loaded" : "not loaded");
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return icbc_test_finish();
}
