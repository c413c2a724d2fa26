#include "plan/runtime_env_defaults.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/megatron_bridge_perf_recipes.h"

namespace bridge {

namespace {

RuntimeEnvDefault compare(std::string_view name, std::string_view value, const LaunchEnv& env) {
  RuntimeEnvDefault d{std::string(name), std::string(value), std::nullopt, "", false};
  if (const EnvVar* mine = env.find(d.name)) {
    d.launch_value = mine->value;
    d.launch_source = mine->source;
    d.launch_secret = mine->secret;
    d.launch_expanded = mine->expand;
  }
  return d;
}

void warn_replaced(const RuntimeEnvDefaults& out, Diagnostics& diags) {
  std::vector<std::string> replaced;
  for (const auto& d : out.vars)
    if (d.launch_env_wins())
      replaced.push_back(fmt::format("{}={} from {} (the recipe has {})", d.name,
                                     d.launch_secret ? std::string("<secret>")
                                     : d.launch_expanded
                                         ? *d.launch_value + " (expanded on the rank)"
                                         : *d.launch_value,
                                     d.launch_source, d.value));
  if (replaced.empty()) return;
  diags.warning(
      "runtime-env-replaced", "env", {},
      fmt::format("Megatron-Bridge's {} sets {} env variable{} at rank start that the launch env "
                  "sets otherwise, and the launch env's value{} win{} (the release sets a "
                  "recipe's env_vars only where the variable is unset): {}",
                  out.origin, replaced.size(), replaced.size() == 1 ? "" : "s",
                  replaced.size() == 1 ? "" : "s", replaced.size() == 1 ? "s" : "",
                  fmt::join(replaced, "; ")),
      "to run NVIDIA's tuned values instead, set them in the recipe's env: (or with -E); "
      "`bridge-launch plan` lists every variable the runtime sets and which value each rank "
      "gets");
}

}  // namespace

void add_recipe_base_env(const Recipe& r, const Topology& t, LaunchEnv& env) {
  const PerfRecipeEnv* recipe_env = perf_recipe_env_of(r, t);
  if (!recipe_env || !recipe_env->does_not_build.empty()) return;
  const std::string source = fmt::format("recipe base {}", recipe_env->function);
  for (const auto& [name, value] : recipe_env->vars())
    if (!env.find(std::string(name)))  // a value the user or a plugin option chose stays
      env.vars.push_back({std::string(name), std::string(value), source,
                          "the recipe's env_vars, which Megatron-Bridge sets at rank start where "
                          "unset; set here so the script shows it and every rank checks it"});
}

RuntimeEnvDefaults runtime_env_defaults(const Recipe& r, const Topology& t,
                                        const std::string& adapter, const LaunchEnv& env,
                                        Diagnostics& diags) {
  RuntimeEnvDefaults out;
  if (adapter != "megatron_bridge") return out;
  const PerfRecipeEnv* recipe_env = perf_recipe_env_of(r, t);
  if (!recipe_env) return out;
  const std::string function(recipe_env->function);
  out.origin = "performance recipe " + function;
  if (!recipe_env->does_not_build.empty()) {
    out.unknown_because = std::string(recipe_env->does_not_build);
    diags.warning(
        "megatron-bridge-recipe-does-not-build", "model.recipe", r.model.recipe.loc,
        fmt::format("Megatron-Bridge 0.6.2's {} does not build from the release's "
                    "PyPI package ({}): run_script.py stops when it builds the config, "
                    "unless the job's Megatron-Bridge is installed from its source tree",
                    out.origin, recipe_env->does_not_build),
        "run it in a container whose Megatron-Bridge comes from the source tree (NVIDIA's "
        "NeMo containers), or choose another compute dtype or GPU; the recipe's env "
        "variables are unknown to bridge-launch");
    return out;
  }
  for (const auto& [name, value] : recipe_env->vars())
    out.vars.push_back(compare(name, value, env));
  warn_replaced(out, diags);
  return out;
}

}  // namespace bridge
