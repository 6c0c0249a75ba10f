#include <gtest/gtest.h>
#include <string>

#include "icbc_status.h"

TEST(Status, EveryCodeHasAName)
{
    for (int s = ICBC_OK; s >= ICBC_ERR_TIMEOUT; --s)
        EXPECT_NE(std::string("unknown status"), icbc_status_str(static_cast<icbc_status_t>(s)));
    EXPECT_EQ(std::string("unknown status"), icbc_status_str(static_cast<icbc_status_t>(-100)));
}
