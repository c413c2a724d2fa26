// PLACEHOLDER (to be replaced by the plugins implementation): -E and recipe env only.
#include "plugins/plugin.h"

namespace bridge {

const std::vector<PluginInfo>& plugin_registry() {
  static const std::vector<PluginInfo> kPlugins;
  return kPlugins;
}

LaunchContributions run_plugins(const PluginContext& ctx, const std::vector<std::string>& cli_env,
                                Diagnostics&) {
  LaunchContributions out;
  for (const auto& e : ctx.recipe.env)
    out.env.vars.push_back(EnvVar{e.name, e.value, "recipe env", "set in env:", e.secret, e.expand});
  for (const auto& kv : cli_env) {
    auto eq = kv.find('=');
    out.env.vars.push_back(EnvVar{kv.substr(0, eq), kv.substr(eq + 1), "-E", "command line"});
  }
  return out;
}

}  // namespace bridge
