// The `none` adapter: the runtime gets only runtime.command and runtime.args. Everything the
// plan validated is then unchecked at run time, so each recipe section with validated values
// gets one warning naming them: a silent split between what was checked and what runs is the
// failure this product exists to prevent.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "plan/runtime_adapter.h"

namespace bridge {

void emit_none(const AdapterInput& in, AdapterOutput&, Diagnostics& diags) {
  static const std::vector<std::string> kSections{"cluster",      "model",     "train",
                                                  "ddp",          "optimizer", "mixed_precision",
                                                  "comm_overlap", "checkpoint"};
  std::map<std::string, std::vector<std::string>> keys_by_section;
  for (const auto& [key, value] : in.recipe.inputs) {
    size_t dot = key.find('.');
    if (dot == std::string::npos || value == "null") continue;
    keys_by_section[key.substr(0, dot)].push_back(key.substr(dot + 1));
  }
  const RuntimeSpec& rt = in.recipe.runtime;
  SourceLoc loc = rt.adapter.is_set() ? rt.adapter.loc : rt.pass_overrides.loc;
  for (const auto& section : kSections) {
    auto it = keys_by_section.find(section);
    if (it == keys_by_section.end()) continue;
    diags.warning("not-forwarded", section, loc,
                  fmt::format("runtime adapter `none`: the validated `{}` values ({}) are not "
                              "passed to the runtime; it may run with other values",
                              section, fmt::join(it->second, ", ")),
                  "choose runtime.adapter megatron_bridge, hydra or probe, or pass them in "
                  "runtime.args with {plan.NAME} placeholders");
  }
}

}  // namespace bridge
