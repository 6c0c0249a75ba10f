/*
 * Counts a process's heap allocations, for the allocation benchmark
 * (benchmarks/alloc/allocs.py): preloaded (LD_PRELOAD), it counts every
 * malloc, calloc, realloc, memalign, posix_memalign, aligned_alloc and
 * valloc of every thread and hands them to glibc. A program reads the count
 * with icbc_alloc_count(), found by dlsym(RTLD_DEFAULT, ...), so that it
 * runs unchanged without the preload.
 */
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static unsigned long long count;

#define COUNT() __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED)

unsigned long long icbc_alloc_count(void)
{
    return __atomic_load_n(&count, __ATOMIC_RELAXED);
}

void *malloc(size_t size)
{
    COUNT();
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    COUNT();
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    COUNT();
    return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
    COUNT();
    return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
    COUNT();
    return __libc_memalign(align, size);
}

void *valloc(size_t size)
{
    COUNT();
    return __libc_memalign(4096, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    void *p;

    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    COUNT();
    p = __libc_memalign(align, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}
