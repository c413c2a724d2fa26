// The recipe base (model/recipe_base.h): a plan that names one of Megatron-Bridge 0.6.2's
// performance recipes starts from that recipe's own values, sends only what the user set, and
// says where every value came from. The table's values are the release's (the conformance
// suite builds every recipe and compares, tests/conformance/fidelity.py); these tests check
// what bridge-launch does with them.
#include "model/recipe_base.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "model/megatron_bridge_perf_recipes.h"
#include "plan/plan.h"
#include "plan/plan_output.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

struct PlanRun {
  Diagnostics diags;
  Plan plan;
  bool has(const std::string& code) const {
    return std::any_of(diags.items().begin(), diags.items().end(),
                       [&](const Diagnostic& d) { return d.code == code; });
  }
  std::vector<std::string> argv() const { return runtime_argv(plan); }
};

PlanRun plan_of(const std::string& text, std::vector<std::string> overrides = {},
                const std::string& executor = "slurm") {
  PlanRun run;
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path = "named.yaml";
  req.executor = executor;
  req.overrides = std::move(overrides);
  run.plan = build_plan_from_text(text, req, env, plugin_registry(), run.diags);
  return run;
}

// NVIDIA's EP-overlap smoke test (examples/named/qwen3-30b-a3b-guide-smoke.yaml): the tuned
// recipe named, CUDA graphs off, the three overlap overrides, 8 steps. Nothing about the model.
const char* kGuide = R"(name: guide
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model: {family: qwen, recipe: qwen3_30b_a3b, cuda_graph_impl: none,
        moe_shared_expert_overlap: false}
comm_overlap: {overlap_moe_expert_parallel_comm: true, delay_wgrad_compute: true}
train: {max_steps: 8}
runtime: {adapter: megatron_bridge, command: [python, run_script.py],
          transformer_engine: "2.9.0", torch: "2.9.0"}
)";

TEST(RecipeBase, TheGuidesSmokeTestValidatesWithoutRestatingTheModel) {
  PlanRun run = plan_of(kGuide);
  ASSERT_FALSE(run.diags.has_errors()) << run.plan.recipe->base.function;
  EXPECT_EQ(run.diags.count(Severity::kWarning), 0u);
  const Recipe& r = *run.plan.recipe;
  EXPECT_EQ(r.base.function, "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  EXPECT_EQ(r.model.num_moe_experts.value, 128);
  EXPECT_EQ(r.model.expert_model_parallel_size.value, 16);  // not 1, the old default
  EXPECT_EQ(run.plan.topology->ep, 16);
  // The argv: what run_script.py needs, then exactly the keys the recipe sets.
  EXPECT_THAT(run.argv(),
              ElementsAreArray<std::string>({"python",
                                             "run_script.py",
                                             "-m",
                                             "qwen",
                                             "-mr",
                                             "qwen3_30b_a3b",
                                             "-g",
                                             "h100",
                                             "-ng",
                                             "16",
                                             "-gn",
                                             "8",
                                             "-ms",
                                             "8",
                                             "-c",
                                             "bf16",
                                             "--cuda_graph_impl",
                                             "none",
                                             "model.moe_shared_expert_overlap=false",
                                             "comm_overlap.overlap_moe_expert_parallel_comm=true",
                                             "comm_overlap.delay_wgrad_compute=true"}));
}

// The shipped example is the same recipe with a container and a Slurm section.
TEST(RecipeBase, TheShippedGuideExampleValidates) {
  Diagnostics diags;
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path =
      std::string(BRIDGE_SOURCE_DIR) + "/examples/named/qwen3-30b-a3b-guide-smoke.yaml";
  Plan plan = build_plan(req, env, plugin_registry(), diags);
  ASSERT_TRUE(plan.complete);
  EXPECT_EQ(diags.count(Severity::kWarning), 0u);
  std::vector<std::string> argv = runtime_argv(plan);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 5, argv.end()),
            (std::vector<std::string>{"--cuda_graph_impl", "none",
                                      "model.moe_shared_expert_overlap=false",
                                      "comm_overlap.overlap_moe_expert_parallel_comm=true",
                                      "comm_overlap.delay_wgrad_compute=true"}));
}

// NVIDIA's whole smoke-test command written as recipe keys plans to the same flags and
// overrides (order aside), but one: --moe_a2a_overlap false, which sets no key
// (--moe_flex_dispatcher_backend None is the key moe_token_dispatcher_type: alltoall). The
// conformance suite builds both with the release (guide-command).
TEST(RecipeBase, TheGuidesWholeCommandAsKeysPlansToItsFlags) {
  Diagnostics diags;
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path =
      std::string(BRIDGE_SOURCE_DIR) + "/examples/named/qwen3-30b-a3b-guide-command.yaml";
  Plan plan = build_plan(req, env, plugin_registry(), diags);
  ASSERT_TRUE(plan.complete);
  EXPECT_EQ(diags.count(Severity::kWarning), 0u);
  std::vector<std::string> argv = runtime_argv(plan);
  argv.erase(argv.begin(), argv.begin() + 2);  // python run_script.py
  const std::string guide =
      "-m qwen -mr qwen3_30b_a3b -g h100 -ng 16 -gn 8 -ms 8 -c bf16 --task pretrain "
      "--config_variant v1 --cuda_graph_impl none --tokenizer_type NullTokenizer "
      "--moe_flex_dispatcher_backend None model.moe_shared_expert_overlap=false "
      "comm_overlap.overlap_moe_expert_parallel_comm=true comm_overlap.delay_wgrad_compute=true";
  EXPECT_EQ(fmt::format("{}", fmt::join(argv, " ")), guide);
}

// The keys only run_script.py's flags carry are refused by the other adapters, never dropped.
TEST(RecipeBase, RunScriptOnlyKeysAreRefusedByTheHydraAdapter) {
  PlanRun run = plan_of(kGuide, {"runtime.adapter=hydra", "train.tokenizer_type=NullTokenizer",
                                 "model.config_variant=large_scale"});
  std::vector<std::string> refused;
  for (const Diagnostic& d : run.diags.items())
    if (d.code == "run-script-only-key" && d.severity == Severity::kError)
      refused.push_back(d.path);
  EXPECT_EQ(refused, (std::vector<std::string>{"model.config_variant", "train.tokenizer_type"}));
  EXPECT_THAT(run.argv(), Not(::testing::Contains(HasSubstr("tokenizer"))));
}

TEST(RecipeBase, AValueOfTheFileOrAnOverrideWinsAndNullMeansTheRecipes) {
  PlanRun run = plan_of(std::string(kGuide) + "ddp: {bucket_size: null}\n",
                        {"model.expert_model_parallel_size=8"});
  const Recipe& r = *run.plan.recipe;
  EXPECT_EQ(r.model.expert_model_parallel_size.value, 8);
  EXPECT_TRUE(r.model.expert_model_parallel_size.loc.from_override());
  EXPECT_TRUE(r.model.cuda_graph_impl.loc.has_position());
  EXPECT_EQ(r.model.cuda_graph_impl.value, "none");
  EXPECT_EQ(r.model.num_layers.loc.describe(),
            "recipe base qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  EXPECT_THAT(run.argv(), ::testing::Contains("-ep"));
  EXPECT_THAT(run.argv(), Not(::testing::Contains("-tp")));
}

// The plan shows every value the base decided, with the base's name, in text and JSON.
TEST(RecipeBase, ThePlanShowsTheBaseAndItsValues) {
  PlanRun run = plan_of(kGuide);
  std::string text = plan_to_text(run.plan, false);
  EXPECT_THAT(text, HasSubstr("recipe base (Megatron-Bridge 0.6.2 "
                              "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config)"));
  EXPECT_THAT(text, HasSubstr("model.expert_model_parallel_size=16"));
  // The section's value lines fit 120 columns.
  size_t start = text.find("recipe base (");
  size_t end = text.find("comm_overlap (resolved)", start);
  ASSERT_NE(end, std::string::npos);
  std::string section = text.substr(start, end - start);
  for (size_t pos = section.find('\n') + 1, next; pos < section.size(); pos = next + 1) {
    next = section.find('\n', pos);
    EXPECT_LE(next - pos, 120u) << section.substr(pos, next - pos);
  }
  std::string json = plan_to_json(run.plan, run.diags).dump();
  EXPECT_THAT(json, HasSubstr("\"recipe_base\":{\"function\":\"qwen3_30b_a3b_pretrain_16gpu_"
                              "h100_bf16_config\""));
  EXPECT_THAT(json, HasSubstr("\"model.num_moe_experts\":\"128\""));
}

// The launch env carries the recipe's env_vars with the recipe's values, so the script shows
// them and every rank's env check covers them; a value the user set stays and is named.
TEST(RecipeBase, TheRecipesEnvIsInTheLaunchEnv) {
  PlanRun run = plan_of(kGuide, {"env.NCCL_NVLS_ENABLE=1"});
  const std::string base = "recipe base qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config";
  for (const char* name : {"CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FWD_LAYERNORM_SM_MARGIN",
                           "NVTE_BWD_LAYERNORM_SM_MARGIN"}) {
    const EnvVar* v = run.plan.env.find(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->source, base);
  }
  EXPECT_EQ(run.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS")->value, "32");
  EXPECT_EQ(run.plan.env.find("NVTE_FWD_LAYERNORM_SM_MARGIN")->value, "20");
  EXPECT_EQ(run.plan.env.find("NCCL_NVLS_ENABLE")->value, "1");
  EXPECT_TRUE(run.has("runtime-env-replaced"));
}

// A warning about NVIDIA's own value (here its TP overlap, off at tp 1) is an info: the user
// asked for nothing, and the runtime does the same. The user's own request is still warned.
TEST(RecipeBase, WarningsAboutTheBasesOwnValuesAreInfos) {
  PlanRun run = plan_of(kGuide);
  EXPECT_FALSE(run.has("tp-overlap-disabled") && run.diags.count(Severity::kWarning) > 0);
  PlanRun mine = plan_of(kGuide, {"comm_overlap.tp_comm_overlap=true"});
  bool warned = false;
  for (const auto& d : mine.diags.items())
    warned |= d.code == "tp-overlap-disabled" && d.severity == Severity::kWarning;
  EXPECT_TRUE(warned);
}

// run_script.py runs another GPU count's recipe when -ng has none, and scales its global batch
// by the data-parallel sizes (set_post_overrides): the base does the same.
TEST(RecipeBase, AnotherGpuCountsRecipeScalesTheGlobalBatch) {
  PlanRun run = plan_of(kGuide, {"cluster.num_gpus=32"});
  const Recipe& r = *run.plan.recipe;
  EXPECT_EQ(r.base.function, "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  EXPECT_EQ(r.train.global_batch_size.value, 2048);  // 1024 at dp 16, so 2048 at dp 32
  PlanRun set = plan_of(kGuide, {"cluster.num_gpus=32", "train.global_batch_size=512"});
  EXPECT_EQ(set.plan.recipe->train.global_batch_size.value, 512);
}

// Where the base is named but its values are not known here, nothing is filled, the plan says
// so by name, and no key the user left unset is sent.
TEST(RecipeBase, AnUnknownBaseIsSaidAndNothingIsInvented) {
  PlanRun run = plan_of(R"(name: k
cluster: {gpu: h100, num_gpus: 1024}
model: {family: kimi, recipe: kimi_k2}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)");
  EXPECT_TRUE(run.has("recipe-base-unknown"));
  EXPECT_FALSE(run.plan.recipe->model.num_layers.is_set());
  EXPECT_THAT(run.argv(), Not(::testing::Contains("-tp")));
}

// The hydra adapter's recipe-driven script builds the library recipe of megatron.bridge.recipes
// for the same model, task, GPU and count (for 32 H100s, Qwen3-30B-A3B's 8-GPU recipe, which
// recomputes fully: validate now refuses EP overlap there, as the release does).
TEST(RecipeBase, TheHydraAdaptersBaseIsTheLibraryRecipe) {
  PlanRun run = plan_of(kGuide, {"runtime.adapter=hydra", "cluster.num_gpus=32"});
  EXPECT_EQ(run.plan.recipe->base.function, "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config");
  EXPECT_EQ(run.plan.recipe->model.recompute_granularity.value, "full");
  EXPECT_TRUE(run.diags.has_errors());
  EXPECT_EQ(find_library_recipe("qwen3_30b_a3b", "pretrain", "h100", "bf16", 16)->function,
            "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  EXPECT_EQ(find_library_recipe("qwen3_30b_a3b", "pretrain", "b200", "bf16", 16)->function,
            "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");  // any GPU's, in name order
  EXPECT_EQ(find_library_recipe("no_such_model", "pretrain", "h100", "bf16", 8), nullptr);
}

// A recipe-driven script given `--recipe NAME` builds that recipe, whatever model.recipe says:
// it is the base. A name the release lacks is said, with the closest name, and no base is made up.
TEST(RecipeBase, TheScriptsRecipeArgumentNamesTheHydraBase) {
  PlanRun run = plan_of(kGuide, {"runtime.adapter=hydra",
                                 "runtime.command=[python,run_recipe.py,--recipe,"
                                 "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config]"});
  EXPECT_EQ(run.plan.recipe->base.function, "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config");
  EXPECT_EQ(run.plan.recipe->model.recompute_granularity.value, "full");  // the 8-GPU recipe's
  PlanRun misspelt = plan_of(kGuide, {"runtime.adapter=hydra",
                                      "runtime.args=[--recipe=qwen3_30b_a3b_pretrain_16gpu_h100_"
                                      "bf16_cnofig]"});
  EXPECT_TRUE(misspelt.plan.recipe->base.function.empty());
  EXPECT_FALSE(misspelt.plan.recipe->model.num_layers.is_set());
  const Diagnostic* d = test::find_diag(misspelt.diags, "hydra-recipe-unknown");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->message, HasSubstr("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"));
}

// A library recipe that sets sequence_parallel at tensor parallelism 1 (Nemotron-3 Ultra's
// pretrain recipe) has it turned off by the release's finalisation: the plan and the values
// the confirmation at start compares hold false, as the job will.
TEST(RecipeBase, ALibraryRecipesSequenceParallelAtTp1IsFalseAsTheReleaseFinalisesIt) {
  PlanRun run = plan_of(kGuide, {"runtime.adapter=hydra",
                                 "runtime.command=[python,run_recipe.py,--recipe,"
                                 "nemotron_3_ultra_pretrain_24gpu_h100_bf16_config]"});
  const Recipe& r = *run.plan.recipe;
  ASSERT_EQ(r.base.function, "nemotron_3_ultra_pretrain_24gpu_h100_bf16_config");
  EXPECT_EQ(r.model.tensor_model_parallel_size.get_or(1), 1);
  EXPECT_EQ(r.model.sequence_parallel.value, false);
  EXPECT_TRUE(r.model.sequence_parallel.loc.from_base());
  EXPECT_THAT(r.base.filled, ::testing::Contains(std::pair<std::string, std::string>{
                                 "model.sequence_parallel", "false"}));
  EXPECT_FALSE(run.has("sequence-parallel-without-tp"));
}

// The probe and none runtimes build no recipe: no base.
TEST(RecipeBase, NoBaseForTheProbe) {
  PlanRun run = plan_of(kGuide, {"runtime.adapter=probe"});
  EXPECT_TRUE(run.plan.recipe->base.function.empty());
  EXPECT_FALSE(run.plan.recipe->model.num_layers.is_set());
}

// E22: an mlp CUDA graph needs dense layers, which only the base knows of: Qwen3-30B-A3B has
// none (refused), DeepSeek-V3 its first three (accepted); without a base, a warning says so.
TEST(RecipeBase, AnMlpCudaGraphNeedsTheDenseLayersTheBaseKnowsOf) {
  const std::vector<std::string> mlp_graph{"model.cuda_graph_impl=transformer_engine",
                                           "model.cuda_graph_scope=[mlp]"};
  PlanRun all_moe = plan_of(kGuide, mlp_graph);
  EXPECT_TRUE(all_moe.has("mlp-cuda-graph-all-moe"));
  EXPECT_TRUE(all_moe.diags.has_errors());

  PlanRun dense_first = plan_of(R"(name: d
cluster: {gpu: h100, num_gpus: 1024}
model: {family: deepseek, recipe: deepseek_v3}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)",
                                mlp_graph);
  EXPECT_EQ(dense_first.plan.recipe->base.function,
            "deepseek_v3_pretrain_1024gpu_h100_bf16_config");
  EXPECT_TRUE(dense_first.plan.recipe->base.moe_dense_layers);
  EXPECT_FALSE(dense_first.has("mlp-cuda-graph-all-moe"));
  EXPECT_FALSE(dense_first.has("mlp-cuda-graph-all-moe-unchecked"));

  std::vector<std::string> own_script = mlp_graph;
  own_script.insert(own_script.end(), {"runtime.adapter=hydra", "model.recipe=my_own_moe",
                                       "model.num_moe_experts=64"});
  PlanRun unknown = plan_of(kGuide, own_script);
  EXPECT_TRUE(unknown.plan.recipe->base.function.empty());
  EXPECT_TRUE(unknown.has("mlp-cuda-graph-all-moe-unchecked"));
  EXPECT_FALSE(unknown.has("mlp-cuda-graph-all-moe"));
}

// One list of keys: every key of the generated table is one the base can fill.
TEST(RecipeBase, EveryKeyOfTheGeneratedTableHasAField) {
  std::vector<std::string_view> keys = recipe_base_keys();
  size_t rows = 0;
  for (const auto& base : megatron_bridge_perf_recipe_base()) {
    rows += base.values().empty() ? 0 : 1;
    for (const auto& v : base.values()) {
      if (is_recipe_base_fact(v.key())) continue;
      EXPECT_NE(std::find(keys.begin(), keys.end(), v.key()), keys.end())
          << base.function << ": " << v.key();
    }
  }
  EXPECT_GT(rows, 300u);
  EXPECT_TRUE(std::is_sorted(megatron_bridge_perf_recipe_base().begin(),
                             megatron_bridge_perf_recipe_base().end(),
                             [](const PerfRecipeBase& a, const PerfRecipeBase& b) {
                               return a.function.view() < b.function.view();
                             }));
}

}  // namespace
}  // namespace bridge
