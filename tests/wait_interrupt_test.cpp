// `--wait` interrupted while a scheduler client hangs, through the real bridge-launch binary
// with fake Slurm clients first on PATH (no cluster needed): the signal kills the hung
// client at once instead of waiting out its 60 s limit, and the launcher ends as any
// interrupted wait does (exit 130, the job keeps running).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "executors/executor.h"
#include "tests/integration/process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class WaitInterruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bool registered = false;
    for (const auto& e : executor_registry()) registered |= std::string(e.name) == "slurm";
    if (!registered) GTEST_SKIP() << "the slurm executor is not registered in this build";
    fs::create_directories(bin());
    fake("sbatch", "cat >/dev/null\necho 4646\n");
    // scontrol knows no job, so the poll asks squeue (status), which hangs: it writes its pid
    // for the test and becomes the sleep (a client that is one process, as squeue is).
    fake("scontrol", "exit 0\n");
    fake("squeue", "echo $$ > \"$(dirname \"$0\")/squeue.pid\"\nexec sleep 60\n");
    fake("sacct", "exit 0\n");
    recipe_ = dir_.write("waiting.yaml",
                         "name: waiting\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
                         "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                         "executor:\n  default: slurm\n  slurm: {account: acct, partition: "
                         "batch, job_dir: " +
                             dir_.path() + "/slurm-jobs}\n");
  }

  std::string bin() const { return dir_.path() + "/bin"; }
  std::string squeue_pid_file() const { return bin() + "/squeue.pid"; }

  void fake(const std::string& program, const std::string& body) const {
    std::string path = dir_.write("bin/" + program, "#!/bin/sh\n" + body);
    chmod(path.c_str(), 0755);
  }

  std::map<std::string, std::string> env() const {
    const char* path = std::getenv("PATH");
    return {{"PATH", bin() + ":" + (path ? path : "/usr/bin:/bin")},
            {"BRIDGE_LAUNCH_STATE_DIR", dir_.path() + "/state"},
            {"HOME", dir_.path()},
            {"NO_COLOR", "1"}};
  }

  // Whether the process is gone (or a zombie nobody reaped yet) within 2 s.
  static bool gone_soon(pid_t pid) {
    for (int i = 0; i < 20; ++i) {
      std::string stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
      size_t paren = stat.rfind(')');
      if (paren == std::string::npos || stat.compare(paren + 2, 1, "Z") == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  test::TempDir dir_;
  std::string recipe_;
};

TEST_F(WaitInterruptTest, ASignalWhileSqueueHangsEndsTheWaitAtOnce) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    fs::remove(squeue_pid_file());
    fs::path out = dir_.path() + "/wait-" + std::to_string(sig) + ".txt";
    pid_t launcher = test::start_background({BRIDGE_LAUNCH_BIN, "--wait", recipe_}, env(), out);
    // The first poll comes 1 s after the submission; give a loaded machine time to get there.
    ASSERT_TRUE(test::wait_for_text(squeue_pid_file(), "\n", 60)) << test::read_file(out);
    pid_t squeue = static_cast<pid_t>(std::stol(test::read_file(squeue_pid_file())));
    ASSERT_GT(squeue, 1);
    auto signalled = std::chrono::steady_clock::now();
    kill(launcher, sig);
    // squeue's own limit is 60 s: ending within 20 s is ending because of the signal.
    int code = test::wait_exit(launcher, 20);
    auto took = std::chrono::steady_clock::now() - signalled;
    std::string said = test::read_file(out);
    EXPECT_EQ(code, 130) << said;
    EXPECT_LT(took, std::chrono::seconds(20)) << said;
    EXPECT_THAT(said, HasSubstr("stopped waiting; job"));
    EXPECT_THAT(said, HasSubstr("keeps running"));
    // The killed query is not an answer: nothing about Slurm failing is reported.
    EXPECT_THAT(said, Not(HasSubstr("cannot get job states"))) << said;
    EXPECT_THAT(said, Not(HasSubstr("time limit"))) << said;
    bool squeue_gone = gone_soon(squeue);
    EXPECT_TRUE(squeue_gone) << "the hung squeue " << squeue << " outlived the launcher";
    if (!squeue_gone) kill(squeue, SIGKILL);
  }
}

}  // namespace
}  // namespace bridge
