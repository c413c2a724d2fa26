// A time limit as Slurm writes it (base/time_limit.h): every accepted form in seconds, the
// unlimited words, and what is refused.
#include "base/time_limit.h"

#include <gtest/gtest.h>

namespace bridge {
namespace {

TEST(TimeLimit, EverySlurmFormIsReadInSeconds) {
  EXPECT_EQ(time_limit_seconds("90"), 90 * 60);                  // minutes
  EXPECT_EQ(time_limit_seconds("90:30"), 90 * 60 + 30);          // minutes:seconds
  EXPECT_EQ(time_limit_seconds("04:00:00"), 4 * 3600);           // hours:minutes:seconds
  EXPECT_EQ(time_limit_seconds("2-12"), 2 * 86400 + 12 * 3600);  // days-hours
  EXPECT_EQ(time_limit_seconds("1-00:30"), 86400 + 30 * 60);     // days-hours:minutes
  EXPECT_EQ(time_limit_seconds("1-02:03:04"), 86400 + 7200 + 184);
  EXPECT_EQ(time_limit_seconds("UNLIMITED"), 0);
  EXPECT_EQ(time_limit_seconds("INFINITE"), 0);
}

TEST(TimeLimit, AnythingElseIsRefused) {
  for (const char* bad : {"", "4h", "1:2:3:4", "1-2:3:4:5", "-5", "1-", ":30", "1::2", "unlimited",
                          "1234567890", "1 -2", "2.5"})
    EXPECT_FALSE(time_limit_seconds(bad).has_value()) << bad;
}

}  // namespace
}  // namespace bridge
