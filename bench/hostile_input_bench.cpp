// Inputs that once took seconds: the time must grow linearly with their size (the fitted
// complexity Google Benchmark reports should be O(N)).
//
// BM_ManyEnvKeys/N: a recipe with N env keys planned end to end (the env merge once searched
// linearly per key: 150 000 keys took 25 s). BM_ExpandManyDollarBraces/N: `${` repeated N
// times with no `}` (each `${` once searched to the end of the text: a million took 10 s).
// BM_IncludeGlobManyStars/N: the runtime.code.include glob `*a*a*a*a*a*a*a*a*ab` against a
// name of N `a`s (the recursive matcher backtracked: 60 characters took 30 s in `validate`).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "model/expand.h"
#include "plan/code_plan.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace {

void BM_ManyEnvKeys(benchmark::State& state) {
  std::string text =
      "name: many\ncluster: {num_gpus: 1}\nruntime: {command: [bridge-probe]}\nenv:\n";
  for (int64_t i = 0; i < state.range(0); ++i) text += "  K" + std::to_string(i) + ": v\n";
  bridge::MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/bench"}});
  bridge::PlanRequest request;
  request.recipe_path = "bench.yaml";
  for (auto _ : state) {
    bridge::Diagnostics diags;
    bridge::Plan plan =
        bridge::build_plan_from_text(text, request, env, bridge::plugin_registry(), diags);
    if (!plan.complete) {
      state.SkipWithError("the benchmark recipe does not plan");
      break;
    }
    benchmark::DoNotOptimize(plan);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ManyEnvKeys)
    ->RangeMultiplier(8)
    ->Range(512, 32768)
    ->Complexity()
    ->Unit(benchmark::kMillisecond);

void BM_ExpandManyDollarBraces(benchmark::State& state) {
  std::string text;
  for (int64_t i = 0; i < state.range(0); ++i) text += "${";
  bridge::MapEnvironment env;
  for (auto _ : state) {
    bridge::Diagnostics diags;
    benchmark::DoNotOptimize(bridge::expand_vars(text, env, "env.X", {}, diags));
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ExpandManyDollarBraces)
    ->RangeMultiplier(8)
    ->Range(1024, 1 << 20)
    ->Complexity()
    ->Unit(benchmark::kMicrosecond);

void BM_IncludeGlobManyStars(benchmark::State& state) {
  const std::string name(static_cast<size_t>(state.range(0)), 'a');
  for (auto _ : state)
    benchmark::DoNotOptimize(bridge::code_path_matches("*a*a*a*a*a*a*a*a*ab", name));
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_IncludeGlobManyStars)
    ->RangeMultiplier(8)
    ->Range(64, 1 << 15)
    ->Complexity()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
