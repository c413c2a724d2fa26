// End to end: an API key and a user secret never appear in `plan`, `plan --format json` or
// `--dry-run` output (the acceptance check of the plugins issue).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

constexpr const char* kKeyMarker = "WANDB-KEY-MARKER-91c2";
constexpr const char* kTokenMarker = "USER-TOKEN-MARKER-77ab";

constexpr const char* kRecipe = R"(name: secrets
cluster: {num_gpus: 1, gpus_per_node: 1}
runtime:
  command: [/bin/true]
plugins:
  wandb: {project: llm}
env:
  HF_TOKEN: {value: "${MY_TOKEN}", secret: true}
executor:
  local: {job_dir: JOB_DIR}
)";

class PluginSecretsEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text = kRecipe;
    text.replace(text.find("JOB_DIR"), 7, dir_.path() + "/jobs");
    recipe_ = dir_.write("secrets.yaml", text);
  }

  test::ChildResult run(std::vector<std::string> args) {
    args.insert(args.begin(), BRIDGE_LAUNCH_BIN);
    return test::run_command(args, {{"WANDB_API_KEY", kKeyMarker}, {"MY_TOKEN", kTokenMarker}});
  }

  static void expect_no_secret(const test::ChildResult& r) {
    for (const auto* marker : {kKeyMarker, kTokenMarker}) {
      EXPECT_EQ(r.out.find(marker), std::string::npos) << r.out;
      EXPECT_EQ(r.err.find(marker), std::string::npos) << r.err;
    }
  }

  test::TempDir dir_;
  std::string recipe_;
};

TEST_F(PluginSecretsEndToEnd, PlanTextHidesSecrets) {
  auto r = run({"plan", recipe_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("WANDB_API_KEY"), std::string::npos);
  EXPECT_NE(r.out.find("<secret>"), std::string::npos);
  expect_no_secret(r);
}

TEST_F(PluginSecretsEndToEnd, PlanJsonHidesSecrets) {
  auto r = run({"plan", recipe_, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_no_secret(r);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j["env"]["WANDB_API_KEY"]["value"].is_null());
  EXPECT_EQ(j["env"]["WANDB_API_KEY"]["secret"], true);
  EXPECT_EQ(j["env"]["WANDB_API_KEY"]["source"], "plugin:wandb");
  EXPECT_TRUE(j["env"]["HF_TOKEN"]["value"].is_null());
  EXPECT_EQ(j["env"]["HF_TOKEN"]["secret"], true);
}

TEST_F(PluginSecretsEndToEnd, DryRunHidesSecrets) {
  auto r = run({recipe_, "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_no_secret(r);
}

}  // namespace
}  // namespace bridge
