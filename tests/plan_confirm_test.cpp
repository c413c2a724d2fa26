// The plan confirmation at start (plan/plan_confirm.h): when a job confirms its plan, how the
// runtime's command line starts through the confirmation program, which files go into the job
// dir, and how a verdict reads back for status and why. The program itself runs against a
// fake runtime in the local and Slurm suites and against the released Megatron-Bridge in
// tests/conformance/runtime_check_test.py.
#include "plan/plan_confirm.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executors/rank_env.h"
#include "executors/slurm_script.h"
#include "jobs/failure_triage.h"
#include "plugins/plugin.h"
#include "system/host_env.h"
#include "system/templates.h"
#include "tests/support/build_paths.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kQwen = "examples/recipes/qwen3-30b-a3b-ep-overlap.yaml";
const std::string kScript = "/opt/Megatron-Bridge/scripts/performance/run_script.py";

class PlanConfirmTest : public ::testing::Test {
 protected:
  Plan plan(std::vector<std::string> overrides, const std::string& executor = "") {
    PlanRequest req;
    req.recipe_path = std::string(test::kSourceDir) + "/" + kQwen;
    req.overrides = std::move(overrides);
    req.executor = executor;
    Plan p = build_plan(req, env_, plugin_registry(), diags_);
    std::string shown;
    for (const auto& d : diags_.items()) shown += d.code + ": " + d.message + "\n";
    EXPECT_TRUE(p.complete) << shown;
    return p;
  }
  const Diagnostic* find(const std::string& code) const { return test::find_diag(diags_, code); }

  MapEnvironment env_{{{"HOME", "/home/user"}}};
  Diagnostics diags_;
};

TEST_F(PlanConfirmTest, AMegatronBridgeJobOnSlurmStartsItsRuntimeThroughTheConfirmation) {
  Plan p = plan({});
  EXPECT_TRUE(p.confirm);
  EXPECT_EQ(find("plan-confirm-off"), nullptr);
  std::vector<std::string> cmd = rank_command(p, "/jobs/qwen/job-1");
  ASSERT_GE(cmd.size(), 7u);
  EXPECT_THAT(std::vector<std::string>(cmd.begin(), cmd.begin() + 6),
              ElementsAre("python", "/jobs/qwen/job-1/bridge_plan_confirm.py", "--confirm",
                          "/jobs/qwen/job-1/plan_confirm.json", "--", kScript));
  // Everything after the script is the plan's argv, unchanged.
  std::vector<std::string> planned = runtime_argv(p);
  EXPECT_EQ(std::vector<std::string>(cmd.begin() + 6, cmd.end()),
            std::vector<std::string>(planned.begin() + 2, planned.end()));
  // Without a job dir (what `plan` shows) the command is the plan's own.
  EXPECT_EQ(rank_command(p), planned);

  SlurmRenderOptions options;
  options.submission_id = "job-1";
  Diagnostics render_diags;
  auto script = render_sbatch_script(p, options, render_diags);
  ASSERT_TRUE(script.has_value());
  std::string dir = slurm_submission_dir(p, "job-1");
  EXPECT_THAT(script->text, HasSubstr("python " + dir + "/bridge_plan_confirm.py --confirm " + dir +
                                      "/plan_confirm.json -- " + kScript + " -m qwen"));
}

TEST_F(PlanConfirmTest, TheJobDirGetsTheEmbeddedProgramAndThePlannedValues) {
  Plan p = plan({});
  auto files = plan_confirmation_files(p);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].first, "bridge_plan_confirm.py");
  EXPECT_EQ(files[0].second, embedded_template("bridge_config_check.py").value_or("none"));
  EXPECT_EQ(files[1].first, "plan_confirm.json");
  json request = json::parse(files[1].second);
  EXPECT_EQ(request["adapter"], "megatron_bridge");
  EXPECT_EQ(request["world_size"], 16);
  std::vector<std::string> planned = runtime_argv(p);
  EXPECT_EQ(request["argv"].get<std::vector<std::string>>(),
            std::vector<std::string>(planned.begin() + 2, planned.end()));
  EXPECT_EQ(request["planned_overlap"]["overlap_moe_expert_parallel_comm"], true);
  EXPECT_EQ(request["planned_overlap"]["overlap_grad_reduce"], true);
}

// Every rank compares its environment with the launch env before its runtime starts: the
// request carries each planned value's bytes (hex, so a hostile value arrives unchanged) and a
// secret by name only (its bytes never reach a file).
TEST_F(PlanConfirmTest, TheRequestCarriesTheLaunchEnvBytesAndSecretsByNameOnly) {
  Plan p = plan(
      {"env.HOSTILE=a'b\"c $(x) \\ ;", "env.TOKEN.value=s3cr3t-value", "env.TOKEN.secret=true"});
  json request = json::parse(plan_confirmation_files(p)[1].second);
  ASSERT_TRUE(request["planned_env"].is_array());
  std::map<std::string, json> by_name;
  for (const auto& e : request["planned_env"]) by_name[e["name"].get<std::string>()] = e;
  ASSERT_EQ(by_name.size(), p.env.vars.size());
  auto hex_of = [](const std::string& text) {
    std::string out;
    for (unsigned char c : text) out += fmt::format("{:02x}", c);
    return out;
  };
  EXPECT_EQ(by_name["HOSTILE"]["hex"], hex_of("a'b\"c $(x) \\ ;"));
  // The recipe base's env_vars are planned values like any other.
  EXPECT_EQ(by_name["CUDA_DEVICE_MAX_CONNECTIONS"]["hex"],
            hex_of(p.env.find("CUDA_DEVICE_MAX_CONNECTIONS")->value));
  EXPECT_FALSE(by_name["TOKEN"].contains("hex"));
  EXPECT_EQ(plan_confirmation_files(p)[1].second.find(hex_of("s3cr3t-value")), std::string::npos);
  EXPECT_EQ(plan_confirmation_files(p)[1].second.find("s3cr3t-value"), std::string::npos);
}

TEST_F(PlanConfirmTest, RuntimeConfirmFalseTurnsItOffWithoutAWord) {
  Plan p = plan({"runtime.confirm=false"});
  EXPECT_FALSE(p.confirm);
  EXPECT_EQ(find("plan-confirm-off"), nullptr);
  EXPECT_TRUE(plan_confirmation_files(p).empty());
  EXPECT_EQ(rank_command(p, "/jobs/qwen/job-1"), runtime_argv(p));
}

TEST_F(PlanConfirmTest, ACommandThatIsNotPythonScriptIsSaidByName) {
  Plan p = plan({"runtime.command=[bash, /opt/run.sh]"});
  EXPECT_FALSE(p.confirm);
  const Diagnostic* d = find("plan-confirm-off");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kInfo) << "the user did not ask for it";
  EXPECT_THAT(d->message, HasSubstr("runtime.command is not `python SCRIPT`"));
  EXPECT_EQ(rank_command(p, "/jobs/x"), runtime_argv(p));
}

// Kubernetes ships the files in a ConfigMap (read-only), so the verdict goes elsewhere:
// `--verdict FILE` before the `--`.
TEST_F(PlanConfirmTest, KubernetesConfirmsWithTheVerdictOutsideTheReadOnlyFiles) {
  Plan p = plan({}, "kubernetes");
  EXPECT_TRUE(p.confirm);
  EXPECT_EQ(find("plan-confirm-off"), nullptr);
  std::vector<std::string> cmd = rank_command(p, "/etc/plan", "/jobs/qwen/q-ab12/v.json");
  std::vector<std::string> planned = runtime_argv(p);
  ASSERT_GE(cmd.size(), 7u);
  EXPECT_EQ(std::vector<std::string>(cmd.begin() + 1, cmd.begin() + 7),
            (std::vector<std::string>{"/etc/plan/bridge_plan_confirm.py", "--confirm",
                                      "/etc/plan/plan_confirm.json", "--verdict",
                                      "/jobs/qwen/q-ab12/v.json", "--"}));
  EXPECT_EQ(std::vector<std::string>(cmd.begin() + 7, cmd.end()),
            std::vector<std::string>(planned.begin() + 1, planned.end()));
}

TEST_F(PlanConfirmTest, ProbeAndNoneAdaptersHaveNothingToConfirm) {
  for (const char* adapter : {"probe", "none"}) {
    diags_ = Diagnostics();
    Plan p = plan({std::string("runtime.adapter=") + adapter, "runtime.command=[bridge-probe]"});
    EXPECT_FALSE(p.confirm) << adapter;
    EXPECT_EQ(find("plan-confirm-off"), nullptr) << adapter;
  }
}

class VerdictTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(dir_.path() + "/plan_confirmation.json") << text;
    return dir_.path();
  }
  test::TempDir dir_;
};

TEST_F(VerdictTest, AConfirmedPlanReadsAsConfirmedByRankZero) {
  auto v = read_plan_confirmation(
      write(R"({"confirmed": true, "compared": 40, "differences": [], "rank": 0,
                "versions": {"megatron.bridge": "0.6.2"}, "seconds": 1.5})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(plan_confirmation_line(*v),
            "plan confirmed by rank 0 (40 values, megatron.bridge 0.6.2)");
  EXPECT_EQ(plan_confirmation_to_json(*v)["confirmed"], true);
}

TEST_F(VerdictTest, TheEnvComparedOnEveryRankIsCounted) {
  auto v = read_plan_confirmation(write(R"({"confirmed": true, "compared": 40, "rank": 0,
                                            "env_compared": 12, "differences": []})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(plan_confirmation_line(*v),
            "plan confirmed by rank 0 (40 values, 12 env variables on every rank)");
  EXPECT_EQ(plan_confirmation_to_json(*v)["env_compared"], 12);
  auto differs = read_plan_confirmation(write(R"({"confirmed": false, "rank": 5,
      "env_compared": 12, "differences": [{"field": "env NCCL_P2P_NET_CHUNKSIZE",
      "key": "env.NCCL_P2P_NET_CHUNKSIZE", "planned": "2097152", "actual": "unset"}]})"));
  ASSERT_TRUE(differs.has_value());
  EXPECT_EQ(plan_confirmation_line(*differs),
            "plan differs on rank 5: env NCCL_P2P_NET_CHUNKSIZE is unset, planned 2097152 "
            "(env.NCCL_P2P_NET_CHUNKSIZE)");
}

// The line a rank prints (where the job dir cannot be read: a Kubernetes pod's log): a
// difference wins over a confirmation printed earlier; other lines and broken JSON are skipped.
TEST(VerdictLine, TheLogsVerdictIsFoundAndADifferenceWins) {
  const std::string confirmed =
      std::string(kConfirmVerdictLine) + R"( {"confirmed": true, "compared": 40, "rank": 0})";
  const std::string differs =
      std::string(kConfirmVerdictLine) +
      R"( {"confirmed": false, "rank": 2, "differences": [{"field": "train.train_iters", )"
      R"("key": "train.max_steps", "planned": 8, "actual": 9}]})";
  auto one = find_plan_confirmation_line("torchrun: starting\n" + confirmed + "\niteration 1\n");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(plan_confirmation_line(*one), "plan confirmed by rank 0 (40 values)");
  std::string both =
      std::string(kConfirmVerdictLine) + " {broken\n" + confirmed + "\n" + differs + "\n";
  auto worst = find_plan_confirmation_line(both);
  ASSERT_TRUE(worst.has_value());
  EXPECT_THAT(plan_confirmation_line(*worst),
              HasSubstr("plan differs on rank 2: train.train_iters is 9, planned 8"));
  EXPECT_FALSE(find_plan_confirmation_line("no verdict here\n").has_value());
  // A line that quotes a verdict is not one; nor is one past the bound.
  EXPECT_FALSE(find_plan_confirmation_line("echo: " + differs + "\n").has_value());
  EXPECT_FALSE(find_plan_confirmation_line(std::string(kConfirmVerdictLine) +
                                           R"( {"confirmed": true, "note": ")" +
                                           std::string(70000, 'x') + "\"}\n")
                   .has_value());
}

TEST_F(VerdictTest, ADifferingPlanNamesEveryFieldWithBothValues) {
  auto v = read_plan_confirmation(
      write(R"({"confirmed": false, "compared": 40, "rank": 3, "differences": [
      {"field": "train.train_iters", "key": "train.max_steps", "planned": 8, "actual": 9},
      {"field": "ddp.overlap_grad_reduce", "key": "comm_overlap.overlap_grad_reduce",
       "planned": true, "actual": false}]})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(plan_confirmation_line(*v),
            "plan differs on rank 3: train.train_iters is 9, planned 8 (train.max_steps); "
            "ddp.overlap_grad_reduce is false, planned true (comm_overlap.overlap_grad_reduce)");
  json j = plan_confirmation_to_json(*v);
  EXPECT_EQ(j["confirmed"], false);
  EXPECT_EQ(j["rank"], 3);
  ASSERT_EQ(j["differences"].size(), 2u);
  EXPECT_EQ(j["differences"][0]["planned"], "8");
  EXPECT_EQ(j["differences"][0]["actual"], "9");
}

TEST_F(VerdictTest, ARuntimeThatNeverFinalisedIsNotConfirmed) {
  auto v = read_plan_confirmation(write(
      R"({"confirmed": null, "compared": 0, "differences": [], "note": "the runtime ended without finalising a config"})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(plan_confirmation_line(*v),
            "plan not confirmed: the runtime ended without finalising a config");
}

TEST_F(VerdictTest, NoVerdictOrAnUnreadableOneIsNone) {
  EXPECT_FALSE(read_plan_confirmation(dir_.path()).has_value());
  EXPECT_FALSE(read_plan_confirmation("").has_value());
  EXPECT_FALSE(read_plan_confirmation(write("{not json")).has_value());
  // Hostile text in a verdict is shown escaped.
  auto v = read_plan_confirmation(write(
      R"({"confirmed": false, "differences": [{"field": "a\u001b[31m", "key": "k", "planned": 1, "actual": 2}]})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_THAT(plan_confirmation_line(*v), Not(HasSubstr("\x1b")));
}

// Issue 47 item 8: the verdict is the job's file, so any bytes. Keys of `versions` reached
// the terminal raw, 200 000 of them made a 2 MB line, and `rank: 99999999999` printed as
// 1215752191 (cut to int).
TEST_F(VerdictTest, VersionNamesAreEscapedAndBounded) {
  json verdict = {{"confirmed", true}, {"compared", 3}, {"rank", 0}};
  verdict["versions"]["megatron.bridge\x1b]0;owned\x07\x1b[2J"] = "0.6.2\x1b[31m";
  for (int i = 0; i < 200000; ++i) verdict["versions"]["pkg" + std::to_string(i)] = "1.0";
  auto v = read_plan_confirmation(write(verdict.dump()));
  ASSERT_TRUE(v.has_value());
  std::string line = plan_confirmation_line(*v);
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x07'), std::string::npos) << line;
  EXPECT_THAT(line, HasSubstr("megatron.bridge\\x1b]0;owned\\x07\\x1b[2J 0.6.2\\x1b[31m"));
  EXPECT_THAT(line, HasSubstr(" and 199993 more)"));
  EXPECT_LT(line.size(), 1000u);
  std::string shown = plan_confirmation_to_json(*v).dump();
  EXPECT_EQ(shown.find("\\u001b"), std::string::npos) << shown.substr(0, 300);
  EXPECT_LT(shown.size(), 2000u);
}

TEST_F(VerdictTest, ARankBeyondIntIsUnknownNotAnotherRank) {
  for (const char* rank : {"99999999999", "-1", "18446744073709551615", "1e3", "\"3\""}) {
    auto v = read_plan_confirmation(write(std::string(R"({"confirmed": false, "rank": )") + rank +
                                          R"(, "differences": [{"field": "f", "key": "k",
                                          "planned": 1, "actual": 2}]})"));
    ASSERT_TRUE(v.has_value()) << rank;
    std::string line = plan_confirmation_line(*v);
    EXPECT_THAT(line, HasSubstr("plan differs on a rank that is not known: f is 2, planned 1"))
        << rank;
    EXPECT_THAT(line, Not(HasSubstr("1215752191")));
    EXPECT_TRUE(plan_confirmation_to_json(*v)["rank"].is_null()) << rank;
  }
  auto v = read_plan_confirmation(write(R"({"confirmed": false, "rank": 2147483647})"));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(plan_confirmation_line(*v), "plan differs on rank 2147483647:");
}

TEST(RecordedPlanConfirms, OnlyAPlanThatStartedItsRanksThroughTheConfirmation) {
  EXPECT_TRUE(recorded_plan_confirms(json{{"confirm_at_start", true}}));
  EXPECT_FALSE(recorded_plan_confirms(json{{"confirm_at_start", false}}));
  EXPECT_FALSE(recorded_plan_confirms(json{{"confirm_at_start", "true"}}));
  EXPECT_FALSE(recorded_plan_confirms(json{{"argv", json::array()}}));
  EXPECT_FALSE(recorded_plan_confirms(json()));
  EXPECT_FALSE(recorded_plan_confirms(json::array()));
}

TEST(PlanConfirmTriage, TheConfirmationsLineIsACauseForWhy) {
  const ErrorSignature* s = classify_line(
      "bridge-launch: the runtime built a config that differs from the plan: train.train_iters "
      "is 9, planned 8 (plan key train.max_steps)");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->id, "plan-differs");
  EXPECT_EQ(s->kind, SignatureKind::kCause);
  const ErrorSignature* env = classify_line(
      "bridge-launch: the rank's environment differs from the planned launch env: env "
      "CUDA_DEVICE_MAX_CONNECTIONS is 1, planned 32");
  ASSERT_NE(env, nullptr);
  EXPECT_STREQ(env->id, "env-differs");
  EXPECT_EQ(env->kind, SignatureKind::kCause);
}

}  // namespace
}  // namespace bridge
