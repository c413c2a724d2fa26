#include "plugins/plugin_util.h"

#include <algorithm>
#include <cctype>

namespace bridge {

void add_env(PluginContribution& out, std::string name, std::string value, std::string reason,
             bool secret) {
  out.env.push_back(EnvVar{std::move(name), std::move(value), "", std::move(reason), secret});
}

void add_setup(PluginContribution& out, std::string command, std::string reason) {
  out.setup.push_back(SetupStep{std::move(command), "", std::move(reason)});
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool is_blackwell_or_newer(const Topology& t) { return t.blackwell_or_newer(); }

int nvlink_domain_size(const Topology& t) { return t.nvlink_domain; }

std::string effective_flex_backend(const Recipe& recipe) {
  if (recipe.model.moe_token_dispatcher_type.get_or("") != "flex") return "";
  return recipe.model.moe_flex_dispatcher_backend.get_or("");
}

bool tp_overlap_resolved_on(const OverlapResolution& overlap) {
  return overlap.overlap.tp_comm_overlap.value.value_or(false);
}

bool a2a_overlap_resolved_on(const OverlapResolution& overlap) {
  return overlap.overlap.overlap_moe_expert_parallel_comm.value.value_or(false);
}

}  // namespace bridge
