// Printing a plan: the stable JSON of `plan --format json` (docs/recipe.md) and the aligned
// text tables. The output formats live here, not in the model's types.
//
// Both are pure functions of (Plan, Diagnostics). Secret env values are never printed: JSON
// has value null and "secret": true, text shows <secret>.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/diagnostics.h"
#include "plan/plan.h"

namespace bridge {

nlohmann::ordered_json diagnostics_to_json(const Diagnostics& diags);
nlohmann::ordered_json plan_to_json(const Plan& plan, const Diagnostics& diags);
// The values plan_to_json shows under comm_overlap, field -> value, without the fields the
// plan leaves null (what the runtime check and the plan confirmation compare).
nlohmann::ordered_json overlap_values_json(const ResolvedOverlap& overlap);
// A per-layer userbuffers config as JSON: {"qkv_dgrad": {"method": "bulk", ...}, ...}.
nlohmann::ordered_json userbuffers_to_json(const UserbuffersConfig& cfg);
std::string plan_to_text(const Plan& plan, bool color);

// What a plan of plan_to_json resolved recipe keys to, spelled as recipe keys ("section.key"
// -> value text, as a recipe file would write it): the layout sizes, the comm_overlap and ddp
// fields, and the recipe base's values. A key the plan leaves null is absent. Read from a
// recorded plan (the registry's), so it takes any JSON and skips what it does not recognise.
std::map<std::string, std::string> resolved_recipe_values(const nlohmann::ordered_json& plan);

// Renders rows as aligned columns; the first row is the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows, bool color);

}  // namespace bridge
