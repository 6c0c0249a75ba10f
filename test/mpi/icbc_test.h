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

/* A non-commutative MPI_User_function on pairs of longs {value, digits}: the
 * decimal digits of IN followed by those of INOUT. With one digit per rank,
 * the result shows the order in which ranks were combined. */
static inline void icbc_test_concat_digits(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    long *a = in, *b = inout;
    (void) dt;
    for (int i = 0; i < *len; i++, a += 2, b += 2) {
        long v = a[0];
        for (long k = 0; k < b[1]; k++)
            v *= 10;
        b[0] = v + b[0];
        b[1] += a[1];
    }
}

#endif
