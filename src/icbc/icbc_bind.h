/*
 * icbc_bind: which core a router uses, from the host's topology (hwloc).
 *
 * A router moves every byte between its NIC and the fabric; on a compute
 * node it competes with the compute processes for the cores. "auto" puts
 * it on a core close to the NIC that holds its WAN address (hwloc's I/O
 * topology: the cores of the NIC's NUMA node or package), the last such
 * core, since processes that nothing binds are placed from the first core
 * up, and its memory on that core's NUMA node. Where hwloc knows no
 * locality for the interface (a virtual one), every core is close and the
 * last core of the host is used. "none" leaves the router where the
 * system puts it; a CPU list ("3", "2-3,6") binds it to those CPUs.
 */
#ifndef ICBC_BIND_H
#define ICBC_BIND_H

#include <stddef.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_BIND_TEXT 192

typedef struct icbc_bind {
    int bound;                     /* 1: bound by this call */
    char cpus[64];                 /* the CPUs bound to, as a list ("3"); "" when not bound */
    char why[ICBC_BIND_TEXT];      /* how they were chosen */
    char topology[ICBC_BIND_TEXT]; /* the host: packages, NUMA nodes, cores, PUs */
} icbc_bind_t;

/* Checks SPEC ("auto", "none" or a CPU list) without binding anything. */
icbc_status_t icbc_bind_check(const char *spec, char *err, size_t errlen);

/* Binds the calling thread (THREAD = 1) or the whole process, and its
 * memory, as SPEC says; IFACE is the interface of the WAN address (for
 * auto). OUT says where and why. A CPU list that names no CPU of this host
 * is an error; memory that cannot be bound is only told in OUT->why. */
icbc_status_t icbc_bind_apply(const char *spec, const char *iface, int thread, icbc_bind_t *out,
                              char *err, size_t errlen);

/* The CPUs the calling process may run on, as a list ("0-1"), in BUF. */
void icbc_bind_where(char *buf, size_t len);

/* The CPU "auto" chooses for IFACE on this host, or -1; WHY says how. */
int icbc_bind_auto_cpu(const char *iface, char *why, size_t whylen);

/* The calling process, when nothing bound it (it may run on every CPU of
 * the host), leaves the CPUs of a router bound as SPEC says (IFACE: its
 * WAN interface) to it: its mask becomes every other CPU. Returns 1 when
 * it moved, 0 when it was bound already (left alone), SPEC is none or
 * would leave it no CPU; WHERE gets the CPUs it runs on. */
int icbc_bind_avoid(const char *spec, const char *iface, char *where, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_BIND_H */
