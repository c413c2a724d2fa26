// The hang watchdog (runtime.watchdog, docs/long-jobs.md): its settings and their defaults,
// the iteration lines it counts, the local launcher's state machine, the verdict file `why`
// and `status` read, the `hang` signature and retry class, and the Slurm batch script's own
// watchdog run in bash against a log that stops growing.
#include "model/watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "executors/slurm_script.h"
#include "jobs/failure_triage.h"
#include "jobs/job_watchdog.h"
#include "model/retry_policy.h"
#include "plan/plan.h"
#include "plan/plan_output.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

Plan plan_of(const std::string& recipe, Diagnostics& diags, const std::string& executor = "local") {
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path = "watchdog.yaml";
  req.executor = executor;
  return build_plan_from_text(recipe, req, env, plugin_registry(), diags);
}

const char* kProbe = R"(name: wd
cluster: {num_gpus: 2, gpus_per_node: 2}
runtime: {launcher: direct, command: [bridge-probe]}
)";

TEST(WatchdogSettings, OnByDefaultWhereTheRuntimePrintsIterationLinesAndShownInThePlan) {
  Diagnostics diags;
  Plan plan = plan_of(kProbe, diags);
  ASSERT_TRUE(plan.complete);
  EXPECT_TRUE(plan.watchdog.enabled);
  EXPECT_EQ(plan.watchdog.startup_timeout, kDefaultStartupTimeout);
  EXPECT_EQ(plan.watchdog.progress_timeout, kDefaultProgressTimeout);
  EXPECT_EQ(plan.watchdog.teardown_grace, kDefaultTeardownGrace);
  EXPECT_EQ(plan.watchdog.source, "default");
  std::string text = plan_to_text(plan, false);
  EXPECT_THAT(text, HasSubstr("watchdog: startup 3600 s, progress 1800 s, teardown grace 1800 s"));
  EXPECT_THAT(plan_to_json(plan, diags).dump(), HasSubstr("\"progress_timeout_s\":1800"));
}

TEST(WatchdogSettings, OffUnderTheNoneAdapterUnlessTheRecipeTurnsItOn) {
  Diagnostics diags;
  const std::string none =
      "name: n\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
      "runtime: {adapter: none, launcher: direct, command: [my-trainer]}\n";
  Plan off = plan_of(none, diags);
  EXPECT_FALSE(off.watchdog.enabled);
  EXPECT_THAT(off.watchdog.source, HasSubstr("adapter none"));
  Plan on = plan_of(
      "name: n\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
      "runtime: {adapter: none, launcher: direct, command: [my-trainer],\n"
      "          watchdog: {enabled: true, progress_timeout: 90}}\n",
      diags);
  EXPECT_TRUE(on.watchdog.enabled);
  EXPECT_EQ(on.watchdog.progress_timeout, 90);
  EXPECT_EQ(on.watchdog.source, "runtime.watchdog");
}

TEST(WatchdogSettings, KubernetesEnforcesItAsTheOtherExecutorsDo) {
  Diagnostics quiet;
  Plan plain = plan_of(kProbe, quiet, "kubernetes");
  EXPECT_TRUE(plain.watchdog.enabled);
  EXPECT_EQ(plain.watchdog.source, "default");
  Diagnostics diags;
  Plan set = plan_of(
      "name: wd\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
      "runtime: {launcher: direct, command: [bridge-probe], watchdog: {progress_timeout: 60}}\n",
      diags, "kubernetes");
  EXPECT_TRUE(set.watchdog.enabled);
  EXPECT_EQ(set.watchdog.progress_timeout, 60);
  EXPECT_EQ(set.watchdog.source, "runtime.watchdog");
}

TEST(WatchdogSettings, ANonPositiveTimeoutIsRefusedWithItsKey) {
  Diagnostics diags;
  plan_of(
      "name: n\ncluster: {num_gpus: 1, gpus_per_node: 1}\n"
      "runtime: {launcher: direct, command: [bridge-probe], watchdog: {progress_timeout: 0}}\n",
      diags);
  ASSERT_TRUE(diags.has_errors());
  EXPECT_EQ(diags.items().front().path, "runtime.watchdog.progress_timeout");
}

TEST(WatchdogSettings, PollsATenthOfTheShortestLimitWithinOneToThirtySeconds) {
  WatchdogSettings w;
  EXPECT_EQ(w.poll_seconds(), 30);
  w.progress_timeout = 20;
  EXPECT_EQ(w.poll_seconds(), 2);
  w.teardown_grace = 3;
  EXPECT_EQ(w.poll_seconds(), 1);
}

TEST(IterationLines, MegatronsAndTheProbesLinesCountOthersDoNot) {
  auto mark = iteration_of_line(
      " [2026-12-04 10:00:00] iteration       20/      60 | consumed samples: 640 | elapsed "
      "time per iteration (ms): 412.7 |");
  ASSERT_TRUE(mark);
  EXPECT_EQ(mark->iteration, 20);
  EXPECT_EQ(mark->total, 60);
  EXPECT_FALSE(iteration_of_line("bridge-probe: rank 0 resumes from checkpoint iteration 20"));
  EXPECT_FALSE(iteration_of_line("iteration 20 of 60"));
  EXPECT_FALSE(iteration_of_line(std::string(5000, 'x') + " iteration 1/2 |"));
}

TEST(ProgressWatch, StartUpThenProgressThenTeardown) {
  WatchdogSettings w;
  w.enabled = true;
  w.startup_timeout = 10;
  w.progress_timeout = 5;
  w.teardown_grace = 3;
  const auto t0 = Clock::now();
  auto at = [&](int s) { return t0 + std::chrono::seconds(s); };
  ProgressWatch watch(w, t0);
  EXPECT_FALSE(watch.due(at(9)));
  auto startup = ProgressWatch(w, t0).due(at(10));
  ASSERT_TRUE(startup);
  EXPECT_EQ(startup->kind, "hang");
  EXPECT_EQ(startup->stage, "startup");

  watch.on_line(0, "iteration 1/ 4 |", at(8));
  EXPECT_FALSE(watch.due(at(12)));
  watch.on_line(0, "some other line", at(12));
  watch.on_line(0, "iteration 1/ 4 |", at(12));  // the same iteration again is no progress
  auto hang = watch.due(at(13));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->stage, "progress");
  EXPECT_EQ(hang->iteration, 1);
  EXPECT_EQ(hang->waited, 5);
  EXPECT_EQ(hang->limit, 5);

  watch.on_line(0, "iteration 4/ 4 |", at(13));
  EXPECT_FALSE(watch.due(at(15)));
  auto teardown = watch.due(at(16));
  ASSERT_TRUE(teardown);
  EXPECT_EQ(teardown->kind, "teardown");
  EXPECT_EQ(teardown->limit, 3);
}

// An in-job restart (torchrun --max-restarts, ft_launcher) resumes from an older checkpoint:
// its lower iteration is progress, not a hang; a second source's lines count on their own.
TEST(ProgressWatch, ALowerIterationAfterARestartAndAnotherRanksLinesAreProgress) {
  WatchdogSettings w;
  w.enabled = true;
  w.progress_timeout = 5;
  const auto t0 = Clock::now();
  auto at = [&](int s) { return t0 + std::chrono::seconds(s); };
  ProgressWatch watch(w, t0);
  watch.on_line(15, "iteration 30/ 60 |", at(1));
  watch.on_line(15, "iteration 21/ 60 |", at(5));  // restarted from checkpoint 20
  EXPECT_FALSE(watch.due(at(9)));
  watch.on_line(0, "iteration 21/ 60 |", at(9));  // rank 0 prints too: its first line
  EXPECT_FALSE(watch.due(at(13)));
  auto hang = watch.due(at(14));
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->iteration, 21);
}

TEST(ProgressWatch, AWatchdogThatIsOffNeverFires) {
  WatchdogSettings w;  // enabled = false
  ProgressWatch watch(w, Clock::now());
  EXPECT_FALSE(watch.due(Clock::now() + std::chrono::hours(24 * 365)));
}

TEST(WatchdogFile, LinesRoundTripAndTornOrForeignLinesAreSkipped) {
  WatchdogEvent e;
  e.kind = "hang";
  e.stage = "progress";
  e.iteration = 19;
  e.total = 60;
  e.waited = 21;
  e.limit = 20;
  e.attempt = 2;
  e.at = "2026-12-04T17:00:00Z";
  std::string text = "garbage line\nteardown iter\n" + watchdog_event_line(e) + "\nhang stage";
  auto events = parse_watchdog_events(text);
  ASSERT_EQ(events.size(), 1u);  // a torn line (no `at=`) is no verdict
  const WatchdogEvent& back = events[0];
  EXPECT_EQ(back.stage, "progress");
  EXPECT_EQ(back.iteration, 19);
  EXPECT_EQ(back.total, 60);
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.at, "2026-12-04T17:00:00Z");
  EXPECT_EQ(watchdog_event_of(events, 2)->iteration, 19);
  EXPECT_FALSE(watchdog_event_of({back}, 1));
}

TEST(WatchdogFile, AHangSentenceIsWhysHangCauseAndATeardownIsNoFailure) {
  WatchdogEvent hang;
  hang.kind = "hang";
  hang.stage = "progress";
  hang.iteration = 19;
  hang.total = 60;
  const ErrorSignature* sig = classify_line(watchdog_event_text(hang));
  ASSERT_NE(sig, nullptr);
  EXPECT_STREQ(sig->id, "hang");
  EXPECT_EQ(sig->kind, SignatureKind::kCause);
  WatchdogEvent teardown;
  teardown.kind = "teardown";
  teardown.iteration = teardown.total = 60;
  EXPECT_EQ(classify_line(watchdog_event_text(teardown)), nullptr);

  FailureEvidence evidence;
  evidence.scheduler_lines.push_back(watchdog_event_text(hang));
  Triage t = triage(evidence);
  ASSERT_EQ(t.job_level.size(), 1u);
  EXPECT_EQ(t.job_level[0].signature, "hang");
}

TEST(WatchdogFile, HangIsARetryClassThatIsNotRetriedByDefault) {
  EXPECT_THAT(retry_on_values(), ::testing::Contains("hang"));
  EXPECT_THAT(default_retry_on(), Not(::testing::Contains("hang")));
}

// The batch script's watchdog, run in bash: a "ranks" process that printed two iteration
// lines and then nothing is ended after the progress timeout, with the verdict in the job
// dir; a rank log that reached its last iteration gets the teardown verdict instead.
class SlurmWatchdogScript : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bl-watchdog-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The script's watchdog functions, then `body`.
  // After the ranks' start (`sleep ... & bridge_ranks=$!`), the script's own lines: the
  // watchdog beside the ranks, the wait for the ranks alone, the verdict from its exit status.
  static constexpr const char* kSequence =
      "rc=0; bridge_verdict=\n"
      "eval \"$(sed -n '/^bridge_watchdog \"\\$bridge_ranks\" &$/,/^case \\$bridge_watchdog_rc/p' "
      "\"$1\")\"\n"
      "echo \"ranks ended: $rc\"\necho \"verdict [$bridge_verdict]\"\n";

  test::ChildResult run_watchdog(
      const std::string& log_text, const std::string& body,
      const std::string& limits = "{startup_timeout: 30, progress_timeout: 1, teardown_grace: 1}") {
    Diagnostics diags;
    Plan plan = plan_of(
        "name: wd\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
        "runtime: {launcher: direct, command: [bridge-probe],\n"
        "          watchdog: " +
            limits + "}\n",
        diags, "slurm");
    EXPECT_TRUE(plan.complete);
    auto script = render_sbatch_script(plan, {}, diags);
    EXPECT_TRUE(script);
    if (!script) return {};
    EXPECT_THAT(script->text, HasSubstr("bridge_watchdog \"$bridge_ranks\" &"));
    std::ofstream(dir_ / "rank0.log") << log_text;
    std::ofstream(dir_ / "batch.sh") << script->text;
    const std::string program =
        "set -euo pipefail\n"
        "eval \"$(sed -n '/^bridge_watchdog_iteration() {/,/^}$/p;/^bridge_watchdog() {/,/^}$/p' "
        "\"$1\")\"\n" +
        body;
    return test::run_command({"bash", "-c", program, "bash", (dir_ / "batch.sh").string()},
                             {{"BRIDGE_JOB_DIR", dir_.string()}, {"BRIDGE_ATTEMPT", "3"}});
  }

  fs::path dir_;
};

TEST_F(SlurmWatchdogScript, EndsRanksThatStoppedAfterTheirLastIterationLine) {
  auto r = run_watchdog("iteration        1/      10 | x\n iteration        2/      10 | x\n",
                        std::string("sleep 600 & bridge_ranks=$!\n") + kSequence);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ranks ended: 143"));
  EXPECT_THAT(r.out, HasSubstr("verdict [hang]"));
  EXPECT_THAT(r.err, HasSubstr("the watchdog ends the ranks (hang at progress"));
  auto events = read_watchdog_events(dir_.string());
  ASSERT_EQ(events.size(), 1u) << test::read_file((dir_ / "watchdog").string());
  EXPECT_EQ(events[0].kind, "hang");
  EXPECT_EQ(events[0].stage, "progress");
  EXPECT_EQ(events[0].iteration, 2);
  EXPECT_EQ(events[0].total, 10);
  EXPECT_EQ(events[0].limit, 1);
  EXPECT_EQ(events[0].attempt, 3);
  EXPECT_GE(events[0].waited, 1);
}

TEST_F(SlurmWatchdogScript, GivesATeardownVerdictOnceTheLastIterationWasPrinted) {
  auto r = run_watchdog("iteration        9/      10 | x\niteration       10/      10 | x\n",
                        std::string("sleep 600 & bridge_ranks=$!\n") + kSequence);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verdict [teardown]"));
  auto events = read_watchdog_events(dir_.string());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "teardown");
  EXPECT_EQ(events[0].iteration, 10);
}

// The script waits for the ranks, not for the watchdog's next look at the log (30 s apart with
// the default limits): a job ends when its ranks do.
TEST_F(SlurmWatchdogScript, RanksThatExitOnTheirOwnAreLeftAloneAndEndTheJobAtOnce) {
  auto start = std::chrono::steady_clock::now();
  auto r =
      run_watchdog("", std::string("sleep 1 & bridge_ranks=$!\n") + kSequence, "{enabled: true}");
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ranks ended: 0"));
  EXPECT_THAT(r.out, HasSubstr("verdict []"));
  EXPECT_FALSE(fs::exists(dir_ / "watchdog"));
  EXPECT_LT(seconds, 20);  // not the 30 s of the watchdog's poll
}

}  // namespace
}  // namespace bridge
