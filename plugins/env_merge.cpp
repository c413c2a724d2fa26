#include "plugins/env_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "model/expand.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

std::string expanded_note(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::vector<std::string> shown;
  for (const auto& n : names) shown.push_back("${" + n + "}");
  return " (expanded " + join(shown, ", ") + ")";
}

std::string overridden_note(const EnvVar& old) {
  if (old.secret) return fmt::format("; overrides the value from {}", old.source);
  return fmt::format("; overrides `{}` from {}", old.value, old.source);
}

SourceLoc recipe_env_loc(const Recipe& recipe, const std::string& name) {
  for (const auto& e : recipe.env)
    if (e.name == name) return e.loc;
  return {};
}

// "perf_env" for a value whose source is "plugin:perf_env".
std::string plugin_name_of(const EnvVar& v) {
  return v.source.rfind("plugin:", 0) == 0 ? v.source.substr(7) : v.source;
}

}  // namespace

bool is_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool is_known_secret_name(const std::string& name) {
  return name == "WANDB_API_KEY" || name == "COMET_API_KEY";
}

EnvIndex::EnvIndex(LaunchEnv& env) : env_(env) {
  for (size_t i = 0; i < env.vars.size(); ++i) positions_.emplace(env.vars[i].name, i);
}

EnvVar* EnvIndex::find(const std::string& name) {
  auto it = positions_.find(name);
  return it == positions_.end() ? nullptr : &env_.vars[it->second];
}

void EnvIndex::append(EnvVar var) {
  positions_.emplace(var.name, env_.vars.size());
  env_.vars.push_back(std::move(var));
}

void set_explicit(EnvIndex& env, EnvVar var) {
  var.secret = var.secret || is_known_secret_name(var.name);
  EnvVar* old = env.find(var.name);
  if (!old) {
    env.append(std::move(var));
    return;
  }
  var.reason += overridden_note(*old);
  var.secret = var.secret || old->secret;
  *old = std::move(var);
}

void apply_recipe_env(const PluginContext& ctx, LaunchEnv& launch_env, Diagnostics& diags) {
  EnvIndex env(launch_env);
  for (const auto& e : ctx.recipe.env) {
    std::string value = e.value;
    std::string reason = "set in env:";
    if (e.expand) {
      reason += " (expand: true: expanded by the rank's shell)";
    } else {
      std::vector<std::string> names;
      auto expanded = expand_vars(e.value, ctx.host_env, "env." + e.name, e.loc, diags, &names);
      if (!expanded) continue;
      value = std::move(*expanded);
      reason += expanded_note(names);
    }
    set_explicit(env, EnvVar{e.name, std::move(value), "recipe env", reason, e.secret, e.expand});
  }
}

void apply_cli_env(const std::vector<std::string>& cli_env, LaunchEnv& launch_env,
                   Diagnostics& diags) {
  EnvIndex env(launch_env);
  for (const auto& kv : cli_env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      diags.error("bad-env", "", {}, fmt::format("-E `{}` is not KEY=VALUE", kv),
                  "write -E NAME=value (an empty value is NAME=)");
      continue;
    }
    std::string name = kv.substr(0, eq);
    if (!is_env_name(name)) {
      diags.error(
          "bad-env", "", {},
          fmt::format("-E `{}=...`: `{}` is not a valid environment variable name", name, name),
          "use letters, digits and '_', not starting with a digit");
      continue;
    }
    if (const char* who = launcher_set_env_owner(name)) {
      diags.error("env-set-by-launcher", "", {},
                  fmt::format("-E `{}=...`: `{}` is set by {} on every rank; the value would be "
                              "replaced there, or break the job's start",
                              name, name, who),
                  "drop it; the launcher derives it from the plan");
      continue;
    }
    set_explicit(env, EnvVar{name, kv.substr(eq + 1), "-E", "set with -E on the command line"});
  }
}

void check_env_contradictions(const PluginContext& ctx, const LaunchEnv& env,
                              const std::optional<EnvVar>& from_plugins, Diagnostics& diags) {
  const EnvVar* v = env.find("CUDA_DEVICE_MAX_CONNECTIONS");
  if (!v || v->source.rfind("plugin:", 0) == 0 || v->value == "1") return;
  if (!tp_overlap_resolved_on(ctx.overlap) || is_blackwell_or_newer(ctx.topology)) return;
  bool from_recipe = v->source == "recipe env";
  SourceLoc loc = from_recipe ? recipe_env_loc(ctx.recipe, v->name) : SourceLoc{};
  if (!from_recipe) loc.override_arg = "-E CUDA_DEVICE_MAX_CONNECTIONS=" + v->value;
  diags.warning(
      "env-contradicts-overlap", from_recipe ? "env.CUDA_DEVICE_MAX_CONNECTIONS" : "", loc,
      fmt::format("CUDA_DEVICE_MAX_CONNECTIONS={} (from {}) contradicts TP communication overlap, "
                  "which is resolved on: on {} (Hopper or older) it needs 1, otherwise the "
                  "communication kernel may be scheduled after the GEMM it overlaps with and the "
                  "overlap kernels serialize",
                  v->value, v->source, ctx.topology.gpu.empty() ? "this GPU" : ctx.topology.gpu),
      from_plugins && from_plugins->value == "1"
          ? fmt::format("drop the explicit value ({} then sets 1) or set it to 1",
                        plugin_name_of(*from_plugins))
          : "set it to 1");
}

}  // namespace bridge
