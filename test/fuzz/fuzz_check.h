/*
 * Shared by the libFuzzer targets: FUZZ_CHECK stops the run with a message
 * and a trap when a property does not hold, so libFuzzer saves the input.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>

#define FUZZ_CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap(); \
        } \
    } while (0)

#endif /* FUZZ_CHECK_H */
