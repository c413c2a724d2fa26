// What the released Megatron-Bridge 0.6.2 refuses or changes, found by the conformance suite
// (tests/conformance/) and now known to `validate` and the adapters: the model-config checks
// E11-E15, run_script.py's performance-recipe table and post overrides (R1), its
// sequence_parallel rule, the distributed optimizer in both configs, D4, and the forms the
// release accepts for mixed precision and userbuffers layers. Each test fails without its fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/megatron_bridge_perf_recipes.h"
#include "plan/megatron_bridge_release.h"
#include "plan/plan.h"
#include "plan/plan_output.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Qwen3-30B-A3B on 16 H100s through run_script.py: a performance recipe exists for 16 GPUs.
const char* kQwen = R"(name: q
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  family: qwen
  recipe: qwen3_30b_a3b
  tensor_model_parallel_size: 1
  expert_model_parallel_size: 8
  num_moe_experts: 128
  num_layers: 48
  precision: bf16
train: {task: pretrain, max_steps: 8}
runtime:
  adapter: megatron_bridge
  command: [python, run_script.py]
  transformer_engine: "2.9.0"
)";

struct PlanRun {
  Diagnostics diags;
  Plan plan;
  std::string codes() const {
    std::string out;
    for (const auto& d : diags.items()) out += d.code + " ";
    return out;
  }
  std::string argv() const {
    std::string out;
    for (const auto& a : runtime_argv(plan)) out += a + "\n";
    return out;
  }
  bool has(const std::string& code) const {
    for (const auto& d : diags.items())
      if (d.code == code) return true;
    return false;
  }
};

PlanRun plan_of(const std::string& text, std::vector<std::string> overrides) {
  PlanRun run;
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path = "q.yaml";
  req.executor = "local";
  req.overrides = std::move(overrides);
  run.plan = build_plan_from_text(text, req, env, plugin_registry(), run.diags);
  return run;
}

// The recipe's own distributed optimizer is not sent: the job runs the recipe base's (true),
// and the plan shows it as the base's value.
TEST(MegatronBridgeRules, TheQwenBaseRecipeIsClean) {
  PlanRun run = plan_of(kQwen, {});
  EXPECT_FALSE(run.diags.has_errors()) << run.codes();
  EXPECT_THAT(run.argv(), Not(HasSubstr("use_distributed_optimizer")));
  EXPECT_TRUE(run.plan.overlap->ddp.use_distributed_optimizer);
  EXPECT_TRUE(run.plan.recipe->ddp.use_distributed_optimizer.loc.from_base());
  EXPECT_THAT(plan_of(kQwen, {"ddp.use_distributed_optimizer=true"}).argv(),
              HasSubstr("optimizer.use_distributed_optimizer=true"));
}

TEST(MegatronBridgeRules, NoPerformanceRecipeIsRefusedWithWhatExists) {
  PlanRun gpt = plan_of(kQwen, {"model.recipe=gpt3_175b"});
  ASSERT_TRUE(gpt.has("megatron-bridge-no-perf-recipe")) << gpt.codes();
  PlanRun dtype = plan_of(kQwen, {"model.compute_dtype=fp8_mx"});
  ASSERT_TRUE(dtype.has("megatron-bridge-no-perf-recipe")) << dtype.codes();
  std::string all;
  for (const auto& d : dtype.diags.items()) all += d.message;
  EXPECT_THAT(all, HasSubstr("pretrain/h100/fp8cs (16, 64 GPUs)"));
  PlanRun hydra = plan_of(kQwen, {"model.recipe=gpt3_175b", "runtime.adapter=hydra"});
  EXPECT_FALSE(hydra.has("megatron-bridge-no-perf-recipe")) << hydra.codes();
}

TEST(MegatronBridgeRules, TheTableHoldsTheReleasesQwenRecipes) {
  const PerfRecipe* r = find_perf_recipe("qwen3_30b_a3b", "pretrain", "h100", "bf16");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(std::vector<int64_t>(r->gpu_counts.begin(), r->gpu_counts.end()),
            (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(perf_recipe_dtype("fp8_cs"), "fp8cs");
  EXPECT_EQ(find_perf_recipe("gpt3_175b", "pretrain", "h100", "bf16"), nullptr);
}

// R1: 32 GPUs has no recipe, so run_script.py starts from another count's and turns the
// optimizer-step gather on after the overrides (dp > 1, pp > 1, vpp > 1).
TEST(MegatronBridgeRules, PostOverridesTurnTheOptimizerStepGatherOn) {
  const std::vector<std::string> layout{
      "cluster.num_gpus=32", "model.pipeline_model_parallel_size=2",
      "model.virtual_pipeline_model_parallel_size=2", "model.expert_model_parallel_size=4"};
  PlanRun run = plan_of(kQwen, layout);
  EXPECT_FALSE(run.diags.has_errors()) << run.codes();
  EXPECT_EQ(run.plan.overlap->overlap.overlap_param_gather_with_optimizer_step.rule, "R1");
  // run_script.py turns it on itself: the plan shows it and sends nothing.
  EXPECT_THAT(run.argv(), Not(HasSubstr("overlap_param_gather_with_optimizer_step")));
  std::vector<std::string> refused = layout;
  refused.push_back("comm_overlap.overlap_param_gather_with_optimizer_step=false");
  EXPECT_TRUE(plan_of(kQwen, refused).has("megatron-bridge-post-override"));
  std::vector<std::string> exact = layout;
  exact[0] = "cluster.num_gpus=64";
  PlanRun at64 = plan_of(kQwen, exact);
  EXPECT_NE(at64.plan.overlap->overlap.overlap_param_gather_with_optimizer_step.rule, "R1");
}

TEST(MegatronBridgeRules, SequenceParallelIsRunScriptsChoice) {
  EXPECT_TRUE(
      plan_of(kQwen, {"model.tensor_model_parallel_size=2", "model.sequence_parallel=false"})
          .has("megatron-bridge-sequence-parallel"));
  // Unset with tp 2: run_script.py turns it on, so TP overlap is not gated off (M1).
  PlanRun run =
      plan_of(kQwen, {"model.tensor_model_parallel_size=2", "comm_overlap.tp_comm_overlap=true"});
  EXPECT_FALSE(run.has("tp-overlap-disabled")) << run.codes();
  EXPECT_EQ(run.plan.overlap->overlap.tp_comm_overlap.value, true);
}

TEST(MegatronBridgeRules, ModelConfigChecksOfTheRuntime) {
  EXPECT_TRUE(plan_of(kQwen, {"model.add_bias_linear=true", "model.expert_tensor_parallel_size=2",
                              "model.tensor_model_parallel_size=2"})
                  .has("moe-bias-needs-etp1"));
  // Qwen3's recipes have no linear bias: etp 2 alone is fine.
  EXPECT_FALSE(
      plan_of(kQwen, {"model.expert_tensor_parallel_size=2", "model.tensor_model_parallel_size=2"})
          .has("moe-bias-needs-etp1"));
  EXPECT_TRUE(plan_of(kQwen, {"model.cuda_graph_impl=local", "model.cuda_graph_scope=[attn]"})
                  .has("local-cuda-graph-needs-full-iteration"));
  EXPECT_FALSE(
      plan_of(kQwen, {"model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]"})
          .has("local-cuda-graph-needs-full-iteration"));
  EXPECT_TRUE(plan_of(kQwen, {"model.cuda_graph_impl=transformer_engine",
                              "model.cuda_graph_scope=[attn]", "model.recompute_granularity=full",
                              "model.recompute_method=uniform", "model.recompute_num_layers=1"})
                  .has("full-recompute-needs-full-iteration-graph"));
  EXPECT_TRUE(plan_of(kQwen, {"runtime.transformer_engine=false"}).has("megatron-bridge-needs-te"));
  const std::vector<std::string> gpt{"runtime.adapter=hydra", "model.recipe=gpt3_175b",
                                     "model.num_moe_experts=null",
                                     "model.expert_model_parallel_size=1"};
  std::vector<std::string> no_bias = gpt;
  no_bias.push_back("model.add_bias_linear=false");
  EXPECT_TRUE(plan_of(kQwen, no_bias).has("bias-gelu-fusion-needs-bias"));
  EXPECT_FALSE(plan_of(kQwen, gpt).has("bias-gelu-fusion-needs-bias"));
  // A family the defaults table does not know: its unset bias is not guessed.
  EXPECT_FALSE(plan_of(kQwen, {"model.recipe=deepseek_v3", "model.expert_tensor_parallel_size=2",
                               "model.tensor_model_parallel_size=2", "runtime.adapter=hydra"})
                   .has("moe-bias-needs-etp1"));
  // bridge-probe builds no Megatron config: none of these apply.
  EXPECT_FALSE(plan_of(kQwen, {"runtime.adapter=probe", "runtime.command=[bridge-probe]",
                               "model.cuda_graph_impl=local"})
                   .has("local-cuda-graph-needs-full-iteration"));
}

TEST(MegatronBridgeRules, HydraTurnsTheNanCheckOffForFullIterationGraphs) {
  PlanRun run = plan_of(kQwen, {"runtime.adapter=hydra", "model.cuda_graph_impl=local",
                                "model.cuda_graph_scope=[full_iteration]"});
  EXPECT_THAT(run.argv(), HasSubstr("rerun_state_machine.check_for_nan_in_loss=false"));
  EXPECT_THAT(plan_of(kQwen, {"runtime.adapter=hydra"}).argv(),
              Not(HasSubstr("check_for_nan_in_loss")));
}

// Without the distributed optimizer the optimizer's flag is sent too (the release turns both
// on when either is), and D4 shows the recipe's DDP values the job keeps.
TEST(MegatronBridgeRules, DistributedOptimizerOffReachesBothConfigs) {
  PlanRun run =
      plan_of(kQwen, {"model.compute_dtype=fp8_cs", "ddp.use_distributed_optimizer=false"});
  EXPECT_THAT(run.argv(), HasSubstr("optimizer.use_distributed_optimizer=false"));
  EXPECT_EQ(run.plan.overlap->overlap.overlap_grad_reduce.rule, "D4");
  EXPECT_THAT(run.argv(), Not(HasSubstr("overlap_grad_reduce")));  // shown, not sent
  EXPECT_EQ(run.plan.overlap->overlap.overlap_grad_reduce.value, true);
}

TEST(MegatronBridgeRules, Bf16UnderRunScriptNeedsTheDistributedOptimizer) {
  EXPECT_TRUE(plan_of(kQwen, {"ddp.use_distributed_optimizer=false"})
                  .has("megatron-bridge-needs-dist-opt"));
  EXPECT_FALSE(plan_of(kQwen, {"ddp.use_distributed_optimizer=false", "model.compute_dtype=fp8_cs"})
                   .has("megatron-bridge-needs-dist-opt"));
}

// With the precision as a recipe name (hydra: `mixed_precision=bf16_mixed`), fields of it
// are refused by Hydra: both go as one MixedPrecisionConfig. run_script.py's performance
// recipes hold an object, on which the field overrides land as they are.
TEST(MegatronBridgeRules, MixedPrecisionFieldsGoAsOneObjectWithARecipeName) {
  PlanRun hydra =
      plan_of(kQwen, {"runtime.adapter=hydra", "mixed_precision.grad_reduce_in_fp32=false"});
  EXPECT_FALSE(hydra.diags.has_errors()) << hydra.codes();
  EXPECT_THAT(hydra.argv(),
              HasSubstr("++mixed_precision={_target_:megatron.bridge.training.mixed_precision."
                        "MixedPrecisionConfig,bf16:true,params_dtype:{_target_:torch.bfloat16,"
                        "_call_:false},pipeline_dtype:{_target_:torch.bfloat16,_call_:false},"
                        "grad_reduce_in_fp32:false}"));
  EXPECT_THAT(hydra.argv(), Not(HasSubstr("mixed_precision.grad_reduce_in_fp32")));
  EXPECT_THAT(hydra.argv(), Not(HasSubstr("mixed_precision=bf16_mixed")));
  PlanRun fp8 = plan_of(kQwen, {"runtime.adapter=hydra", "model.compute_dtype=fp8_cs",
                                "mixed_precision.fp8_param_gather=false"});
  EXPECT_THAT(fp8.argv(), HasSubstr("fp8_param:false,fp8_param_gather:false"));
  PlanRun perf = plan_of(kQwen, {"mixed_precision.grad_reduce_in_fp32=false"});
  EXPECT_THAT(perf.argv(), HasSubstr("\nmixed_precision.grad_reduce_in_fp32=false\n"));
  EXPECT_THAT(perf.argv(), Not(HasSubstr("MixedPrecisionConfig")));
}

// PipelineOverlapCfg's own fp8_buf default is the tuple (False,), which Python reads as true.
TEST(MegatronBridgeRules, PipelineLayersAlwaysCarryFp8Buf) {
  PlanRun run =
      plan_of(kQwen, {"model.tensor_model_parallel_size=2", "comm_overlap.tp_comm_overlap=true",
                      "comm_overlap.tp_comm_overlap_cfg={proj_fprop: {method: pipeline, "
                      "num_sm: 8}}"});
  EXPECT_THAT(run.argv(), HasSubstr("PipelineOverlapCfg,method:pipeline,num_sm:8,fp8_buf:false"));
  PlanRun preset =
      plan_of(kQwen, {"model.tensor_model_parallel_size=4", "model.expert_model_parallel_size=4",
                      "comm_overlap.tp_comm_overlap=true",
                      "comm_overlap.tp_comm_overlap_cfg=userbuffers_bf16_h100_h12288_tp4_"
                      "mbs1_seqlen2048"});
  EXPECT_FALSE(preset.diags.has_errors()) << preset.codes();
  EXPECT_THAT(preset.argv(), Not(HasSubstr("_call_:false}")));
  EXPECT_THAT(preset.argv(), HasSubstr("TransformerLayerTPOverlapCfg"));
}

TEST(MegatronBridgeRules, MixedPrecisionRecipeNames) {
  ModelSpec m;
  m.precision.value = "bf16";
  EXPECT_EQ(mixed_precision_recipe_name(m), "bf16_mixed");
  m.compute_dtype.value = "fp8_mx";
  EXPECT_EQ(mixed_precision_recipe_name(m), "bf16_with_mxfp8_mixed");
  ASSERT_NE(find_mixed_precision_recipe("bf16_with_mxfp8_mixed"), nullptr);
  m.precision.value = "fp32";
  EXPECT_EQ(mixed_precision_recipe_name(m), "");
}

// Issue 32 (d): the performance recipe's env_vars are applied at rank start only where a
// variable is unset, so the plan lists them, says which value each rank gets, and warns where
// the launch env replaces NVIDIA's value. The expected values are the release's
// (qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config), checked against it by the conformance suite.
const RuntimeEnvDefault* runtime_var(const Plan& plan, const std::string& name) {
  for (const auto& d : plan.runtime_env.vars)
    if (d.name == name) return &d;
  return nullptr;
}

std::string warnings_of(const PlanRun& run, const std::string& code) {
  std::string out;
  for (const auto& d : run.diags.items())
    if (d.code == code) out += d.message + "\n";
  return out;
}

TEST(MegatronBridgeRules, TheRuntimesEnvIsListedWithWhatEachRankGets) {
  PlanRun run = plan_of(kQwen, {"env.NCCL_NVLS_ENABLE=0", "env.CUDA_DEVICE_MAX_CONNECTIONS=1"});
  ASSERT_FALSE(run.diags.has_errors()) << run.codes();
  EXPECT_EQ(run.plan.runtime_env.origin,
            "performance recipe qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  const RuntimeEnvDefault* common = runtime_var(run.plan, "TORCH_NCCL_HIGH_PRIORITY");
  ASSERT_NE(common, nullptr);
  EXPECT_EQ(common->value, "1");
  // The launch env carries the recipe's value itself, so every rank checks it.
  EXPECT_EQ(common->launch_value, std::optional<std::string>("1"));
  EXPECT_FALSE(common->launch_env_wins());
  EXPECT_EQ(common->launch_source, "recipe base qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  const RuntimeEnvDefault* same = runtime_var(run.plan, "NCCL_NVLS_ENABLE");
  ASSERT_NE(same, nullptr);
  EXPECT_EQ(same->launch_value, std::optional<std::string>("0"));
  EXPECT_FALSE(same->launch_env_wins());
  const RuntimeEnvDefault* mine = runtime_var(run.plan, "CUDA_DEVICE_MAX_CONNECTIONS");
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->value, "32");
  EXPECT_TRUE(mine->launch_env_wins());
  EXPECT_EQ(mine->launch_source, "recipe env");
  std::string warning = warnings_of(run, "runtime-env-replaced");
  EXPECT_THAT(warning, HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=1 from recipe env (the recipe "
                                 "has 32)"));
  EXPECT_THAT(warning, Not(HasSubstr("NCCL_NVLS_ENABLE")));
  EXPECT_THAT(warning, Not(HasSubstr("TORCH_NCCL_HIGH_PRIORITY")));
}

// perf_env's generic choices give way to the recipe's tuned ones, even where a rule of ours
// would choose otherwise (1 connection for TP overlap on Hopper): the named recipe is the base,
// and the launch env carries its values. An option the user set (layernorm_sm_margin) stays.
TEST(MegatronBridgeRules, PerfEnvLeavesTuningToThePerformanceRecipe) {
  const std::string with_perf_env = std::string(kQwen) + "plugins: {perf_env: {}}\n";
  const std::string base = "recipe base qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config";
  PlanRun run = plan_of(with_perf_env, {});
  EXPECT_FALSE(run.has("runtime-env-replaced")) << warnings_of(run, "runtime-env-replaced");
  ASSERT_NE(run.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS"), nullptr);
  EXPECT_EQ(run.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS")->value, "32");
  EXPECT_EQ(run.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS")->source, base);
  EXPECT_EQ(run.plan.env.find("NVTE_FWD_LAYERNORM_SM_MARGIN")->value, "20");
  EXPECT_TRUE(run.has("perf-env-leaves-it-to-the-recipe")) << run.codes();

  PlanRun tp = plan_of(with_perf_env,
                       {"model.tensor_model_parallel_size=2", "model.expert_model_parallel_size=4",
                        "comm_overlap.tp_comm_overlap=true"});
  ASSERT_FALSE(tp.diags.has_errors()) << tp.codes();
  ASSERT_NE(tp.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS"), nullptr);
  EXPECT_EQ(tp.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS")->value, "32");
  EXPECT_FALSE(tp.has("runtime-env-replaced")) << warnings_of(tp, "runtime-env-replaced");
  PlanRun margin =
      plan_of(std::string(kQwen) + "plugins: {perf_env: {layernorm_sm_margin: 8}}\n", {});
  EXPECT_EQ(margin.plan.env.find("NVTE_FWD_LAYERNORM_SM_MARGIN")->value, "8");
  EXPECT_THAT(warnings_of(margin, "runtime-env-replaced"),
              HasSubstr("NVTE_FWD_LAYERNORM_SM_MARGIN=8 from plugin:perf_env (the recipe has 20)"));
  // The probe adapter runs no performance recipe: perf_env sets everything itself.
  PlanRun probe = plan_of(with_perf_env, {"runtime.adapter=probe"});
  EXPECT_NE(probe.plan.env.find("CUDA_DEVICE_MAX_CONNECTIONS"), nullptr) << probe.codes();
}

TEST(MegatronBridgeRules, TheRecipesOwnValuesRaiseNoWarning) {
  std::vector<std::string> overrides;
  const PerfRecipeEnv* env = find_perf_recipe_env("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  ASSERT_NE(env, nullptr);
  for (const auto& [name, value] : env->vars())
    overrides.push_back(std::string("env.") + std::string(name) + "=" + std::string(value));
  PlanRun run = plan_of(kQwen, overrides);
  EXPECT_FALSE(run.has("runtime-env-replaced")) << warnings_of(run, "runtime-env-replaced");
  for (const auto& d : run.plan.runtime_env.vars) EXPECT_FALSE(d.launch_env_wins()) << d.name;
}

TEST(MegatronBridgeRules, ASecretLaunchValueIsNotShownInTheWarning) {
  PlanRun run = plan_of(kQwen, {"env.NCCL_NVLS_ENABLE={value: hunter2-very-secret, secret: true}"});
  EXPECT_THAT(warnings_of(run, "runtime-env-replaced"),
              HasSubstr("NCCL_NVLS_ENABLE=<secret> from recipe env"));
  std::string all;
  for (const auto& d : run.diags.items()) all += d.message + d.help;
  EXPECT_THAT(all, Not(HasSubstr("hunter2")));
}

// plan's text and JSON are not scrubbed by Diagnostics: the runtime env section itself must
// not show a secret, nor tell whether it equals the recipe's value.
TEST(MegatronBridgeRules, PlanOutputShowsNoSecretOfTheRuntimeEnv) {
  PlanRun leak =
      plan_of(kQwen, {"env.NCCL_NVLS_ENABLE={value: hunter2-very-secret, secret: true}"});
  std::string text = plan_to_text(leak.plan, false);
  std::string json = plan_to_json(leak.plan, leak.diags).dump();
  EXPECT_THAT(text, Not(HasSubstr("hunter2"))) << text;
  EXPECT_THAT(json, Not(HasSubstr("hunter2")));
  EXPECT_THAT(json,
              HasSubstr(R"("name":"NCCL_NVLS_ENABLE","value":"0","launch_value":"<secret>")"));
  // The recipe's value is "0": a secret "0" is not reported as "the same".
  PlanRun same = plan_of(kQwen, {"env.NCCL_NVLS_ENABLE={value: \"0\", secret: true}"});
  const RuntimeEnvDefault* v = runtime_var(same.plan, "NCCL_NVLS_ENABLE");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->launch_env_wins());
  EXPECT_THAT(plan_to_json(same.plan, same.diags).dump(), HasSubstr(R"("rank_gets":"launch_env")"));
}

// An explicit plugin option is the user's request: perf_env keeps it over the recipe's value.
TEST(MegatronBridgeRules, AnExplicitLayernormMarginWinsOverTheRecipe) {
  PlanRun run =
      plan_of(std::string(kQwen) + "plugins: {perf_env: {layernorm_sm_margin: 24}}\n", {});
  ASSERT_NE(run.plan.env.find("NVTE_FWD_LAYERNORM_SM_MARGIN"), nullptr) << run.codes();
  EXPECT_EQ(run.plan.env.find("NVTE_FWD_LAYERNORM_SM_MARGIN")->value, "24");
  EXPECT_THAT(
      warnings_of(run, "runtime-env-replaced"),
      HasSubstr("NVTE_FWD_LAYERNORM_SM_MARGIN=24 from plugin:perf_env (the recipe has 20)"));
}

// 32 GPUs has no Qwen3-30B-A3B H100 recipe: run_script.py starts from its default count (16).
TEST(MegatronBridgeRules, WithoutARecipeForNgTheEnvIsTheDefaultCountsRecipe) {
  PlanRun run = plan_of(kQwen, {"cluster.num_gpus=32"});
  EXPECT_EQ(run.plan.runtime_env.origin,
            "performance recipe qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  PlanRun at64 = plan_of(kQwen, {"cluster.num_gpus=64"});
  EXPECT_EQ(at64.plan.runtime_env.origin,
            "performance recipe qwen3_30b_a3b_pretrain_64gpu_h100_bf16_config");
}

TEST(MegatronBridgeRules, OnlyTheMegatronBridgeAdapterListsARecipesEnv) {
  PlanRun hydra = plan_of(kQwen, {"runtime.adapter=hydra"});
  EXPECT_TRUE(hydra.plan.runtime_env.origin.empty());
  EXPECT_TRUE(hydra.plan.runtime_env.vars.empty());
  EXPECT_FALSE(hydra.has("runtime-env-replaced"));
}

// Megatron-Bridge 0.6.2's package lacks a data file that the Nemotron-3 Super NVFP4 recipes
// read (the generator found it building them), so run_script.py cannot build them from PyPI.
TEST(MegatronBridgeRules, ARecipeThePackageCannotBuildIsNamed) {
  const char* kNemotron = R"(name: n
cluster: {gpu: b200, num_gpus: 64, gpus_per_node: 8}
model: {family: nemotronh, recipe: nemotron_3_super, compute_dtype: nvfp4, precision: bf16}
train: {task: pretrain}
runtime: {adapter: megatron_bridge, command: [python, run_script.py], transformer_engine: "2.9.0"}
)";
  PlanRun run = plan_of(kNemotron, {});
  ASSERT_TRUE(run.has("megatron-bridge-recipe-does-not-build")) << run.codes();
  EXPECT_THAT(
      run.plan.runtime_env.unknown_because,
      HasSubstr("perf_recipes/nemotronh/te_quant.cfg is not in the megatron-bridge package"));
  EXPECT_TRUE(run.plan.runtime_env.vars.empty());
}

// Every recipe of the name table has an env row (TORCH_NCCL_HIGH_PRIORITY is in every one of
// the release's), and the rows are sorted, as find_perf_recipe_env's binary search needs.
TEST(MegatronBridgeRules, EveryPerformanceRecipeHasItsEnvRow) {
  size_t rows = 0;
  for (const auto& r : megatron_bridge_perf_recipes())
    for (int64_t n : r.gpu_counts) {
      const PerfRecipeEnv* env = find_perf_recipe_env(perf_recipe_function(r, n));
      ASSERT_NE(env, nullptr) << perf_recipe_function(r, n);
      ++rows;
      if (!env->does_not_build.empty()) continue;  // its env_vars are unknown
      bool common = false;
      for (const auto& [name, value] : env->vars())
        common = common || (name == "TORCH_NCCL_HIGH_PRIORITY" && value == "1");
      EXPECT_TRUE(common) << env->function;
    }
  EXPECT_EQ(rows, megatron_bridge_perf_recipe_env().size());
  const auto& table = megatron_bridge_perf_recipe_env();
  for (size_t i = 1; i < table.size(); ++i) EXPECT_LT(table[i - 1].function, table[i].function);
}

// Found by naming every recipe of the release (tests/conformance/fidelity.py): configs the
// release refuses when it finalises them, which validate now refuses too.
TEST(MegatronBridgeRules, WhatTheReleaseRefusesOnItsOwnRecipes) {
  // HybridEP only on the GPUs Megatron-Bridge names (its VR200 recipes are refused there).
  PlanRun vr = plan_of(R"(name: g
cluster: {gpu: vr200, num_gpus: 64}
model: {family: gpt_oss, recipe: gpt_oss_120b, compute_dtype: fp8_mx}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)",
                       {});
  EXPECT_TRUE(vr.has("hybridep-gpu-unsupported")) << vr.codes();
  // Selective recompute of a module Megatron-Core does not know.
  PlanRun mhc = plan_of(
      kQwen, {"model.recompute_granularity=selective", "model.recompute_modules=[mlp,mhc]"});
  EXPECT_TRUE(mhc.has("recompute-module-unknown")) << mhc.codes();
  // delay_wgrad_compute with Transformer Engine CUDA graphs needs TE >= 2.10.
  const std::vector<std::string> delayed{
      "comm_overlap.overlap_moe_expert_parallel_comm=true", "comm_overlap.delay_wgrad_compute=true",
      "model.cuda_graph_impl=transformer_engine",           "model.cuda_graph_scope=[moe_router]",
      "model.moe_token_dispatcher_type=alltoall",           "model.expert_model_parallel_size=16"};
  PlanRun old_te = plan_of(kQwen, delayed);
  EXPECT_TRUE(old_te.has("delay-wgrad-te-version")) << old_te.codes();
  std::vector<std::string> new_te = delayed;
  new_te.push_back("runtime.transformer_engine=2.12.0");
  EXPECT_FALSE(plan_of(kQwen, new_te).has("delay-wgrad-te-version"));
  // PEFT without the checkpoint it adapts.
  const std::string peft = R"(name: p
cluster: {gpu: h100, num_gpus: 8}
model: {family: llama, recipe: llama3_70b}
train: {task: peft}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)";
  EXPECT_TRUE(plan_of(peft, {}).has("megatron-bridge-peft-needs-checkpoint"));
  // The hydra adapter's library recipe (Qwen3-30B-A3B, 16 H100s) has a precision-aware
  // optimizer, which needs the distributed one.
  PlanRun hydra = plan_of(kQwen, {"runtime.adapter=hydra", "ddp.use_distributed_optimizer=false"});
  EXPECT_TRUE(hydra.has("precision-aware-optimizer-needs-dist-opt")) << hydra.codes();
  EXPECT_FALSE(plan_of(peft + "  args: [checkpoint.pretrained_checkpoint=/ckpt]\n", {})
                   .has("megatron-bridge-peft-needs-checkpoint"));
}

// A recipe base that splits its layers unevenly (Llama 3.1 405B: 126 layers, pipeline stages
// that account for the embedding and the loss) is not refused for it; changing the split's
// inputs is warned as unchecked.
TEST(MegatronBridgeRules, AnUnevenSplitOfTheBaseIsLeftToTheRuntime) {
  const std::string named = R"(name: l
cluster: {gpu: b200, num_gpus: 128}
model: {family: llama, recipe: llama31_405b}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)";
  PlanRun run = plan_of(named, {});
  EXPECT_FALSE(run.has("layers-not-multiple-of-pp")) << run.codes();
  EXPECT_TRUE(run.has("uneven-pipeline-split")) << run.codes();
  EXPECT_FALSE(run.plan.recipe->base.uneven_pipeline_split.empty());
  PlanRun changed = plan_of(named, {"model.virtual_pipeline_model_parallel_size=4"});
  EXPECT_TRUE(changed.has("uneven-pipeline-split-unchecked")) << changed.codes();
}

}  // namespace
}  // namespace bridge
