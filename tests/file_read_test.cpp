// system/file_read.h, the one reader of files read back from a job dir, and every reader
// built on it (issue 47, item 7): a FIFO without a writer, a symlink to /dev/zero and a file
// over its bound each give a clear answer at once. Each read runs in a child process that is
// killed after a few seconds, so a reader that blocks fails the test instead of hanging it.
#include "system/file_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "executors/executor.h"
#include "executors/rank_logs.h"
#include "executors/slurm_retry.h"
#include "plan/plan_confirm.h"
#include "system/log_tail.h"
#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define BRIDGE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRIDGE_TEST_ASAN 1
#endif
#endif

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// What `read` returned, run in a child process; "killed: ..." when it did not finish within
// `limit` or did not end normally (a crash, an allocation past the child's memory limit).
std::string in_child(const std::function<std::string()>& reader,
                     std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  int fds[2];
  if (pipe(fds) != 0) return "killed: no pipe";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
#ifndef BRIDGE_TEST_ASAN
    // Reading /dev/zero to its end must not take the machine's memory with it.
    rlimit as{size_t{1} << 30, size_t{1} << 30};
    setrlimit(RLIMIT_AS, &as);
#endif
    std::string result = reader();
    for (size_t done = 0; done < result.size();) {
      ssize_t n = write(fds[1], result.data() + done, result.size() - done);
      if (n <= 0) _exit(1);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      return "killed: still reading after the time limit (blocked or unbounded)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "killed: the reader crashed";
  return out;
}

std::string reason(const fs::path& path, size_t max_bytes) {
  StatusOr<std::string> r = read_regular_file(path, max_bytes);
  return r.ok() ? "read " + std::to_string(r->size()) + " bytes" : r.why();
}

TEST(FileRead, ARegularFileIsReadWhole) {
  test::TempDir dir;
  std::string path = dir.write("verdict", std::string("{\"a\": 1}\n\0x", 11));
  StatusOr<std::string> r = read_regular_file(path, 11);
  ASSERT_TRUE(r.ok()) << r.why();
  EXPECT_EQ(*r, std::string("{\"a\": 1}\n\0x", 11));
  StatusOr<RegularFile> f = open_regular_file(path);
  ASSERT_TRUE(f.ok()) << f.why();
  EXPECT_EQ(f->size(), 11u);
  EXPECT_EQ(f->read_at(9, 100).value(), std::string("\0x", 2));
  EXPECT_EQ(f->read_at(50, 100).value(), "");
}

// A FIFO without a writer, a link to /dev/zero, a file over the bound, a directory and a
// missing file: each a clear reason, at once, with nothing read.
TEST(FileRead, WhatIsNotABoundedRegularFileIsRefusedAtOnceWithAReason) {
  test::TempDir dir;
  fs::path fifo = fs::path(dir.path()) / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::path zero = fs::path(dir.path()) / "zero";
  fs::create_symlink("/dev/zero", zero);
  std::string big = dir.write("big", std::string(1025, 'x'));
  fs::path good_link = fs::path(dir.path()) / "link";
  fs::create_symlink(dir.write("small", "ok"), good_link);
  struct Case {
    fs::path path;
    const char* why;
  };
  for (const Case& c : {Case{fifo, "is a FIFO, not a regular file"},
                        Case{zero, "is a symbolic link"}, Case{good_link, "is a symbolic link"},
                        Case{big, "has 1025 bytes, more than the 1024 it may hold"},
                        Case{dir.path(), "is a directory, not a regular file"},
                        Case{fs::path(dir.path()) / "missing", "No such file or directory"}}) {
    std::string why = in_child([&] { return reason(c.path, 1024); });
    EXPECT_THAT(why, HasSubstr(c.why)) << c.path;
    EXPECT_THAT(why, HasSubstr(c.path.filename().string())) << "the reason names the file";
  }
  EXPECT_EQ(in_child([&] { return reason(big, 1025); }), "read 1025 bytes");
}

// A job dir whose files are FIFOs (no writer), links to /dev/zero or huge: every reader of
// `status`, `why` and `logs` answers at once as if the file were absent.
class JobDirReaders : public ::testing::Test {
 protected:
  void SetUp() override {
    job_dir_ = dir_.path() + "/job";
    fs::create_directories(job_dir_);
  }

  // Replaces every file the readers look at with what `make` puts there.
  void plant(const std::function<void(const fs::path&)>& make) {
    for (const char* name : {kConfirmVerdictFile, kAttemptsFile, "hosts", "exits.tsv",
                             ".launcher.lock", "rank0.log", "rank1.log", "slurm-9.err"}) {
      fs::path p = fs::path(job_dir_) / name;
      fs::remove(p);
      make(p);
    }
  }

  JobRecord record(const std::string& executor, const std::string& scheduler_id) const {
    JobRecord r;
    r.id = "job-1";
    r.executor = executor;
    r.scheduler_id = scheduler_id;
    r.job_dir = job_dir_;
    r.state = JobState::kRunning;
    r.nodes = 1;
    r.ranks = 2;
    return r;
  }

  // What each reader makes of the planted files, one line each.
  std::string read_everything() const {
    std::ostringstream out;
    out << "verdict " << read_plan_confirmation(job_dir_).has_value() << "\n";
    out << "attempts " << read_slurm_attempts(job_dir_).size() << "\n";
    out << "hosts " << job_dir_hosts(job_dir_).size() << "\n";
    size_t first = 0;
    out << "tail " << read_last_lines(fs::path(job_dir_) / "rank0.log", 10, 4096, first).size()
        << "\n";
    std::ostringstream logged;
    LogTail tail("rank 0", fs::path(job_dir_) / "rank0.log");
    tail.start_at_last_lines(5);
    tail.pump(logged, true, true);
    out << "logs " << logged.str().size() << "\n";
    testing::ScriptedRunner runner([](const CommandSpec&) {
      CommandResult r;
      r.started = true;
      r.out = "9|FAILED|NonZeroExitCode\n";
      return r;
    });
    testing::TestServices seams(runner);
    for (const char* name : {"local", "slurm"}) {
      auto ex = make_executor(executor_registry(), name, seams.services());
      Diagnostics diags;
      JobRecord rec = record(name, name == std::string("local") ? "1" : "9");
      FailureEvidence e = ex->failure_evidence(rec, diags);
      size_t lines = 0;
      for (const RankEvidence& u : e.units) lines += u.lines.size();
      out << name << " why " << e.units.size() << " units, " << lines << " lines, order '"
          << e.order_source << "'\n";
      out << name << " status " << job_state_name(ex->status({rec}, diags).front().state) << "\n";
    }
    return out.str();
  }

  test::TempDir dir_;
  std::string job_dir_;
};

constexpr const char* kNothingRead =
    "verdict 0\nattempts 0\nhosts 0\ntail 0\nlogs 0\n"
    "local why 2 units, 0 lines, order ''\nlocal status FAILED\n"
    "slurm why 2 units, 0 lines, order ''\nslurm status FAILED\n";

TEST_F(JobDirReaders, FifosWithoutAWriterHangNoReader) {
  plant([](const fs::path& p) { ASSERT_EQ(mkfifo(p.c_str(), 0600), 0); });
  EXPECT_EQ(in_child([&] { return read_everything(); }), kNothingRead);
}

TEST_F(JobDirReaders, LinksToDevZeroAreNotRead) {
  plant([](const fs::path& p) { fs::create_symlink("/dev/zero", p); });
  EXPECT_EQ(in_child([&] { return read_everything(); }), kNothingRead);
}

// A verdict and an attempts record over their bounds (4 MiB, 1 MiB) are none, although each
// is well-formed: a 300 MB verdict cost 1.4 GB of memory.
TEST_F(JobDirReaders, FilesOverTheirBoundAreNotRead) {
  std::string note(size_t{4} << 20, 'x');
  std::ofstream(fs::path(job_dir_) / kConfirmVerdictFile)
      << R"({"confirmed": true, "rank": 0, "note": ")" << note << "\"}\n";
  std::string line = "start attempt=1 of=3 slurm_job=9 nodes=n1 at=2026-11-30T12:00:00Z\n";
  std::ofstream attempts(fs::path(job_dir_) / kAttemptsFile);
  for (size_t written = 0; written <= (size_t{1} << 20); written += line.size()) attempts << line;
  attempts.close();
  std::string answer = in_child([&] {
    return std::to_string(read_plan_confirmation(job_dir_).has_value()) + " " +
           std::to_string(read_slurm_attempts(job_dir_).size());
  });
  EXPECT_EQ(answer, "0 0");
  // Within the bounds, the same files are read.
  std::ofstream(fs::path(job_dir_) / kConfirmVerdictFile) << R"({"confirmed": true, "rank": 0})";
  std::ofstream(fs::path(job_dir_) / kAttemptsFile) << line;
  EXPECT_EQ(in_child([&] {
              return std::to_string(read_plan_confirmation(job_dir_).has_value()) + " " +
                     std::to_string(read_slurm_attempts(job_dir_).size());
            }),
            "1 1");
}

}  // namespace
}  // namespace bridge
