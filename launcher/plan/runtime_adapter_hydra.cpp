// The `hydra` adapter: the plan as `section.key=value` overrides, for runtimes that apply
// them to a ConfigContainer (Megatron-Bridge's example scripts and the like). ng, gn and the
// GPU type are not ConfigContainer fields: they reach such a runtime as its world size and
// devices, which the executor sets from the same plan.
#include <fmt/format.h>

#include "launcher/plan/runtime_adapter.h"

namespace bridge {

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
    out.args.push_back({key, "", value, ""});
  }
  for (auto& [key, value] : user_hydra_values(in.recipe, emitted))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  add_overlap_args(in, out);
}

}  // namespace bridge
