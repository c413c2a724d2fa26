// Recipe loading and validation speed (foundation issue: under 2 ms per recipe).
//
// BM_LoadAndTopology: parse + schema-check + overrides + topology (T1-T6) of the MoE example
// from recipe.md. BM_BuildPlanFromText: the whole planning pipeline on the same text (load,
// topology, overlap resolution, plugins, env), as `bridge-launch plan` runs it minus the file
// read. BM_LoadExamples: every recipe in examples/recipes, when there are any. The time per
// iteration is the time per recipe.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_paths.h"
#include "model/recipe_loader.h"
#include "model/topology.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace {

// A complete recipe (every section), as in docs/recipe.md.
constexpr const char* kMoeRecipe = R"yaml(
name: qwen3-30b-a3b-ep-overlap          # required; used for job names (sanitized per executor)
description: EP=16 alltoall, overlap on

cluster:
  gpu: h100                               # GPU type; drives plugin decisions
  num_gpus: 16                            # -ng
  gpus_per_node: 8                        # -gn

model:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  virtual_pipeline_model_parallel_size: null
  context_parallel_size: 1
  expert_model_parallel_size: 16
  expert_tensor_parallel_size: null       # null = same as tp
  sequence_parallel: false
  num_layers: 48
  hidden_size: 2048
  num_attention_heads: 32
  num_moe_experts: 128
  moe_token_dispatcher_type: alltoall     # allgather | alltoall | flex
  moe_flex_dispatcher_backend: null       # deepep | hybridep (only active with dispatcher flex)
  moe_shared_expert_overlap: false
  moe_shared_expert_intermediate_size: null
  moe_permute_fusion: false
  mtp_num_layers: null
  precision: bf16                         # bf16 | fp16 | fp32 (sets bf16/fp16 flags)
  compute_dtype: bf16                     # bf16 | fp8_cs | fp8_mx | fp8_sc | nvfp4
  recompute_granularity: selective        # null | selective | full
  recompute_method: null                  # null | uniform | block
  recompute_num_layers: null
  recompute_modules: [core_attn]
  gradient_accumulation_fusion: true
  add_bias_linear: false
  add_qkv_bias: false
  cuda_graph_impl: none                   # none | local | transformer_engine
  cuda_graph_scope: []                    # e.g. [attn, moe_router, mlp, full_iteration]
  overlap_moe_expert_parallel_comm: false # model-level flag (docs/overlap.md)

comm_overlap:                             # every field null/absent = "let the rules decide"
  tp_comm_overlap: false
  tp_comm_overlap_cfg: null               # a preset name, or an inline per-layer mapping
  tp_comm_bootstrap_backend: nccl
  overlap_p2p_comm: null
  batch_p2p_comm: null
  overlap_grad_reduce: null
  overlap_param_gather: null
  overlap_param_gather_with_optimizer_step: null
  align_param_gather: null
  bucket_size: null                       # a PARAMETER count, not bytes
  defer_embedding_wgrad_compute: null
  wgrad_deferral_limit: null
  overlap_moe_expert_parallel_comm: true
  delay_wgrad_compute: false

ddp:
  use_distributed_optimizer: true
  overlap_grad_reduce: null
  overlap_param_gather: null
  align_param_gather: null
  bucket_size: null

optimizer:
  overlap_param_gather_with_optimizer_step: null

mixed_precision:
  grad_reduce_in_fp32: false
  fp8_param_gather: false

train:
  global_batch_size: 1024
  micro_batch_size: 1
  max_steps: 8                            # the runtime's train_iters

runtime:                                  # what every rank runs
  launcher: srun
  command: [python, /opt/Megatron-Bridge/scripts/performance/run_script.py]
  args: [-m, qwen, -mr, qwen3_30b_a3b, --task, pretrain]
  pass_overrides: true                    # forward resolved overlap fields as KEY=VALUE args
  container_image: nvcr.io/nvidia/nemo:25.11
  workdir: null
  transformer_engine: "2.9.0"
  torch: "2.9.0"

plugins:                                  # see plugins.md; a plugin runs only if listed
  perf_env: {}
  preemption: {preempt_time: 60}

env:                                      # explicit launch env; wins over plugins
  NCCL_DEBUG: WARN

executor:
  default: slurm
  local: {}
  slurm:
    account: my-account
    partition: batch
    time: "00:30:00"
    container_mounts: [/lustre:/lustre]
    exclusive: true
    job_dir: ~/bridge-launch/jobs         # where scripts and logs live on the shared FS
  kubernetes:
    namespace: training
    api: jobset                           # jobset | job
)yaml";

// What `bridge-launch -ng 16 -gn 8 recipe.yaml KEY=VALUE` adds on top of the file.
const std::vector<std::string> kOverrides{"comm_overlap.delay_wgrad_compute=false",
                                          "model.recompute_modules=[core_attn,mlp]",
                                          "cluster.num_gpus=16", "cluster.gpus_per_node=8"};

void BM_LoadAndTopology(benchmark::State& state) {
  for (auto _ : state) {
    bridge::Diagnostics diags;
    auto recipe = bridge::load_recipe_text(kMoeRecipe, "bench.yaml", kOverrides, diags);
    if (!recipe) {
      state.SkipWithError("the benchmark recipe does not load");
      break;
    }
    auto topology = bridge::compute_topology(*recipe, diags);
    if (!topology || topology->nodes != 2) {
      state.SkipWithError("unexpected topology");
      break;
    }
    benchmark::DoNotOptimize(topology);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("per recipe; target < 2 ms");
}
BENCHMARK(BM_LoadAndTopology)->Unit(benchmark::kMicrosecond);

void BM_BuildPlanFromText(benchmark::State& state) {
  bridge::MapEnvironment env(
      std::map<std::string, std::string>{{"HOME", "/home/bench"}, {"USER", "bench"}});
  bridge::PlanRequest request;
  request.recipe_path = "bench.yaml";
  request.overrides = kOverrides;
  const std::string text = kMoeRecipe;
  for (auto _ : state) {
    bridge::Diagnostics diags;
    bridge::Plan plan =
        bridge::build_plan_from_text(text, request, env, bridge::plugin_registry(), diags);
    if (!plan.complete) {  // every stage ran, plugins included
      state.SkipWithError("the benchmark recipe does not plan");
      break;
    }
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("per recipe; target < 2 ms");
}
BENCHMARK(BM_BuildPlanFromText)->Unit(benchmark::kMicrosecond);

// A small recipe: the fixed cost of one load.
void BM_LoadMinimal(benchmark::State& state) {
  for (auto _ : state) {
    bridge::Diagnostics diags;
    auto recipe = bridge::load_recipe_text("name: minimal\n", "bench.yaml", {}, diags);
    benchmark::DoNotOptimize(recipe);
  }
}
BENCHMARK(BM_LoadMinimal)->Unit(benchmark::kMicrosecond);

std::vector<std::string> example_texts() {
  std::vector<std::string> texts;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(BRIDGE_EXAMPLES, ec)) {
    if (e.path().extension() != ".yaml") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    texts.push_back(s.str());
  }
  return texts;
}

void BM_LoadExamples(benchmark::State& state) {
  const std::vector<std::string> texts = example_texts();
  if (texts.empty()) {
    state.SkipWithError((std::string("no examples in ") + BRIDGE_EXAMPLES).c_str());
    return;
  }
  size_t i = 0;
  for (auto _ : state) {
    bridge::Diagnostics diags;
    auto recipe = bridge::load_recipe_text(texts[i++ % texts.size()], "example.yaml", {}, diags);
    if (recipe) benchmark::DoNotOptimize(bridge::compute_topology(*recipe, diags));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LoadExamples)->Unit(benchmark::kMicrosecond);

}  // namespace
