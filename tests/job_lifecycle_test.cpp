// launcher/jobs/job_lifecycle.h: the one owner of registry writes.
#include "launcher/jobs/job_lifecycle.h"

#include <gtest/gtest.h>

#include <filesystem>

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
  EXPECT_TRUE(lifecycle.observe(r, {JobState::kUnknown, "unknown to squeue", std::nullopt}, diags));
  EXPECT_EQ(r.state, JobState::kPending);
  // The same status again writes nothing.
  EXPECT_TRUE(lifecycle.observe(r, {JobState::kPending, "submitted", std::nullopt}, diags));
  EXPECT_EQ(written_at(reg, r.id), first_write);

  EXPECT_TRUE(lifecycle.observe(r, {JobState::kFailed, "FAILED (ExitCode=17:0)", 17}, diags));
  Diagnostics read;
  JobRecord saved = *reg.find(r.id, read);
  EXPECT_EQ(saved.state, JobState::kFailed);
  EXPECT_EQ(saved.exit_code, 17);
  // A later status without an exit code keeps the one we know.
  EXPECT_TRUE(lifecycle.observe(r, {JobState::kFailed, "FAILED", std::nullopt}, diags));
  EXPECT_EQ(reg.find(r.id, read)->exit_code, 17);
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
