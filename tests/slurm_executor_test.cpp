// The Slurm executor against a fake CommandRunner: submission (job id parsing, secrets only in
// sbatch's environment, errors with Slurm's own message, transient retries, no duplicate
// job), status (one squeue for all jobs, sacct/scontrol fallbacks, state mapping), logs and
// cancel.
#include "executors/slurm_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>

#include "executors/executor.h"
#include "executors/slurm_scheduler.h"
#include "plan/plan.h"
#include "system/command_runner.h"
#include "system/host_env.h"
#include "tests/support/fake_services.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr const char* kMarker = "MARKER-secret-0b5e";

CommandResult ok(std::string out) {
  CommandResult r;
  r.out = std::move(out);
  return r;
}

CommandResult fail(std::string err, int code = 1) {
  CommandResult r;
  r.exit_code = code;
  r.err = std::move(err);
  return r;
}

std::string diag_text(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += format_diagnostic(d, false);
  return out;
}

class SlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SlurmRetryPolicy p;
    p.first_backoff = std::chrono::milliseconds(1);
    executor = make_slurm_executor(seams.services(), p);
    ASSERT_NE(executor, nullptr);
  }

  // The executor's commands are answered by `respond` from now on.
  testing::ScriptedRunner& script(testing::ScriptedRunner::Respond respond) {
    runner_.respond = std::move(respond);
    return runner_;
  }

  Plan plan(const std::string& job_dir) {
    MapEnvironment env({{"HOME", "/home/alice"}, {"WANDB_API_KEY", kMarker}});
    PlanRequest req;
    req.recipe_path = "t.yaml";
    req.executor = "slurm";
    Plan p = build_plan_from_text(
        "name: unit\ncluster: {gpu: h100, num_gpus: 4, gpus_per_node: 2}\n"
        "model: {tensor_model_parallel_size: 1, num_layers: 2, hidden_size: 64, "
        "num_attention_heads: 4}\n"
        "runtime: {command: [bridge-probe], pass_overrides: false}\n"
        "plugins:\n  wandb: {project: p}\n"
        "executor:\n  slurm: {job_dir: \"" +
            job_dir + "\"}\n",
        req, env, plugin_registry(), plan_diags);
    EXPECT_TRUE(p.complete) << diag_text(plan_diags);
    return p;
  }

  SubmitResult submit(const Plan& p, Diagnostics& diags, int* accepted_calls,
                      const std::string& job_id = "unit-20261130-120000-ab12") {
    auto job = executor->render(p, SubmissionIdentity{job_id}, diags);
    EXPECT_FALSE(diags.has_errors()) << diag_text(diags);
    if (!job) return SubmitResult{};
    std::ostringstream out;
    return job->submit(SubmitOptions{}, out, diags,
                       [&](const SubmitResult&) { ++*accepted_calls; });
  }

  JobRecord record(const std::string& id, const std::string& job_dir = "/nonexistent") {
    JobRecord r;
    r.id = "job-" + id;
    r.executor = "slurm";
    r.scheduler_id = id;
    r.job_dir = job_dir;
    r.nodes = 2;
    r.ranks = 4;
    return r;
  }

  Diagnostics plan_diags;
  testing::ScriptedRunner runner_;
  testing::TestServices seams{runner_};
  std::unique_ptr<Executor> executor;
};

// ---- submit -------------------------------------------------------------------------------

TEST_F(SlurmExecutorTest, SubmitParsesIdAndPassesSecretsOnlyThroughTheEnvironment) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) { return ok("4711;cluster-a\n"); });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 0) << diag_text(diags);
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(r.scheduler_id, "4711");
  EXPECT_EQ(r.job_dir, dir.path() + "/jobs/unit/unit-20261130-120000-ab12");
  ASSERT_EQ(runner.calls.size(), 1u);
  const CommandSpec& c = runner.calls[0];
  ASSERT_GE(c.argv.size(), 2u);
  EXPECT_EQ(c.argv[0], "sbatch");
  EXPECT_EQ(c.argv[1], "--parsable");
  EXPECT_EQ(c.stdin_text.rfind("#!/bin/bash\n", 0), 0u);
  EXPECT_EQ(c.stdin_text.find(kMarker), std::string::npos);
  for (const auto& a : c.argv) EXPECT_EQ(a.find(kMarker), std::string::npos);
  ASSERT_EQ(c.extra_env.count("WANDB_API_KEY"), 1u);
  EXPECT_EQ(c.extra_env.at("WANDB_API_KEY"), kMarker);
  // sbatch writes slurm-%j.* there, so it exists before the job starts.
  EXPECT_TRUE(fs::is_directory(r.job_dir));
  EXPECT_THAT(c.stdin_text,
              ::testing::HasSubstr("#SBATCH --output=" + r.job_dir + "/slurm-%j.out\n"));
}

// prepare_to_submit starts sbatch before the plan exists, so its command line and environment
// cannot depend on the plan. The submission uses that sbatch when the script carries the
// job's comment and every secret already has its value in the launcher's environment.
TEST_F(SlurmExecutorTest, ThePreparedSbatchSubmitsWhenNothingItNeedsDependsOnThePlan) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) { return ok("4711\n"); });
  seams.env.set("WANDB_API_KEY", kMarker);
  executor->prepare_to_submit();
  ASSERT_EQ(runner.started.size(), 1u);
  EXPECT_EQ(runner.started[0].argv, (std::vector<std::string>{"sbatch", "--parsable"}));
  EXPECT_TRUE(runner.started[0].extra_env.empty());
  EXPECT_TRUE(runner.calls.empty()) << "nothing reaches the scheduler before the script";

  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.scheduler_id, "4711") << diag_text(diags);
  EXPECT_EQ(runner.started.size(), 1u) << "a second sbatch was started";
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].argv, (std::vector<std::string>{"sbatch", "--parsable"}));
  EXPECT_TRUE(runner.calls[0].extra_env.empty());  // the secret is in what it inherited
  EXPECT_THAT(
      runner.calls[0].stdin_text,
      ::testing::HasSubstr("\n#SBATCH --comment=bridge-launch:unit-20261130-120000-ab12\n"));
}

// A secret whose value the launcher's environment does not hold needs an sbatch started with
// it: the prepared one is stopped before it read anything, and a fresh one submits.
TEST_F(SlurmExecutorTest, ASecretTheLauncherDoesNotHoldNeedsAFreshSbatch) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) { return ok("4712\n"); });
  executor->prepare_to_submit();
  Plan p = plan(dir.path() + "/jobs");  // WANDB_API_KEY comes from the plan's environment only
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.scheduler_id, "4712") << diag_text(diags);
  ASSERT_EQ(runner.started.size(), 2u);
  EXPECT_EQ(runner.started[1].extra_env.at("WANDB_API_KEY"), kMarker);
  ASSERT_EQ(runner.calls.size(), 1u) << "the prepared sbatch must never run";
  EXPECT_EQ(runner.calls[0].extra_env.at("WANDB_API_KEY"), kMarker);
}

// A user template without {{#directives}} has no `#SBATCH --comment`: the comment goes on
// sbatch's command line (which wins over the script), through a fresh sbatch.
TEST_F(SlurmExecutorTest, AUserTemplateWithoutTheCommentGetsItOnTheCommandLine) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) { return ok("4713\n"); });
  std::string tmpl = dir.write("bare.mustache", "#!/bin/bash\nsrun {{task_command}}\n");
  seams.env.set("WANDB_API_KEY", kMarker);
  executor->prepare_to_submit();
  MapEnvironment env;
  env.set("HOME", "/home/alice");
  PlanRequest req;
  req.recipe_path = "t.yaml";
  req.executor = "slurm";
  Plan p = build_plan_from_text(
      "name: unit\ncluster: {gpu: h100, num_gpus: 4, gpus_per_node: 2}\n"
      "runtime: {command: [bridge-probe], pass_overrides: false}\n"
      "executor:\n  slurm: {job_dir: \"" +
          dir.path() + "/jobs\", template: \"" + tmpl + "\"}\n",
      req, env, plugin_registry(), plan_diags);
  ASSERT_TRUE(p.complete) << diag_text(plan_diags);
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.scheduler_id, "4713") << diag_text(diags);
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].argv,
            (std::vector<std::string>{"sbatch", "--parsable",
                                      "--comment=bridge-launch:unit-20261130-120000-ab12"}));
  EXPECT_EQ(runner.started.size(), 2u);
}

// A controller whose state was reset hands out old Slurm ids again: two submissions that get
// the same id still have a directory each (named after the registry id), so neither the batch
// output nor the rank logs of the two jobs mix.
TEST_F(SlurmExecutorTest, TwoSubmissionsGivenTheSameSlurmIdKeepTheirOwnDirectories) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) { return ok("9\n"); });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult first = submit(p, diags, &accepted, "unit-20261130-120000-0001");
  SubmitResult second = submit(p, diags, &accepted, "unit-20261130-120000-0002");
  ASSERT_EQ(accepted, 2) << diag_text(diags);
  EXPECT_EQ(first.scheduler_id, second.scheduler_id);
  EXPECT_NE(first.job_dir, second.job_dir);
  ASSERT_EQ(runner.calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const std::string& d = i == 0 ? first.job_dir : second.job_dir;
    EXPECT_TRUE(fs::is_directory(d));
    EXPECT_THAT(runner.calls[i].stdin_text,
                ::testing::HasSubstr("#SBATCH --output=" + d + "/slurm-%j.out"));
    EXPECT_THAT(runner.calls[i].stdin_text, ::testing::HasSubstr("BRIDGE_JOB_DIR='" + d + "'\n"));
  }
}

TEST_F(SlurmExecutorTest, SchedulerErrorIsReportedVerbatimAndLeavesNothingBehind) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) {
    return fail(
        "sbatch: error: Batch job submission failed: Invalid account or account/partition "
        "combination specified\n");
  });
  Plan p = plan(dir.path() + "/deep/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(runner.count("sbatch"), 1);  // not transient: no retry
  EXPECT_NE(diag_text(diags).find("Invalid account or account/partition combination"),
            std::string::npos)
      << diag_text(diags);
  EXPECT_FALSE(fs::exists(dir.path() + "/deep")) << "the job dir created for it must go";
}

// An sbatch (or a site's wrapper around it) that echoes its environment, which holds the
// job's secrets, when it fails: neither the retry warnings nor the error show a secret, in
// any spelling (as is, JSON-escaped). Status and scancel errors likewise, with the values
// the reader's environment has for the names the recorded plan marks secret.
TEST_F(SlurmExecutorTest, SchedulerOutputShownInMessagesHoldsNoSecret) {
  TempDir dir;
  int sbatch_calls = 0;
  script([&](const CommandSpec& s) {
    if (s.argv[0] == "squeue" && s.argv.size() > 2 && s.argv[2] == "--states=all")
      return fail(std::string("squeue: error: env WANDB_API_KEY=") + kMarker + "\n");
    if (s.argv[0] == "squeue") return ok("");  // the comment lookup before a retry
    if (s.argv[0] == "scancel") return fail(std::string("scancel: ") + kMarker + "\n");
    std::string env = "WANDB_API_KEY=" + s.extra_env.at("WANDB_API_KEY") + "\n";
    return ++sbatch_calls < 3
               ? fail("sbatch: error: Socket timed out on send/recv operation\n" + env)
               : fail("sbatch: error: Invalid account\n" + env + "{\"k\": \"" +
                      s.extra_env.at("WANDB_API_KEY") + "\"}\n");
  });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(sbatch_calls, 3);
  std::string shown = diag_text(diags) + seams.log.text.str();
  EXPECT_THAT(shown, ::testing::HasSubstr("Invalid account"));
  EXPECT_THAT(shown, ::testing::HasSubstr("WANDB_API_KEY=<secret>"));
  EXPECT_THAT(shown, ::testing::HasSubstr("retrying"));
  EXPECT_EQ(shown.find(kMarker), std::string::npos) << shown;

  // Readers: the job's record names WANDB_API_KEY as a secret; this environment has its value.
  JobRecord rec = record("7");
  rec.plan_json = {{"env", {{"WANDB_API_KEY", {{"value", nullptr}, {"secret", true}}}}}};
  seams.env.set("WANDB_API_KEY", kMarker);
  Diagnostics status_diags;
  executor->status({rec}, status_diags);
  executor->cancel(rec, status_diags);
  std::string said = diag_text(status_diags);
  EXPECT_THAT(said, ::testing::HasSubstr("squeue: error: env WANDB_API_KEY=<secret>"));
  EXPECT_THAT(said, ::testing::HasSubstr("scancel: <secret>"));
  EXPECT_EQ(said.find(kMarker), std::string::npos) << said;
}

TEST_F(SlurmExecutorTest, ControllerDownFailsOnceWithoutRetries) {
  TempDir dir;
  auto& runner = script([](const CommandSpec&) {
    return fail(
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
        "(connect failure)\n");
  });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(runner.calls.size(), 1u);
  std::string text = diag_text(diags);
  EXPECT_NE(text.find("Unable to contact slurm controller"), std::string::npos) << text;
  EXPECT_NE(text.find("scontrol ping"), std::string::npos) << text;
}

TEST_F(SlurmExecutorTest, TransientErrorsAreRetriedWithBoundedAttempts) {
  TempDir dir;
  int sbatch_calls = 0;
  auto& runner = script([&](const CommandSpec& s) {
    if (s.argv[0] == "squeue") return ok("");  // the job was not created
    return ++sbatch_calls < 3
               ? fail(
                     "sbatch: error: Batch job submission failed: Socket timed out on "
                     "send/recv operation\n")
               : ok("99\n");
  });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 0) << diag_text(diags);
  EXPECT_EQ(r.scheduler_id, "99");
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(runner.count("sbatch"), 3);
  EXPECT_EQ(runner.count("squeue"), 2);  // duplicate check before each retry
}

TEST_F(SlurmExecutorTest, TransientErrorsGiveUpAfterThreeTries) {
  TempDir dir;
  auto& runner = script([&](const CommandSpec& s) {
    if (s.argv[0] == "squeue") return ok("");
    return fail("sbatch: error: slurm_receive_msg: Socket timed out on send/recv operation\n");
  });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(runner.count("sbatch"), 3);
  EXPECT_NE(diag_text(diags).find("Socket timed out"), std::string::npos);
}

// A fake Slurm whose sbatch records the job's unique comment (its script's
// `#SBATCH --comment=` line) and answers `sbatch_answer`; squeue (the lookup by comment)
// answers `squeue_answer(comment)`.
testing::ScriptedRunner::Respond comment_tracking_slurm(
    std::string& comment, CommandResult sbatch_answer,
    std::function<std::string(const std::string&)> squeue_answer) {
  return [&comment, sbatch_answer, squeue_answer](const CommandSpec& s) {
    if (s.argv[0] != "sbatch") return ok(squeue_answer(comment));
    const std::string directive = "\n#SBATCH --comment=";
    size_t at = s.stdin_text.find(directive);
    if (at != std::string::npos) {
      at += directive.size();
      comment = s.stdin_text.substr(at, s.stdin_text.find('\n', at) - at);
    }
    return sbatch_answer;
  };
}

// The runner's own timeout killed sbatch, but the controller had taken the job: it is found
// by its comment and recorded, and its job dir is kept.
TEST_F(SlurmExecutorTest, SbatchKilledByTheRunnersTimeoutIsLookedUpBeforeCleanup) {
  TempDir dir;
  std::string comment;
  CommandResult killed;
  killed.started = true;
  killed.timed_out = true;
  killed.exit_code = -1;
  auto& runner = script(comment_tracking_slurm(
      comment, killed, [](const std::string& c) { return "77|" + c + "\n"; }));  // %i|%k
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 0) << diag_text(diags);
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(r.scheduler_id, "77");
  EXPECT_EQ(runner.count("sbatch"), 1);
}

TEST_F(SlurmExecutorTest, TimedOutSubmissionThatCreatedTheJobIsNotSubmittedTwice) {
  TempDir dir;
  std::string comment;
  auto& runner = script(comment_tracking_slurm(
      comment, fail("sbatch: error: Socket timed out on send/recv operation\n"),
      [](const std::string& c) { return "17|someone-else\n18|" + c + "\n"; }));  // %i|%k
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 0) << diag_text(diags);
  EXPECT_EQ(r.scheduler_id, "18");
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(runner.count("sbatch"), 1);
  EXPECT_FALSE(comment.empty());
}

TEST_F(SlurmExecutorTest, MissingSbatchIsAClearError) {
  TempDir dir;
  script([](const CommandSpec&) {
    CommandResult r;
    r.started = false;
    r.err = "sbatch: command not found";
    return r;
  });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(diag_text(diags).find("could not run sbatch"), std::string::npos) << diag_text(diags);
}

TEST_F(SlurmExecutorTest, GarbageOutputIsNotAJobId) {
  TempDir dir;
  script([](const CommandSpec&) { return ok("Submitted batch job\n"); });
  Plan p = plan(dir.path() + "/jobs");
  Diagnostics diags;
  int accepted = 0;
  SubmitResult r = submit(p, diags, &accepted);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(accepted, 0);
  EXPECT_NE(diag_text(diags).find("printed no job id"), std::string::npos);
}

// ---- status -------------------------------------------------------------------------------

TEST_F(SlurmExecutorTest, StatusAsksSqueueOnceThenFallsBackForTheRest) {
  auto& runner = script([](const CommandSpec& s) {
    if (s.argv[0] == "squeue") return ok("101|RUNNING|None\n102|PENDING|Resources\n");
    if (s.argv[0] == "sacct") return fail("Slurm accounting storage is disabled\n");
    return ok(
        "JobId=103 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
        "Dependency=(null) ExitCode=17:0 RunTime=00:00:01\n"
        "JobId=104 JobName=y JobState=COMPLETED Reason=None ExitCode=0:0\n"
        "JobId=999 JobName=z JobState=CANCELLED Reason=None ExitCode=0:15\n");
  });
  Diagnostics diags;
  auto st = executor->status(
      {record("101"), record("102"), record("103"), record("104"), record("105")}, diags);
  EXPECT_FALSE(diags.has_errors()) << diag_text(diags);
  ASSERT_EQ(st.size(), 5u);
  EXPECT_EQ(st[0].state, JobState::kRunning);
  EXPECT_EQ(st[1].state, JobState::kPending);
  EXPECT_EQ(st[1].detail, "PENDING (Resources)");
  EXPECT_EQ(st[2].state, JobState::kFailed);
  EXPECT_EQ(st[2].detail, "FAILED (NonZeroExitCode, ExitCode=17:0)");
  EXPECT_EQ(st[2].exit_code.value_or(-1), 17);
  EXPECT_EQ(st[3].state, JobState::kSucceeded);
  EXPECT_EQ(st[4].state, JobState::kUnknown);
  ASSERT_EQ(runner.count("squeue"), 1);
  EXPECT_EQ(runner.calls[0].argv,
            (std::vector<std::string>{"squeue", "--noheader", "--states=all",
                                      "--jobs=101,102,103,104,105", "--format=%i|%T|%r|%S|%e"}));
  EXPECT_EQ(runner.count("sacct"), 1);
  EXPECT_EQ(runner.count("scontrol"), 1);

  // sacct is not asked again once accounting is known to be off.
  runner.calls.clear();
  executor->status({record("103")}, diags);
  EXPECT_EQ(runner.count("sacct"), 0);
  EXPECT_EQ(runner.count("scontrol"), 1);
  EXPECT_EQ(runner.calls.back().argv,
            (std::vector<std::string>{"scontrol", "--oneliner", "show", "job", "103"}));
}

// --wait polls one job with `scontrol show job` (two controller RPCs; squeue costs three),
// and falls back to the full status query when scontrol no longer knows the job.
TEST_F(SlurmExecutorTest, PollAsksScontrolAndFallsBackToStatus) {
  auto& runner = script([](const CommandSpec& s) {
    if (s.argv[0] == "scontrol" && s.argv.back() == "61")
      return ok("JobId=61 JobName=x JobState=RUNNING Reason=None ExitCode=0:0\n");
    if (s.argv[0] == "scontrol") return fail("slurm_load_jobs error: Invalid job id specified\n");
    if (s.argv[0] == "squeue") return ok("62|COMPLETED|None\n");
    return fail("unexpected");
  });
  Diagnostics diags;
  EXPECT_EQ(executor->poll(record("61"), diags).state, JobState::kRunning);
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].argv,
            (std::vector<std::string>{"scontrol", "--oneliner", "show", "job", "61"}));
  runner.calls.clear();
  EXPECT_EQ(executor->poll(record("62"), diags).state, JobState::kSucceeded);
  EXPECT_EQ(runner.count("squeue"), 1);
  // A damaged id is never handed to scontrol as an option.
  runner.calls.clear();
  executor->poll(record("--user=root"), diags);
  EXPECT_EQ(runner.count("scontrol"), 0);
}

TEST_F(SlurmExecutorTest, StatusUsesSacctWhenAccountingWorks) {
  auto& runner = script([](const CommandSpec& s) {
    if (s.argv[0] == "squeue") return fail("slurm_load_jobs error: Invalid job id specified\n");
    return ok("55|CANCELLED by 1000|0:0\n55.batch|CANCELLED|0:15\n56|TIMEOUT|0:0\n");
  });
  Diagnostics diags;
  auto st = executor->status({record("55"), record("56")}, diags);
  EXPECT_FALSE(diags.has_errors()) << diag_text(diags);
  EXPECT_EQ(st[0].state, JobState::kCancelled);
  EXPECT_EQ(st[1].state, JobState::kFailed);
  EXPECT_EQ(runner.count("scontrol"), 0);
}

TEST_F(SlurmExecutorTest, StatusWithControllerDownIsAnErrorNotAGuess) {
  auto& runner = script([](const CommandSpec&) {
    return fail("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n");
  });
  Diagnostics diags;
  auto st = executor->status({record("1"), record("2")}, diags);
  EXPECT_TRUE(diags.has_errors());
  EXPECT_NE(diag_text(diags).find("Unable to contact slurm controller"), std::string::npos);
  EXPECT_EQ(runner.calls.size(), 1u);
  for (const auto& s : st) EXPECT_EQ(s.state, JobState::kUnknown);
}

TEST_F(SlurmExecutorTest, StatusRetriesTransientSqueueErrors) {
  int n = 0;
  script([&](const CommandSpec&) {
    return ++n == 1 ? fail("squeue: error: Socket timed out on send/recv operation\n")
                    : ok("7|COMPLETING|None\n");
  });
  Diagnostics diags;
  auto st = executor->status({record("7")}, diags);
  EXPECT_FALSE(diags.has_errors());
  EXPECT_EQ(st[0].state, JobState::kRunning);
  EXPECT_EQ(n, 2);
}

TEST(SlurmStates, MapEveryState) {
  std::vector<std::pair<std::string, JobState>> cases{
      {"COMPLETED", JobState::kSucceeded},  {"FAILED", JobState::kFailed},
      {"TIMEOUT", JobState::kFailed},       {"NODE_FAIL", JobState::kFailed},
      {"OUT_OF_MEMORY", JobState::kFailed}, {"BOOT_FAIL", JobState::kFailed},
      {"DEADLINE", JobState::kFailed},      {"PREEMPTED", JobState::kFailed},
      {"CANCELLED", JobState::kCancelled},  {"CANCELLED by 0", JobState::kCancelled},
      {"CANCELLED+", JobState::kCancelled}, {"PENDING", JobState::kPending},
      {"CONFIGURING", JobState::kPending},  {"REQUEUED", JobState::kPending},
      {"REQUEUE_HOLD", JobState::kPending}, {"RUNNING", JobState::kRunning},
      {"COMPLETING", JobState::kRunning},   {"SUSPENDED", JobState::kRunning},
      {"WHATEVER", JobState::kUnknown},     {"", JobState::kUnknown}};
  for (const auto& [s, want] : cases) EXPECT_EQ(map_slurm_state(s), want) << s;
}

TEST(SlurmParse, SbatchIds) {
  EXPECT_EQ(parse_sbatch_id("123\n").value_or(""), "123");
  EXPECT_EQ(parse_sbatch_id("123;cluster\n").value_or(""), "123");
  EXPECT_EQ(parse_sbatch_id("sbatch: warning: x\n456\n").value_or(""), "456");
  EXPECT_FALSE(parse_sbatch_id("").has_value());
  EXPECT_FALSE(parse_sbatch_id("Submitted batch job 5\n").has_value());
}

TEST(SlurmParse, TransientClassification) {
  EXPECT_TRUE(is_transient_slurm_error("error: Socket timed out on send/recv operation"));
  EXPECT_TRUE(is_transient_slurm_error("Zero Bytes were transmitted or received"));
  EXPECT_TRUE(is_transient_slurm_error(
      "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying"));
  EXPECT_FALSE(is_transient_slurm_error("Unable to contact slurm controller (connect failure)"));
  EXPECT_FALSE(is_transient_slurm_error("Invalid account or account/partition combination"));
}

// ---- cancel and logs ----------------------------------------------------------------------

TEST_F(SlurmExecutorTest, CancelRunsScancel) {
  auto& runner = script([](const CommandSpec&) { return ok(""); });
  Diagnostics diags;
  EXPECT_EQ(executor->cancel(record("31"), diags), 0);
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].argv, (std::vector<std::string>{"scancel", "31"}));
}

// The registry is a file the user can edit: a scheduler id that is no Slurm id never
// reaches scancel (`--user=root` would cancel every job of that user).
TEST_F(SlurmExecutorTest, CancelRefusesAnIdThatIsNoSlurmId) {
  auto& runner = script([](const CommandSpec&) { return ok(""); });
  for (const char* id : {"--user=root", "-1", "12 34", "_5"}) {
    Diagnostics diags;
    EXPECT_EQ(executor->cancel(record(id), diags), 1) << id;
    EXPECT_NE(diag_text(diags).find("no valid Slurm job id"), std::string::npos) << id;
  }
  EXPECT_EQ(runner.calls.size(), 0u);
  Diagnostics array_task;
  EXPECT_EQ(executor->cancel(record("1234_7"), array_task), 0);
}

TEST_F(SlurmExecutorTest, CancelErrorsCarrySlurmsMessage) {
  script([](const CommandSpec&) {
    return fail(
        "scancel: error: Kill job error on job id 31: Unable to contact slurm controller "
        "(connect failure)\n");
  });
  Diagnostics diags;
  EXPECT_EQ(executor->cancel(record("31"), diags), 1);
  EXPECT_NE(diag_text(diags).find("Kill job error on job id 31"), std::string::npos);
}

class SlurmLogsTest : public SlurmExecutorTest {
 protected:
  void SetUp() override {
    SlurmExecutorTest::SetUp();
    job_dir = dir.path() + "/name/77";
    fs::create_directories(job_dir);
    std::ofstream(job_dir + "/rank0.log") << "r0 a\nr0 b\n";
    std::ofstream(job_dir + "/rank1.log") << "r1 a\nr1 partial";
    std::ofstream(job_dir + "/rank10.log") << "r10\n";
    std::ofstream(dir.path() + "/name/slurm-77.err")
        << "srun: error: node1: task 1: Exited with exit code 17\n";
  }
  TempDir dir;
  std::string job_dir;
};

TEST_F(SlurmLogsTest, AllRanksPrefixedInRankOrderThenTheBatchOutput) {
  auto& runner = script([](const CommandSpec&) { return ok("77|FAILED|NonZeroExitCode\n"); });
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("77", job_dir), testing::rank_query(std::nullopt, false), out,
                           notes, diags),
            0);
  EXPECT_EQ(out.str(),
            "[rank 0] r0 a\n[rank 0] r0 b\n[rank 1] r1 a\n[rank 1] r1 partial\n[rank 10] r10\n"
            "[batch stderr] srun: error: node1: task 1: Exited with exit code 17\n");
  EXPECT_EQ(runner.calls.size(), 0u);  // no follow: no scheduler query
}

TEST_F(SlurmLogsTest, OneRankRawAndFollowStopsWhenFinal) {
  auto& runner = script([](const CommandSpec&) { return ok("77|COMPLETED|None\n"); });
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("77", job_dir), testing::rank_query(1, true), out, notes, diags),
            0);
  EXPECT_EQ(out.str(), "r1 a\nr1 partial\n");
  EXPECT_EQ(runner.count("squeue"), 1);
}

TEST_F(SlurmLogsTest, NodeFilterTailAndGrepWithTheHostOfEachRank) {
  std::ofstream(job_dir + "/hosts") << "gpu-a\ngpu-b\n";
  std::ofstream(job_dir + "/rank2.log") << "r2 x\nr2 NCCL y\n";
  std::ofstream(job_dir + "/rank3.log") << "r3 NCCL z\nr3 w\n";
  LogQuery q;
  q.node = 1;  // 4 ranks on 2 nodes: ranks 2 and 3
  q.grep = *LineFilter::compile("NCCL").filter;
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("77", job_dir), q, out, notes, diags), 0);
  EXPECT_EQ(out.str(), "[rank 2 gpu-b] r2 NCCL y\n[rank 3 gpu-b] r3 NCCL z\n");
  // --tail applies first: rank 3's last line has no match.
  q.tail = 1;
  std::ostringstream tailed;
  EXPECT_EQ(executor->logs(record("77", job_dir), q, tailed, notes, diags), 0);
  EXPECT_EQ(tailed.str(), "[rank 2 gpu-b] r2 NCCL y\n");
  // A node the job does not have is a usage error, as a rank is.
  q.node = 2;
  EXPECT_EQ(executor->logs(record("77", job_dir), q, tailed, notes, diags), 2);
  EXPECT_TRUE(diags.has_code("bad-node"));
}

TEST_F(SlurmLogsTest, FollowingAPendingJobSaysOnceThatItWaitsAndWhy) {
  int polls = 0;
  script([&](const CommandSpec&) {
    ++polls;
    if (polls <= 2) return ok("77|PENDING|Resources|N/A|N/A\n");
    if (polls == 3) return ok("77|PENDING|Priority|N/A|N/A\n");
    if (polls == 4) return ok("77|RUNNING|None|2026-11-30T20:00:00|2026-11-30T21:00:00\n");
    return ok("77|COMPLETED|None|2026-11-30T20:00:00|2026-11-30T20:00:09\n");
  });
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("77", job_dir), testing::rank_query(0, true), out, notes, diags),
            0);
  EXPECT_EQ(notes.str(),
            "bridge-launch: job job-77 is PENDING (Resources); its logs follow once it starts\n"
            "bridge-launch: job job-77 is PENDING (Priority); its logs follow once it starts\n"
            "bridge-launch: job job-77 is RUNNING\n");
  EXPECT_EQ(out.str(), "r0 a\nr0 b\n");
}

// bridge-launch killed between sbatch accepting the job and recording its id: status finds
// the job by its --comment (the registry id) and adopts the id.
TEST_F(SlurmExecutorTest, AnEntryWithoutAnIdIsFoundByItsCommentAndAdopted) {
  auto& runner = script([](const CommandSpec& spec) {
    if (spec.argv.size() > 3 && spec.argv[3] == "--name=train")
      return ok("90|bridge-launch:job-other\n91|bridge-launch:job-\n");
    return ok("91|RUNNING|None|2026-11-30T20:00:00|2026-11-30T21:00:00\n");
  });
  JobRecord lost = record("");  // id "job-", no Slurm id
  lost.name = "train";
  Diagnostics diags;
  JobStatus st = executor->status({lost}, diags).front();
  EXPECT_EQ(st.state, JobState::kRunning) << st.detail;
  EXPECT_EQ(st.scheduler_id, "91");
  ASSERT_GE(runner.calls.size(), 2u);
  EXPECT_EQ(runner.calls[1].argv.at(3), "--jobs=91");
}

TEST(SlurmTimes, StartAndEndAreKeptOnlyOnceTheyHappenedInUtc) {
  // Slurm prints the client's local time; the registry keeps UTC.
  const char* old_tz = std::getenv("TZ");
  std::string saved = old_tz ? old_tz : "";
  setenv("TZ", "CET-1", 1);  // POSIX form: UTC+1 all year, no tz database needed
  tzset();
  EXPECT_EQ(slurm_time_to_utc("2026-11-30T21:00:05"), "2026-11-30T20:00:05Z");
  EXPECT_EQ(slurm_time_to_utc("Unknown"), "");
  EXPECT_EQ(slurm_time_to_utc("N/A"), "");
  EXPECT_EQ(slurm_time_to_utc("2026-11-30T21:00:05junk"), "");
  auto running =
      to_job_status({"7", "RUNNING", "None", "", "2026-11-30T21:00:05", "2026-11-30T22:00:05"});
  EXPECT_EQ(running.started_at, "2026-11-30T20:00:05Z");
  EXPECT_EQ(running.ended_at, "");  // the time limit's end, not an end that happened
  auto pending = to_job_status({"8", "PENDING", "Resources", "", "2026-12-01T00:00:00", ""});
  EXPECT_EQ(pending.started_at, "");  // an estimate
  EXPECT_EQ(pending.pending_reason, "Resources");
  auto done = to_job_status(
      {"9", "COMPLETED", "None", "0:0", "2026-11-30T21:00:05", "2026-11-30T21:10:00"});
  EXPECT_EQ(done.ended_at, "2026-11-30T20:10:00Z");
  if (old_tz)
    setenv("TZ", saved.c_str(), 1);
  else
    unsetenv("TZ");
  tzset();
}

TEST_F(SlurmLogsTest, FailedStatusNamesTheFailingRank) {
  script([](const CommandSpec&) { return ok("77|FAILED|NonZeroExitCode\n"); });
  Diagnostics diags;
  JobStatus st = executor->status({record("77", job_dir)}, diags).front();
  EXPECT_EQ(st.state, JobState::kFailed);
  EXPECT_EQ(st.detail, "FAILED (NonZeroExitCode); rank 1 exited with code 17");
  EXPECT_EQ(st.exit_code.value_or(-1), 17);
}

TEST_F(SlurmLogsTest, RankOutOfRangeIsAUsageError) {
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("77", job_dir), testing::rank_query(4, false), out, notes, diags),
            2);  // as on every executor
  EXPECT_TRUE(diags.has_errors());
}

TEST_F(SlurmLogsTest, TorchrunNodeLogsServeTheirRanks) {
  std::string d = dir.path() + "/tr/78";
  fs::create_directories(d);
  std::ofstream(d + "/node1.log") << "node one\n";
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(executor->logs(record("78", d), testing::rank_query(3, false), out, notes, diags),
            0);  // 2 ranks per node
  EXPECT_EQ(out.str(), "node one\n");
}

// Transient errors are retried with doubling backoff through the Sleeper seam (no real
// waiting here); a definite error is not retried.
TEST(SlurmClientTest, RetriesTransientErrorsWithBackoffThroughTheSleeper) {
  int calls = 0;
  testing::ScriptedRunner runner([&](const CommandSpec&) {
    return ++calls < 3 ? fail("sbatch: error: Socket timed out on send/recv operation")
                       : ok("42\n");
  });
  testing::RecordingSleeper sleeper;
  testing::CapturedLog log;
  SlurmRetryPolicy policy;
  policy.attempts = 3;
  policy.first_backoff = std::chrono::milliseconds(100);
  SlurmClient client(runner, sleeper, log.logger, policy);
  CommandSpec spec;
  spec.argv = {"sbatch", "--parsable"};
  int attempts = 0;
  CommandResult r = client.run(spec, &attempts);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(attempts, 3);
  EXPECT_THAT(sleeper.waits, ::testing::ElementsAre(std::chrono::milliseconds(100),
                                                    std::chrono::milliseconds(200)));

  testing::ScriptedRunner refusing(
      [](const CommandSpec&) { return fail("sbatch: error: invalid partition"); });
  testing::RecordingSleeper no_waits;
  SlurmClient once(refusing, no_waits, log.logger, policy);
  EXPECT_FALSE(once.run(spec, &attempts).ok());
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(no_waits.waits.empty());
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// `why` on Slurm: srun's task reports give node, exit code and order; a requeued job's
// earlier attempts are ignored; grouped task lists ("tasks 0-2,4-7") count for every task;
// a stale slurm-<id>.err one level up (an older job that got the same id) is not read.
TEST_F(SlurmExecutorTest, FailureEvidenceReadsTheLastAttemptsSrunReports) {
  TempDir dir;
  std::string job_dir = dir.path() + "/name/name-20261130-120000-ab12";
  fs::create_directories(job_dir);
  for (int r = 0; r < 8; ++r)
    std::ofstream(job_dir + "/rank" + std::to_string(r) + ".log")
        << (r == 3 ? "Traceback (most recent call last):\nRuntimeError: CUDA error: misaligned "
                     "address\n"
                   : "[rank" + std::to_string(r) + "]: NCCL WARN Connection closed by remote\n");
  std::ofstream(job_dir + "/slurm-9.err")
      << "srun: error: node2: task 6: Exited with exit code 9\n"
         "bridge-launch: the ranks failed (srun exit 9); requeueing job 9, retry 1 of 1\n"
         "srun: error: node1: tasks 0-2,4-7: Exited with exit code 1\n"
         "srun: error: node1: task 3: Exited with exit code 17\n"
         "slurmstepd: error: *** STEP 9.0 ON node1 CANCELLED AT 2026-11-30T12:00:00 ***\n";
  std::ofstream(dir.path() + "/name/slurm-9.err")
      << "srun: error: nodeX: task 5: Segmentation fault\n";
  Diagnostics diags;
  JobRecord rec = record("9", job_dir);
  FailureEvidence e = executor->failure_evidence(rec, diags);
  ASSERT_EQ(e.units.size(), 8u);
  const RankEvidence& r3 = e.units[3];
  EXPECT_EQ(r3.host, "node1");
  EXPECT_EQ(r3.exit_code, 17);
  EXPECT_EQ(r3.failure_order, 1);
  EXPECT_EQ(e.units[6].exit_code, 1) << "attempt 1's report of task 6 is not this attempt's";
  EXPECT_EQ(e.units[6].failure_order, 0);
  EXPECT_THAT(e.order_source, ::testing::HasSubstr("slurm-9.err"));
  Triage t = triage(e);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->label, "rank 3");
  EXPECT_EQ(t.first->finding->signature, "cuda-error");
  ASSERT_EQ(t.consequences.size(), 1u);
  EXPECT_EQ(t.consequences[0].units_text, "ranks 0-2, 4-7");
  for (const auto& line : e.scheduler_lines) EXPECT_EQ(line.find("nodeX"), std::string::npos);
  // status names the rank srun reported alone, not the group reported first.
  script([](const CommandSpec&) { return ok("9|FAILED|NonZeroExitCode\n"); });
  JobStatus st = executor->status({rec}, diags).front();
  EXPECT_THAT(st.detail, ::testing::HasSubstr("rank 3 exited with code 17"));
}

// With retries on, the batch script writes "attempt K starts" before srun and "attempt K
// failed (...)" after srun's task reports; the reports between them are the attempt's own.
// `why` dropped everything up to the "failed" line and blamed rank 0 with no exit status, and
// `status` lost the exit code (issue 47, item 1): the same logs must give the same answer
// with `retries: 2` as with `retries: 0`.
TEST_F(SlurmExecutorTest, WithRetriesTheLastAttemptsTaskReportsNameTheFailedRank) {
  const std::string reports =
      "srun: error: node1: task 1: Exited with exit code 139\n"
      "srun: error: node1: task 0: Terminated\n"
      "srun: error: node2: tasks 2-3: Terminated\n"
      "srun: Terminating StepId=300.0\n";
  const std::string retried =
      "bridge-launch: attempt 3 starts\n" + reports +
      "bridge-launch: attempt 3 failed (segfault on node1); not retried: no-attempts-left\n";
  auto evidence_of = [&](const std::string& batch_stderr, bool with_attempts) {
    TempDir dir;
    std::string job_dir = dir.path() + "/unit/unit-20261130-120000-ab12";
    fs::create_directories(job_dir);
    for (int r = 0; r < 4; ++r)
      std::ofstream(job_dir + "/rank" + std::to_string(r) + ".log")
          << (r == 1 ? "iteration 3/10 |\n" : "[rank]: NCCL WARN Connection closed by remote\n");
    std::ofstream(job_dir + "/slurm-300.err") << batch_stderr;
    if (with_attempts)
      std::ofstream(job_dir + "/attempts")
          << "start attempt=1 of=3 slurm_job=100 nodes=node[1-2] at=2026-11-30T12:00:00Z\n"
             "retry attempt=1 slurm_job=100 rc=1 signature=segfault class=any host=node1 "
             "unit=rank_1 excluded=- next_slurm_job=200 at=2026-11-30T12:01:00Z\n"
             "start attempt=2 of=3 slurm_job=200 nodes=node[1-2] at=2026-11-30T12:02:00Z\n"
             "retry attempt=2 slurm_job=200 rc=1 signature=segfault class=any host=node1 "
             "unit=rank_1 excluded=- next_slurm_job=300 at=2026-11-30T12:03:00Z\n"
             "start attempt=3 of=3 slurm_job=300 nodes=node[1-2] at=2026-11-30T12:04:00Z\n"
             "end attempt=3 slurm_job=300 rc=1 signature=segfault class=any host=node1 "
             "unit=rank_1 at=2026-11-30T12:05:00Z reason=no-attempts-left\n";
    Diagnostics diags;
    JobRecord rec = record(with_attempts ? "100" : "300", job_dir);
    Triage t = triage(executor->failure_evidence(rec, diags));
    script([](const CommandSpec&) { return ok("300|FAILED|NonZeroExitCode\n"); });
    JobStatus st = executor->status({rec}, diags).front();
    return std::make_pair(t, st);
  };
  for (auto [name, batch_stderr, with_attempts] :
       {std::tuple{"retries: 0", reports, false}, std::tuple{"retries: 2", retried, true}}) {
    SCOPED_TRACE(name);
    auto [t, st] = evidence_of(batch_stderr, with_attempts);
    ASSERT_TRUE(t.first);
    EXPECT_EQ(t.first->label, "rank 1");
    EXPECT_EQ(t.first->exit_code, 139);
    EXPECT_EQ(t.first->host, "node1");
    EXPECT_TRUE(t.job_level.empty()) << "the script's own summary line is no evidence";
    EXPECT_THAT(st.detail, ::testing::HasSubstr("rank 1 exited with code 139")) << st.detail;
    EXPECT_EQ(st.exit_code, 139);
  }
}

TEST(SrunTaskReports, ListsRangesSignalsAndBounds) {
  auto reports = parse_srun_task_reports(
      {"srun: error: node1: tasks 0-2,4: Terminated", "srun: error: n2: task 7: Killed",
       "srun: error: n2: task 2147483647: Exited with exit code 1",
       "srun: error: n2: tasks 0-2147483647: Aborted", "srun: error: n2: tasks 5-3: Killed",
       "not srun", "srun: error: n3: task 1: Some new words"});
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports[0].tasks, (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(reports[0].signal, 15);
  EXPECT_EQ(reports[1].signal, 9);
  EXPECT_EQ(reports[2].tasks, std::vector<int>{2147483647});
  EXPECT_EQ(reports[3].tasks.size(), 65536u) << "a task list is bounded";
  EXPECT_EQ(reports[4].text, "Some new words");
  EXPECT_FALSE(reports[4].exit_code || reports[4].signal);
}

}  // namespace
}  // namespace bridge
