// Small helpers shared by the built-in plugins: adding env vars and setup steps to a
// contribution, shell quoting, and the GPU / model facts the plugins decide on.
//
// The GPU tables are explicit and meant to be extended when new GPUs appear:
// "Blackwell or newer" and the NVLink domain size (8 for HGX boards, 72 for NVL72 racks).
// effective_flex_backend applies rule E4 (docs/overlap.md): the recipe's
// moe_flex_dispatcher_backend counts only when moe_token_dispatcher_type is flex.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/overlap.h"
#include "model/recipe.h"
#include "plugins/plugin.h"

namespace bridge {

void add_env(PluginContribution& out, std::string name, std::string value, std::string reason,
             bool secret = false);
void add_setup(PluginContribution& out, std::string command, std::string reason);

std::string join(const std::vector<std::string>& parts, std::string_view sep);

// Both read the GPU table's entry for the plan's GPU (model/gpu_table.h), or the
// architecture a recipe declared with cluster.gpu_arch (NVLink domain then 0 = unknown).
bool is_blackwell_or_newer(const Topology& t);
int nvlink_domain_size(const Topology& t);
// "deepep", "hybridep", or "" when no flex backend is in effect.
std::string effective_flex_backend(const Recipe& recipe);
bool tp_overlap_resolved_on(const OverlapResolution& overlap);
bool a2a_overlap_resolved_on(const OverlapResolution& overlap);

}  // namespace bridge
