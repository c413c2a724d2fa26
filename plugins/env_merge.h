// The env precedence rules of the plugin runner, kept apart from running the plugins.
//
// Plugins' values come first (merged by the runner); then set_explicit applies recipe env:
// and then -E values, each replacing whatever was there in place and naming what it
// overrode in the reason (never a secret value). Names of known API keys stay secret
// whoever sets them. check_env_contradictions warns when an explicit value contradicts
// what the resolved overlap config needs.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "plugins/plugin.h"

namespace bridge {

bool is_env_name(const std::string& name);
bool is_known_secret_name(const std::string& name);

// Name -> position in a LaunchEnv's vars, so that merging n variables costs O(n) rather than
// a linear search per variable (150 000 env keys once took 25 s to validate). Valid while
// only it appends to `env`.
class EnvIndex {
 public:
  explicit EnvIndex(LaunchEnv& env);
  EnvVar* find(const std::string& name);
  void append(EnvVar var);

 private:
  LaunchEnv& env_;
  std::unordered_map<std::string, size_t> positions_;
};

// Replaces or appends `var` (source "recipe env" or "-E").
void set_explicit(EnvIndex& env, EnvVar var);

// recipe env: entries, `${VAR}` expanded from ctx.host_env unless `expand: true` (then the
// rank's shell expands the value and it is kept verbatim).
void apply_recipe_env(const PluginContext& ctx, LaunchEnv& env, Diagnostics& diags);

// -E "KEY=VALUE" entries, literal values; malformed entries are "bad-env" errors.
void apply_cli_env(const std::vector<std::string>& cli_env, LaunchEnv& env, Diagnostics& diags);

// TP overlap resolved on + Hopper-or-older GPU + explicit CUDA_DEVICE_MAX_CONNECTIONS != 1.
// `from_plugins`: CUDA_DEVICE_MAX_CONNECTIONS as the plugins set it, before the recipe's env and
// -E replaced it (nullopt: no plugin sets it), so the fix says what dropping the value gives.
void check_env_contradictions(const PluginContext& ctx, const LaunchEnv& env,
                              const std::optional<EnvVar>& from_plugins, Diagnostics& diags);

}  // namespace bridge
