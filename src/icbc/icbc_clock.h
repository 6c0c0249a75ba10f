/*
 * The one clock of libicbc, the transports, the routers and the netmod:
 * CLOCK_MONOTONIC, in seconds or milliseconds as doubles. The coarse
 * variants (a few ms resolution, no system call) are for code that reads
 * the time on every progress poll.
 */
#ifndef ICBC_CLOCK_H
#define ICBC_CLOCK_H

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds of clock ID. */
static inline double icbc_clock_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static inline double icbc_clock_now(void)
{
    return icbc_clock_of(CLOCK_MONOTONIC);
}

static inline double icbc_clock_ms(void)
{
    return icbc_clock_now() * 1e3;
}

static inline double icbc_clock_coarse(void)
{
    return icbc_clock_of(CLOCK_MONOTONIC_COARSE);
}

static inline double icbc_clock_coarse_ms(void)
{
    return icbc_clock_coarse() * 1e3;
}

#ifdef __cplusplus
}
#endif

#endif /* ICBC_CLOCK_H */
