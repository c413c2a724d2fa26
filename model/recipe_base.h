// The recipe base: a plan that names one of the runtime's own recipes starts from it.
//
// Users pick one of NVIDIA's tuned recipes and change one knob at a time. A key they leave
// unset must keep the value of the recipe the job runs, never a default of ours: so before
// anything validates, every unset field of the Recipe is filled with that recipe's own value
// (plan = recipe base, then the recipe file, then the command-line overrides). A filled field
// carries SourceLoc::base (the recipe's function name), so `plan` shows where each value came
// from, diagnostics point at "recipe base NAME", and the runtime adapters send only what the
// user set (user_set, model/recipe.h): the runtime builds the rest from the same recipe.
//
// Where the base comes from: the megatron_bridge adapter runs a flat performance recipe of
// Megatron-Bridge 0.6.2 (model/megatron_bridge_perf_recipes.h, perf_recipe_count_for), the
// hydra adapter's recipe-driven script a library recipe of megatron.bridge.recipes (the one
// its `--recipe NAME` argument names, else find_library_recipe); their values are the generated
// tables megatron_bridge_perf_recipe_base() and megatron_bridge_library_recipe_base(). Where no
// base is known (the probe and none runtimes, a recipe that needs a Hugging Face config the tables
// were made without), nothing is filled, RecipeBaseInfo says why, and unset keys stay unset.
//
// run_script.py's own rules applied on the way (they are the release's, not ours): -tp sets
// sequence_parallel = (tp > 1), so a user-set tp leaves the base's sequence_parallel out; a
// GPU count without a recipe of its own runs another count's recipe with the global batch
// scaled by the data-parallel sizes (set_post_overrides), so the base does the same.
//
// Contract: pure; reads only the generated tables. Never fails: a base value that does not
// fit its field (a table from another release) is reported as a warning and left out.
#pragma once

#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "model/recipe.h"

namespace bridge {

// Fills the unset fields of `r` from the recipe base named by its model recipe, task, GPU,
// compute dtype and GPU count; records the base in r.base.
void apply_recipe_base(Recipe& r, Diagnostics& diags);

// The recipe keys a base can fill, in table order (every key the generated table uses).
std::vector<std::string_view> recipe_base_keys();

// Sets recipe key `key` (a table key: "model.cuda_graph_impl", "comm_overlap.delay_wgrad_compute")
// to `text` as the table writes values ("true", "7", "[attn,mlp]"), with source `loc`, where the
// field is unset. True when the key is known and the text fits its field (or it was set).
bool fill_recipe_key(Recipe& r, std::string_view key, std::string_view text, const SourceLoc& loc);

// Whether a table key is a fact about the recipe that is not a recipe key (comm_overlap null,
// pipeline_split, precision_aware_optimizer, moe_dense_layers: RecipeBaseInfo holds them).
bool is_recipe_base_fact(std::string_view key);

}  // namespace bridge
