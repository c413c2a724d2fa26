// The `hydra` adapter: the plan as `section.key=value` overrides, for runtimes that apply
// them to a ConfigContainer (Megatron-Bridge's example scripts and the like). ng, gn and the
// GPU type are not ConfigContainer fields: they reach such a runtime as its world size and
// devices, which the executor sets from the same plan.
#include <fmt/format.h>

#include <algorithm>

#include "plan/megatron_bridge_release.h"
#include "plan/runtime_adapter.h"

namespace bridge {

namespace {

// The script builds a library recipe bridge-launch knows (model/recipe_base.h): that recipe
// decides every key the user leaves unset, in the plan and in the runtime alike.
bool builds_recipe_base(const AdapterInput& in) { return !in.recipe.base.function.empty(); }

// The plan's precision as the ConfigContainer spells it: `mixed_precision=<recipe>` (it has
// no model.precision or model.compute_dtype), only when the recipe sets one of the two. A
// precision the recipe base filled in is not sent: a recipe name would replace the library
// recipe's own mixed-precision object (its tuned flags) with the named recipe's defaults.
void add_precision(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  const ModelSpec& m = in.recipe.model;
  if (builds_recipe_base(in) ? !user_set(m.precision) && !user_set(m.compute_dtype)
                             : !m.precision.is_set() && !m.compute_dtype.is_set())
    return;
  const SourceLoc& loc = m.compute_dtype.is_set() ? m.compute_dtype.loc : m.precision.loc;
  std::string name = mixed_precision_recipe_name(m);
  if (name.empty()) {
    diags.info("not-forwarded",
               m.compute_dtype.is_set() ? "model.compute_dtype" : "model.precision", loc,
               fmt::format("runtime adapter hydra: precision {}{} has no mixed-precision recipe "
                           "in Megatron-Bridge; the runtime's recipe keeps its own",
                           m.precision.get_or("bf16"),
                           m.compute_dtype.is_set() ? " with " + *m.compute_dtype.value : ""));
    return;
  }
  out.args.push_back({m.compute_dtype.is_set() ? "model.compute_dtype" : "model.precision", "",
                      name, "", "mixed_precision"});
}

// With the precision as `mixed_precision=<recipe name>`, the recipe's mixed_precision.* keys
// cannot follow as `mixed_precision.<field>=` (Hydra refuses a field of a string), and a name
// carries no field changes: both become one
// `++mixed_precision={_target_:...MixedPrecisionConfig,...}`, the named recipe's fields
// (megatron_bridge_release.cpp) with the recipe's keys applied. Without a precision the
// fields stay field overrides onto the script's own recipe.
void fold_mixed_precision(AdapterOutput& out) {
  auto is_field = [](const AdapterArg& a) { return a.key.rfind("mixed_precision.", 0) == 0; };
  auto named = std::find_if(out.args.begin(), out.args.end(),
                            [](const AdapterArg& a) { return a.runtime_key == "mixed_precision"; });
  if (named == out.args.end() || std::none_of(out.args.begin(), out.args.end(), is_field)) return;
  const MixedPrecisionRecipe* base = find_mixed_precision_recipe(named->value);
  if (!base) return;
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& a : out.args)
    if (is_field(a)) fields.emplace_back(a.key.substr(a.key.find('.') + 1), a.value);
  named->value = mixed_precision_object(*base, fields);
  named->runtime_key = "++mixed_precision";
  named->reason = fmt::format(
      "Megatron-Bridge's mixed-precision recipe {} with the recipe's mixed_precision keys",
      base->name);
  out.args.erase(std::remove_if(out.args.begin(), out.args.end(), is_field), out.args.end());
}

// A PEFT library recipe (<model>_peft_..._config) leaves the checkpoint it adapts to the
// command line, as NVIDIA's PEFT performance recipes do.
void check_peft_checkpoint(const Recipe& r, Diagnostics& diags) {
  const std::string& base = r.base.function;
  if (base.find("_peft_") != std::string::npos)
    require_peft_checkpoint(r, "runtime.command", r.runtime.command.loc,
                            fmt::format("the recipe base {} is a PEFT recipe", base), diags);
}

}  // namespace

void emit_hydra(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  // Said by name, as every value the plan used and the runtime does not get.
  if (!in.topology.gpu.empty())
    diags.info("not-forwarded", "cluster.gpu", in.recipe.cluster.gpu.loc,
               fmt::format("runtime adapter hydra: cluster.gpu ({}) is not passed to the runtime "
                           "(a ConfigContainer has no GPU field); the launch env derived from it "
                           "is, and ng/gn reach it as the world size",
                           in.topology.gpu));
  // On a recipe base only what the user set is sent, as with megatron_bridge: the script
  // builds the same recipe, so the values the plan took from it are the runtime's already.
  const bool on_base = builds_recipe_base(in);
  check_peft_checkpoint(in.recipe, diags);
  std::vector<std::string> emitted;
  for (auto& [key, value] : on_base ? user_plan_values(in, {}) : plan_values(in)) {
    if (key.rfind("cluster.", 0) == 0) continue;
    emitted.push_back(key);
    if (key == "model.precision" || key == "model.compute_dtype") continue;  // add_precision
    // The ConfigContainer counts iterations in train.train_iters.
    out.args.push_back(
        {key, "", value, "", key == "train.max_steps" ? "train.train_iters" : std::string()});
  }
  add_precision(in, out, diags);
  // Megatron-Bridge's ConfigContainer refuses full-iteration CUDA graphs while the loss is
  // checked for NaN (the check syncs with the host inside the graph); run_script.py turns the
  // check off for such graphs, and a ConfigContainer script gets the same setting here.
  const ModelSpec& m = in.recipe.model;
  if (overlap_detail::is_full_iteration_cuda_graph(m) &&
      (!on_base || user_set(m.cuda_graph_impl) || user_set(m.cuda_graph_scope)))
    out.args.push_back({"rerun_state_machine.check_for_nan_in_loss", "", "false",
                        "full-iteration CUDA graphs need the NaN-in-loss check off (Megatron-"
                        "Bridge refuses them otherwise; run_script.py sets the same)"});
  for (auto& [key, value] : user_hydra_values(in.recipe, emitted))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  fold_mixed_precision(out);
  // Without a base the whole resolved section goes (CommOverlapForm::kUserFieldsOnBase).
  if (on_base)
    add_user_overlap_args(in, out);
  else
    add_overlap_args(in, out);
  add_checkpoint_args(in.recipe, out);
}

}  // namespace bridge
