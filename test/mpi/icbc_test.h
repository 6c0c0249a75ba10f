/* Small helpers shared by the MPI-level tests: deterministic payloads and a
 * failure counter that every test reduces and reports as "No Errors". */
#ifndef ICBC_TEST_H
#define ICBC_TEST_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int icbc_test_errors;

#define CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            int r_; MPI_Comm_rank(MPI_COMM_WORLD, &r_); \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", r_, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
            icbc_test_errors++; \
        } \
    } while (0)

static inline unsigned char pattern_byte(int seed, size_t i)
{
    uint32_t x = (uint32_t) seed * 2654435761u + (uint32_t) i * 40503u + (uint32_t) (i >> 13);
    return (unsigned char) (x ^ (x >> 11) ^ (x >> 23));
}

static inline void fill_pattern(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) buf[i] = pattern_byte(seed, i);
}

/* Returns the index of the first wrong byte, or (size_t)-1 when all match. */
static inline size_t check_pattern(const unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern_byte(seed, i)) return i;
    return (size_t) -1;
}

static inline int icbc_test_finish(void)
{
    int total = 0, rank;
    MPI_Allreduce(&icbc_test_errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        if (total == 0) printf("No Errors\n");
        else printf("Found %d errors\n", total);
    }
    MPI_Finalize();
    return total != 0;
}

#endif
