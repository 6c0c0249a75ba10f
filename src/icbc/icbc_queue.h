/* Intrusive FIFO of singly linked elements: the send and wait queues of
 * bt_lib, the transports and the IMPI library. A zeroed queue is empty, so
 * queues inside calloc'd or memset objects need no initialisation. */
#ifndef ICBC_QUEUE_H
#define ICBC_QUEUE_H

#include <stddef.h>

#include "icbc_list.h"

typedef struct icbc_queue_elem {
    struct icbc_queue_elem *next;
} icbc_queue_elem_t;

typedef struct icbc_queue {
    icbc_queue_elem_t *head, *tail;
} icbc_queue_t;

static inline int icbc_queue_empty(const icbc_queue_t *q)
{
    return q->head == NULL;
}

static inline void icbc_queue_push(icbc_queue_t *q, icbc_queue_elem_t *e)
{
    e->next = NULL;
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
}

/* The first element, unlinked; NULL when Q is empty. */
static inline icbc_queue_elem_t *icbc_queue_pop(icbc_queue_t *q)
{
    icbc_queue_elem_t *e = q->head;

    if (e != NULL) {
        q->head = e->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    return e;
}

static inline void *icbc_queue_obj(icbc_queue_elem_t *e, size_t offset)
{
    return e ? (void *) ((char *) e - offset) : NULL;
}

/* The object of TYPE holding E in MEMBER, or NULL for NULL (E evaluated
 * once: it may be icbc_queue_pop's call). */
#define ICBC_QUEUE_OBJ(e, type, member) ((type *) icbc_queue_obj((e), offsetof(type, member)))

#define icbc_queue_for_each(e, q) for (icbc_queue_elem_t *e = (q)->head; e != NULL; e = e->next)

#endif /* ICBC_QUEUE_H */
