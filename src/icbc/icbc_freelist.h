/*
 * Objects of one size for the data path: taken from a free list and given
 * back to it, the list growing by slabs of many objects. Once it holds as
 * many as the traffic keeps in flight, a chunk or a message allocates
 * nothing. One thread uses a list (the netmod's progress); it frees its slabs
 * when destroyed, so every object must be back by then or no longer used.
 */
#ifndef ICBC_FREELIST_H
#define ICBC_FREELIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define ICBC_FREELIST_ALIGN 16

typedef struct icbc_freelist {
    size_t size;       /* of an object, a multiple of ICBC_FREELIST_ALIGN */
    unsigned per_slab; /* objects per slab */
    void *free;        /* free objects, linked through their first word */
    void *slabs;       /* linked through the first word of each slab */
    uint64_t nslabs;   /* slabs allocated: the list's only allocations */
    uint64_t taken;    /* objects out now */
} icbc_freelist_t;

/* For objects of SIZE bytes, PER_SLAB (at least 1) at a time. Allocates nothing. */
static inline void icbc_freelist_init(icbc_freelist_t *fl, size_t size, unsigned per_slab)
{
    size = size < sizeof(void *) ? sizeof(void *) : size;
    fl->size = (size + ICBC_FREELIST_ALIGN - 1) & ~(size_t) (ICBC_FREELIST_ALIGN - 1);
    fl->per_slab = per_slab ? per_slab : 1;
    fl->free = fl->slabs = NULL;
    fl->nslabs = fl->taken = 0;
}

/* One slab more; -1: out of memory. */
static inline int icbc_freelist_grow(icbc_freelist_t *fl)
{
    char *slab = (char *) malloc(ICBC_FREELIST_ALIGN + fl->size * fl->per_slab);

    if (slab == NULL)
        return -1;
    *(void **) slab = fl->slabs;
    fl->slabs = slab;
    fl->nslabs++;
    for (unsigned i = fl->per_slab; i-- > 0;) {
        void *o = slab + ICBC_FREELIST_ALIGN + (size_t) i * fl->size;
        *(void **) o = fl->free;
        fl->free = o;
    }
    return 0;
}

/* An object (its bytes undefined), aligned to ICBC_FREELIST_ALIGN; NULL: out of memory. */
static inline void *icbc_freelist_get(icbc_freelist_t *fl)
{
    void *o;

    if (fl->free == NULL && icbc_freelist_grow(fl) != 0)
        return NULL;
    o = fl->free;
    fl->free = *(void **) o;
    fl->taken++;
    return o;
}

static inline void icbc_freelist_put(icbc_freelist_t *fl, void *o)
{
    *(void **) o = fl->free;
    fl->free = o;
    fl->taken--;
}

static inline void icbc_freelist_destroy(icbc_freelist_t *fl)
{
    while (fl->slabs) {
        void *next = *(void **) fl->slabs;
        free(fl->slabs);
        fl->slabs = next;
    }
    fl->free = NULL;
    fl->taken = 0;
}

#endif /* ICBC_FREELIST_H */
