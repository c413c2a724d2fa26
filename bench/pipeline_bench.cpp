// Microbenchmarks of the pipeline stages after loading: overlap resolution, plugins, and
// Slurm / Kubernetes rendering at ng = 8 ... 32768 (gn 8). bench/run.sh measures the whole
// process side by side with its floors; these isolate the stages.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "bench/bench_paths.h"
#include "executors/executor.h"
#include "model/recipe_loader.h"
#include "plan/plan.h"
#include "plugins/plugin.h"
#include "system/host_env.h"
#include "tests/support/fake_services.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

std::string moe_recipe_text() {
  std::ifstream in(std::string(BRIDGE_EXAMPLES) + "/qwen3-30b-a3b-ep-overlap.yaml");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Plan plan_for(int64_t ng, const std::string& executor) {
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/bench"}});
  PlanRequest req;
  req.recipe_path = "moe.yaml";
  req.executor = executor;
  // The global batch grows with the GPUs: it must stay a multiple of micro_batch * dp (T7).
  req.overrides = {"cluster.num_gpus=" + std::to_string(ng), "cluster.gpus_per_node=8",
                   "train.global_batch_size=" + std::to_string(ng),
                   "model.expert_model_parallel_size=8",
                   "runtime.container_image=nvcr.io/nvidia/nemo:25.11"};
  Diagnostics diags;
  return build_plan_from_text(moe_recipe_text(), req, env, plugin_registry(), diags);
}

void BM_ResolveOverlap(benchmark::State& state) {
  Plan plan = plan_for(16, "slurm");
  for (auto _ : state) {
    Diagnostics diags;
    benchmark::DoNotOptimize(resolve_comm_overlap(*plan.recipe, *plan.topology, diags));
  }
}
BENCHMARK(BM_ResolveOverlap)->Unit(benchmark::kMicrosecond);

void BM_RunPlugins(benchmark::State& state) {
  Plan plan = plan_for(16, "slurm");
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/bench"}});
  PluginContext ctx{*plan.recipe, *plan.topology, *plan.overlap, "slurm", plan.job_dir, env};
  for (auto _ : state) {
    Diagnostics diags;
    benchmark::DoNotOptimize(run_plugins(plugin_registry(), ctx, {"NCCL_DEBUG=INFO"}, diags));
  }
}
BENCHMARK(BM_RunPlugins)->Unit(benchmark::kMicrosecond);

void BM_Render(benchmark::State& state, const std::string& executor) {
  Plan plan = plan_for(state.range(0), executor);
  bridge::testing::TestServices seams;  // its runner answers nothing: render runs none
  std::unique_ptr<Executor> ex = make_executor(executor_registry(), executor, seams.services());
  if (!plan.complete || !ex) {
    state.SkipWithError("plan or executor unavailable");
    return;
  }
  for (auto _ : state) {
    Diagnostics diags;
    benchmark::DoNotOptimize(ex->render(plan, dry_run_identity(plan), diags));
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK_CAPTURE(BM_Render, slurm, std::string("slurm"))
    ->RangeMultiplier(8)
    ->Range(8, 32768)
    ->Complexity()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, kubernetes, std::string("kubernetes"))
    ->RangeMultiplier(8)
    ->Range(8, 32768)
    ->Complexity()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bridge
