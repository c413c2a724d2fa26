// jobs/job_lifecycle.h: the one owner of registry writes.
#include "jobs/job_lifecycle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

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

// A registry in a fresh directory and the lifecycle that owns its writes.
class JobLifecycleTest : public ::testing::Test {
 protected:
  // The entry as the registry has it on disk now.
  JobRecord saved(const JobRecord& r) const {
    Diagnostics read;
    return *reg_.find(r.id, read);
  }

  test::TempDir dir_;
  testing::TestServices seams_;
  JobRegistry reg_{dir_.path(), seams_.registry_seams()};
  JobLifecycle lifecycle_{reg_};
  Diagnostics diags_;
};

TEST_F(JobLifecycleTest, AcceptedCreatesButNeverOverwritesAnEntry) {
  JobRecord r = slurm_job();
  EXPECT_TRUE(lifecycle_.accepted(r, diags_));
  JobRecord other = slurm_job();
  other.scheduler_id = "78";
  EXPECT_FALSE(lifecycle_.accepted(other, diags_));
  EXPECT_TRUE(diags_.has_errors());
  EXPECT_EQ(saved(r).scheduler_id, "77");
}

TEST_F(JobLifecycleTest, ObserveKeepsKnownStatesAndWritesOnlyNews) {
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle_.accepted(r, diags_));
  auto first_write = written_at(reg_, r.id);

  // A scheduler that forgot the job does not erase what we know.
  EXPECT_TRUE(lifecycle_.observe(
      r, status_of(JobState::kUnknown, "unknown to squeue", std::nullopt), diags_));
  EXPECT_EQ(r.state, JobState::kPending);
  // The same status again writes nothing.
  EXPECT_TRUE(
      lifecycle_.observe(r, status_of(JobState::kPending, "submitted", std::nullopt), diags_));
  EXPECT_EQ(written_at(reg_, r.id), first_write);

  EXPECT_TRUE(
      lifecycle_.observe(r, status_of(JobState::kFailed, "FAILED (ExitCode=17:0)", 17), diags_));
  JobRecord on_disk = saved(r);
  EXPECT_EQ(on_disk.state, JobState::kFailed);
  EXPECT_EQ(on_disk.exit_code, 17);
  // A later status without an exit code keeps the one we know.
  EXPECT_TRUE(lifecycle_.observe(r, status_of(JobState::kFailed, "FAILED", std::nullopt), diags_));
  EXPECT_EQ(saved(r).exit_code, 17);
  EXPECT_FALSE(diags_.has_errors());
}

TEST_F(JobLifecycleTest, ObserveRecordsTheSchedulersTimesAndNeverErasesThem) {
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle_.accepted(r, diags_));
  JobStatus running = status_of(JobState::kRunning, "RUNNING", std::nullopt);
  running.started_at = "2026-11-30T20:00:00Z";
  EXPECT_TRUE(lifecycle_.observe(r, running, diags_));
  // The same state with a start time only now known is news too; without it, nothing changes.
  JobStatus done = status_of(JobState::kSucceeded, "COMPLETED", 0);
  done.ended_at = "2026-11-30T20:05:30Z";
  EXPECT_TRUE(lifecycle_.observe(r, done, diags_));
  EXPECT_TRUE(lifecycle_.observe(r, status_of(JobState::kSucceeded, "COMPLETED", 0), diags_));
  JobRecord on_disk = saved(r);
  EXPECT_EQ(on_disk.started_at, "2026-11-30T20:00:00Z");
  EXPECT_EQ(on_disk.ended_at, "2026-11-30T20:05:30Z");
  EXPECT_FALSE(diags_.has_errors());
}

TEST_F(JobLifecycleTest, CancelledIsRecorded) {
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle_.accepted(r, diags_));
  EXPECT_TRUE(lifecycle_.cancelled(r, diags_));
  EXPECT_EQ(saved(r).state, JobState::kCancelled);
}

// A reader that read the entry RUNNING, then saw the launcher gone, must not replace the
// SUCCEEDED that the job's owner wrote in between (docs/reliability.md, "Readers and the
// job's owner").
TEST_F(JobLifecycleTest, ObserveNeverOverwritesWhatTheOwnerWroteAfterTheRead) {
  JobRecord owner = slurm_job();
  owner.executor = "local";
  owner.state = JobState::kRunning;
  ASSERT_TRUE(lifecycle_.accepted(owner, diags_));
  JobRecord reader = saved(owner);  // the reader's copy: RUNNING
  ASSERT_TRUE(lifecycle_.finished(owner, status_of(JobState::kSucceeded, "finished", 0), diags_));
  EXPECT_TRUE(
      lifecycle_.observe(reader, status_of(JobState::kFailed, "the launcher is gone", {}), diags_));
  EXPECT_EQ(saved(owner).state, JobState::kSucceeded);
  EXPECT_EQ(saved(owner).state_detail, "finished");
  EXPECT_EQ(reader.state, JobState::kSucceeded) << "the reader shows what the owner wrote";
  EXPECT_FALSE(diags_.has_errors());
}

// A reader that is behind on a live job (--wait still holds PENDING while `status` recorded
// RUNNING) still records how the job ended: only a final state stands against a reader.
TEST_F(JobLifecycleTest, AReaderBehindOnALiveJobStillRecordsTheEnd) {
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle_.accepted(r, diags_));
  JobRecord waiter = saved(r);  // PENDING
  JobRecord other = saved(r);
  ASSERT_TRUE(lifecycle_.observe(other, status_of(JobState::kRunning, "RUNNING", {}), diags_));
  EXPECT_TRUE(lifecycle_.observe(waiter, status_of(JobState::kSucceeded, "COMPLETED", 0), diags_));
  EXPECT_EQ(saved(r).state, JobState::kSucceeded);
}

// The owner's record of a run it saw end stands, whatever a reader wrote meanwhile.
TEST_F(JobLifecycleTest, FinishedIsWrittenOverAReadersGuess) {
  JobRecord owner = slurm_job();
  owner.state = JobState::kRunning;
  ASSERT_TRUE(lifecycle_.accepted(owner, diags_));
  JobRecord reader = saved(owner);
  ASSERT_TRUE(lifecycle_.observe(reader, status_of(JobState::kFailed, "guess", {}), diags_));
  ASSERT_EQ(saved(owner).state, JobState::kFailed);
  ASSERT_TRUE(lifecycle_.finished(owner, status_of(JobState::kSucceeded, "finished", 0), diags_));
  EXPECT_EQ(saved(owner).state, JobState::kSucceeded);
}

// A file in jobs/ far larger than any entry is skipped by its size, without being read.
TEST_F(JobLifecycleTest, AHugeFileInTheRegistryIsSkippedUnread) {
  JobRecord r = slurm_job();
  ASSERT_TRUE(lifecycle_.accepted(r, diags_));
  const std::string huge = reg_.dir() + "/jobs/huge.json";
  { std::ofstream(huge) << "{"; }
  std::filesystem::resize_file(huge, uintmax_t{3} << 30);  // sparse: 3 GiB, nothing on disk
  Diagnostics read;
  std::vector<JobRecord> all = reg_.list(read);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, r.id);
  ASSERT_EQ(read.items().size(), 1u);
  EXPECT_NE(read.items()[0].message.find("more than any entry"), std::string::npos)
      << read.items()[0].message;
  std::filesystem::remove(huge);
}

}  // namespace
}  // namespace bridge
