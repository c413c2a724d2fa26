// The `hydra` adapter: the plan as `section.key=value` overrides, for runtimes that apply
// them to a ConfigContainer (Megatron-Bridge's example scripts and the like). ng, gn and the
// GPU type are not ConfigContainer fields: they reach such a runtime as its world size and
// devices, which the executor sets from the same plan.
#include <fmt/format.h>

#include "launcher/plan/runtime_adapter.h"

namespace bridge {

namespace {

// Megatron-Bridge's mixed-precision recipe (megatron.bridge.training.mixed_precision) for the
// recipe's precision and compute dtype; "" when it has none (fp32: no mixed precision).
std::string mixed_precision_recipe(const Recipe& r) {
  std::string base = r.model.precision.get_or("bf16");
  if (base != "bf16" && base != "fp16") return "";
  std::string dtype = r.model.compute_dtype.get_or("bf16");
  if (dtype == "fp8_cs") return base + "_with_fp8_current_scaling_mixed";
  if (dtype == "fp8_mx") return base + "_with_mxfp8_mixed";
  if (dtype == "fp8_sc") return base + "_with_fp8_subchannel_scaling_mixed";
  if (dtype == "nvfp4") return base == "bf16" ? "bf16_with_nvfp4_mixed" : "";
  return base + "_mixed";
}

// The plan's precision as the ConfigContainer spells it: `mixed_precision=<recipe>` (it has
// no model.precision or model.compute_dtype), only when the recipe sets one of the two.
void add_precision(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  const ModelSpec& m = in.recipe.model;
  if (!m.precision.is_set() && !m.compute_dtype.is_set()) return;
  const SourceLoc& loc = m.compute_dtype.is_set() ? m.compute_dtype.loc : m.precision.loc;
  std::string name = mixed_precision_recipe(in.recipe);
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

}  // namespace

void emit_hydra(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  // Said by name, as every value the plan used and the runtime does not get.
  if (!in.topology.gpu.empty())
    diags.info("not-forwarded", "cluster.gpu", in.recipe.cluster.gpu.loc,
               fmt::format("runtime adapter hydra: cluster.gpu ({}) is not passed to the runtime "
                           "(a ConfigContainer has no GPU field); the launch env derived from it "
                           "is, and ng/gn reach it as the world size",
                           in.topology.gpu));
  std::vector<std::string> emitted;
  for (auto& [key, value] : plan_values(in)) {
    if (key.rfind("cluster.", 0) == 0) continue;
    emitted.push_back(key);
    if (key == "model.precision" || key == "model.compute_dtype") continue;  // add_precision
    // The ConfigContainer counts iterations in train.train_iters.
    out.args.push_back(
        {key, "", value, "", key == "train.max_steps" ? "train.train_iters" : std::string()});
  }
  add_precision(in, out, diags);
  for (auto& [key, value] : user_hydra_values(in.recipe, emitted))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  add_overlap_args(in, out);
}

}  // namespace bridge
