// The runtime check (plan/runtime_check.h) with a scripted answer: what it asks the check
// program, and how each answer becomes diagnostics at the recipe line that set the value.
// The check against the real release is tests/conformance/runtime_check_test.py.
#include "plan/runtime_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plugins/plugin.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_services.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kQwen = "examples/recipes/qwen3-30b-a3b-ep-overlap.yaml";

CommandResult answer(const json& a) {
  CommandResult r;
  r.out = "the release printed this while importing\n" + a.dump() + "\n";
  return r;
}

json passing_answer() {
  return {{"ok", true},
          {"error", nullptr},
          {"versions", {{"megatron.bridge", "0.6.2"}, {"megatron.core", "0.19.2"}}},
          {"seconds", 12.5},
          {"base", {{"kind", "perf_recipes"}, {"function", "qwen3_30b_a3b_pretrain_config"}}},
          {"findings", json::array()}};
}

json with_finding(const std::string& cls, const json& key, const std::string& message) {
  json a = passing_answer();
  a["ok"] = false;
  a["findings"].push_back({{"class", cls}, {"key", key}, {"arg", nullptr}, {"message", message}});
  return a;
}

class RuntimeCheckTest : public ::testing::Test {
 protected:
  Plan plan(std::vector<std::string> overrides) {
    PlanRequest req;
    req.recipe_path =
        recipe_path_.empty() ? std::string(test::kSourceDir) + "/" + kQwen : recipe_path_;
    req.overrides = std::move(overrides);
    Plan p = build_plan(req, env_, plugin_registry(), diags_);
    std::string shown;
    for (const auto& d : diags_.items()) shown += d.code + ": " + d.message + "\n";
    EXPECT_TRUE(p.complete) << shown;
    return p;
  }
  Plan checked(const json& reply, std::vector<std::string> overrides = {}) {
    overrides.push_back("runtime.check.python=/opt/mb/bin/python");
    Plan p = plan(overrides);
    runner_.respond = [reply](const CommandSpec&) { return answer(reply); };
    run_runtime_check(p, runner_, clock_, diags_);
    return p;
  }
  const Diagnostic* find(const std::string& code) const { return test::find_diag(diags_, code); }

  std::string recipe_path_;  // the Qwen example when empty
  MapEnvironment env_{{{"HOME", "/home/user"}}};
  Diagnostics diags_;
  testing::ScriptedRunner runner_;
  testing::FakeClock clock_;
};

TEST_F(RuntimeCheckTest, NothingRunsUnlessAsked) {
  Plan p = plan({});
  run_runtime_check(p, runner_, clock_, diags_);
  EXPECT_TRUE(runner_.calls.empty());
  EXPECT_FALSE(p.runtime_check.ran);
}

TEST_F(RuntimeCheckTest, TheProgramGetsExactlyTheAdapterArgvTheWorldSizeAndTheGpu) {
  Plan p = checked(passing_answer());
  ASSERT_EQ(runner_.calls.size(), 1u);
  const CommandSpec& call = runner_.calls[0];
  ASSERT_GE(call.argv.size(), 3u);
  EXPECT_EQ(call.argv[0], "/opt/mb/bin/python");
  EXPECT_EQ(call.argv[1], "-c");
  EXPECT_THAT(call.argv[2], HasSubstr("def check(request)"));  // the embedded program
  EXPECT_EQ(call.timeout, std::chrono::seconds(kDefaultRuntimeCheckSeconds));
  json request = json::parse(call.stdin_text);
  EXPECT_EQ(request["adapter"], "megatron_bridge");
  std::vector<std::string> argv;
  for (const auto& a : p.runtime_args) argv.push_back(a.text);
  EXPECT_EQ(request["argv"].get<std::vector<std::string>>(), argv);
  EXPECT_EQ(request["world_size"], 16);
  EXPECT_EQ(request["gpu"], "h100");
  EXPECT_EQ(request["capability"], json::array({9, 0}));
  EXPECT_EQ(request["planned_overlap"]["overlap_moe_expert_parallel_comm"], true);
  EXPECT_EQ(request["recipe_lookup"]["model_recipe_name"], "qwen3_30b_a3b");
  EXPECT_FALSE(request["planned_overlap"].contains("tp_comm_overlap_cfg"));  // left to runtime
}

TEST_F(RuntimeCheckTest, APassingCheckSaysWhichReleaseAndRecipeAndHowLong) {
  Plan p = checked(passing_answer());
  EXPECT_FALSE(diags_.has_errors());
  EXPECT_TRUE(p.runtime_check.passed);
  EXPECT_EQ(p.runtime_check.recipe, "qwen3_30b_a3b_pretrain_config");
  const Diagnostic* d = find("runtime-check-passed");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("megatron.bridge 0.6.2, megatron.core 0.19.2"));
  EXPECT_THAT(d->message, HasSubstr("qwen3_30b_a3b_pretrain_config"));
  EXPECT_TRUE(p.complete);
}

TEST_F(RuntimeCheckTest, ARefusedOverrideIsAnErrorAtItsRecipeLineWithTheReleasesMessage) {
  Plan p = checked(with_finding("override-refused", "model.num_layers",
                                "ConfigAttributeError: Key 'num_layers' is not in struct"));
  const Diagnostic* d = find("runtime-check-refused");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->loc.file, HasSubstr(kQwen));
  EXPECT_EQ(d->loc.line, 24);
  EXPECT_THAT(d->message, HasSubstr("Key 'num_layers' is not in struct"));
  EXPECT_THAT(d->message, HasSubstr("/opt/mb/bin/python"));
  EXPECT_FALSE(p.complete);
  EXPECT_FALSE(p.runtime_check.passed);
}

TEST_F(RuntimeCheckTest, AValueSetByAnOverrideIsReportedAtTheOverride) {
  checked(with_finding("value-changed", "model.hidden_size", "model.hidden_size is 4096"),
          {"model.hidden_size=1024"});
  const Diagnostic* d = find("runtime-check-differs");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->loc.from_override());
  EXPECT_THAT(d->loc.override_arg, HasSubstr("model.hidden_size"));
}

TEST_F(RuntimeCheckTest, AnOverlapFieldThatDiffersNamesBothValuesAtItsLine) {
  checked(with_finding("overlap-differs", "comm_overlap.overlap_moe_expert_parallel_comm",
                       "model.overlap_moe_expert_parallel_comm is false after "
                       "CommOverlapConfig.setup, the plan resolved true"));
  const Diagnostic* d = find("runtime-check-differs");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->loc.line, 42);
  EXPECT_THAT(d->message, HasSubstr("is false after"));
  EXPECT_THAT(d->message, HasSubstr("resolved true"));
}

TEST_F(RuntimeCheckTest, AFinalisationRefusalPointsAtTheFirstRecipeKeyItsMessageNames) {
  checked(with_finding("finalisation-refused", "",
                       "AssertionError: expert_tensor_parallel_size must be 1 with bias"));
  const Diagnostic* d = find("runtime-check-refused");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->loc.line, 22);
  EXPECT_EQ(d->path, "model.expert_tensor_parallel_size");
}

// Recipe keys are text, never patterns: keys that would be malformed regular expressions
// (issue 47 item 5: `example.com/owner[x` ended the check with "internal error: Mismatched
// '(' and ')'") are searched for as plain words, and found when the message names them.
TEST_F(RuntimeCheckTest, KeysThatLookLikeRegularExpressionsAreSearchedAsText) {
  test::TempDir dir;  // the example's `executor:` section is its last: annotations go in it
  recipe_path_ = dir.write("recipe.yaml",
                           test::read_file(std::string(test::kSourceDir) + "/" + kQwen) +
                               "\n  kubernetes:\n    annotations:\n"
                               "      \"example.com/own(er\": a\n      \"example.com/owner[x\": b\n"
                               "      \"example.com/x.*+?{\": c\n");
  checked(with_finding("finalisation-refused", "",
                       "RuntimeError: annotation com/owner[x is not allowed here"));
  const Diagnostic* d = find("runtime-check-refused");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "executor.kubernetes.annotations.example.com/owner[x");
  EXPECT_GT(d->loc.line, 22);

  // Part of a longer word is no mention; the name inside other text is.
  diags_ = Diagnostics();
  checked(with_finding("finalisation-refused", "",
                       "RuntimeError: com/owner[xy and xcom/owner[x and com/own(er-ish"));
  d = find("runtime-check-refused");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "");
  EXPECT_EQ(d->loc.line, 0);
}

TEST_F(RuntimeCheckTest, ARefusalThatNamesNoRecipeKeyPointsAtTheFile) {
  checked(with_finding("finalisation-refused", "", "RuntimeError: something else entirely"));
  const Diagnostic* d = find("runtime-check-refused");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->loc.file, HasSubstr(kQwen));
  EXPECT_EQ(d->loc.line, 0);
}

TEST_F(RuntimeCheckTest, ThePythonThatCannotStartIsOneClearError) {
  Plan p = plan({"runtime.check.python=/nonexistent/python"});
  runner_.respond = [](const CommandSpec&) {
    CommandResult r;
    r.started = false;
    r.err = "No such file or directory";
    return r;
  };
  run_runtime_check(p, runner_, clock_, diags_);
  const Diagnostic* d = find("runtime-check-failed");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("/nonexistent/python could not start"));
  EXPECT_TRUE(d->loc.from_override());
  EXPECT_FALSE(p.complete);
}

TEST_F(RuntimeCheckTest, TheTimeLimitIsTheRecipesAndATimeoutSaysSo) {
  Plan p = plan({"runtime.check.python=/opt/mb/bin/python", "runtime.check.timeout=7"});
  runner_.respond = [](const CommandSpec&) {
    CommandResult r;
    r.timed_out = true;
    return r;
  };
  run_runtime_check(p, runner_, clock_, diags_);
  ASSERT_EQ(runner_.calls.size(), 1u);
  EXPECT_EQ(runner_.calls[0].timeout, std::chrono::seconds(7));
  const Diagnostic* d = find("runtime-check-failed");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("did not answer within 7 s"));
  EXPECT_THAT(d->help, HasSubstr("runtime.check.timeout"));
}

TEST_F(RuntimeCheckTest, AnImportFailureAndAnUnreadableAnswerAreTheChecksOwnFailure) {
  json import_failed = {{"ok", false},
                        {"error",
                         "Megatron-Bridge does not import in /usr/bin/python3: "
                         "ModuleNotFoundError: No module named 'megatron'"}};
  checked(import_failed);
  const Diagnostic* d = find("runtime-check-failed");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("No module named 'megatron'"));

  diags_ = Diagnostics();
  Plan p = plan({"runtime.check.python=/opt/mb/bin/python"});
  runner_.respond = [](const CommandSpec&) {
    CommandResult r;
    r.out = "Traceback (most recent call last):\n  garbage\n";
    return r;
  };
  run_runtime_check(p, runner_, clock_, diags_);
  EXPECT_NE(find("runtime-check-failed"), nullptr);
}

TEST_F(RuntimeCheckTest, AnAdapterThatForwardsNothingToMegatronBridgeIsSkippedWithAWarning) {
  Plan p = plan({"runtime.adapter=none", "runtime.check.python=/opt/mb/bin/python"});
  run_runtime_check(p, runner_, clock_, diags_);
  EXPECT_TRUE(runner_.calls.empty());
  const Diagnostic* d = find("runtime-check-skipped");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
}

// Whether process `pid` is gone (or a zombie no one reaped yet) within 5 s.
bool gone_soon(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::string stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && stat.compare(paren + 2, 1, "Z") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);  // a failing test leaves nothing behind
  return false;
}

// A --runtime-check Python that is a wrapper script starting the real one (as
// docs/runtime-check.md suggests) and hangs: at the time limit the whole process group is
// killed, so what the script started (here a sleeping grandchild) is gone too. Before, only
// the script was killed and the grandchild ran on.
TEST_F(RuntimeCheckTest, ATimedOutWrapperScriptTakesWhatItStartedWithIt) {
  test::TempDir dir;
  const std::string pid_file = dir.path() + "/grandchild.pid";
  const std::string python =
      dir.write("python", "#!/bin/sh\nsleep 60 &\necho $! > '" + pid_file + "'\nwait\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  Plan p = plan({"runtime.check.python=" + python, "runtime.check.timeout=1"});
  SpawnCommandRunner real;
  run_runtime_check(p, real, clock_, diags_);
  const Diagnostic* d = find("runtime-check-failed");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("did not answer within 1 s"));
  long pid = 0;
  std::istringstream(test::read_file(pid_file)) >> pid;
  ASSERT_GT(pid, 1) << "the wrapper started nothing";
  EXPECT_TRUE(gone_soon(static_cast<pid_t>(pid))) << "the wrapper's child " << pid << " runs on";
}

// A Python that prints more than the runner keeps (kMaxCapturedOutput) before its answer: the
// answer, the last line, is still read, and a warning says the output was cut. Before, all of
// it was held (300 MB cost 862 MiB).
TEST_F(RuntimeCheckTest, OutputPastTheBoundIsCutAndTheAnswerStillRead) {
  test::TempDir dir;
  const std::string python =
      dir.write("python", "#!/bin/sh\nhead -c " + std::to_string(kMaxCapturedOutput + 4096) +
                              " /dev/zero | tr '\\0' x\necho\ncat <<'ANSWER'\n" +
                              passing_answer().dump() + "\nANSWER\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  Plan p = plan({"runtime.check.python=" + python});
  SpawnCommandRunner real;
  run_runtime_check(p, real, clock_, diags_);
  EXPECT_EQ(find("runtime-check-failed"), nullptr);
  EXPECT_NE(find("runtime-check-passed"), nullptr);
  const Diagnostic* d = find("runtime-check-output-cut");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_THAT(d->message,
              HasSubstr("output cut at " + std::to_string(kMaxCapturedOutput) + " bytes"));
  EXPECT_TRUE(p.runtime_check.passed);
}

}  // namespace
}  // namespace bridge
