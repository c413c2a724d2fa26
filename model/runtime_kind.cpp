#include "model/runtime_kind.h"

namespace bridge {

std::string effective_adapter_name(const RuntimeSpec& runtime) {
  if (runtime.adapter.is_set()) return *runtime.adapter.value;
  if (runtime.pass_overrides.is_set() && !*runtime.pass_overrides.value) return "none";
  const StringList command = runtime.command.get_or({"bridge-probe"});
  const std::string program = command.empty() ? std::string() : command.front();
  size_t slash = program.rfind('/');
  std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  return base == "bridge-probe" ? "probe" : "hydra";
}

bool runtime_is_megatron_bridge(const RuntimeSpec& runtime) {
  std::string adapter = effective_adapter_name(runtime);
  return adapter == "megatron_bridge" || adapter == "hydra";
}

bool gradient_accumulation_fusion_on(const Recipe& recipe) {
  return recipe.model.gradient_accumulation_fusion.get_or(
      runtime_is_megatron_bridge(recipe.runtime));
}

std::optional<bool> runtime_forced_sequence_parallel(const Recipe& recipe, int64_t tp) {
  if (effective_adapter_name(recipe.runtime) != "megatron_bridge") return std::nullopt;
  return tp > 1;
}

RuntimeModelDefaults runtime_model_defaults(const Recipe& recipe) {
  struct FamilyDefaults {
    const char* recipe_prefix;
    RuntimeModelDefaults defaults;
  };
  // Read from the release's recipes by the conformance suite's probes (GPTModelProvider for
  // gpt3_*: biased linear layers, fused bias-GeLU; Qwen3 providers: no bias, SwiGLU).
  static const FamilyDefaults kFamilies[] = {
      {"gpt3_", {true, true, false, "gelu", "Megatron-Bridge 0.6.2's gpt3 recipes", true}},
      {"qwen3_", {false, true, true, "silu", "Megatron-Bridge 0.6.2's qwen3 recipes", true}},
  };
  RuntimeModelDefaults fallback;
  if (!runtime_is_megatron_bridge(recipe.runtime) || !recipe.model.recipe.is_set()) return fallback;
  const std::string& name = *recipe.model.recipe.value;
  for (const auto& f : kFamilies)
    if (name.rfind(f.recipe_prefix, 0) == 0) return f.defaults;
  fallback.known = false;
  return fallback;
}

}  // namespace bridge
