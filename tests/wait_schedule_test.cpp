// launcher/wait_schedule.h: the polling schedule of --wait, simulated on a job's timeline.
#include "launcher/wait_schedule.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace bridge {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The times at which --wait polls until it has seen a job that ends at `end`; returns the
// poll times (the last one notices the end).
std::vector<milliseconds> polls_until(milliseconds end) {
  std::vector<milliseconds> at;
  milliseconds now(0);
  // Submission itself is followed by the first wait; every poll is one status query.
  for (int done = 0; at.empty() || at.back() < end; ++done) {
    now += wait_poll_delay(now, done);
    at.push_back(now);
  }
  return at;
}

TEST(WaitSchedule, ASixtySecondJobCostsFewPollsAndIsNoticedWithinSixSeconds) {
  auto at = polls_until(seconds(60));
  EXPECT_LE(at.size(), 13u);  // about two controller RPCs per squeue: <= 26 in all
  EXPECT_LE(at.back() - seconds(60), seconds(6));
  EXPECT_EQ(at[0], seconds(1));  // a job that fails at once is seen at once
  EXPECT_EQ(at[1], seconds(3));
}

TEST(WaitSchedule, LongJobsAreNoticedWithinATenthOfTheirRunTimeAndPolledAtMostEveryMinute) {
  for (auto end : {seconds(600), seconds(3600), seconds(7 * 24 * 3600)}) {
    auto at = polls_until(end);
    milliseconds late = at.back() - end;
    EXPECT_LE(late, std::max<milliseconds>(seconds(6), end / 10)) << end.count();
    for (size_t i = 2; i < at.size(); ++i) EXPECT_LE(at[i] - at[i - 1], seconds(60));
  }
  // A week-long job: about one poll a minute, not one every two seconds.
  EXPECT_LE(polls_until(seconds(7 * 24 * 3600)).size(), 7u * 24 * 60 + 100);
}

}  // namespace
}  // namespace bridge
