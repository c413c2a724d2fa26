// Which runtime a recipe's job runs, as far as the model layer needs to know it: the adapter
// name (the plan layer's table of adapters, launcher/plan/runtime_adapter.h, implements each)
// and whether that runtime is Megatron-Bridge, whose recipes' defaults then apply to the keys
// a recipe leaves unset.
#pragma once

#include <string>

#include "launcher/recipe.h"

namespace bridge {

// The adapter a recipe's runtime gets: the one runtime.adapter names, else `none` when
// runtime.pass_overrides is false, `probe` for bridge-probe, `hydra` for any other command.
std::string effective_adapter_name(const RuntimeSpec& runtime);

// The megatron_bridge and hydra adapters: the runtime is Megatron-Bridge's ConfigContainer,
// and keys the recipe leaves unset take the defaults of Megatron-Bridge's own recipes, not
// Megatron-Core's (docs/recipe.md, "Defaults of unset keys").
bool runtime_is_megatron_bridge(const RuntimeSpec& runtime);

}  // namespace bridge
