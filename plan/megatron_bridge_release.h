// Facts about the released Megatron-Bridge (0.6.2) that the Megatron-Bridge adapters need to
// spell the plan in a form the release accepts. Each table here is checked against the
// release itself by the conformance suite (tests/conformance/), never only by reading its
// code: a table that drifts from the release fails `make test`.
//
// Contract: pure lookups over constant tables; no I/O.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/recipe.h"

namespace bridge {

// One of megatron.bridge.training.mixed_precision's named recipes, as the fields in which
// it differs from MixedPrecisionConfig's defaults, in Hydra value syntax (a torch dtype as
// the object reference `{_target_:torch.bfloat16,_call_:false}`).
struct MixedPrecisionRecipe {
  std::string_view name;
  std::vector<std::pair<std::string_view, std::string_view>> fields;
};

const std::vector<MixedPrecisionRecipe>& mixed_precision_recipes();
const MixedPrecisionRecipe* find_mixed_precision_recipe(std::string_view name);

// The named recipe for the recipe's precision and compute dtype (precision bf16 by
// default); "" when Megatron-Bridge has none (fp32, or nvfp4 on fp16).
std::string mixed_precision_recipe_name(const ModelSpec& model);

// The fields of a named recipe with the recipe's own mixed_precision keys applied, as one
// `{_target_:...MixedPrecisionConfig,...}` value: where the precision is sent as a recipe
// name, `mixed_precision.<field>=` overrides are refused, and the whole object is accepted.
std::string mixed_precision_object(const MixedPrecisionRecipe& base,
                                   const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace bridge
