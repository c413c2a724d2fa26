// The flat performance recipes of Megatron-Bridge 0.6.2 (megatron.bridge.perf_recipes), the
// only configs its scripts/performance/run_script.py runs (adapter megatron_bridge): one per
// model recipe, task, GPU type and compute dtype, at one or more GPU counts. The table is
// generated from the release (tests/conformance/perf_recipe_table.py) and checked against it
// on every conformance run.
//
// run_script.py takes the recipe for -ng GPUs when there is one; otherwise another GPU count
// of the same model/task/GPU/dtype, and then applies its "post overrides" (among them
// overlap_param_gather_with_optimizer_step; see overlap_data_parallel.cpp, rule R1). Without
// any, it stops: "No flat perf recipe found".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bridge {

struct PerfRecipe {
  std::string_view model_recipe;  // -mr, e.g. qwen3_30b_a3b
  std::string_view task;          // pretrain | sft | peft
  std::string_view gpu;           // -g
  std::string_view dtype;         // bf16 | fp8cs | fp8mx | fp8sc | nvfp4 (from -c)
  std::vector<int64_t> gpu_counts;
};

const std::vector<PerfRecipe>& megatron_bridge_perf_recipes();

// run_script.py's spelling of -c in recipe names: fp8_cs -> fp8cs, ...
std::string perf_recipe_dtype(std::string_view compute_dtype);

const PerfRecipe* find_perf_recipe(std::string_view model_recipe, std::string_view task,
                                   std::string_view gpu, std::string_view dtype);

}  // namespace bridge
