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
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/recipe.h"
#include "model/topology.h"

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

// The GPU count whose recipe run_script.py builds for -ng: -ng itself when the release has a
// recipe for it, else the count its default-count table (_DEFAULT_GPU_COUNT_OVERRIDES) names
// for the model, else the largest count.
int64_t perf_recipe_count_for(const PerfRecipe& recipe, int64_t num_gpus);

// The recipe's function name in megatron.bridge.perf_recipes at one GPU count, e.g.
// qwen3_30b_a3b_pretrain_8gpu_gb200_bf16_config.
std::string perf_recipe_function(const PerfRecipe& recipe, int64_t gpu_count);

// A flat performance recipe's `env_vars` (ConfigContainer.env_vars), each value as
// Megatron-Bridge puts it into the process environment (Python's str(): 1 -> "1",
// True -> "True"). Megatron-Bridge applies them at the start of every rank, in
// runtime_config_update, with os.environ.setdefault: a variable the rank's environment already
// has keeps its value. Generated from the release (tests/conformance/perf_recipe_table.py);
// every recipe of megatron_bridge_perf_recipes() has a row, in name order.
struct PerfRecipeEnvVar {
  std::string_view name;
  std::string_view value;
};

struct PerfRecipeEnv {
  std::string_view function;  // perf_recipe_function()
  std::span<const PerfRecipeEnvVar> vars;
  // Why the recipe does not build from the release's PyPI package (a file its code reads is
  // not packaged), so its env_vars are unknown; "" for a recipe that builds.
  std::string_view does_not_build = {};
};

std::span<const PerfRecipeEnv> megatron_bridge_perf_recipe_env();
const PerfRecipeEnv* find_perf_recipe_env(std::string_view function);

// The env row of the performance recipe the job runs: the megatron_bridge adapter's
// run_script.py builds it from the recipe's model recipe, task, GPU, compute dtype and GPU
// count (perf_recipe_count_for). nullptr for another adapter or a plan without one.
const PerfRecipeEnv* perf_recipe_env_of(const Recipe& r, const Topology& t);

// A flat performance recipe's own values of the recipe keys it decides, as a recipe writes
// them ("4", "true", "alltoall", "[attn,mlp]", a userbuffers preset's name), read from the
// recipe as built, before the runtime finalises it; "null" where the recipe leaves a key to
// the runtime. Key `comm_overlap` with value "null": the recipe has no CommOverlapConfig; key
// `pipeline_split`: the fields by which it splits layers unevenly over pipeline stages; key
// `precision_aware_optimizer`: "true" where its optimizer is precision-aware.
// model.cuda_graph_scope holds the release's cuda_graph_modules and cuda_graph_scope together
// (both name what is captured; Megatron-Bridge reads the two as one list).
// Generated from the release (tests/conformance/perf_recipe_table.py --write-base); the base
// of a plan that names the recipe (model/recipe_base.h). In name order.
// The texts are plain pointers: a table of many thousand string_views would not build as a
// constant (clang counts a step per byte measuring each), and built at start-up it would cost
// every command. key() and value() measure them when read.
struct PerfRecipeBaseValue {
  const char* key_text;
  const char* value_text;
  std::string_view key() const { return key_text; }
  std::string_view value() const { return value_text; }
};

struct PerfRecipeBase {
  std::string_view function;  // perf_recipe_function()
  std::span<const PerfRecipeBaseValue> values;
  // The Hugging Face model id whose config.json the recipe reads and the survey did not have
  // offline; its values are then unknown. "" otherwise.
  std::string_view needs_hub_config = {};
};

std::span<const PerfRecipeBase> megatron_bridge_perf_recipe_base();
const PerfRecipeBase* find_perf_recipe_base(std::string_view function);

// The same for every library recipe of megatron.bridge.recipes (the hydra adapter's base), a
// row for each function the release has; needs_hub_config "-" marks one that does not build.
std::span<const PerfRecipeBase> megatron_bridge_library_recipe_base();

// The library recipe a recipe-driven script builds for model recipe, task, GPU, dtype (as in
// recipe names: fp8cs) and GPU count: <mr>_<task>_<n>gpu_<gpu>_<dtype>_config, else the same
// GPU and dtype at another count (lowest first), else any <mr>_<task>_<n>gpu_* in name order,
// else <mr>_<task>_config; nullptr when the release has none of them.
const PerfRecipeBase* find_library_recipe(std::string_view model_recipe, std::string_view task,
                                          std::string_view gpu, std::string_view dtype,
                                          int64_t num_gpus);

}  // namespace bridge
