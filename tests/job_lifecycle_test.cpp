// launcher/jobs/job_lifecycle.h: the one owner of registry writes.
#include "launcher/jobs/job_lifecycle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "test_util.h"

namespace bridge {
namespace {

JobRecord slurm_job() {
  JobRecord r;
  r.id = "demo-20261130-120000-ab12";
  r.name = "demo";
  r.executor = "slurm";
  r.scheduler_id = "77";
  r.state = JobState::kPending;
  r.state_detail = "submitted";
  return r;
}

JobStatus status_of(JobState state, std::string detail, std::optional<int> exit_code) {
  JobStatus s;
  s.state = state;
  s.detail = std::move(detail);
  s.exit_code = exit_code;
  return s;
}

std::filesystem::file_time_type written_at(const JobRegistry& reg, const std::string& id) {
  return std::filesystem::last_write_time(reg.dir() + "/jobs/" + id + ".json");
}

TEST(JobLifecycle, AcceptedCreatesButNeverOverwritesAnEntry) {
  test::TempDir dir;
  JobRegistry reg(dir.path());
  JobLifecycle lifecycle(reg);
  Diagnostics diags;
  JobRecord r = slurm_job();
  EXPECT_TRUE(lifecycle.accepted(r, diags));
  JobRecord other = slurm_job();
  other.scheduler_id = "78";
  EXPECT_FALSE(lifecycle.accepted(other, diags));
  EXPECT_TRUE(diags.has_errors());
  Diagnostics read;
  EXPECT_EQ(reg.find(r.id, read)->scheduler_id, "77");
}

TEST(JobLifecycle, ObserveKeepsKnownStatesAndWritesOnlyNews) {
  test::TempDir dir;
  JobRegistry reg(dir.path());
  JobLifecycle lifecycle(reg);
  Diagnostics diags;
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle.accepted(r, diags));
  auto first_write = written_at(reg, r.id);

  // A scheduler that forgot the job does not erase what we know.
  EXPECT_TRUE(lifecycle.observe(r, status_of(JobState::kUnknown, "unknown to squeue", std::nullopt),
                                diags));
  EXPECT_EQ(r.state, JobState::kPending);
  // The same status again writes nothing.
  EXPECT_TRUE(
      lifecycle.observe(r, status_of(JobState::kPending, "submitted", std::nullopt), diags));
  EXPECT_EQ(written_at(reg, r.id), first_write);

  EXPECT_TRUE(
      lifecycle.observe(r, status_of(JobState::kFailed, "FAILED (ExitCode=17:0)", 17), diags));
  Diagnostics read;
  JobRecord saved = *reg.find(r.id, read);
  EXPECT_EQ(saved.state, JobState::kFailed);
  EXPECT_EQ(saved.exit_code, 17);
  // A later status without an exit code keeps the one we know.
  EXPECT_TRUE(lifecycle.observe(r, status_of(JobState::kFailed, "FAILED", std::nullopt), diags));
  EXPECT_EQ(reg.find(r.id, read)->exit_code, 17);
  EXPECT_FALSE(diags.has_errors());
}

TEST(JobLifecycle, ObserveRecordsTheSchedulersTimesAndNeverErasesThem) {
  test::TempDir dir;
  JobRegistry reg(dir.path());
  JobLifecycle lifecycle(reg);
  Diagnostics diags;
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle.accepted(r, diags));
  JobStatus running = status_of(JobState::kRunning, "RUNNING", std::nullopt);
  running.started_at = "2026-11-30T20:00:00Z";
  EXPECT_TRUE(lifecycle.observe(r, running, diags));
  // The same state with a start time only now known is news too; without it, nothing changes.
  JobStatus done = status_of(JobState::kSucceeded, "COMPLETED", 0);
  done.ended_at = "2026-11-30T20:05:30Z";
  EXPECT_TRUE(lifecycle.observe(r, done, diags));
  EXPECT_TRUE(lifecycle.observe(r, status_of(JobState::kSucceeded, "COMPLETED", 0), diags));
  Diagnostics read;
  JobRecord saved = *reg.find(r.id, read);
  EXPECT_EQ(saved.started_at, "2026-11-30T20:00:00Z");
  EXPECT_EQ(saved.ended_at, "2026-11-30T20:05:30Z");
  EXPECT_FALSE(diags.has_errors());
}

TEST(JobLifecycle, CancelledIsRecorded) {
  test::TempDir dir;
  JobRegistry reg(dir.path());
  JobLifecycle lifecycle(reg);
  Diagnostics diags;
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle.accepted(r, diags));
  EXPECT_TRUE(lifecycle.cancelled(r, diags));
  Diagnostics read;
  EXPECT_EQ(reg.find(r.id, read)->state, JobState::kCancelled);
}

}  // namespace
}  // namespace bridge
