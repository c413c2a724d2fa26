// The `probe` adapter: everything bridge-probe needs as Hydra overrides (it reads the
// topology, sizes and steps from them), and the same plan values in BRIDGE_EXPECTED_PLAN so
// that every rank can prove it received the plan (docs/probe.md, "plan check").
#include "plan/runtime_adapter.h"

namespace bridge {

void emit_probe(const AdapterInput& in, AdapterOutput& out, Diagnostics&) {
  std::vector<std::string> emitted;
  for (auto& [key, value] : plan_values(in)) {
    emitted.push_back(key);
    out.args.push_back({key, "", value, ""});
    // The check's format is `key=value;...`; a declared GPU name could hold either byte.
    if (value.find_first_of(";=") == std::string::npos) out.expected_plan.emplace_back(key, value);
  }
  for (auto& [key, value] : user_hydra_values(in.recipe, emitted))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  add_overlap_args(in, out);
  add_checkpoint_args(in.recipe, out);
}

}  // namespace bridge
