// The local executor end to end: real bridge-launch, real bridge-probe ranks, real signals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "probe/env_hash.h"
#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::ChildResult;
using test::run_command;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

using test::processes_with;
using test::read_file;
using test::start_background;
using test::wait_exit;
using test::wait_for_text;

class LocalExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bl-local-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    env_ = {{"BRIDGE_LAUNCH_STATE_DIR", (dir_ / "state").string()}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A probe recipe with `extra_args` appended to the probe's arguments.
  std::string recipe(const std::string& name, const std::string& extra_args, bool overlap = true,
                     const std::string& extra_yaml = "") {
    std::string text = "name: " + name +
                       "\ncluster: {num_gpus: 4, gpus_per_node: 4}\n"
                       "comm_overlap: {overlap_grad_reduce: " +
                       (overlap ? "true" : "false") +
                       "}\nddp: {use_distributed_optimizer: true}\n"
                       "runtime:\n  command: [bridge-probe]\n"
                       "  args: [--steps, '8', --buckets, '16', --compute-ms, '100', "
                       "--link-gbps, '0.2', --timeout, '5'" +
                       extra_args +
                       "]\n  pass_overrides: false\n"
                       "executor:\n  local: {job_dir: " +
                       (dir_ / "jobs").string() + ", grace_period: 2, timeout: 120}\n" + extra_yaml;
    fs::path p = dir_ / (name + ".yaml");
    std::ofstream(p) << text;
    return p.string();
  }

  ChildResult launch(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, env_);
  }

  fs::path dir_;
  std::map<std::string, std::string> env_;
};

double steady_step_ms(const std::string& out) {
  std::smatch m;
  static const std::regex kSummary(R"(summary \(mean over steps [^)]*\):.*step \(ms\): ([0-9.]+))");
  if (!std::regex_search(out, m, kSummary)) return -1;
  return std::stod(m[1]);
}

TEST_F(LocalExecutorTest, DemoRecipeRunsWithEnvCheckAndOverlapEfficiency) {
  ChildResult r = launch({std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/demo.yaml",
                          "executor.local.job_dir=" + (dir_ / "jobs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0]  ["));
  EXPECT_THAT(r.out, HasSubstr("iteration        8/       8"));
  EXPECT_THAT(r.out, HasSubstr("env check: all ranks match"));
  EXPECT_THAT(r.out, HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS"));
  EXPECT_THAT(r.out, HasSubstr("overlap efficiency: "));
  EXPECT_THAT(r.out, HasSubstr("rendezvous complete: 4 ranks"));
  EXPECT_THAT(r.out, HasSubstr("bridge-probe: OK"));
  // The plan reached every rank: the probe adapter's values, checked on each of the 4 ranks.
  EXPECT_THAT(r.out, HasSubstr("plan check: 13 planned values, 4 ranks"));
  EXPECT_THAT(r.out, HasSubstr("plan check: all ranks match"));
  EXPECT_THAT(r.out, HasSubstr("training: 8 steps (train.max_steps)"));
}

// A secret that the shell expands on the rank never appears in a process's arguments
// (/proc/PID/cmdline is world-readable): the expansion below keeps the wrapper alive for a
// second, while every process's arguments are searched for the value.
TEST_F(LocalExecutorTest, ExpandedSecretIsNeverInAnyProcessArguments) {
  const std::string marker = "XPAND-S3CRET-" + std::to_string(getpid());
  std::string yaml = "env:\n  TOKEN: {value: '" + marker +
                     "-$(sleep 2; echo done)', secret: true, expand: true}\n";
  std::string path = recipe("xsecret", ", --steps, '1'", true, yaml);
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, path}, env_, dir_ / "xsecret.out");
  int seen = 0;
  for (int i = 0; i < 25; ++i) {
    seen += static_cast<int>(processes_with(marker).size());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(wait_exit(pid, 60), 0);
  EXPECT_EQ(seen, 0) << "the secret was visible in /proc/*/cmdline";
}

// The end of a rank is its exit, not EOF on its pipe: a daemon that a rank started and that
// holds the rank's stdout (`setsid ... &`) must not hang the launcher.
TEST_F(LocalExecutorTest, DaemonHoldingARanksOutputDoesNotHangTheLauncher) {
  const std::string marker = "daemon-holds-pipe-" + std::to_string(getpid());
  std::string text =
      "name: daemon\ncluster: {num_gpus: 1}\n"
      "runtime:\n  adapter: none\n  command: [/bin/sh, -c, 'setsid /bin/sh -c "
      "\"sleep 30; : " +
      marker +
      "\" & echo rank done']\n"
      "executor:\n  local: {job_dir: " +
      (dir_ / "jobs").string() + ", grace_period: 1, timeout: 60}\n";
  fs::path p = dir_ / "daemon.yaml";
  std::ofstream(p) << text;
  auto start = std::chrono::steady_clock::now();
  ChildResult r = launch({p.string()});
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<pid_t> survivors = processes_with(marker);
  for (pid_t pid : survivors) kill(pid, SIGKILL);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank done"));
  EXPECT_LT(seconds, 15.0) << "the launcher waited for the daemon";
  // ... and the daemon does not outlive the job (the launcher is a child subreaper).
  EXPECT_TRUE(survivors.empty()) << "a process the rank started outlived the job";
  EXPECT_THAT(r.err, HasSubstr("stopped 1 process the ranks had left running"));
}

// A shared job dir: another user plants a symlink where the job's directory goes
// (<job_dir>/<name> -> their directory). The launch must fail clearly, start nothing and
// write nothing through the link (rank logs in their directory, readable by them).
TEST_F(LocalExecutorTest, SymlinkPlantedInASharedJobDirIsNotFollowed) {
  fs::create_directories(dir_ / "jobs");
  fs::create_directories(dir_ / "other-user");
  fs::create_directory_symlink(dir_ / "other-user", dir_ / "jobs" / "planted");
  std::string text =
      "name: planted\ncluster: {num_gpus: 1}\n"
      "runtime:\n  adapter: none\n  command: [/bin/echo, rank output]\n"
      "executor:\n  local: {job_dir: " +
      (dir_ / "jobs").string() + "}\n";
  fs::path p = dir_ / "planted.yaml";
  std::ofstream(p) << text;
  ChildResult r = launch({p.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("is a symbolic link"));
  EXPECT_THAT(r.out, Not(HasSubstr("rank output")));
  EXPECT_TRUE(fs::is_empty(dir_ / "other-user")) << "the job wrote through the planted link";
  // The same recipe without the link runs, and its files are new ones of this user.
  fs::remove(dir_ / "jobs" / "planted");
  ChildResult ok = launch({p.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  // A <name> directory of another user is refused too (only root can make one here).
  if (geteuid() != 0) return;
  fs::remove_all(dir_ / "jobs" / "planted");
  fs::create_directories(dir_ / "jobs" / "planted");
  ASSERT_EQ(chown((dir_ / "jobs" / "planted").c_str(), 65534, 65534), 0);
  ChildResult theirs = launch({p.string()});
  EXPECT_EQ(theirs.exit_code, 1) << theirs.out << theirs.err;
  EXPECT_THAT(theirs.err, HasSubstr("belongs to uid 65534"));
  EXPECT_TRUE(fs::is_empty(dir_ / "jobs" / "planted"));
}

// A setsid'ed grandchild that ignores SIGTERM, left by a rank when another rank fails, is
// stopped too (SIGKILL after the grace).
TEST_F(LocalExecutorTest, TermIgnoringDaemonOfAFailedJobIsStopped) {
  const std::string marker = "term-ignoring-daemon-" + std::to_string(getpid());
  std::string text =
      "name: stubborn\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
      "runtime:\n  adapter: none\n  command: [/bin/sh, -c, 'if [ \"$RANK\" = 0 ]; then "
      "setsid /bin/sh -c \"trap \\\"\\\" TERM; sleep 60; : " +
      marker +
      "\" </dev/null >/dev/null 2>&1 & sleep 30; else sleep 1; exit 3; fi']\n"
      "executor:\n  local: {job_dir: " +
      (dir_ / "jobs").string() + ", grace_period: 1, timeout: 60}\n";
  fs::path p = dir_ / "stubborn.yaml";
  std::ofstream(p) << text;
  ChildResult r = launch({p.string()});
  std::vector<pid_t> survivors = processes_with(marker);
  for (pid_t pid : survivors) kill(pid, SIGKILL);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 1 exited with code 3"));
  EXPECT_TRUE(survivors.empty()) << "a TERM-ignoring daemon outlived the failed job";
}

// bridge-launch as a container's entrypoint (PID 1 of a PID namespace) starts its ranks
// like anywhere else (a "parent died" check once compared the parent's pid with 1).
TEST_F(LocalExecutorTest, RunsAsPidOneOfAPidNamespace) {
  if (geteuid() != 0 || access("/usr/bin/unshare", X_OK) != 0)
    GTEST_SKIP() << "needs root and unshare (util-linux) for a PID namespace";
  std::string path = recipe("pid1", ", --steps, '2'");
  for (int run = 0; run < 3; ++run) {
    ChildResult r = run_command(
        {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", BRIDGE_LAUNCH_BIN, path}, env_);
    ASSERT_EQ(r.exit_code, 0) << "run " << run << "\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("bridge-probe: OK"));
  }
}

// A reader that goes away (`bridge-launch ... | head -c 1`) must not kill the launcher: the
// job runs to its end and its final state is recorded.
TEST_F(LocalExecutorTest, ClosedStdoutPipeDoesNotKillTheLauncherOrTheJob) {
  std::string path = recipe("piped", "");
  std::string cmd = std::string(BRIDGE_LAUNCH_BIN) + " " + path + " | head -c 1 >/dev/null";
  ChildResult piped = run_command({"/bin/bash", "-c", cmd}, env_);
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  ChildResult list = launch({"list", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("\"SUCCEEDED\"")) << list.out;
}

// A wrapper between the launcher and the runtime that changes the layout (here it appends a
// tp override) is caught by the ranks' plan check: the job fails and names rank and field.
TEST_F(LocalExecutorTest, RuntimeThatReceivesAnotherLayoutFailsThePlanCheck) {
  std::string text =
      "name: wrapped\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
      "train: {max_steps: 2, global_batch_size: 2}\n"
      "runtime:\n  adapter: probe\n"
      "  command: [bash, -c, 'exec \"$0\" \"$@\" model.tensor_model_parallel_size=2', " +
      std::string(BRIDGE_PROBE_BIN) +
      "]\n  args: [--compute-ms, '10', --timeout, '20']\n"
      "executor:\n  local: {job_dir: " +
      (dir_ / "jobs").string() + ", grace_period: 2, timeout: 60}\n";
  fs::path p = dir_ / "wrapped.yaml";
  std::ofstream(p) << text;
  ChildResult r = launch({p.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  std::string all = r.out + r.err;
  EXPECT_THAT(all, HasSubstr("plan mismatch: rank 0: model.tensor_model_parallel_size: planned 1, "
                             "received 2"));
  EXPECT_THAT(all, HasSubstr("plan check: MISMATCH"));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("bridge-probe: OK")));
}

// Both runs share one emulated link; compute is real CPU work on 4 ranks over 2 cores, so a
// machine busy with other work shrinks the gain. Each attempt measures both modes back to
// back; the best of up to three attempts must show the margin.
TEST_F(LocalExecutorTest, OverlapIsClearlyFasterThanNoOverlapOnTheSameLink) {
  double best_ratio = 1e9;
  std::string report;
  for (int attempt = 0; attempt < 3 && best_ratio > 0.85; ++attempt) {
    ChildResult off = launch({recipe("ovl-off", "", false)});
    ChildResult on = launch({recipe("ovl-on", "", true)});
    ASSERT_EQ(off.exit_code, 0) << off.err;
    ASSERT_EQ(on.exit_code, 0) << on.err;
    EXPECT_THAT(on.out, HasSubstr("overlap on (BRIDGE_OVERLAP_GRAD_REDUCE=1)"));
    EXPECT_THAT(off.out, HasSubstr("overlap off (BRIDGE_OVERLAP_GRAD_REDUCE=0)"));
    double t_off = steady_step_ms(off.out), t_on = steady_step_ms(on.out);
    ASSERT_GT(t_off, 0) << off.out;
    ASSERT_GT(t_on, 0) << on.out;
    best_ratio = std::min(best_ratio, t_on / t_off);
    report += " overlap " + std::to_string(t_on) + " ms vs " + std::to_string(t_off) + " ms;";
  }
  EXPECT_LE(best_ratio, 0.85) << report;
}

TEST_F(LocalExecutorTest, FailingRankStopsTheJobPromptlyAndIsNamed) {
  auto start = std::chrono::steady_clock::now();
  ChildResult r = launch({recipe("fail", ", --fail-rank, '2', --fail-at-step, '2'")});
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 2 exited with code 17"));
  EXPECT_THAT(r.err, HasSubstr("rank2.log"));
  EXPECT_LT(seconds, 30);
}

TEST_F(LocalExecutorTest, HungRankIsCaughtByTheStepTimeout) {
  auto start = std::chrono::steady_clock::now();
  ChildResult r = launch({recipe("hang", ", --hang-rank, '1', --timeout, '3'")});
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("timed out"));
  EXPECT_LT(seconds, 60);
}

// checkpoint: (docs/long-jobs.md): a job that fails after its checkpoints is launched again,
// and every rank of the new job resumes from the newest complete checkpoint, runs only the
// remaining steps and ends; `status` shows the checkpoint.
TEST_F(LocalExecutorTest, ALaunchAfterAFailureResumesFromTheNewestCheckpoint) {
  const std::string ckpt = (dir_ / "ckpt").string();
  auto write = [&](const std::string& name, const std::string& extra_args) {
    fs::path p = dir_ / (name + ".yaml");
    std::ofstream(p) << "name: " << name << "\n"
                     << "cluster: {num_gpus: 2, gpus_per_node: 2}\n"
                        "train: {global_batch_size: 2, micro_batch_size: 1, max_steps: 6}\n"
                        "checkpoint: {dir: "
                     << ckpt
                     << ", interval: 2}\n"
                        "runtime: {launcher: direct, command: [bridge-probe], args: [--compute-ms, "
                        "'20', --timeout, '20'"
                     << extra_args << "]}\nexecutor: {local: {job_dir: " << (dir_ / "jobs").string()
                     << ", grace_period: 2, timeout: 120}}\n";
    return p.string();
  };
  ChildResult failed = launch({write("resume", ", --fail-rank, '1', --fail-at-step, '5'")});
  ASSERT_EQ(failed.exit_code, 1) << failed.err;
  // Iteration 4 was saved before rank 1 failed, unless the stop of rank 0 came while it wrote
  // the tracker: then the newest complete one is 2. Either is what a restart resumes from.
  std::string tracked = read_file(ckpt + "/latest_checkpointed_iteration.txt");
  ASSERT_TRUE(tracked == "4\n" || tracked == "2\n") << tracked;
  const std::string from = tracked.substr(0, 1);

  ChildResult resumed = launch({write("resume", "")});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("rank 0 resumes from checkpoint iteration " + from));
  EXPECT_THAT(resumed.out, Not(HasSubstr("iteration        1/")));
  EXPECT_THAT(resumed.out, HasSubstr("saved checkpoint iteration 6"));
  EXPECT_EQ(read_file(ckpt + "/latest_checkpointed_iteration.txt"), "6\n");
  // Every rank says so, in its own log.
  ChildResult list = launch({"list", "--format", "json"});
  auto jobs = nlohmann::json::parse(list.out);
  ASSERT_EQ(jobs.size(), 2u) << list.out;
  auto second = std::find_if(jobs.begin(), jobs.end(),
                             [](const auto& j) { return j["state"] == "SUCCEEDED"; });
  ASSERT_NE(second, jobs.end()) << list.out;
  const std::string id = (*second)["id"].get<std::string>();
  const std::string job_dir = (*second)["job_dir"].get<std::string>();
  for (int rank : {0, 1})
    EXPECT_THAT(
        read_file(job_dir + "/rank" + std::to_string(rank) + ".log"),
        HasSubstr("rank " + std::to_string(rank) + " resumes from checkpoint iteration " + from));
  ChildResult status = launch({"status", id});
  EXPECT_THAT(status.out, HasSubstr("checkpoint iteration 6, saved "));
  ChildResult why = launch({"why", id});
  EXPECT_THAT(why.out,
              HasSubstr("resumed: the attempt started from the checkpoint of iteration " + from));
}

// `resume JOB` (docs/long-jobs.md): the failed job's recipe and overrides launched again;
// every rank loads the newest checkpoint. A job without checkpoints is refused by name.
TEST_F(LocalExecutorTest, ResumeLaunchesAFailedJobAgainFromItsNewestCheckpoint) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string mark = (dir_ / "failed-once").string();
  fs::path p = dir_ / "resume.yaml";
  std::ofstream(p)
      << "name: resume\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
         "train: {global_batch_size: 2, micro_batch_size: 1, max_steps: 6}\n"
         "checkpoint: {dir: "
      << ckpt
      << ", interval: 2}\n"
         "runtime:\n  adapter: probe\n  launcher: direct\n  command:\n    - bash\n    - -c\n"
         "    - |\n"
         "      if [ \"$RANK\" = 1 ] && mkdir "
      << mark
      << " 2>/dev/null; then\n"
         "        exec "
      << BRIDGE_PROBE_BIN
      << " \"$@\" --fail-rank 1 --fail-at-step 5\n"
         "      fi\n"
         "      exec "
      << BRIDGE_PROBE_BIN
      << " \"$@\"\n"
         "    - probe\n"
         "  args: [--compute-ms, '20', --timeout, '20']\n"
         "executor: {local: {job_dir: "
      << (dir_ / "jobs").string() << ", grace_period: 2, timeout: 120}}\n";
  ChildResult failed = launch({p.string(), "train.max_steps=6"});
  ASSERT_EQ(failed.exit_code, 1) << failed.err;
  auto jobs = nlohmann::json::parse(launch({"list", "--format", "json"}).out);
  ASSERT_EQ(jobs.size(), 1u);
  const std::string id = jobs[0]["id"].get<std::string>();

  ChildResult resumed = launch({"resume", id});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, ContainsRegex("resuming " + id +
                                         ": .*resume.yaml train.max_steps=6 "
                                         "on local; it loads iteration [24]"));
  EXPECT_THAT(resumed.out, ContainsRegex("rank 1 resumes from checkpoint iteration [24]"));
  EXPECT_EQ(read_file(ckpt + "/latest_checkpointed_iteration.txt"), "6\n");

  fs::path plain = dir_ / "plain.yaml";
  std::ofstream(plain) << "name: plain\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
                          "runtime: {launcher: direct, command: [bridge-probe], args: [--steps, "
                          "'2']}\nexecutor: {local: {job_dir: "
                       << (dir_ / "jobs").string() << "}}\n";
  ASSERT_EQ(launch({plain.string()}).exit_code, 0);
  jobs = nlohmann::json::parse(launch({"list", "--format", "json"}).out);
  std::string plain_id;
  for (const auto& j : jobs)
    if (j["name"] == "plain") plain_id = j["id"].get<std::string>();
  ChildResult refused = launch({"resume", plain_id});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("has no checkpoint.dir: a new launch would start from "
                                     "iteration 0"));
}

// runtime.watchdog (docs/long-jobs.md): rank 2 stops making progress at step 5 (the others
// wait for it in the all-reduce, with a communication timeout far above the watchdog's): the
// watchdog ends the job within its progress timeout plus its kill grace, records `hang`, and
// `why` names rank 2, whom the others say they were waiting for when they were ended.
TEST_F(LocalExecutorTest, TheWatchdogEndsAHungJobAndWhyNamesTheRankThatStopped) {
  fs::path p = dir_ / "hang.yaml";
  std::ofstream(p) << "name: hang\ncluster: {num_gpus: 4, gpus_per_node: 4}\n"
                      "train: {global_batch_size: 4, micro_batch_size: 1, max_steps: 40}\n"
                      "runtime:\n  launcher: direct\n  command: [bridge-probe]\n"
                      "  args: [--compute-ms, '20', --timeout, '600', --hang-rank, '2', "
                      "--hang-at-step, '5']\n"
                      "  watchdog: {startup_timeout: 60, progress_timeout: 3}\n"
                      "executor: {local: {job_dir: "
                   << (dir_ / "jobs").string() << ", grace_period: 2, timeout: 300}}\n";
  auto start = std::chrono::steady_clock::now();
  ChildResult r = launch({p.string()});
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bridge-launch watchdog: hang: no iteration line for "));
  EXPECT_THAT(r.err, HasSubstr("after iteration 4/40"));
  EXPECT_LT(seconds, 3 + 30 + 20);  // the progress timeout, the kill grace, start-up slack

  auto jobs = nlohmann::json::parse(launch({"list", "--format", "json"}).out);
  ASSERT_EQ(jobs.size(), 1u);
  const std::string id = jobs[0]["id"].get<std::string>();
  EXPECT_EQ(jobs[0]["state"], "FAILED");
  EXPECT_THAT(read_file(jobs[0]["job_dir"].get<std::string>() + "/watchdog"),
              ContainsRegex("^hang stage=progress iteration=4 total=40 waited=[0-9]+ limit=3 "
                            "attempt=1 at=20"));
  ChildResult why = launch({"why", id, "--format", "json"});
  auto j = nlohmann::json::parse(why.out);
  EXPECT_EQ(j["first_failure"]["rank"], 2) << why.out;
  EXPECT_THAT(why.out, HasSubstr("\"hang\"")) << why.out;
  ChildResult why_text = launch({"why", id});
  EXPECT_THAT(why_text.out, HasSubstr("rank 2"));
  EXPECT_THAT(why_text.out, HasSubstr("bridge-launch watchdog: hang"));
}

// The long-job recipe every executor runs (tests/data/recipes/long-job.yaml; the Kubernetes
// suite runs the same file on pods): rank 1 stops making progress at step 20, the watchdog
// ends the job and `why` names rank 1 and `hang`; launched again with the fault cleared,
// every rank resumes from checkpoint 15 (the newest before the hang) and the job succeeds.
TEST_F(LocalExecutorTest, TheLongJobRecipeEndsAHangAndTheNextLaunchResumesFromItsCheckpoint) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::vector<std::string> common{
      std::string(BRIDGE_SOURCE_DIR) + "/tests/data/recipes/long-job.yaml",
      "-ng",
      "4",
      "-gn",
      "4",
      "runtime.launcher=direct",
      "checkpoint.dir=" + ckpt,
      std::string("env.BRIDGE_PROBE=") + BRIDGE_PROBE_BIN,
      "runtime.watchdog.progress_timeout=5",
      "executor.local.job_dir=" + (dir_ / "jobs").string(),
      "executor.local.grace_period=2"};
  std::vector<std::string> faulty = common;
  faulty.push_back("env.FIRST_ATTEMPT_FLAGS=--hang-rank 1 --hang-at-step 20");
  ChildResult hung = launch(faulty);
  EXPECT_EQ(hung.exit_code, 1) << hung.err;
  EXPECT_THAT(hung.err, HasSubstr("bridge-launch watchdog: hang: no iteration line for "));
  EXPECT_THAT(hung.err, HasSubstr("after iteration 19/30"));
  auto jobs = nlohmann::json::parse(launch({"list", "--format", "json"}).out);
  ASSERT_EQ(jobs.size(), 1u);
  ChildResult why = launch({"why", jobs[0]["id"].get<std::string>(), "--format", "json"});
  auto j = nlohmann::json::parse(why.out);
  EXPECT_EQ(j["first_failure"]["rank"], 1) << why.out;
  EXPECT_THAT(why.out, HasSubstr("\"hang\"")) << why.out;
  EXPECT_EQ(read_file(ckpt + "/latest_checkpointed_iteration.txt"), "15\n");

  ChildResult resumed = launch(common);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_THAT(resumed.out, HasSubstr("bridge-probe: rank " + std::to_string(rank) +
                                       " resumes from checkpoint iteration 15"))
        << rank;
  EXPECT_EQ(read_file(ckpt + "/latest_checkpointed_iteration.txt"), "30\n");
}

// A job whose training reached its last iteration and whose rank 1 then does not exit: the
// watchdog ends it after the teardown grace, and the job counts as succeeded, with the note.
TEST_F(LocalExecutorTest, ATeardownHangAfterTheLastIterationEndsAsSucceededWithANote) {
  fs::path p = dir_ / "teardown.yaml";
  std::ofstream(p) << "name: teardown\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
                      "train: {global_batch_size: 2, micro_batch_size: 1, max_steps: 4}\n"
                      "runtime:\n  launcher: direct\n  command: [bridge-probe]\n"
                      "  args: [--compute-ms, '20', --timeout, '600', --hang-at-exit-rank, '1']\n"
                      "  watchdog: {teardown_grace: 3}\n"
                      "executor: {local: {job_dir: "
                   << (dir_ / "jobs").string() << ", grace_period: 2, timeout: 300}}\n";
  auto start = std::chrono::steady_clock::now();
  ChildResult r = launch({p.string()});
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("training reached iteration 4/4, but the processes had not exited"));
  EXPECT_LT(seconds, 60);
  auto jobs = nlohmann::json::parse(launch({"list", "--format", "json"}).out);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["state"], "SUCCEEDED");
  ChildResult status = launch({"status", jobs[0]["id"].get<std::string>()});
  EXPECT_THAT(status.out, HasSubstr("teardown hang"));
  // `why` names no failed rank: the rank the watchdog stopped is not a failure.
  ChildResult why = launch({"why", jobs[0]["id"].get<std::string>(), "--format", "json"});
  EXPECT_EQ(why.exit_code, 0);
  auto j = nlohmann::json::parse(why.out);
  EXPECT_TRUE(j["first_failure"].is_null()) << why.out;
  EXPECT_THAT(j["watchdog"].get<std::string>(), HasSubstr("training reached iteration 4/4"));
}

TEST_F(LocalExecutorTest, WrongAllReduceIsDetected) {
  ChildResult r = launch({recipe("corrupt", ", --corrupt-rank, '1'")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("exited with code 4"));
}

TEST_F(LocalExecutorTest, HostileEnvValuesArriveByteForByteOnEveryRank) {
  const std::map<std::string, std::string> values{{"Q1", "it's \"quoted\""},
                                                  {"SUBST", "$(touch /tmp/pwned) $HOME $$ ${HOME"},
                                                  {"TICKS", "`id` and \\backslash"},
                                                  {"SPACES", "  lead and trail  "},
                                                  {"NEWLINES", "line1\nline2\n"},
                                                  {"UNICODE", "überoverlap ✓ 梯度 🚀"},
                                                  {"EMPTYISH", "="},
                                                  {"BRACES", "$${NOT_EXPANDED}"}};
  std::string yaml = "env:\n";
  for (const auto& [k, v] : values) {
    nlohmann::json j = v;  // a JSON string is a valid YAML double-quoted scalar
    yaml += "  " + k + ": " + j.dump() + "\n";
  }
  fs::path dump = dir_ / "dump";
  fs::create_directories(dump);
  std::string path =
      recipe("hostile", ", --steps, '1', --dump-env-dir, '" + dump.string() + "'", true, yaml);
  ChildResult r = launch({path, "-E", "FROM_CLI=a'b\"c $(x) `y`\n\t✓"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("env check: all ranks match"));
  auto all = values;
  all["BRACES"] = "${NOT_EXPANDED}";  // `$${` is the documented escape for a literal `${`
  all["FROM_CLI"] = "a'b\"c $(x) `y`\n\t✓";
  for (int rank = 0; rank < 4; ++rank)
    for (const auto& [k, v] : all)
      EXPECT_EQ(read_file(dump / ("rank" + std::to_string(rank) + "." + k)), v)
          << k << " on rank " << rank;
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
}

TEST_F(LocalExecutorTest, DryRunStartsNothingAndWritesNothing) {
  ChildResult r = launch({"--dry-run", recipe("dry", "")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 3: RANK=3"));
  EXPECT_THAT(r.out, HasSubstr("BRIDGE_EXPECTED_ENV="));
  EXPECT_THAT(r.out, HasSubstr("command: '"));
  EXPECT_FALSE(fs::exists(dir_ / "jobs"));
  EXPECT_FALSE(fs::exists(dir_ / "state"));
}

TEST_F(LocalExecutorTest, SigintStopsEveryRankAndExits130) {
  std::string marker = "sigint-marker-" + std::to_string(getpid());
  std::string path = recipe("sigint", ", --steps, '1000', " + marker + "=1");
  fs::path out = dir_ / "out.txt";
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, path}, env_, out);
  ASSERT_TRUE(wait_for_text(out, "iteration        2/", 60)) << read_file(out);
  EXPECT_EQ(processes_with(marker).size(), 4u);
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, 30), 130) << read_file(out);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(processes_with(marker).empty()) << "ranks survived the interrupt";
}

TEST_F(LocalExecutorTest, SigkillOfTheLauncherLeavesNoRankBehind) {
  std::string marker = "sigkill-marker-" + std::to_string(getpid());
  std::string path = recipe("sigkill", ", --steps, '1000', " + marker + "=1");
  fs::path out = dir_ / "out.txt";
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, path}, env_, out);
  ASSERT_TRUE(wait_for_text(out, "iteration        2/", 60)) << read_file(out);
  kill(pid, SIGKILL);
  wait_exit(pid, 10);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = processes_with(marker).empty();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "ranks survived the launcher";
  ChildResult st = launch({"status", "--format", "json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_THAT(st.out, HasSubstr("\"state\": \"FAILED\""));
  EXPECT_THAT(st.out, HasSubstr("is gone"));
}

// `cancel` signals only the launcher of that very job: a registry entry whose pid now
// belongs to another process (pid reuse, or an edited entry), even one named
// "bridge-launch", is refused and that process is left alone.
TEST_F(LocalExecutorTest, CancelNeverSignalsAProcessThatIsNotTheJobsLauncher) {
  std::string path = recipe("finished", "");
  ChildResult done = launch({path});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  fs::path imposter = dir_ / "bridge-launch-imposter";
  fs::copy_file("/bin/sleep", imposter);
  pid_t other = start_background({imposter.string(), "30"}, {}, dir_ / "imposter.out");
  fs::path entry;
  for (const auto& e : fs::directory_iterator(dir_ / "state" / "jobs"))
    if (e.path().extension() == ".json") entry = e.path();
  ASSERT_FALSE(entry.empty());
  std::string json = read_file(entry);
  json = std::regex_replace(json, std::regex(R"("state": "[A-Z]+")"), R"("state": "RUNNING")");
  json = std::regex_replace(json, std::regex(R"("scheduler_id": "[0-9.]+")"),
                            "\"scheduler_id\": \"" + std::to_string(other) + "\"");
  std::ofstream(entry) << json;
  ChildResult cancel = launch({"cancel", "finished"});
  EXPECT_NE(cancel.exit_code, 0) << cancel.out;
  EXPECT_THAT(cancel.err, HasSubstr("is not running"));
  EXPECT_EQ(kill(other, 0), 0) << "cancel signalled a process that is not the job's launcher";
  kill(other, SIGKILL);
  wait_exit(other, 5);
}

// Job dirs of the submitting host are recorded absolute (a relative one is taken from where
// bridge-launch ran), so `logs` works from any directory; a --rank outside the job is a
// usage error (exit 2), as on Slurm and Kubernetes.
TEST_F(LocalExecutorTest, RelativeJobDirIsRecordedAbsoluteAndABadRankIsAUsageError) {
  fs::path recipe_path = dir_ / "rel.yaml";
  std::ofstream(recipe_path) << "name: rel\ncluster: {num_gpus: 1}\n"
                                "runtime: {command: [/bin/echo, hello-from-rank], adapter: none}\n"
                                "executor: {local: {job_dir: relative-jobs}}\n";
  std::string cmd = "cd '" + dir_.string() + "' && exec '" + BRIDGE_LAUNCH_BIN + "' rel.yaml";
  ChildResult r = run_command({"/bin/sh", "-c", cmd}, env_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ChildResult list = launch({"list", "--format", "json"});
  EXPECT_THAT(list.out, HasSubstr("\"job_dir\": \"" + (dir_ / "relative-jobs/rel/").string()));
  ChildResult logs = launch({"logs", "rel"});  // from the test's cwd, not dir_
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("hello-from-rank"));
  ChildResult bad = launch({"logs", "--rank", "5", "rel"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("there is no rank 5"));
}

TEST_F(LocalExecutorTest, ListStatusLogsAndCancelFollowALocalJob) {
  std::string marker = "cancel-marker-" + std::to_string(getpid());
  std::string path = recipe("cancelme", ", --steps, '1000', " + marker + "=1");
  fs::path out = dir_ / "out.txt";
  pid_t pid = start_background({BRIDGE_LAUNCH_BIN, path}, env_, out);
  ASSERT_TRUE(wait_for_text(out, "iteration        2/", 60)) << read_file(out);

  ChildResult list = launch({"list", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  nlohmann::json jobs = nlohmann::json::parse(list.out);
  ASSERT_EQ(jobs.size(), 1u);
  std::string id = jobs[0]["id"];
  EXPECT_EQ(jobs[0]["state"], "RUNNING");

  ChildResult status = launch({"status", id.substr(0, 10)});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_THAT(status.out, HasSubstr("RUNNING"));
  // One job: its times, run time and size, one field a line.
  EXPECT_THAT(status.out, ContainsRegex("started +20[0-9-]+T[0-9:]+Z"));
  EXPECT_THAT(status.out, ContainsRegex("elapsed +[0-9][0-9ms ]*s \\(running\\)"));
  EXPECT_THAT(status.out, ContainsRegex("nodes +1 \\([0-9]+ ranks?\\)"));
  ChildResult logs = launch({"logs", id, "--rank", "0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("iteration        1/    1000"));
  // Filters: --grep, --tail, --node; a bad pattern or node is a usage error.
  ChildResult grep = launch({"logs", id, "--rank", "0", "--grep", "iteration +1/"});
  EXPECT_EQ(grep.exit_code, 0) << grep.err;
  EXPECT_THAT(grep.out, HasSubstr("iteration        1/    1000"));
  EXPECT_THAT(grep.out, Not(HasSubstr("iteration        2/")));
  EXPECT_THAT(grep.err, Not(HasSubstr("no line matched")));
  // Nothing matched: stdout stays empty, and stderr says the pattern was looked for.
  ChildResult none = launch({"logs", id, "--rank", "0", "--tail", "3", "--grep", "no-such-x"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("no line matched `no-such-x` in the last 3 lines of each log"));
  ChildResult tail = launch({"logs", id, "--rank", "0", "--tail", "1"});
  EXPECT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(std::count(tail.out.begin(), tail.out.end(), '\n'), 1) << tail.out;
  ChildResult node = launch({"logs", id, "--node", "0", "--grep", "iteration +1/"});
  EXPECT_EQ(node.exit_code, 0) << node.err;
  EXPECT_THAT(node.out, ContainsRegex("^\\[rank 0 [^]]+\\] "));  // rank and host
  ChildResult bad_grep = launch({"logs", id, "--grep", "(unclosed"});
  EXPECT_EQ(bad_grep.exit_code, 2);
  EXPECT_THAT(bad_grep.err, HasSubstr("unbalanced parenthesis"));
  EXPECT_EQ(launch({"logs", id, "--node", "1"}).exit_code, 2);
  EXPECT_EQ(launch({"logs", id, "--node", "0", "--rank", "0"}).exit_code, 2);

  ChildResult cancel = launch({"cancel", id});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(wait_exit(pid, 30), 130);
  ChildResult after = launch({"status", id, "--format", "json"});
  EXPECT_THAT(after.out, HasSubstr("CANCELLED"));
  nlohmann::json after_json = nlohmann::json::parse(after.out, nullptr, false);
  ASSERT_TRUE(after_json.is_array() && after_json.size() == 1u) << after.out;
  EXPECT_TRUE(after_json[0]["started_at"].is_string()) << after.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(processes_with(marker).empty());
  EXPECT_EQ(launch({"logs", "no-such-job"}).exit_code, 2);
}

TEST_F(LocalExecutorTest, AblateRunsOneKnobVariantsAndComparesThem) {
  std::string path = recipe("ablate", "", true);
  ChildResult r = launch({"ablate", path, "--vary", "comm_overlap.overlap_grad_reduce=false",
                          "--window", "2:8", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("ablate: 2 jobs (baseline + 1 variant)"));
  EXPECT_THAT(r.out, HasSubstr("steady-state step time, iterations 2-8"));
  std::smatch m;
  std::regex ratio(
      R"(\n\s+ablate-\S+\s+SUCCEEDED\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s+comm_overlap\.overlap_grad_reduce)");
  ASSERT_TRUE(std::regex_search(r.out, m, ratio)) << r.out;
  EXPECT_GT(std::stod(m[1]), 1.15) << "no-overlap variant should be slower than the baseline";
  // Each difference with its values: the variant's in its row, the baseline's (as its plan
  // resolved it, the recipe leaving it unset) in one line under the table.
  EXPECT_THAT(r.out, HasSubstr("comm_overlap.overlap_grad_reduce=false\n"));
  EXPECT_THAT(r.out, HasSubstr("baseline: comm_overlap.overlap_grad_reduce=true\n"));
  // One launcher ran both jobs: each still has its own scheduler id, "<launcher pid>.<n>".
  ChildResult list = launch({"list", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::set<std::string> ids;
  std::set<std::string> launchers;
  static const std::regex kId(R"re("scheduler_id": "([0-9]+)\.([0-9]+)")re");
  for (std::sregex_iterator it(list.out.begin(), list.out.end(), kId), end; it != end; ++it) {
    ids.insert((*it)[0]);
    launchers.insert((*it)[1]);
  }
  EXPECT_EQ(ids.size(), 2u) << list.out;
  EXPECT_EQ(launchers.size(), 1u) << list.out;
}

// One state root: the registry in <root>/jobs, a local job's files in <root>/logs/<name>/<id>
// when the recipe names no job_dir; both follow BRIDGE_LAUNCH_STATE_DIR (and XDG_STATE_HOME).
TEST_F(LocalExecutorTest, RegistryAndLocalLogsLiveInSeparateDirectoriesOfTheStateRoot) {
  fs::path p = dir_ / "where.yaml";
  std::ofstream(p) << "name: where\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
                      "runtime: {command: [/bin/echo, hello-from-rank], adapter: none}\n";
  for (const auto& [var, root] : {std::pair{"BRIDGE_LAUNCH_STATE_DIR", dir_ / "state"},
                                  std::pair{"XDG_STATE_HOME", dir_ / "xdg" / "bridge-launch"}}) {
    // An empty BRIDGE_LAUNCH_STATE_DIR counts as unset (the XDG round must not inherit one).
    env_ = {{"BRIDGE_LAUNCH_STATE_DIR", ""}, {"HOME", (dir_ / "home").string()}};
    env_[var] = var == std::string("XDG_STATE_HOME") ? (dir_ / "xdg").string() : root.string();
    ChildResult r = launch({p.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ChildResult st = launch({"status", "where", "--format", "json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(st.out, m, std::regex(R"re("job_dir": "([^"]+)")re"))) << st.out;
    fs::path job_dir = m[1].str();
    EXPECT_EQ(job_dir.parent_path(), root / "logs" / "where") << var;
    EXPECT_THAT(read_file(job_dir / "rank0.log"), HasSubstr("hello-from-rank"));
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(root / "jobs"))
      entries += e.path().extension() == ".json";
    EXPECT_EQ(entries, 1u) << var;
    EXPECT_FALSE(fs::exists(root / "jobs" / "where")) << "job files mixed into the registry";
    EXPECT_FALSE(fs::exists(dir_ / "home" / ".local")) << var;
  }
}

TEST_F(LocalExecutorTest, AblateRefusesToSubmitWhenAnyVariantIsInvalid) {
  std::string path = recipe("ablate-bad", "", true);
  ChildResult r = launch({"ablate", path, "--vary", "model.tensor_model_parallel_size=1,3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no variant was submitted"));
  EXPECT_FALSE(fs::exists(dir_ / "jobs"));
}

// The plan confirmation at start (plan/plan_confirm.h) with the fake Megatron-Bridge runtime of
// tests/data/fake-megatron-runtime: the runtime that builds the planned config trains and
// `status` says the plan was confirmed; a wrapper that changes one value (-ms 8 -> 9) stops
// every rank before training, and `why` names the field, the planned and the built value.
TEST_F(LocalExecutorTest, TheRuntimeConfirmsThePlanAtStartAndAChangedValueStopsTheJob) {
  const std::string fake = std::string(BRIDGE_SOURCE_DIR) + "/tests/data/fake-megatron-runtime";
  auto recipe_for = [&](const std::string& name, const std::string& script) {
    fs::path p = dir_ / (name + ".yaml");
    std::ofstream(p) << "name: " << name << R"(
cluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}
model: {family: llama, recipe: llama3_8b, tensor_model_parallel_size: 1, precision: bf16}
train: {global_batch_size: 8, micro_batch_size: 1, max_steps: 8}
env:
  PYTHONPATH: )" << fake
                     << R"(
runtime:
  adapter: megatron_bridge
  command: [python3, )"
                     << fake << "/" << script << R"(]
executor:
  local: {job_dir: )" << (dir_ / "jobs").string()
                     << R"(, timeout: 60}
)";
    return p.string();
  };
  ChildResult clean = launch({recipe_for("confirm-clean", "run_script.py")});
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_THAT(clean.out, HasSubstr("fake run_script: iteration 3/8"));
  ChildResult status = launch({"status", "confirm-clean"});
  // The keys the recipe base decides are not sent; the confirmation compares them with what
  // the runtime built, and every rank compares its env (docs/runtime-check.md).
  EXPECT_THAT(status.out, ContainsRegex("plan +plan confirmed by rank 0 \\([0-9]+ values, "
                                        "[0-9]+ env variables on every rank, "
                                        "([0-9]+ left to the runtime, )?"
                                        "megatron.bridge 0.0.0\\+fake\\)"))
      << status.out;

  auto start = std::chrono::steady_clock::now();
  ChildResult changed = launch({recipe_for("confirm-changed", "change_one_value.py")});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(changed.exit_code, 0) << changed.out;
  EXPECT_LT(seconds, 10) << "the job stops before training";
  EXPECT_THAT(changed.out, Not(HasSubstr("fake run_script: iteration")));
  ChildResult why = launch({"why", "confirm-changed"});
  EXPECT_EQ(why.exit_code, 1) << why.out << why.err;
  EXPECT_THAT(why.out, ContainsRegex("plan differs on rank [01]: train.train_iters is 9, "
                                     "planned 8 \\(train.max_steps\\)"));
  EXPECT_THAT(why.out, HasSubstr("the runtime built a config that differs from the plan"));
  ChildResult json = launch({"why", "confirm-changed", "--format", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"plan_confirmation\""));
  EXPECT_THAT(json.out, HasSubstr("\"field\": \"train.train_iters\""));
}

}  // namespace
}  // namespace bridge
