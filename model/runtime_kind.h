// Which runtime a recipe's job runs, as far as the model layer needs to know it: the adapter
// name (the plan layer's table of adapters, plan/runtime_adapter.h, implements each)
// and whether that runtime is Megatron-Bridge, whose recipes' defaults then apply to the keys
// a recipe leaves unset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/recipe.h"

namespace bridge {

// The adapter a recipe's runtime gets: the one runtime.adapter names, else `none` when
// runtime.pass_overrides is false, `probe` for bridge-probe, `hydra` for any other command.
std::string effective_adapter_name(const RuntimeSpec& runtime);

// The megatron_bridge and hydra adapters: the runtime is Megatron-Bridge's ConfigContainer,
// and keys the recipe leaves unset take the defaults of Megatron-Bridge's own recipes, not
// Megatron-Core's (docs/recipe.md, "Defaults of unset keys").
bool runtime_is_megatron_bridge(const RuntimeSpec& runtime);

// The sequence_parallel the runtime ends up with, when its own launcher decides it whatever
// the overrides say: run_script.py (adapter megatron_bridge) sets it to tp > 1 after applying
// them. nullopt: the recipe's value (or the runtime recipe's default) stands.
std::optional<bool> runtime_forced_sequence_parallel(const Recipe& recipe, int64_t tp);

// The gradient-accumulation fusion the runtime uses: the recipe's value, else on under the
// Megatron-Bridge adapters (its GPTModelProvider turns it on whenever Transformer Engine
// imports; the conformance suite checks it) and off under Megatron-Core alone. Every rule that
// needs the fusion reads it here, so an unset key is never told to be set to what it already is.
bool gradient_accumulation_fusion_on(const Recipe& recipe);

// The model-config defaults that apply to keys a recipe leaves unset, and where they come
// from: Megatron-Bridge 0.6.2's recipes of the model family (model.recipe) for the
// Megatron-Bridge adapters, else Megatron-Core's TransformerConfig defaults. The conformance
// suite compares them with the release's recipes (plan JSON `model_defaults`).
struct RuntimeModelDefaults {
  bool add_bias_linear = true;
  bool bias_activation_fusion = false;
  bool gated_linear_unit = false;
  const char* activation = "gelu";
  const char* source = "Megatron-Core's TransformerConfig default";
  // false: a Megatron-Bridge recipe of a family this table does not hold; its providers set
  // their own defaults, so checks on an unset key are skipped rather than guessed.
  bool known = true;
};

RuntimeModelDefaults runtime_model_defaults(const Recipe& recipe);

}  // namespace bridge
