// libFuzzer target: KEY=VALUE overrides (apply_override) on a fixed, valid recipe. The input
// is split at newlines into several overrides, applied in order, then the result is read
// against the schema, exactly as `bridge-launch validate recipe.yaml A=1 B=2` does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/recipe_loader.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

constexpr const char* kRecipe = R"(name: fuzz-override
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  tensor_model_parallel_size: 2
  sequence_parallel: true
  expert_model_parallel_size: 2
  num_moe_experts: 8
  moe_token_dispatcher_type: alltoall
  recompute_modules: [core_attn]
comm_overlap:
  tp_comm_overlap: true
  overlap_moe_expert_parallel_comm: true
ddp: {use_distributed_optimizer: true}
runtime:
  command: [bridge-probe]
  args: [--steps, '8']
  transformer_engine: "2.9.0"
plugins:
  perf_env: {}
env:
  NCCL_DEBUG: WARN
executor:
  slurm: {account: a, partition: p}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bridge::YamlNode kBase = [] {
    bridge::Diagnostics d;
    bridge::YamlNode n = bridge::parse_yaml_document(kRecipe, "base.yaml", d);
    if (d.has_errors()) bridge::fuzz::fail("the base recipe does not parse");
    return n;
  }();
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t start = 0; start <= input.size() && overrides.size() < 8;) {
    size_t nl = input.find('\n', start);
    overrides.push_back(input.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  bridge::YamlNode root = kBase;
  bridge::Diagnostics diags;
  for (const auto& o : overrides) bridge::apply_override(root, o, diags);
  // read_recipe answers for its own errors (the CLI stops before it on override errors).
  size_t errors_before = diags.count(bridge::Severity::kError);
  auto recipe = bridge::read_recipe(root, "base.yaml", diags);
  if (recipe.has_value() != (diags.count(bridge::Severity::kError) == errors_before))
    bridge::fuzz::fail("read_recipe: a recipe despite errors, or neither");
  bridge::fuzz::render_diagnostics(diags);

  // The same overrides through the public entry point the CLI uses.
  bridge::Diagnostics again;
  auto loaded = bridge::load_recipe_text(kRecipe, "base.yaml", overrides, again);
  if (loaded.has_value() == again.has_errors())
    bridge::fuzz::fail("load_recipe_text: a recipe despite errors, or neither");
  bridge::fuzz::render_diagnostics(again);
  return 0;
}
