#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <tuple>

#include "model/megatron_bridge_perf_recipes.h"
#include "model/runtime_kind.h"

namespace bridge {

std::string perf_recipe_dtype(std::string_view compute_dtype) {
  std::string out(compute_dtype);
  out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
  return out;
}

const PerfRecipe* find_perf_recipe(std::string_view model_recipe, std::string_view task,
                                   std::string_view gpu, std::string_view dtype) {
  for (const auto& r : megatron_bridge_perf_recipes())
    if (r.model_recipe.view() == model_recipe && r.task.view() == task && r.gpu.view() == gpu &&
        r.dtype.view() == dtype)
      return &r;
  return nullptr;
}

namespace {

// run_script.py's utils/utils.py _DEFAULT_GPU_COUNT_OVERRIDES (scripts of the r0.6.0 branch,
// upstream commit 6124fbe, the commit tests/tools/megatron_bridge_argv_test.py pins): the count
// it starts from when -ng names none of a model's recipes. The conformance harness holds the
// same table (tests/conformance/harness.py DEFAULT_GPU_COUNT), and the suite compares the env
// of the recipe each case builds with the plan's.
struct DefaultCount {
  std::string_view model_recipe, task, gpu, dtype;
  int64_t count;
};

const std::vector<DefaultCount>& default_counts() {
  static const std::vector<DefaultCount> kCounts{
      {"qwen3_30b_a3b", "pretrain", "h100", "bf16", 16},
      {"qwen3_30b_a3b", "pretrain", "h100", "fp8cs", 16},
      {"qwen3_30b_a3b", "pretrain", "b200", "bf16", 8},
      {"qwen3_30b_a3b", "pretrain", "b200", "fp8cs", 8},
      {"qwen3_30b_a3b", "pretrain", "gb200", "bf16", 8},
      {"qwen3_30b_a3b", "pretrain", "gb200", "fp8cs", 8},
      {"qwen3_30b_a3b", "pretrain", "gb300", "bf16", 8},
      {"qwen3_30b_a3b", "pretrain", "gb300", "fp8cs", 8},
      {"llama3_8b", "pretrain", "h100", "bf16", 8},
      {"llama3_8b", "pretrain", "h100", "fp8cs", 8},
      {"llama3_8b", "pretrain", "b200", "bf16", 8},
      {"llama3_8b", "pretrain", "b200", "fp8cs", 8},
  };
  return kCounts;
}

}  // namespace

int64_t perf_recipe_count_for(const PerfRecipe& recipe, int64_t num_gpus) {
  const auto& counts = recipe.gpu_counts;
  if (counts.empty()) return num_gpus;
  if (std::find(counts.begin(), counts.end(), num_gpus) != counts.end()) return num_gpus;
  for (const auto& d : default_counts())
    if (std::tie(d.model_recipe, d.task, d.gpu, d.dtype) ==
        std::make_tuple(recipe.model_recipe.view(), recipe.task.view(), recipe.gpu.view(),
                        recipe.dtype.view()))
      return d.count;
  return *std::max_element(counts.begin(), counts.end());
}

std::string perf_recipe_function(const PerfRecipe& recipe, int64_t gpu_count) {
  return fmt::format("{}_{}_{}gpu_{}_{}_config", recipe.model_recipe, recipe.task, gpu_count,
                     recipe.gpu, recipe.dtype);
}

std::span<const PerfRecipeEnv> megatron_bridge_perf_recipe_env() {
  return megatron_bridge_perf_recipe_env_table().rows;
}

std::span<const PerfRecipeBase> megatron_bridge_perf_recipe_base() {
  return megatron_bridge_perf_recipe_base_table().rows;
}

std::span<const PerfRecipeBase> megatron_bridge_library_recipe_base() {
  return megatron_bridge_library_recipe_base_table().rows;
}

TextPairs<PerfRecipeEnvVar> PerfRecipeEnv::vars() const {
  return megatron_bridge_perf_recipe_env_table().pairs<PerfRecipeEnvVar>(first, count);
}

// The row knows its run of cells, not its table: the table is the one whose rows hold it.
TextPairs<PerfRecipeBaseValue> PerfRecipeBase::values() const {
  for (const PairTable<PerfRecipeBase>& table :
       {megatron_bridge_perf_recipe_base_table(), megatron_bridge_library_recipe_base_table()}) {
    std::less<const PerfRecipeBase*> before;
    if (!before(this, table.rows.data()) && before(this, table.rows.data() + table.rows.size()))
      return table.pairs<PerfRecipeBaseValue>(first, count);
  }
  return {};
}

namespace {

template <class Row>
const Row* find_by_function(std::span<const Row> table, std::string_view function) {
  auto it =
      std::lower_bound(table.begin(), table.end(), function,
                       [](const Row& e, std::string_view f) { return e.function.view() < f; });
  return it != table.end() && it->function.view() == function ? &*it : nullptr;
}

}  // namespace

const PerfRecipeEnv* find_perf_recipe_env(std::string_view function) {
  return find_by_function(megatron_bridge_perf_recipe_env(), function);
}

const PerfRecipeBase* find_perf_recipe_base(std::string_view function) {
  return find_by_function(megatron_bridge_perf_recipe_base(), function);
}

namespace {

// "<n>gpu_" at the start of `rest`: the count, and `rest` moved past it.
std::optional<int64_t> gpu_count_prefix(std::string_view& rest) {
  size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  if (digits == 0 || rest.substr(digits, 4) != "gpu_") return std::nullopt;
  int64_t n = 0;
  for (char c : rest.substr(0, digits)) n = n * 10 + (c - '0');
  rest.remove_prefix(digits + 4);
  return n;
}

}  // namespace

const PerfRecipeBase* find_library_recipe(std::string_view model_recipe, std::string_view task,
                                          std::string_view gpu, std::string_view dtype,
                                          int64_t num_gpus) {
  const auto table = megatron_bridge_library_recipe_base();
  auto find = [&](const std::string& name) { return find_by_function(table, name); };
  const std::string stem = fmt::format("{}_{}_", model_recipe, task);
  if (auto* exact = find(fmt::format("{}{}gpu_{}_{}_config", stem, num_gpus, gpu, dtype)))
    return exact;
  const PerfRecipeBase* same_gpu = nullptr;
  const PerfRecipeBase* any_gpu = nullptr;
  int64_t lowest = 0;
  const std::string tail = fmt::format("{}_{}_config", gpu, dtype);
  for (const auto& row : table) {
    std::string_view rest = row.function;
    if (rest.substr(0, stem.size()) != stem) continue;
    rest.remove_prefix(stem.size());
    std::optional<int64_t> n = gpu_count_prefix(rest);
    if (!n || rest.size() <= 7 || rest.substr(rest.size() - 7) != "_config") continue;
    if (!any_gpu) any_gpu = &row;  // the table is in name order
    if (rest == tail && (!same_gpu || *n < lowest)) {
      same_gpu = &row;
      lowest = *n;
    }
  }
  if (same_gpu) return same_gpu;
  if (any_gpu) return any_gpu;
  return find(stem + "config");
}

const PerfRecipeEnv* perf_recipe_env_of(const Recipe& r, const Topology& t) {
  if (effective_adapter_name(r.runtime) != "megatron_bridge" || !r.model.recipe.is_set() ||
      t.gpu.empty())
    return nullptr;
  const PerfRecipe* recipe =
      find_perf_recipe(*r.model.recipe.value, r.train.task.get_or("pretrain"), t.gpu,
                       perf_recipe_dtype(r.model.compute_dtype.get_or("bf16")));
  if (!recipe) return nullptr;  // the adapter refuses the plan (megatron-bridge-no-perf-recipe)
  return find_perf_recipe_env(
      perf_recipe_function(*recipe, perf_recipe_count_for(*recipe, t.num_gpus)));
}

}  // namespace bridge
