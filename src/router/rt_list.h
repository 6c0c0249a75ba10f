/* Intrusive circular doubly-linked list of the router. */
#ifndef RT_LIST_H
#define RT_LIST_H

#include <stddef.h>

typedef struct rt_list {
    struct rt_list *prev, *next;
} rt_list_t;

#define RT_CONTAINER(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

static inline void rt_list_init(rt_list_t *l)
{
    l->prev = l->next = l;
}

static inline int rt_list_empty(const rt_list_t *l)
{
    return l->next == l;
}

static inline void rt_list_push(rt_list_t *head, rt_list_t *e)
{
    e->prev = head->prev;
    e->next = head;
    head->prev->next = e;
    head->prev = e;
}

/* Unlinks E and leaves it as an empty list, so a second unlink is harmless. */
static inline void rt_list_del(rt_list_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    rt_list_init(e);
}

static inline int rt_list_linked(const rt_list_t *e)
{
    return e->next != e;
}

#endif /* RT_LIST_H */
