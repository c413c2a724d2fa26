// "--dry-run shows exactly what is submitted" needs a render that is a function of its
// inputs: every executor, rendered twice from the same plan and SubmissionIdentity, gives
// the same bytes, runs no command and waits for nothing; another job id changes only what
// the id names (Kubernetes object names), never the Slurm script or the local description.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "executors/executor.h"
#include "model/executor_kind.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/fake_services.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

constexpr const char* kRecipe = R"(name: determinism
cluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}
model: {tensor_model_parallel_size: 2, num_layers: 4, hidden_size: 256, num_attention_heads: 8}
runtime: {command: [bridge-probe], container_image: "nvcr.io/nvidia/nemo:25.04"}
env:
  NCCL_DEBUG: WARN
  TOKEN: {value: "s3cr3t-value", secret: true}
)";

TEST(RenderDeterminism, EveryExecutorRendersTheSameBytesTwiceWithoutSideEffects) {
  for (const auto& info : executor_registry()) {
    SCOPED_TRACE(info.name);
    MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/test"}});
    PlanRequest req;
    req.recipe_path = "determinism.yaml";
    req.executor = info.name;
    Diagnostics diags;
    Plan plan = build_plan_from_text(kRecipe, req, env, plugin_registry(), diags);
    ASSERT_TRUE(plan.complete) << info.name;
    testing::ScriptedRunner runner;
    testing::TestServices seams(runner);
    auto executor = make_executor(executor_registry(), info.name, seams.services());
    ASSERT_NE(executor, nullptr);
    SubmissionIdentity id{"determinism-20261130-120000-ab12"};
    auto first = executor->render(plan, id, diags);
    auto second = executor->render(plan, id, diags);
    ASSERT_TRUE(first && second) << info.name;
    EXPECT_FALSE(first->dry_run_text().empty());
    EXPECT_EQ(first->dry_run_text(), second->dry_run_text());
    EXPECT_THAT(first->dry_run_text(), ::testing::Not(::testing::HasSubstr("s3cr3t-value")));
    EXPECT_TRUE(runner.calls.empty() && runner.started.empty()) << "render ran a command";
    EXPECT_TRUE(seams.sleeper.waits.empty()) << "render waited";

    auto other =
        executor->render(plan, SubmissionIdentity{"determinism-20261130-120001-cd34"}, diags);
    ASSERT_TRUE(other);
    // A scheduler's job carries its id (object names, the job dir); what runs here does not.
    if (find_executor_kind(info.name)->runs_here)
      EXPECT_EQ(other->dry_run_text(), first->dry_run_text()) << info.name;
    else
      EXPECT_NE(other->dry_run_text(), first->dry_run_text()) << info.name << ": new job id";
  }
}

TEST(RenderDeterminism, TheExecutorTableMatchesTheNamesRecipesUse) {
  std::vector<std::string> table;
  for (const auto& info : executor_registry()) table.emplace_back(info.name);
  EXPECT_EQ(table, executor_names());
  ASSERT_NE(find_executor(executor_registry(), "local"), nullptr);
  EXPECT_TRUE(find_executor(executor_registry(), "local")->kind().runs_here);
  EXPECT_FALSE(find_executor(executor_registry(), "slurm")->kind().runs_here);
  EXPECT_FALSE(find_executor(executor_registry(), "kubernetes")->kind().runs_here);
  EXPECT_EQ(find_executor(executor_registry(), "slurmm"), nullptr);
}

// The model's table of executor traits (what the planner and the plugins ask instead of
// comparing names) has a row for every executor, in the same order, and the rows say what the
// executors do.
TEST(RenderDeterminism, TheExecutorKindsMatchTheNamesAndTheExecutors) {
  std::vector<std::string> kinds;
  for (const auto& kind : executor_kinds()) kinds.emplace_back(kind.name);
  EXPECT_EQ(kinds, executor_names());
  for (const auto& kind : executor_kinds()) {
    SCOPED_TRACE(std::string(kind.name));
    ASSERT_NE(kind.job_dir, nullptr);
    const ExecutorInfo* info = find_executor(executor_registry(), std::string(kind.name));
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(&info->kind(), &kind);
  }
  ExecutorSpec x;
  x.slurm.retries.value = 3;
  x.kubernetes.job_dir.value = "/k";
  EXPECT_EQ(*find_executor_kind("slurm")->retries(x)->value, 3);
  EXPECT_EQ(find_executor_kind("local")->retries, nullptr) << "the local executor never retries";
  EXPECT_EQ(*find_executor_kind("kubernetes")->job_dir(x).value, "/k");
  EXPECT_TRUE(find_executor_kind("slurm")->renders_batch_script);
  EXPECT_FALSE(find_executor_kind("kubernetes")->renders_batch_script);
  EXPECT_TRUE(find_executor_kind("kubernetes")->job_dir_in_container);
  EXPECT_EQ(find_executor_kind("slurmm"), nullptr);
}

}  // namespace
}  // namespace bridge
