/* Intrusive circular doubly-linked list: the one list of libicbc, the routers and the transports. */
#ifndef ICBC_LIST_H
#define ICBC_LIST_H

#include <stddef.h>

typedef struct icbc_list {
    struct icbc_list *prev, *next;
} icbc_list_t;

#define ICBC_CONTAINER(ptr, type, member) ((type *) ((char *) (ptr) -offsetof(type, member)))

static inline void icbc_list_init(icbc_list_t *l)
{
    l->prev = l->next = l;
}

static inline int icbc_list_empty(const icbc_list_t *l)
{
    return l->next == l;
}

static inline void icbc_list_push(icbc_list_t *head, icbc_list_t *e)
{
    e->prev = head->prev;
    e->next = head;
    head->prev->next = e;
    head->prev = e;
}

/* Unlinks E and leaves it as an empty list, so a second unlink is harmless. */
static inline void icbc_list_del(icbc_list_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    icbc_list_init(e);
}

/* Moves every element of FROM to the end of TO and leaves FROM empty. */
static inline void icbc_list_splice_init(icbc_list_t *from, icbc_list_t *to)
{
    if (icbc_list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    icbc_list_init(from);
}

static inline int icbc_list_linked(const icbc_list_t *e)
{
    return e->next != e;
}

#endif /* ICBC_LIST_H */
