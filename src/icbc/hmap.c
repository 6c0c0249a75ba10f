/* Open-addressing map with a 128-bit key; see icbc_hmap.h. */
#include "icbc_hmap.h"

#include <stdlib.h>

static uint64_t mix(uint64_t k1, uint64_t k2)
{
    uint64_t h = k1 * 0x9e3779b97f4a7c15ull ^ (k2 + 0x632be59bd9b4e019ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

void icbc_hmap_init(icbc_hmap_t *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void icbc_hmap_free(icbc_hmap_t *m)
{
    free(m->slots);
    icbc_hmap_init(m);
}

static icbc_hmap_slot_t *find(const icbc_hmap_t *m, uint64_t k1, uint64_t k2)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        icbc_hmap_slot_t *s = &m->slots[i];
        if (s->val == NULL || (s->k1 == k1 && s->k2 == k2))
            return s;
    }
}

static icbc_status_t grow(icbc_hmap_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    icbc_hmap_t n = { calloc(ncap, sizeof(icbc_hmap_slot_t)), ncap, 0 };

    if (n.slots == NULL)
        return ICBC_ERR_NO_MEMORY;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].val == NULL)
            continue;
        *find(&n, m->slots[i].k1, m->slots[i].k2) = m->slots[i];
        n.count++;
    }
    free(m->slots);
    *m = n;
    return ICBC_OK;
}

icbc_status_t icbc_hmap_put(icbc_hmap_t *m, uint64_t k1, uint64_t k2, void *val)
{
    icbc_hmap_slot_t *s;

    /* Keep the load at most 1/2 so probes stay short and always end. */
    if ((m->count + 1) * 2 > m->cap && grow(m) != ICBC_OK)
        return ICBC_ERR_NO_MEMORY;
    s = find(m, k1, k2);
    if (s->val == NULL)
        m->count++;
    s->k1 = k1;
    s->k2 = k2;
    s->val = val;
    return ICBC_OK;
}

void *icbc_hmap_get(const icbc_hmap_t *m, uint64_t k1, uint64_t k2)
{
    icbc_hmap_slot_t *s = find(m, k1, k2);
    return s ? s->val : NULL;
}

void *icbc_hmap_del(icbc_hmap_t *m, uint64_t k1, uint64_t k2)
{
    icbc_hmap_slot_t *s = find(m, k1, k2);
    void *val;
    size_t i, j;

    if (s == NULL || s->val == NULL)
        return NULL;
    val = s->val;
    s->val = NULL;
    m->count--;
    /* Re-insert the rest of the probe run so no lookup stops early. */
    i = (size_t) (s - m->slots);
    for (j = (i + 1) & (m->cap - 1); m->slots[j].val != NULL; j = (j + 1) & (m->cap - 1)) {
        icbc_hmap_slot_t moved = m->slots[j];
        m->slots[j].val = NULL;
        *find(m, moved.k1, moved.k2) = moved;
    }
    return val;
}
