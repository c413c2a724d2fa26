// Fault injection (docs/reliability.md): what bridge-launch does when the registry directory
// is read-only or the disk is full, when it is stopped by SIGTERM in the middle of a local
// run, and when the scheduler's sbatch answers garbage or the controller is down (a fake
// `sbatch` first on PATH; no cluster needed). Every case: a clear error, the documented exit
// code, nothing started, nothing half-recorded, nothing left running.
//
// The read-only and disk-full cases mount a small tmpfs (we run as root in CI, and root
// ignores directory permissions); where mount is not permitted they fall back to chmod when
// not root, or are skipped with a message.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "executors/executor.h"
#include "jobs/registry.h"
#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::ChildResult;
using test::run_command;
using ::testing::HasSubstr;
using ::testing::Not;

using test::gone_within;
using test::processes_with;
using test::start_background;
using test::wait_exit;
using test::wait_for_text;

std::string slurp(const fs::path& p) { return test::read_file(p); }

// Every regular file under `dir` (relative path -> bytes): "nothing corrupted" is "equal".
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file()) files[fs::relative(it->path(), dir).string()] = slurp(it->path());
  return files;
}

size_t registry_entries(const fs::path& state) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state / "jobs", ec))
    if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') ++n;
  return n;
}

// A tmpfs mounted for the lifetime of the object (unmounted even when the test fails).
class TmpfsMount {
 public:
  TmpfsMount(const fs::path& where, const std::string& options) : where_(where) {
    fs::create_directories(where);
    mounted_ = mount("tmpfs", where.c_str(), "tmpfs", 0, options.c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~TmpfsMount() {
    if (mounted_ && umount(where_.c_str()) != 0) umount2(where_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool ok() const { return mounted_; }
  const std::string& error() const { return error_; }
  bool make_read_only() {
    return mount("tmpfs", where_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  fs::path where_;
  bool mounted_ = false;
  std::string error_;
};

class LocalFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bl-faults-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home");
    state_ = dir_ / "state";
    env_ = {{"BRIDGE_LAUNCH_STATE_DIR", state_.string()}, {"HOME", (dir_ / "home").string()}};
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  // A local job: `command` on 2 ranks. Long-running probe jobs carry `marker` so that the
  // test can find every process they started.
  std::string local_recipe(const std::string& name, const std::string& marker = "") {
    std::string runtime = marker.empty()
                              ? "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                              : "runtime:\n  command: [bridge-probe]\n"
                                "  args: [--steps, '1000', --compute-ms, '50', --timeout, '30', " +
                                    marker + "=1]\n  pass_overrides: false\n";
    return write(name + ".yaml", "name: " + name + "\ncluster: {num_gpus: 2, gpus_per_node: 2}\n" +
                                     runtime +
                                     "executor:\n  local: {job_dir: " + (dir_ / "jobs").string() +
                                     ", grace_period: 2, timeout: 120}\n");
  }

  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  ChildResult launch(const std::vector<std::string>& args,
                     std::map<std::string, std::string> extra = {}) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const auto& [k, v] : env_) extra.emplace(k, v);
    return run_command(argv, extra);
  }

  // Records one finished job so that the registry has an entry that must survive the fault.
  void record_one_job() {
    ChildResult first = launch({local_recipe("before")});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    ASSERT_EQ(registry_entries(state_), 1u);
  }

  // After a refused launch: nothing started, the job dir untouched, old entries intact.
  void expect_nothing_happened(const std::string& marker,
                               const std::map<std::string, std::string>& before) {
    EXPECT_TRUE(gone_within(marker, 5)) << "a rank was started";
    EXPECT_FALSE(fs::exists(dir_ / "jobs" / "refused")) << "a job dir was created";
    EXPECT_EQ(snapshot(state_), before) << "the registry changed";
    ChildResult list = launch({"list", "--format", "json"});
    EXPECT_EQ(list.exit_code, 0) << list.err;
    nlohmann::json jobs = nlohmann::json::parse(list.out, nullptr, false);
    ASSERT_TRUE(jobs.is_array()) << list.out;
    EXPECT_EQ(jobs.size(), 1u) << list.out;
    EXPECT_THAT(list.err, Not(HasSubstr("unreadable"))) << "an entry was damaged";
  }

  fs::path dir_, state_;
  std::map<std::string, std::string> env_;
};

// Readers never rewrite what the job's owner records (docs/reliability.md, "Readers and the
// job's owner"): `status` processes running all the time while short local jobs start and end
// must leave every job SUCCEEDED. Before the owner lock and the conditional reader write, about
// one job in six ended FAILED for good ("the launcher process N is gone"), and pending jobs
// showed as FAILED. BRIDGE_STRESS_JOBS sets the number of jobs (default 40; 200 in the
// reliability run of docs/reliability.md).
TEST_F(LocalFaultsTest, StatusReadersNeverRecordAFinishedJobAsFailed) {
  const char* count_text = std::getenv("BRIDGE_STRESS_JOBS");
  const int jobs = count_text && std::atoi(count_text) > 0 ? std::atoi(count_text) : 40;
  std::string recipe = write("tiny.yaml",
                             "name: tiny\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
                             "runtime:\n  command: [/bin/true]\n"
                             "  pass_overrides: false\nexecutor:\n  local: {job_dir: " +
                                 (dir_ / "jobs").string() + "}\n");
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, failed_reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      while (!done) {
        ChildResult r = run_command({BRIDGE_LAUNCH_BIN, "status"}, env_);
        ++reads;
        // A reader may see a job pending or running, never one that failed.
        if (r.out.find("FAILED") != std::string::npos) ++failed_reads;
      }
    });
  int launched_ok = 0;
  for (int i = 0; i < jobs; ++i)
    launched_ok += run_command({BRIDGE_LAUNCH_BIN, recipe}, env_).exit_code == 0;
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(launched_ok, jobs);
  Diagnostics diags;
  testing::TestServices seams;
  std::vector<JobRecord> records = JobRegistry(state_.string(), seams.registry_seams()).list(diags);
  ASSERT_EQ(records.size(), static_cast<size_t>(jobs));
  int succeeded = 0;
  for (const auto& r : records) {
    succeeded += r.state == JobState::kSucceeded;
    EXPECT_EQ(r.state, JobState::kSucceeded) << r.id << ": " << r.state_detail;
  }
  EXPECT_EQ(succeeded, jobs);
  EXPECT_EQ(failed_reads, 0) << "of " << reads << " status reads";
  // The readers ran alongside the jobs, not only after them.
  EXPECT_GE(reads, jobs / 2) << "status reads during " << jobs << " jobs";
}

TEST_F(LocalFaultsTest, ReadOnlyRegistryRefusesTheLaunchAndStartsNothing) {
  TmpfsMount mnt(state_, "size=4m,mode=0755");
  bool use_chmod = false;
  if (!mnt.ok()) {
    if (geteuid() == 0) GTEST_SKIP() << "cannot mount a tmpfs (" << mnt.error() << ") as root";
    use_chmod = true;
  }
  record_one_job();
  auto before = snapshot(state_);
  if (use_chmod) {
    fs::permissions(state_ / "jobs", fs::perms::owner_read | fs::perms::owner_exec);
    fs::permissions(state_, fs::perms::owner_read | fs::perms::owner_exec);
  } else {
    ASSERT_TRUE(mnt.make_read_only()) << std::strerror(errno);
  }
  std::string marker = "ro-marker-" + std::to_string(getpid());
  ChildResult r = launch({local_recipe("refused", marker)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("is not writable"));
  EXPECT_THAT(r.err, HasSubstr("nothing was submitted"));
  EXPECT_THAT(r.err, HasSubstr(state_.string()));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("internal error")));
  expect_nothing_happened(marker, before);
  if (use_chmod) fs::permissions(state_, fs::perms::owner_all, fs::perm_options::add);
}

TEST_F(LocalFaultsTest, FullDiskUnderTheRegistryRefusesTheLaunchAndRecovers) {
  TmpfsMount mnt(state_, "size=256k,mode=0755");
  if (!mnt.ok()) GTEST_SKIP() << "cannot mount a small tmpfs to fill (" << mnt.error() << ")";
  record_one_job();
  auto before = snapshot(state_);
  {  // Fill the file system to the last byte.
    std::ofstream fill(state_ / "filler", std::ios::binary);
    std::string block(4096, 'x');
    while (fill.write(block.data(), static_cast<std::streamsize>(block.size())) && fill.flush()) {
    }
  }
  before["filler"] = slurp(state_ / "filler");
  std::string marker = "full-marker-" + std::to_string(getpid());
  ChildResult r = launch({local_recipe("refused", marker)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("No space left on device"));
  EXPECT_THAT(r.err, HasSubstr("nothing was submitted"));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("internal error")));
  expect_nothing_happened(marker, before);

  // Once space is freed, the next launch works and both entries are listed.
  fs::remove(state_ / "filler");
  ChildResult again = launch({local_recipe("after")});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(registry_entries(state_), 2u);
}

// Room for a tiny file but not for the job's entry: the launch must still be refused before
// anything starts (a started job without a registry entry would be lost to status/cancel).
// The disk fills while the job runs: the job's outcome cannot be saved, so the launcher must
// not exit 0 as if all were well; it says which job and what state were lost.
TEST_F(LocalFaultsTest, DiskFillingDuringTheRunIsAFailureThatNamesTheJob) {
  TmpfsMount mnt(state_, "size=256k,mode=0755");
  if (!mnt.ok()) GTEST_SKIP() << "cannot mount a small tmpfs to fill (" << mnt.error() << ")";
  std::string recipe = write("filling.yaml",
                             "name: filling\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
                             "runtime:\n  command: [/bin/sh, -c, 'sleep 2']\n"
                             "  pass_overrides: false\nexecutor:\n  local: {job_dir: " +
                                 (dir_ / "jobs").string() + "}\n");
  fs::path out = dir_ / "out.txt";
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, recipe}, env_, out);
  ASSERT_TRUE(wait_for_text(out, "submitted job", 30)) << slurp(out);
  {  // Fill the registry's file system while the ranks sleep.
    std::ofstream fill(state_ / "filler", std::ios::binary);
    std::string block(4096, 'x');
    while (fill.write(block.data(), static_cast<std::streamsize>(block.size())) && fill.flush()) {
    }
  }
  EXPECT_EQ(wait_exit(pid, 60), 1) << slurp(out);
  std::string said = slurp(out);
  EXPECT_THAT(said, HasSubstr("registry-stale"));
  EXPECT_THAT(said, HasSubstr("its state SUCCEEDED could not be saved"));
  EXPECT_THAT(said, HasSubstr("No space left on device"));
  EXPECT_THAT(said, Not(HasSubstr("internal error")));
  // The entry written on acceptance is intact (still RUNNING), not truncated.
  fs::remove(state_ / "filler");
  ChildResult list = launch({"list", "--format", "json"});
  nlohmann::json jobs = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_TRUE(jobs.is_array() && jobs.size() == 1u) << list.out << list.err;
}

// A job dir that fills up while the ranks write: the job is not reported as a success with a
// silently truncated log (once: exit 0, SUCCEEDED, 1751 of 20001 lines).
TEST_F(LocalFaultsTest, FullJobDirIsAFailureNotATruncatedSuccess) {
  fs::path jobs = dir_ / "jobs";
  TmpfsMount mnt(jobs, "size=64k,mode=0755");
  if (!mnt.ok()) GTEST_SKIP() << "cannot mount a small tmpfs to fill (" << mnt.error() << ")";
  std::string recipe = write("chatty.yaml",
                             "name: chatty\ncluster: {num_gpus: 1}\n"
                             "runtime:\n  command: [/bin/sh, -c, 'seq 1 20000']\n"
                             "  adapter: none\nexecutor:\n  local: {job_dir: " +
                                 jobs.string() + "}\n");
  ChildResult r = launch({"-q", recipe});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank-log-incomplete"));
  EXPECT_THAT(r.err, HasSubstr("rank0.log (No space left on device)"));
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"FAILED\"")) << list.out;
  EXPECT_THAT(list.out, HasSubstr("logs are incomplete")) << list.out;
}

TEST_F(LocalFaultsTest, DiskWithRoomForAProbeButNotTheEntryRefusesTheLaunch) {
  TmpfsMount mnt(state_, "size=256k,mode=0755");
  if (!mnt.ok()) GTEST_SKIP() << "cannot mount a small tmpfs to fill (" << mnt.error() << ")";
  record_one_job();
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(state_.c_str(), &vfs), 0);
  size_t page = vfs.f_bsize, free_bytes = vfs.f_bavail * vfs.f_bsize;
  ASSERT_GT(free_bytes, page);
  {  // Leave exactly one block free: enough for a small file, not for an entry of a few KiB.
    std::ofstream fill(state_ / "filler", std::ios::binary);
    fill << std::string(free_bytes - page, 'x');
    ASSERT_TRUE(fill.flush()) << "could not pre-fill the tmpfs";
  }
  auto before = snapshot(state_);
  std::string marker = "nearly-full-marker-" + std::to_string(getpid());
  std::string path = local_recipe("refused", marker);
  std::ofstream(path, std::ios::app) << "env:\n  PADDING: \"" << std::string(3000, 'p') << "\"\n";
  ChildResult r = launch({path});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("No space left on device"));
  EXPECT_THAT(r.err, Not(HasSubstr("submitted job"))) << "the job was started";
  expect_nothing_happened(marker, before);
}

// SIGHUP (the ssh session or terminal went away) is handled as SIGTERM: it used to kill the
// launcher at once (exit 129, ranks SIGKILLed, the entry left RUNNING).
TEST_F(LocalFaultsTest, SigtermOrSighupStopsEveryRankExits130AndRecordsTheCancel) {
  for (int sig : {SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    std::string marker = "sig" + std::to_string(sig) + "-marker-" + std::to_string(getpid());
    fs::remove_all(state_);
    std::string path = local_recipe("sig" + std::to_string(sig), marker);
    fs::path out = dir_ / ("out" + std::to_string(sig) + ".txt");
    pid_t pid = start_background({BRIDGE_LAUNCH_BIN, path}, env_, out);
    ASSERT_TRUE(wait_for_text(out, "iteration        2/", 60)) << slurp(out);
    EXPECT_EQ(processes_with(marker).size(), 2u);
    kill(pid, sig);
    EXPECT_EQ(wait_exit(pid, 30), 130) << slurp(out);
    EXPECT_TRUE(gone_within(marker, 10)) << "ranks survived the signal";
    ChildResult st = launch({"status", "--format", "json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_THAT(st.out, HasSubstr("\"state\": \"CANCELLED\"")) << st.out;
  }
}

// ---------------------------------------------------------------------------------------
// A fake Slurm: shell scripts first on PATH stand in for sbatch/squeue.

class FakeSlurmTest : public LocalFaultsTest {
 protected:
  void SetUp() override {
    LocalFaultsTest::SetUp();
    bool registered = false;
    for (const auto& e : executor_registry()) registered |= std::string(e.name) == "slurm";
    if (!registered) GTEST_SKIP() << "the slurm executor is not registered in this build";
    fs::create_directories(dir_ / "bin");
    env_["PATH"] =
        (dir_ / "bin").string() + ":" + std::string(getenv("PATH") ? getenv("PATH") : "");
  }

  void fake(const std::string& program, const std::string& body) {
    fs::path p = dir_ / "bin" / program;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all);
  }

  std::string slurm_recipe(const std::string& name) {
    return write(name + ".yaml", "name: " + name +
                                     "\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
                                     "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                                     "executor:\n  default: slurm\n  slurm: {account: acct, "
                                     "partition: batch, job_dir: " +
                                     (dir_ / "slurm-jobs").string() + "}\n");
  }

  void expect_no_entry_and_no_dir(const ChildResult& r) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(r.out, "") << "no job id may be printed";
    EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
    EXPECT_THAT(r.err, Not(HasSubstr("submitted job")));
    EXPECT_EQ(registry_entries(state_), 0u) << "a failed submission was recorded";
    EXPECT_FALSE(fs::exists(dir_ / "slurm-jobs")) << "the job dir created for sbatch was kept";
  }
};

TEST_F(FakeSlurmTest, SbatchPrintingGarbageIsAFailureWithNoRegistryEntry) {
  fake("sbatch", "cat >/dev/null\necho '<html><body>502 Bad Gateway</body></html>'\nexit 0\n");
  ChildResult r = launch({slurm_recipe("garbage")});
  expect_no_entry_and_no_dir(r);
  EXPECT_THAT(r.err, HasSubstr("sbatch printed no job id"));
  EXPECT_THAT(r.err, HasSubstr("502 Bad Gateway"));
}

TEST_F(FakeSlurmTest, SbatchPrintingBinaryGarbageIsAFailureWithNoRegistryEntry) {
  fake("sbatch", "cat >/dev/null\nprintf 'job\\377\\376\\000id: \\033[31mx\\n'\nexit 0\n");
  ChildResult r = launch({slurm_recipe("binary")});
  expect_no_entry_and_no_dir(r);
  EXPECT_THAT(r.err, HasSubstr("no job id"));
  // Control bytes are shown escaped, never sent to the terminal.
  EXPECT_THAT(r.err, HasSubstr("\\x1b[31mx"));
  EXPECT_THAT(r.err, Not(HasSubstr("\033")));
}

TEST_F(FakeSlurmTest, SbatchErrorWithTerminalEscapesIsShownEscaped) {
  fake("sbatch", "cat >/dev/null\nprintf 'sbatch: error: \\033]0;pwned\\007bad\\n' >&2\nexit 1\n");
  ChildResult r = launch({slurm_recipe("escapes")});
  expect_no_entry_and_no_dir(r);
  EXPECT_THAT(r.err, HasSubstr("sbatch: error: \\x1b]0;pwned\\x07bad"));
  EXPECT_THAT(r.err, Not(HasSubstr("\033")));
  EXPECT_THAT(r.err, Not(HasSubstr("\007")));
}

TEST_F(FakeSlurmTest, ControllerDownIsAClearFailureWithNoRegistryEntry) {
  fake("sbatch",
       "cat >/dev/null\necho 'sbatch: error: Batch job submission failed: Unable to contact "
       "slurm controller (connect failure)' >&2\nexit 1\n");
  ChildResult r = launch({slurm_recipe("down")});
  expect_no_entry_and_no_dir(r);
  EXPECT_THAT(r.err, HasSubstr("Unable to contact slurm controller"));
  EXPECT_THAT(r.err, HasSubstr("scontrol ping"));
}

TEST_F(FakeSlurmTest, MissingSbatchIsAClearFailureWithNoRegistryEntry) {
  env_["PATH"] = (dir_ / "bin").string();  // an empty directory: no Slurm client at all
  ChildResult r = launch({slurm_recipe("nosbatch")}, {});
  expect_no_entry_and_no_dir(r);
  EXPECT_THAT(r.err, HasSubstr("sbatch"));
}

// Ctrl-C or SIGTERM while sbatch runs: the job Slurm accepts is recorded, never left running
// unrecorded (the signals are held back until the registry entry is written).
TEST_F(FakeSlurmTest, SignalDuringSbatchEndsWithTheJobRecorded) {
  fake("sbatch", "cat >/dev/null\nsleep 2\necho 5151\n");
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    fs::remove_all(state_);
    fs::path out = dir_ / ("during-" + std::to_string(sig) + ".txt");
    pid_t pid = start_background({BRIDGE_LAUNCH_BIN, slurm_recipe("during")}, env_, out);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));  // sbatch is sleeping
    kill(pid, sig);
    EXPECT_EQ(wait_exit(pid, 30), 130) << slurp(out);
    EXPECT_THAT(slurp(out), HasSubstr("was submitted and recorded"));
    ChildResult list = launch({"list", "--format", "json"});
    EXPECT_THAT(list.out, HasSubstr("\"scheduler_id\": \"5151\"")) << list.out << slurp(out);
  }
}

// A terminal's Ctrl-C goes to the whole process group: the launcher and the sbatch it started
// before planning (--executor on the command line). sbatch runs with SIGINT and SIGTERM
// blocked, so the submission completes and is recorded, as when only the launcher is hit.
TEST_F(FakeSlurmTest, CtrlCToTheProcessGroupDoesNotCutTheEarlySbatchOff) {
  fake("sbatch", "cat >/dev/null\nsleep 2\necho 5252\n");
  fs::path out = dir_ / "group-ctrl-c.txt";
  // setsid makes the launcher a process group leader, as a shell's job control does.
  pid_t pid = start_background(
      {"/usr/bin/setsid", BRIDGE_LAUNCH_BIN, "--executor", "slurm", slurm_recipe("group")}, env_,
      out);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // sbatch is sleeping
  kill(-pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, 30), 130) << slurp(out);
  EXPECT_THAT(slurp(out), HasSubstr("was submitted and recorded"));
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"scheduler_id\": \"5252\"")) << list.out << slurp(out);
}

// `--executor slurm` starts sbatch before the command line is parsed. Whatever the parse
// then finds decides: a subcommand or --dry-run starts no sbatch at all, a usage error leaves
// the early one without a script (nothing submitted), a launch submits exactly once.
TEST_F(FakeSlurmTest, TheSbatchStartedBeforeParsingSubmitsOnlyForALaunch) {
  fs::path runs = dir_ / "bin" / "runs";
  // Notes each start, and each script it got, as sbatch would take it.
  fake("sbatch", "echo started >> " + runs.string() + "\nscript=$(cat)\n" +
                     "[ -n \"$script\" ] || exit 1\necho submitted >> " + runs.string() +
                     "\necho 7171\n");
  std::string recipe = slurm_recipe("early");
  auto lines = [&]() {
    std::ifstream in(runs);
    std::vector<std::string> v;
    for (std::string l; std::getline(in, l);) v.push_back(l);
    fs::remove(runs);
    return v;
  };
  ChildResult plan = launch({"--executor", "slurm", "plan", recipe});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  ChildResult dry = launch({"--executor", "slurm", "--dry-run", recipe});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(lines(), ::testing::IsEmpty()) << "a plan or a dry-run started sbatch";

  ChildResult bad = launch({"--executor", "slurm", "--no-such-option", recipe});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  ChildResult invalid = launch({"--executor", "slurm", recipe, "cluster.num_gpus=-3"});
  EXPECT_EQ(invalid.exit_code, 2) << invalid.err;
  EXPECT_THAT(lines(), Not(::testing::Contains("submitted"))) << "a refused launch submitted";
  EXPECT_EQ(registry_entries(state_), 0u);

  ChildResult ok = launch({"--executor", "slurm", recipe});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(lines(), ::testing::ElementsAre("started", "submitted"));
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"scheduler_id\": \"7171\"")) << list.out;
}

// The job is recorded and announced as soon as sbatch prints its id, while sbatch still
// runs (it tears down for about half a millisecond after printing): this fake sbatch prints a
// banner line (passed over, as a site's wrapper might print one), then the id, and then waits
// until the registry entry holds the id as its Slurm id, so a launcher that recorded the id
// only after sbatch's exit would leave it waiting until its own limit ("late").
TEST_F(FakeSlurmTest, TheIdIsRecordedWhileSbatchIsStillRunning) {
  fs::path seen = dir_ / "bin" / "seen";
  fake("sbatch",
       "cat >/dev/null\necho 'site banner'\necho 8181\ni=0\n"
       "while ! grep -qs '\"scheduler_id\": *\"8181\"' " +
           (state_ / "jobs").string() +
           "/*.json; do\n"
           "  i=$((i+1)); if [ $i -gt 1000 ]; then echo late > " +
           seen.string() + "; exit 0; fi\n  sleep 0.01\ndone\necho recorded > " + seen.string() +
           "\n");
  ChildResult r = launch({slurm_recipe("early-id")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(slurm id 8181)"));
  EXPECT_THAT(r.out, ::testing::MatchesRegex("early-id-[-0-9a-z]+\n")) << "the id, flushed";
  // The launcher does not wait for sbatch's end (the next test): the fake may write its
  // verdict a moment after the launcher returned.
  EXPECT_TRUE(wait_for_text(seen, "\n", 20)) << "the fake sbatch never finished";
  EXPECT_EQ(slurp(seen), "recorded\n") << "the id was recorded only after sbatch ended";
}

// With --wait the launcher waits for sbatch's end (it follows the job afterwards anyway):
// sbatch that prints a job id and then exits non-zero did create the job, which is recorded,
// and the exit is reported as a warning.
TEST_F(FakeSlurmTest, WithWaitAnIdThenAFailingSbatchIsRecordedWithAWarning) {
  fake("sbatch", "cat >/dev/null\necho 6262\nexit 1\n");
  fake("squeue", "case \"$*\" in *--jobs=*6262*) echo '6262|COMPLETED|None' ;; esac\nexit 0\n");
  fake("sacct", "exit 0\n");
  fake("scontrol", "exit 0\n");
  ChildResult r = launch({"--wait", slurm_recipe("idthenfail-wait")});
  EXPECT_THAT(r.err, HasSubstr("after printing job id 6262")) << r.err;
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"scheduler_id\": \"6262\"")) << list.out;
}

// A submission without --wait ends once the id is recorded: sbatch's teardown after the id
// is left to sbatch, neither waited for nor killed. This fake sbatch prints the id and then
// waits for `release`, which the test creates only after the launcher returned; it then
// exits non-zero, which nothing waits to see (the job was accepted with its id).
TEST_F(FakeSlurmTest, TheLaunchEndsOnceTheIdIsRecordedAndLeavesSbatchToEnd) {
  fs::path release = dir_ / "release";
  fs::path ended = dir_ / "ended";
  fake("sbatch", "cat >/dev/null\necho 6161\nwhile [ ! -e " + release.string() +
                     " ]; do sleep 0.01; done\necho ended > " + ended.string() + "\nexit 1\n");
  ChildResult r = launch({slurm_recipe("idthenfail")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(slurm id 6161)"));
  EXPECT_FALSE(fs::exists(ended)) << "the launcher waited for sbatch's end";
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"scheduler_id\": \"6161\"")) << list.out;
  std::ofstream(release.string()) << "go";
  EXPECT_TRUE(wait_for_text(ended, "ended", 20)) << "sbatch, left to end, was killed";
}

// Submission durability (docs/reliability.md): bridge-launch killed with SIGKILL at any
// point of a submission never loses a job the scheduler accepted. The fake sbatch accepts
// every non-empty script (as sbatch does) and notes "<slurm id> <comment>" in `accepted`;
// after each kill, every accepted job must be in the registry under the id of its comment
// (with that Slurm id, or still pending when the kill came before the commit), no entry may
// claim a Slurm id that was not accepted, and no entry may be damaged.
class SubmitKillTest : public FakeSlurmTest {
 protected:
  // Runs the launch once under strace, then once per system call of the launcher's main
  // thread from the id's reservation on, with SIGKILL injected at that call.
  void kill_at_every_system_call(const std::vector<std::string>& args) {
    fs::path trace = dir_ / "trace.txt";
    std::vector<std::string> argv{"strace", "-qq", "-o", trace.string(), BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildResult first = run_command(argv, env_);
    if (first.exit_code != 0 && first.err.find("ptrace") != std::string::npos)
      GTEST_SKIP() << "strace cannot trace here: " << first.err;
    ASSERT_EQ(first.exit_code, 0) << first.err;
    expect_no_accepted_job_lost("no kill");
    // (system call, its n-th call in the process) for each call from the reservation on.
    std::vector<std::pair<std::string, int>> points;
    std::map<std::string, int> seen;
    bool reserving = false;
    std::ifstream lines(trace);
    for (std::string line; std::getline(lines, line);) {
      size_t paren = line.find('(');
      if (paren == std::string::npos || line.rfind("+++", 0) == 0 || line.rfind("---", 0) == 0)
        continue;
      std::string name = line.substr(0, paren);
      if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        continue;
      int n = ++seen[name];
      reserving |= line.find(".reservation") != std::string::npos;
      if (reserving) points.emplace_back(name, n);
    }
    ASSERT_GT(points.size(), 10u) << "the trace shows no reservation:\n" << test::read_file(trace);
    size_t accepted_before = accepted_jobs_;
    for (const auto& [name, n] : points) {
      std::string what = fmt::format("SIGKILL at {} #{}", name, n);
      std::string inject = fmt::format("inject={}:signal=SIGKILL:when={}", name, n);
      std::vector<std::string> killed{"strace",        "-qq", "-o",   "/dev/null",      "-e",
                                      "trace=" + name, "-e",  inject, BRIDGE_LAUNCH_BIN};
      killed.insert(killed.end(), args.begin(), args.end());
      run_command(killed, env_);
      expect_no_accepted_job_lost(what);
      if (HasFatalFailure()) return;
    }
    // Some launches never got as far as sbatch.
    EXPECT_LT(accepted_jobs_ - accepted_before, points.size() + 1);
    std::cout << points.size() << " kill points\n";
  }

  void SetUp() override {
    FakeSlurmTest::SetUp();
    if (IsSkipped()) return;
    // The lock lets the test wait for an sbatch that outlived its killed launcher.
    fake("sbatch",
         "exec 9>>\"$(dirname \"$0\")/sbatch.lock\"; flock 9\n"
         "dir=$(dirname \"$0\")\n"
         "[ \"$KILL_AT\" = before-script ] && kill -9 $PPID\n"
         "script=$(cat)\n"
         "[ -n \"$script\" ] || { echo 'sbatch: error: Batch script is empty!' >&2; exit 1; }\n"
         "comment=$(printf '%s\\n' \"$script\" | sed -n 's/^#SBATCH --comment=//p')\n"
         "[ \"$KILL_AT\" = before-accept ] && kill -9 $PPID\n"
         "id=$((7000 + $(cat \"$dir/accepted\" 2>/dev/null | wc -l)))\n"
         "echo \"$id $comment\" >>\"$dir/accepted\"\n"
         "[ \"$KILL_AT\" = before-answer ] && kill -9 $PPID\n"
         "echo $id\n"
         // A launcher that does not wait may be gone by now (it ends once the id is
         // recorded): the kill is only for a parent that is still this sbatch's.
         "[ \"$KILL_AT\" = after-answer ] && [ \"$(cut -d' ' -f4 /proc/$$/stat)\" = \"$PPID\" ] &&"
         " kill -9 $PPID\n"
         "exit 0\n");
  }

  // Waits until no fake sbatch holds its lock (an sbatch outlives a killed launcher).
  void wait_for_sbatch() {
    int fd = open((dir_ / "bin" / "sbatch.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    flock(fd, LOCK_EX);
    close(fd);
  }

  // The invariants after one (possibly killed) submission; `what` names the kill point.
  void expect_no_accepted_job_lost(const std::string& what) {
    wait_for_sbatch();
    std::map<std::string, std::string> accepted;  // bridge-launch id -> Slurm id
    std::ifstream in(dir_ / "bin" / "accepted");
    for (std::string slurm_id, comment; in >> slurm_id >> comment;)
      accepted[comment.substr(comment.find(':') + 1)] = slurm_id;
    ChildResult list = launch({"list", "--format", "json"});
    ASSERT_EQ(list.exit_code, 0) << what << list.err;
    EXPECT_THAT(list.err, Not(HasSubstr("unreadable"))) << what;
    nlohmann::json jobs = nlohmann::json::parse(list.out, nullptr, false);
    ASSERT_TRUE(jobs.is_array()) << what << list.out;
    std::map<std::string, std::string> recorded;  // bridge-launch id -> recorded Slurm id
    for (const auto& j : jobs) recorded[j.value("id", "")] = j.value("scheduler_id", "");
    for (const auto& [id, slurm_id] : accepted) {
      ASSERT_TRUE(recorded.count(id)) << what << ": Slurm accepted job " << slurm_id << " (" << id
                                      << ") and the registry lost it\n"
                                      << list.out;
      EXPECT_THAT(recorded[id], ::testing::AnyOf(slurm_id, "")) << what;
      if (recorded[id].empty()) accepted_but_pending_.insert(id);
    }
    for (const auto& [id, slurm_id] : recorded) {
      if (!slurm_id.empty()) {
        EXPECT_EQ(accepted[id], slurm_id) << what << ": " << id << " claims a job never accepted";
      }
    }
    accepted_jobs_ = accepted.size();
  }

  // Accepted jobs whose launcher was killed before it committed the Slurm id.
  std::set<std::string> accepted_but_pending_;
  size_t accepted_jobs_ = 0;
};

TEST_F(SubmitKillTest, KilledWhileSbatchRunsNeverLosesAnAcceptedJob) {
  for (const char* at : {"before-script", "before-accept", "before-answer", "after-answer"}) {
    ChildResult r = launch({slurm_recipe("killsb")}, {{"KILL_AT", at}});
    // After the answer the launcher may have recorded the job and ended before the kill
    // (it does not wait for sbatch's end): killed or done, nothing may be lost.
    if (std::string(at) != "after-answer") {
      EXPECT_NE(r.exit_code, 0) << at << r.err;
    }
    expect_no_accepted_job_lost(at);
  }
  // Every kill from before-accept on came after sbatch had the script: 3 or 4 accepted.
  std::ifstream in(dir_ / "bin" / "accepted");
  EXPECT_GE(std::count(std::istreambuf_iterator<char>(in), {}, '\n'), 3);
}

// Every system call of the launcher from the id's reservation on (the pending entry, its
// fsyncs and rename, starting sbatch, writing its script, reading its answer, the commit)
// is, in turn, the one where SIGKILL arrives (strace's fault injection; the call does not
// happen).
TEST_F(SubmitKillTest, KilledAtEverySystemCallOfTheSubmissionNeverLosesAnAcceptedJob) {
  if (run_command({"sh", "-c", "command -v strace"}).exit_code != 0)
    GTEST_SKIP() << "strace is not installed";
  std::string recipe = slurm_recipe("killsc");
  // sbatch started after planning (the recipe names the executor), and before parsing
  // (--executor on the command line).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{recipe},
        std::vector<std::string>{"--executor", "slurm", recipe}}) {
    SCOPED_TRACE(args.size() == 1 ? "sbatch started after planning" : "sbatch started early");
    kill_at_every_system_call(args);
    if (HasFatalFailure() || IsSkipped()) return;
  }
  // The kills did land on both sides of sbatch's acceptance: some jobs were accepted and
  // only their pending entry names them, and some launches never got as far as sbatch.
  EXPECT_FALSE(accepted_but_pending_.empty());
  std::cout << accepted_jobs_ << " jobs accepted, " << accepted_but_pending_.size()
            << " of them killed before the commit\n";
}

TEST_F(FakeSlurmTest, InterruptedWaitLeavesTheJobRunningAndStatusFindsIt) {
  fake("sbatch", "cat >/dev/null\necho '4242;cluster'\n");
  // squeue answers RUNNING for our job id; every other query finds nothing.
  fake("squeue", "case \"$*\" in *--jobs=*4242*) echo '4242|RUNNING|None' ;; esac\nexit 0\n");
  fake("sacct", "exit 0\n");
  fake("scontrol", "exit 0\n");
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    // A file per run: the previous run's "RUNNING" must not trigger the signal early.
    fs::path out = dir_ / ("wait-" + std::to_string(sig) + ".txt");
    pid_t pid = start_background({BRIDGE_LAUNCH_BIN, "--wait", slurm_recipe("waiting")}, env_, out);
    ASSERT_TRUE(wait_for_text(out, "RUNNING", 60)) << slurp(out);
    kill(pid, sig);
    EXPECT_EQ(wait_exit(pid, 30), 130) << slurp(out);
    EXPECT_THAT(slurp(out), HasSubstr("keeps running"));
    ChildResult st = launch({"status", "--format", "json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_THAT(st.out, HasSubstr("\"scheduler_id\": \"4242\""));
    EXPECT_THAT(st.out, HasSubstr("\"state\": \"RUNNING\""));
    EXPECT_THAT(st.out, Not(HasSubstr("CANCELLED"))) << "an interrupted wait cancelled the job";
  }
}

TEST_F(FakeSlurmTest, KilledWaitIsRecoveredByTheNextStatus) {
  fake("sbatch", "cat >/dev/null\necho 4343\n");
  fake("squeue", "case \"$*\" in *--jobs=*4343*) cat \"$(dirname \"$0\")/state\" ;; esac\n");
  fake("sacct", "exit 0\n");
  fake("scontrol", "exit 0\n");
  std::ofstream(dir_ / "bin" / "state") << "4343|RUNNING|None\n";
  fs::path out = dir_ / "wait.txt";
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, "--wait", slurm_recipe("killed")}, env_, out);
  ASSERT_TRUE(wait_for_text(out, "RUNNING", 60)) << slurp(out);
  kill(pid, SIGKILL);
  wait_exit(pid, 10);
  // The job finishes while nobody is watching; `status` catches up and records it.
  std::ofstream(dir_ / "bin" / "state") << "4343|COMPLETED|None\n";
  ChildResult st = launch({"status", "--format", "json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_THAT(st.out, HasSubstr("\"state\": \"SUCCEEDED\"")) << st.out;
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"state\": \"SUCCEEDED\"")) << "status did not save the state";
}

}  // namespace
}  // namespace bridge
