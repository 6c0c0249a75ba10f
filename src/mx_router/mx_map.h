/*
 * A hash map from a 128-bit key (two 64-bit words) to a pointer, with open
 * addressing and linear probing. Used for UCX endpoint -> peer (key: the
 * pointer, 0) and (job, rank) -> registered process. Not thread-safe.
 */
#ifndef MX_MAP_H
#define MX_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

typedef struct {
    uint64_t k1, k2;
    void *val; /* NULL: empty slot */
} mx_map_slot_t;

typedef struct {
    mx_map_slot_t *slots;
    size_t cap;   /* power of two, or 0 */
    size_t count;
} mx_map_t;

void mx_map_init(mx_map_t *m);
void mx_map_free(mx_map_t *m);
/* Inserts or replaces; VAL must not be NULL. */
icbc_status_t mx_map_put(mx_map_t *m, uint64_t k1, uint64_t k2, void *val);
void *mx_map_get(const mx_map_t *m, uint64_t k1, uint64_t k2);
/* Removes the key if present; returns its value or NULL. */
void *mx_map_del(mx_map_t *m, uint64_t k1, uint64_t k2);

#endif /* MX_MAP_H */
