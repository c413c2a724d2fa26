// What the released Megatron-Bridge 0.6.2 refuses or changes, found by the conformance suite
// (tests/conformance/) and now known to `validate` and the adapters: the model-config checks
// E11-E15, run_script.py's performance-recipe table and post overrides (R1), its
// sequence_parallel rule, the distributed optimizer in both configs, D4, and the forms the
// release accepts for mixed precision and userbuffers layers. Each test fails without its fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "launcher/host_env.h"
#include "launcher/megatron_bridge_perf_recipes.h"
#include "launcher/plan/megatron_bridge_release.h"
#include "launcher/plan/plan.h"

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

TEST(MegatronBridgeRules, TheQwenBaseRecipeIsClean) {
  PlanRun run = plan_of(kQwen, {});
  EXPECT_FALSE(run.diags.has_errors()) << run.codes();
  EXPECT_THAT(run.argv(), HasSubstr("optimizer.use_distributed_optimizer=true"));
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
  EXPECT_EQ(r->gpu_counts, (std::vector<int64_t>{16, 64}));
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
  EXPECT_THAT(run.argv(), HasSubstr("optimizer.overlap_param_gather_with_optimizer_step=true"));
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

}  // namespace
}  // namespace bridge
