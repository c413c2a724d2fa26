// Retries after a transient failure on Slurm (executors/slurm_retry.h): the policy read from
// the recipe, the classes against `why`'s signature table, the batch script's own triage (the
// rendered awk program, run for real on job dirs written here), the attempts file `status`
// reads back, and the script's retry block (rendered, and `bash -n` clean).
#include "executors/slurm_retry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/shell_quote.h"
#include "executors/slurm_script.h"
#include "jobs/failure_triage.h"
#include "model/retry_policy.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

Plan make_plan(const std::string& executor_section, Diagnostics& diags) {
  MapEnvironment env({{"HOME", "/home/alice"}, {"USER", "alice"}});
  PlanRequest req;
  req.recipe_path = "retry.yaml";
  req.executor = "slurm";
  std::string text = R"(name: retry
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime: {adapter: none, command: [bash, -c, "exit 0"]}
executor:
)" + executor_section;
  return build_plan_from_text(text, req, env, plugin_registry(), diags);
}

std::string render(const Plan& plan, Diagnostics& diags) {
  SlurmRenderOptions options;
  options.submission_id = "retry-20261202-101500-abcd";
  auto script = render_sbatch_script(plan, options, diags);
  return script ? script->text : "";
}

std::string errors_of(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += d.code + ": " + d.message + "\n";
  return out;
}

TEST(RetryPolicy, EveryClassStandsForSignaturesOfWhy) {
  const auto& table = error_signatures();
  for (const RetryClass& c : retry_classes()) {
    EXPECT_FALSE(c.signatures.empty()) << c.id;
    for (const char* sig : c.signatures)
      EXPECT_TRUE(std::any_of(table.begin(), table.end(),
                              [&](const ErrorSignature& s) { return std::string(s.id) == sig; }))
          << c.id << " names " << sig << ", which `why` does not know";
  }
  EXPECT_EQ(default_retry_on(),
            (std::vector<std::string>{"nccl-timeout", "gpu-xid", "node-failure"}));
}

TEST(RetryPolicy, RecipeDefaultsAndSettings) {
  Diagnostics d1;
  SlurmRetry plain = slurm_retry(make_plan("  slurm: {retries: 2}\n", d1));
  EXPECT_FALSE(d1.has_errors()) << errors_of(d1);
  EXPECT_EQ(plain.retries, 2);
  EXPECT_EQ(plain.retry_on, default_retry_on());
  EXPECT_TRUE(plain.exclude_failed_nodes);

  Diagnostics d2;
  SlurmRetry set = slurm_retry(make_plan(
      "  slurm: {retries: 1, retry_on: [cuda-oom, any], exclude_failed_nodes: false}\n", d2));
  EXPECT_FALSE(d2.has_errors()) << errors_of(d2);
  EXPECT_EQ(set.retry_on, (std::vector<std::string>{"cuda-oom", "any"}));
  EXPECT_FALSE(set.exclude_failed_nodes);
}

TEST(RetryPolicy, AnUnknownClassIsRefusedWithASuggestion) {
  Diagnostics diags;
  make_plan("  slurm: {retries: 1, retry_on: [nccl-timout]}\n", diags);
  ASSERT_TRUE(diags.has_errors());
  std::string text = errors_of(diags);
  EXPECT_THAT(text, HasSubstr("bad-value: `executor.slurm.retry_on` lists `nccl-timout`"));
  EXPECT_THAT(text, HasSubstr("did you mean `nccl-timeout`"));
}

// retry_on is refused by name on Kubernetes; exclude_failed_nodes is read there (the Job API
// uses it, tests/k8s_retry_test.cpp).
TEST(RetryPolicy, KubernetesRefusesTheSlurmOnlyKeyByName) {
  Diagnostics diags;
  make_plan("  kubernetes: {retries: 1, retry_on: [nccl-timeout], exclude_failed_nodes: true}\n",
            diags);
  std::string text = errors_of(diags);
  EXPECT_THAT(text, HasSubstr("k8s-retry-policy-unsupported: `executor.kubernetes.retry_on` is "
                              "Slurm-only for now"));
  EXPECT_THAT(text, Not(HasSubstr("exclude_failed_nodes")));
  EXPECT_THAT(text, Not(HasSubstr("unknown-key")));
}

// A job dir as an attempt leaves it: batch stderr with srun's task reports, rank logs.
class RetryTriage : public ::testing::Test {
 protected:
  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(dir.path()) / name) << text;
  }
  // The script's triage, run by awk as the batch script runs it.
  std::string run(const SlurmRetry& policy, bool per_node = false) {
    auto r = run_command(
        {"awk", retry_triage_program(policy, per_node)},
        {{"BRIDGE_JOB_DIR", dir.path()}, {"SLURM_JOB_ID", "77"}, {"SLURM_NTASKS", "16"}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  SlurmRetry defaults() {
    SlurmRetry p;
    p.retries = 2;
    p.retry_on = default_retry_on();
    return p;
  }
  TempDir dir;
};

TEST_F(RetryTriage, TheRankThatTimedOutIsBlamedWithItsNode) {
  write("slurm-77.err",
        "srun: error: node2: tasks 8-15: Terminated\n"
        "srun: error: node1: task 3: Exited with exit code 17\n");
  write("rank3.log", "iteration 1\n[rank3]: NCCL timeout: allreduce did not finish in 600 s\n");
  for (int r : {8, 9, 10, 11, 12, 13, 14, 15})
    write("rank" + std::to_string(r) + ".log", "Received SIGTERM\n");
  EXPECT_EQ(run(defaults()), "nccl-timeout cause nccl-timeout node1 rank_3\n");
}

// The watchdog ended the attempt: the hang is blamed on the rank at the end of the chain of
// waits (a ring: each rank waits for the one before it; rank 5 waits for no one), on its node.
TEST_F(RetryTriage, AWatchdogHangIsBlamedOnTheRankTheWaitsLeadTo) {
  write("slurm-77.err", "srun: error: node1: tasks 0-15: Terminated\n");
  write("watchdog",
        "hang stage=progress iteration=19 total=30 waited=11 limit=10 attempt=1 "
        "at=2026-12-04T17:00:00Z\n");
  write("hosts", "node1\nnode2\n");
  for (int r = 0; r < 16; ++r) {
    if (r == 5) {
      write("rank5.log", "iteration line\n");
      continue;
    }
    write("rank" + std::to_string(r) + ".log", "bridge-probe: error: rank " + std::to_string(r) +
                                                   ": terminated while waiting for rank " +
                                                   std::to_string((r + 15) % 16) + " (step 20)\n");
  }
  SlurmRetry policy = defaults();
  EXPECT_EQ(run(policy), "hang cause - node1 rank_5\n");  // hang is not retried by default
  policy.retry_on.push_back("hang");
  EXPECT_EQ(run(policy), "hang cause hang node1 rank_5\n");
  // A verdict of another attempt is not this one's.
  write("watchdog", "hang stage=progress iteration=19 total=30 attempt=2 at=x\n");
  EXPECT_THAT(run(policy), Not(HasSubstr("hang")));
}

TEST_F(RetryTriage, OutOfMemoryIsNotRetriedByDefaultButIsWhenListed) {
  write("slurm-77.err", "srun: error: node2: task 9: Exited with exit code 1\n");
  write("rank9.log",
        "Traceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  EXPECT_EQ(run(defaults()), "cuda-oom cause - node2 rank_9\n");
  SlurmRetry p = defaults();
  p.retry_on = {"cuda-oom"};
  EXPECT_EQ(run(p), "cuda-oom cause cuda-oom node2 rank_9\n");
  p.retry_on = {"any"};
  EXPECT_EQ(run(p), "cuda-oom cause any node2 rank_9\n");
}

TEST_F(RetryTriage, ItNamesWhatWhyNamesForTheSameLines) {
  // A Python exception line no needle claims, before an NCCL line: `why` says
  // python-exception for the unit, and so does the script (no retry).
  const std::string log =
      "ValueError: the batch does not divide\n[rank1]: NCCL timeout: allreduce\n";
  write("slurm-77.err", "srun: error: node1: task 1: Exited with exit code 1\n");
  write("rank1.log", log);
  FailureEvidence e;
  RankEvidence u;
  u.label = "rank 1";
  u.rank = 1;
  u.exit_code = 1;
  u.failure_order = 0;
  u.lines = {"ValueError: the batch does not divide", "[rank1]: NCCL timeout: allreduce"};
  e.units.push_back(u);
  Triage t = triage(e);
  ASSERT_TRUE(t.first && t.first->finding);
  EXPECT_EQ(t.first->finding->signature, "python-exception");
  EXPECT_EQ(run(defaults()), "python-exception cause - node1 rank_1\n");
}

TEST_F(RetryTriage, OnlyTheLastAttemptOfARequeuedSlurmJobCounts) {
  write("slurm-77.err",
        "srun: error: node1: task 0: Exited with exit code 1\n"
        "bridge-launch: attempt 2 starts\n"
        "srun: error: node2: task 12: Exited with exit code 1\n");
  write("rank0.log", "NCCL timeout\n");
  write("rank12.log", "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n");
  EXPECT_EQ(run(defaults()), "gpu-xid cause gpu-xid node2 rank_12\n");
}

TEST_F(RetryTriage, ANodeFailureNamedBySlurmIsBlamedOnThatNode) {
  write("slurm-77.err",
        "slurmstepd: error: *** JOB 77 ON node2 CANCELLED AT 2026-12-02T10:00:00 DUE TO NODE "
        "FAILURE ***\n");
  EXPECT_EQ(run(defaults()), "node-failure cause node-failure node2 -\n");
}

TEST_F(RetryTriage, PerNodeLogsAndNothingKnown) {
  write("slurm-77.err", "srun: error: node1: task 1: Exited with exit code 3\n");
  write("node1.log", "all fine until now\n");
  EXPECT_EQ(run(defaults(), /*per_node=*/true), "- - - node1 node_1\n");
  write("slurm-77.err", "");
  EXPECT_EQ(run(defaults(), true), "- - - - -\n");
}

TEST(SlurmAttempts, ParsedAndDescribed) {
  const std::string text =
      "start attempt=1 of=3 slurm_job=134 nodes=node1 at=2026-12-02T10:00:00Z\n"
      "retry attempt=1 slurm_job=134 rc=17 signature=nccl-timeout class=nccl-timeout "
      "host=node1 unit=rank_3 at=2026-12-02T10:01:00Z excluded=node1 next_slurm_job=135\n"
      "torn line without an attempt\n";
  auto attempts = parse_slurm_attempts(text);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].unit, "rank 3");
  EXPECT_EQ(attempts[1].slurm_job, "135");
  EXPECT_EQ(attempts[1].of, 3);
  EXPECT_EQ(latest_slurm_job(attempts), "135");
  EXPECT_EQ(started_slurm_job(attempts), "134");
  EXPECT_EQ(attempt_headline(attempts), "attempt 2 of 3 after nccl-timeout on node1 (excluded)");
  auto lines = attempt_lines(attempts);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "1: Slurm job 134 on node1, failed (srun exit 17): nccl-timeout on node1 (rank 3); "
            "attempt 2 is Slurm job 135, node1 excluded");
  EXPECT_EQ(lines[1], "2: Slurm job 135, not started yet");

  auto started = parse_slurm_attempts(
      text + "start attempt=2 of=3 slurm_job=135 nodes=node2 at=2026-12-02T10:01:05Z\n");
  EXPECT_EQ(started_slurm_job(started), "135");
  EXPECT_EQ(attempt_lines(started)[1], "2: Slurm job 135 on node2, started 2026-12-02T10:01:05Z");
  EXPECT_TRUE(parse_slurm_attempts("").empty());
}

// Progress-aware retries (docs/executors/slurm.md, "Retries"): the checkpoint each attempt
// started from and ended with, whether it counted, and a requeued attempt's landing.
TEST(SlurmAttempts, CheckpointsAndProgressAreParsedAndShown) {
  const std::string text =
      "start attempt=1 of=8 slurm_job=134 nodes=node1 ckpt=-1 at=2026-12-02T10:00:00Z\n"
      "retry attempt=1 slurm_job=134 rc=1 signature=hang class=hang host=node1 unit=rank_5 "
      "ckpt=15 progress=yes at=2026-12-02T10:01:00Z excluded=node1 next_slurm_job=135\n"
      "start attempt=2 of=8 slurm_job=135 nodes=node2 ckpt=15 at=2026-12-02T10:01:05Z\n"
      "end attempt=2 slurm_job=135 reason=requeued ckpt=20 progress=yes at=2026-12-02T10:02:00Z\n"
      "start attempt=3 of=8 slurm_job=135 nodes=node2 ckpt=20 at=2026-12-02T10:04:00Z\n";
  auto attempts = parse_slurm_attempts(text);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].checkpoint_at_start, -1);  // none yet: not shown
  EXPECT_EQ(attempts[0].checkpoint_at_end, 15);
  EXPECT_EQ(attempts[0].progress, "yes");
  auto lines = attempt_lines(attempts);
  EXPECT_THAT(lines[0], HasSubstr("hang on node1 (rank 5) (saved up to checkpoint 15: not "
                                  "counted against retries)"));
  EXPECT_THAT(lines[1], HasSubstr(", from checkpoint 15, requeued after checkpoint 20 landed"));
  EXPECT_THAT(lines[0], Not(HasSubstr("from checkpoint")));
  EXPECT_THAT(lines[2], HasSubstr("started 2026-12-02T10:04:00Z, from checkpoint 20"));
}

// The script's retry decision run in bash: with checkpoints, attempts that saved a newer one
// do not count against `retries`; the hard cap still ends the job.
TEST(SlurmRetryScript, OnlyAttemptsWithoutProgressCountAgainstRetries) {
  Diagnostics diags;
  std::string script = render(make_plan("  slurm: {job_dir: /jobs, retries: 1, retry_on: [any]}\n"
                                        "checkpoint: {dir: /ckpt, interval: 5}\n",
                                        diags),
                              diags);
  ASSERT_FALSE(script.empty()) << errors_of(diags);
  EXPECT_THAT(script, HasSubstr("of=8 slurm_job"));
  EXPECT_THAT(script, HasSubstr("local dir='/ckpt' t=\"\""));
  TempDir dir;
  std::ofstream(dir.path() + "/batch.sh") << script;
  // The two functions, with the checkpoint dir pointed at the test's.
  auto decide = [&](const std::string& attempts, const std::string& tracker_before,
                    const std::string& tracker_after) {
    std::ofstream(dir.path() + "/attempts") << attempts;
    fs::create_directories(dir.path() + "/ckpt");
    std::ofstream(dir.path() + "/ckpt/latest_checkpointed_iteration.txt") << tracker_before;
    const std::string program =
        "set -euo pipefail\n"
        "eval \"$(sed -n '/^bridge_newest_checkpoint() {/,/^}$/p;/^bridge_progress() {/,/^}$/p' "
        "\"$1\" | sed \"s|local dir='/ckpt'|local dir='$2/ckpt'|\")\"\n"
        "start=$(bridge_newest_checkpoint)\n"
        "printf '%s' \"$3\" >\"$2/ckpt/latest_checkpointed_iteration.txt\"\n"
        "now=$(bridge_newest_checkpoint)\n"
        "echo \"$start $now $(bridge_progress \"$start\" \"$now\")\"\n";
    return run_command(
               {"bash", "-c", program, "bash", dir.path() + "/batch.sh", dir.path(), tracker_after})
        .out;
  };
  EXPECT_EQ(decide("", "10\n", "15\n"), "10 15 yes\n");
  EXPECT_EQ(decide("", "15\n", "15\n"), "15 15 no\n");
  // No tracker: the highest iter_ directory.
  fs::remove(dir.path() + "/ckpt/latest_checkpointed_iteration.txt");
  fs::create_directories(dir.path() + "/ckpt/iter_0000020");
  fs::create_directories(dir.path() + "/ckpt/iter_0000005");
  EXPECT_EQ(
      run_command({"bash", "-c",
                   "eval \"$(sed -n '/^bridge_newest_checkpoint() {/,/^}$/p' \"$1\" | sed "
                   "\"s|local dir='/ckpt'|local dir='$2/ckpt'|\")\"; bridge_newest_checkpoint",
                   "bash", dir.path() + "/batch.sh", dir.path()})
          .out,
      "20\n");
  // The count the decision uses: earlier failed ends without progress=yes, plus this one.
  const std::string count_program =
      "awk '($1 == \"end\" || $1 == \"retry\") && !/ progress=yes( |$)/ && !/ "
      "reason=requeued( |$)/ { n++ } END { print n + 0 }' \"$1\"";
  std::ofstream(dir.path() + "/attempts")
      << "retry attempt=1 progress=yes at=x\nretry attempt=2 progress=no at=y\n"
         "end attempt=3 reason=requeued progress=- at=z\n";
  // The same program as the script's (which reads "$bridge_attempts" instead of "$1").
  EXPECT_THAT(script, HasSubstr(count_program.substr(0, count_program.size() - 5)));
  EXPECT_EQ(run_command({"bash", "-c", count_program, "bash", dir.path() + "/attempts"}).out,
            "1\n");  // the requeued attempt is no failure
}

TEST(SlurmRetryScript, RenderedOnlyWithRetriesAndValidBash) {
  Diagnostics d0;
  std::string none = render(make_plan("  slurm: {job_dir: /jobs}\n", d0), d0);
  ASSERT_FALSE(none.empty()) << errors_of(d0);
  EXPECT_THAT(none, Not(HasSubstr("bridge_retry_after_failure")));

  Diagnostics diags;
  Plan plan =
      make_plan("  slurm: {job_dir: /jobs, retries: 2, exclude_failed_nodes: false}\n", diags);
  std::string script = render(plan, diags);
  ASSERT_FALSE(script.empty()) << errors_of(diags);
  // The triage program is computed only for a script that retries, and is then the whole
  // program, quoted for bash.
  EXPECT_THAT(script, HasSubstr("found=$(awk " +
                                shell_quote(retry_triage_program(slurm_retry(plan), false)) +
                                " </dev/null"));
  // Without retries the program is never built: the template's value is lazy, and the
  // built-in template uses it only inside {{#retry}}.
  Diagnostics d1;
  Plan plain = make_plan("  slurm: {job_dir: /jobs}\n", d1);
  auto data = sbatch_template_data(plain, SlurmRenderOptions{}, d1);
  ASSERT_TRUE(data) << errors_of(d1);
  const TemplateData::Value* triage = data->find("retry_triage_q");
  ASSERT_NE(triage, nullptr);
  EXPECT_TRUE(triage->make);
  EXPECT_TRUE(triage->text.empty());
  EXPECT_THAT(script, HasSubstr("of=3 slurm_job=$SLURM_JOB_ID"));
  EXPECT_THAT(script, HasSubstr("(nccl-timeout, gpu-xid, node-failure)"));
  EXPECT_THAT(script, HasSubstr("if false && [ \"$host\" != \"-\" ]"));
  EXPECT_THAT(script, HasSubstr("[ \"$counted\" -gt 2 ]"));
  EXPECT_THAT(script, HasSubstr("[ \"$BRIDGE_ATTEMPT\" -ge 3 ]"));  // no checkpoints: 3 in all
  EXPECT_THAT(script, Not(HasSubstr("scontrol requeue")));
  TempDir dir;
  std::string path = dir.path() + "/job.sbatch";
  std::ofstream(path) << script;
  auto r = run_command({"bash", "-n", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The table's needles are awk string literals: quotes, backslashes and control bytes escaped
// so that awk reads back exactly the bytes (run by the real awk here, as the batch script
// runs it).
TEST(SlurmRetryScript, AwkStringLiteralsReadBackAsTheSameBytes) {
  EXPECT_EQ(awk_string_literal("NCCL error"), "\"NCCL error\"");
  EXPECT_EQ(awk_string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(awk_string_literal(std::string("x\x01\ty\x7f", 5)), "\"x\\001\\011y\\177\"");
  EXPECT_EQ(awk_string_literal(""), "\"\"");
  const std::string hostile = std::string("q\"\\\x1b[31m\x7f", 9) + "\xc3\xa9 end";
  auto r = run_command(
      {"awk", "BEGIN { printf \"%s\", " + awk_string_literal(hostile) + " }", "/dev/null"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, hostile);
}

}  // namespace
}  // namespace bridge
