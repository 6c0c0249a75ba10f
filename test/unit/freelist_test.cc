/*
 * icbc_freelist.h: objects come aligned and distinct, go back and come
 * again without a new slab, and the list grows by whole slabs only.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "icbc_freelist.h"

TEST(Freelist, ObjectsAreAlignedDistinctAndWritable)
{
    icbc_freelist_t fl;
    icbc_freelist_init(&fl, 40, 4);
    EXPECT_EQ(48u, fl.size);
    EXPECT_EQ(0u, fl.nslabs); /* nothing allocated before the first get */
    std::set<void *> seen;
    std::vector<void *> out;
    for (int i = 0; i < 10; i++) {
        void *o = icbc_freelist_get(&fl);
        ASSERT_NE(nullptr, o);
        EXPECT_EQ(0u, (uintptr_t) o % ICBC_FREELIST_ALIGN);
        EXPECT_TRUE(seen.insert(o).second);
        memset(o, 0xa5, 40); /* the whole object is ours */
        out.push_back(o);
    }
    EXPECT_EQ(3u, fl.nslabs); /* 10 objects, 4 per slab */
    EXPECT_EQ(10u, fl.taken);
    for (void *o : out)
        icbc_freelist_put(&fl, o);
    EXPECT_EQ(0u, fl.taken);
    icbc_freelist_destroy(&fl);
}

TEST(Freelist, SteadyTrafficAllocatesNoMoreSlabs)
{
    icbc_freelist_t fl;
    icbc_freelist_init(&fl, 4400, 16);
    std::vector<void *> inflight;
    /* 1000 rounds of 20 objects in flight: the list grows to 2 slabs once */
    for (int round = 0; round < 1000; round++) {
        for (int k = 0; k < 20; k++)
            inflight.push_back(icbc_freelist_get(&fl));
        for (void *o : inflight)
            icbc_freelist_put(&fl, o);
        inflight.clear();
        ASSERT_EQ(2u, fl.nslabs) << "round " << round;
    }
    icbc_freelist_destroy(&fl);
}

TEST(Freelist, TinyObjectsHoldTheLink)
{
    icbc_freelist_t fl;
    icbc_freelist_init(&fl, 1, 0); /* at least a pointer, at least one per slab */
    EXPECT_EQ((size_t) ICBC_FREELIST_ALIGN, fl.size);
    EXPECT_EQ(1u, fl.per_slab);
    void *a = icbc_freelist_get(&fl), *b = icbc_freelist_get(&fl);
    ASSERT_TRUE(a && b && a != b);
    icbc_freelist_put(&fl, b);
    EXPECT_EQ(b, icbc_freelist_get(&fl)); /* the last one back is the next out */
    icbc_freelist_put(&fl, a);
    icbc_freelist_put(&fl, b);
    icbc_freelist_destroy(&fl);
}
