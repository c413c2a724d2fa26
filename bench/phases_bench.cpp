// Microbenchmarks of the planning phases that a command pays for only when its recipe needs
// them, so that a regression shows up in the phase where it happens (docs/performance.md):
// the performance-recipe lookups of a megatron_bridge plan (the recipe, its env row, its base
// row and that row's values), the NUMA binding (placement), and the pod shape of a Kubernetes
// job; and the text of a plan's JSON in the registry. bench/run.sh measures whole processes;
// BM_Render covers the renderers.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "base/json_text.h"
#include "bench/bench_paths.h"
#include "executors/k8s_pod_shape.h"
#include "executors/k8s_pod_spec.h"
#include "model/executor_kind.h"
#include "model/k8s_network.h"
#include "model/megatron_bridge_perf_recipes.h"
#include "model/placement.h"
#include "plan/plan.h"
#include "plan/plan_output.h"
#include "plugins/plugin.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

Plan moe_plan(const std::string& executor, const std::vector<std::string>& extra = {}) {
  std::ifstream in(std::string(BRIDGE_EXAMPLES) + "/qwen3-30b-a3b-ep-overlap.yaml");
  std::stringstream text;
  text << in.rdbuf();
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/bench"}});
  PlanRequest req;
  req.recipe_path = "moe.yaml";
  req.executor = executor;
  req.overrides = {"runtime.container_image=nvcr.io/nvidia/nemo:25.11"};
  req.overrides.insert(req.overrides.end(), extra.begin(), extra.end());
  Diagnostics diags;
  return build_plan_from_text(text.str(), req, env, plugin_registry(), diags);
}

// What a megatron_bridge plan looks up: the recipe for model/task/GPU/dtype, its env row
// (perf_env, the launch env) and its base row (the values of unset keys).
void BM_PerfRecipeLookup(benchmark::State& state) {
  Plan plan = moe_plan("slurm");
  if (!plan.recipe || !plan.topology) {
    state.SkipWithError("the example did not plan");
    return;
  }
  for (auto _ : state) {
    const PerfRecipe* recipe = find_perf_recipe("qwen3_30b_a3b", "pretrain", "h100", "bf16");
    benchmark::DoNotOptimize(recipe);
    benchmark::DoNotOptimize(perf_recipe_env_of(*plan.recipe, *plan.topology));
    benchmark::DoNotOptimize(
        find_perf_recipe_base("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"));
  }
}
BENCHMARK(BM_PerfRecipeLookup)->Unit(benchmark::kMicrosecond);

// Reading every value of a base row (the recipe base's fill reads each one).
void BM_PerfRecipeBaseValues(benchmark::State& state) {
  const PerfRecipeBase* base =
      find_perf_recipe_base("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  if (!base) {
    state.SkipWithError("no base row");
    return;
  }
  for (auto _ : state) {
    size_t bytes = 0;
    for (const auto& v : base->values()) bytes += v.key().size() + v.value().size();
    benchmark::DoNotOptimize(bytes);
  }
}
BENCHMARK(BM_PerfRecipeBaseValues)->Unit(benchmark::kMicrosecond);

void BM_Placement(benchmark::State& state) {
  Plan plan = moe_plan("slurm", {"cluster.gpu=gb200", "cluster.gpus_per_node=4"});
  const ExecutorKind* slurm = find_executor_kind("slurm");
  if (!plan.recipe || !plan.topology || !slurm) {
    state.SkipWithError("the example did not plan");
    return;
  }
  for (auto _ : state) {
    Diagnostics diags;
    benchmark::DoNotOptimize(resolve_binding(*plan.recipe, *plan.topology, *slurm, diags));
    benchmark::DoNotOptimize(default_nvlink_segment(*plan.topology));
  }
}
BENCHMARK(BM_Placement)->Unit(benchmark::kMicrosecond);

void BM_PodShape(benchmark::State& state) {
  Plan plan = moe_plan("kubernetes");
  if (!plan.recipe || !plan.topology) {
    state.SkipWithError("the example did not plan");
    return;
  }
  const KubernetesExecutorSpec& kx = plan.recipe->executor.kubernetes;
  const int64_t gpus_per_node = plan.topology->gpus_per_node;
  Diagnostics setup;
  std::optional<K8sPodSettings> settings = read_pod_settings(kx, plan.job_dir, setup);
  std::optional<K8sNetwork> network = read_k8s_network(kx.network, gpus_per_node, setup);
  if (!settings || !network) {
    state.SkipWithError("no pod settings");
    return;
  }
  for (auto _ : state) {
    Diagnostics diags;
    benchmark::DoNotOptimize(
        read_pod_shape(kx, *settings, *network, gpus_per_node, plan.topology->node_gpus, diags));
  }
}
BENCHMARK(BM_PodShape)->Unit(benchmark::kMicrosecond);

// The text of a plan's JSON as the registry writes it beside sbatch at every submission:
// json_text (arg 1) against nlohmann's own dump (arg 0), the same bytes.
void BM_PlanJsonText(benchmark::State& state) {
  Plan plan = moe_plan("slurm");
  Diagnostics none;
  const nlohmann::ordered_json j = plan_to_json(plan, none);
  const bool ours = state.range(0) == 1;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text =
        ours ? json_text(j) : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
}
BENCHMARK(BM_PlanJsonText)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bridge
