// jobs/job_progress.h: whose log the live line reads, the ETA from recent steps,
// run times from the registry's UTC times.
#include "jobs/job_progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bridge {
namespace {

std::string megatron_line(int iteration, int total, double ms) {
  return "[2026-11-30 20:00:00] iteration " + std::to_string(iteration) + "/" +
         std::to_string(total) +
         " | consumed samples: 64 | elapsed time per iteration (ms): " + std::to_string(ms) +
         " | learning rate: 1.0E-04 |";
}

TEST(JobProgress, TheLastRankComesFirstWhenThePlanSaysSoThenTheFallbacks) {
  JobRecord job;
  job.ranks = 16;
  job.progress_rank = 15;
  EXPECT_EQ(progress_ranks(job), (std::vector<int>{15, 0}));
  job.progress_rank = 3;
  EXPECT_EQ(progress_ranks(job), (std::vector<int>{3, 15, 0}));
  job.progress_rank = -1;  // an entry of an older version: last rank, then 0
  EXPECT_EQ(progress_ranks(job), (std::vector<int>{15, 0}));
  job.ranks = 1;
  job.progress_rank = 0;
  EXPECT_EQ(progress_ranks(job), (std::vector<int>{0}));
  job.progress_rank = 40;  // out of range (a damaged entry): ignored
  EXPECT_EQ(progress_ranks(job), (std::vector<int>{0}));
}

TEST(JobProgress, EtaFromTheMeanOfTheRecentStepsNotTheWarmUp) {
  std::vector<std::string> lines{"noise", megatron_line(1, 20, 9000)};
  for (int i = 2; i <= 10; ++i) lines.push_back(megatron_line(i, 20, 500));
  lines.push_back("NCCL INFO something");
  auto p = progress_from_lines(15, lines);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank, 15);
  EXPECT_EQ(p->iteration, 10);
  EXPECT_EQ(p->total, 20);
  ASSERT_TRUE(p->step_ms);
  EXPECT_DOUBLE_EQ(*p->step_ms, 500);
  ASSERT_TRUE(p->eta);
  EXPECT_EQ(p->eta->count(), 5);  // 10 steps left x 0.5 s
  EXPECT_EQ(progress_text(*p), "iteration 10/20 (rank 15), 0.50 s/step, ETA 5s");
}

TEST(JobProgress, NoIterationLineNoProgressAndTheLastStepHasNoEta) {
  EXPECT_FALSE(progress_from_lines(0, {"starting", "loading data"}));
  auto done = progress_from_lines(0, {megatron_line(8, 8, 400)});
  ASSERT_TRUE(done);
  EXPECT_EQ(progress_text(*done), "iteration 8/8 (rank 0), 0.40 s/step");
}

TEST(JobProgress, DurationsReadLikeAClock) {
  using std::chrono::seconds;
  EXPECT_EQ(duration_text(seconds(0)), "0s");
  EXPECT_EQ(duration_text(seconds(59)), "59s");
  EXPECT_EQ(duration_text(seconds(187)), "3m 07s");
  EXPECT_EQ(duration_text(seconds(2 * 3600 + 5 * 60 + 9)), "2h 05m");
  EXPECT_EQ(duration_text(seconds(3 * 86400 + 4 * 3600)), "3d 04h");
  EXPECT_EQ(duration_text(seconds(-5)), "0s");
}

TEST(JobProgress, RunTimeFromTheRecordedTimes) {
  auto now = parse_utc_time("2026-11-30T20:10:00Z");
  ASSERT_TRUE(now);
  EXPECT_EQ(utc_time_text(*now), "2026-11-30T20:10:00Z");
  EXPECT_TRUE(parse_utc_time("2026-11-30T20:10:00.123Z"));  // the registry's submitted_at
  EXPECT_FALSE(parse_utc_time("2026-11-30T20:10:00"));      // no zone: not ours
  EXPECT_FALSE(parse_utc_time(""));
  JobRecord job;
  job.state = JobState::kRunning;
  EXPECT_FALSE(job_elapsed(job, *now));  // not started
  job.started_at = "2026-11-30T20:00:00Z";
  EXPECT_EQ(job_elapsed(job, *now)->count(), 600);
  job.state = JobState::kSucceeded;
  EXPECT_FALSE(job_elapsed(job, *now));  // ended, but when is unknown: no made-up time
  job.ended_at = "2026-11-30T20:05:30Z";
  EXPECT_EQ(job_elapsed(job, *now)->count(), 330);
}

}  // namespace
}  // namespace bridge
