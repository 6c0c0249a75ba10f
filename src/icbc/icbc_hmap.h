/*
 * A hash map from a 128-bit key (two 64-bit words) to a pointer, with open
 * addressing and linear probing. Used for UCX endpoint -> peer (key: the
 * pointer, 0) and (job, rank) -> registered process. Not thread-safe.
 */
#ifndef ICBC_HMAP_H
#define ICBC_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

typedef struct {
    uint64_t k1, k2;
    void *val; /* NULL: empty slot */
} icbc_hmap_slot_t;

typedef struct {
    icbc_hmap_slot_t *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
} icbc_hmap_t;

void icbc_hmap_init(icbc_hmap_t *m);
void icbc_hmap_free(icbc_hmap_t *m);
/* Inserts or replaces; VAL must not be NULL. */
icbc_status_t icbc_hmap_put(icbc_hmap_t *m, uint64_t k1, uint64_t k2, void *val);
void *icbc_hmap_get(const icbc_hmap_t *m, uint64_t k1, uint64_t k2);
/* Removes the key if present; returns its value or NULL. */
void *icbc_hmap_del(icbc_hmap_t *m, uint64_t k1, uint64_t k2);

#endif /* ICBC_HMAP_H */
