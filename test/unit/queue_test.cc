/*
 * icbc_queue.h and icbc_list.h: a zeroed queue is empty, elements leave in
 * the order they came, the object of a popped element is found with the
 * pop evaluated once, and a spliced list keeps its order and leaves its
 * source empty.
 */
#include <gtest/gtest.h>

#include <cstring>

#include "icbc_list.h"
#include "icbc_queue.h"

namespace
{

struct item {
    int value;
    icbc_queue_elem_t qe;
    icbc_list_t link;
};

} // namespace

TEST(Queue, AZeroedQueueIsEmptyAndElementsLeaveInOrder)
{
    icbc_queue_t q;
    item it[5];

    memset(&q, 0, sizeof(q));
    EXPECT_TRUE(icbc_queue_empty(&q));
    EXPECT_EQ(nullptr, icbc_queue_pop(&q));
    for (int i = 0; i < 5; i++) {
        it[i].value = i;
        icbc_queue_push(&q, &it[i].qe);
    }
    int n = 0;
    icbc_queue_for_each (e, &q)
        EXPECT_EQ(n++, ICBC_CONTAINER(e, item, qe)->value);
    EXPECT_EQ(5, n);
    for (int i = 0; i < 5; i++) {
        item *x = ICBC_QUEUE_OBJ(icbc_queue_pop(&q), item, qe);
        ASSERT_NE(nullptr, x);
        EXPECT_EQ(i, x->value); /* one pop per call: none skipped */
    }
    EXPECT_TRUE(icbc_queue_empty(&q));
    EXPECT_EQ(nullptr, ICBC_QUEUE_OBJ(icbc_queue_pop(&q), item, qe));
    /* usable again once emptied: the tail was reset */
    icbc_queue_push(&q, &it[3].qe);
    EXPECT_EQ(&it[3], ICBC_QUEUE_OBJ(icbc_queue_pop(&q), item, qe));
}

TEST(List, SpliceMovesEveryElementInOrderAndEmptiesTheSource)
{
    icbc_list_t from, to;
    item it[4];

    icbc_list_init(&from);
    icbc_list_init(&to);
    icbc_list_splice_init(&from, &to); /* an empty source changes nothing */
    EXPECT_TRUE(icbc_list_empty(&to));
    icbc_list_push(&to, &it[0].link);
    for (int i = 1; i < 4; i++)
        icbc_list_push(&from, &it[i].link);
    for (int i = 0; i < 4; i++)
        it[i].value = i;
    icbc_list_splice_init(&from, &to);
    EXPECT_TRUE(icbc_list_empty(&from));
    int n = 0;
    for (icbc_list_t *e = to.next; e != &to; e = e->next)
        EXPECT_EQ(n++, ICBC_CONTAINER(e, item, link)->value);
    EXPECT_EQ(4, n);
    n = 3;
    for (icbc_list_t *e = to.prev; e != &to; e = e->prev)
        EXPECT_EQ(n--, ICBC_CONTAINER(e, item, link)->value);
    /* an element leaves the spliced list as from any other */
    icbc_list_del(&it[2].link);
    EXPECT_EQ(&it[3].link, it[1].link.next);
    EXPECT_EQ(&it[1].link, it[3].link.prev);
}
