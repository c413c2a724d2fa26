// The env variables the runtime sets itself at rank start, compared with the launch env.
//
// Megatron-Bridge's flat performance recipes (the megatron_bridge adapter's run_script.py runs
// one) carry `env_vars`: NVIDIA's tuned process settings for that model, GPU and precision
// (CUDA_DEVICE_MAX_CONNECTIONS, the LayerNorm SM margins, NCCL settings, ...). The release
// applies them in runtime_config_update with os.environ.setdefault, so a variable that the
// launch env already sets keeps the launch env's value. `plan` lists every such variable and
// which value the rank runs with, and one warning names each variable whose value the launch
// env replaces (docs/recipe.md, "Env the runtime sets").
//
// Contract: pure; reads the generated tables of model/megatron_bridge_perf_recipes.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

struct RuntimeEnvDefault {
  std::string name;
  std::string value;                        // what the runtime would set
  std::optional<std::string> launch_value;  // the launch env's, when it sets the name
  std::string launch_source;                // e.g. "plugin:perf_env", "recipe env", "-E"
  bool launch_secret = false;
  bool launch_expanded = false;  // expanded on the rank (expand: true): its value is not known here

  // A secret or rank-expanded launch value is not compared with the recipe's (an answer
  // "the same" would tell a secret's value): it counts as replacing it.
  bool launch_env_wins() const {
    return launch_value && (launch_secret || launch_expanded || *launch_value != value);
  }
};

struct RuntimeEnvDefaults {
  std::string origin;  // e.g. "performance recipe qwen3_30b_a3b_pretrain_8gpu_gb200_bf16_config"
  std::vector<RuntimeEnvDefault> vars;  // in name order
  std::string unknown_because;          // set when the recipe's env_vars are unknown
};

// The runtime's env defaults for a plan: the performance recipe run_script.py builds for the
// megatron_bridge adapter; nothing for other adapters (the hydra adapter's training script
// builds a recipe bridge-launch does not know). Warns once, naming each variable the launch
// env sets to another value.
// The launch env says it out loud: each env variable of the recipe base (the performance
// recipe the megatron_bridge adapter's run_script.py builds) is put into `env` with the
// recipe's value, so the script and the pod spec show it and every rank's env check covers it
// (the release's set-if-unset at rank start then changes nothing). A value already in `env`
// stays: the user's (the recipe's env:, -E, a plugin option they set), and runtime_env_defaults
// warns that it replaces the recipe's. perf_env leaves the recipe's names to it.
void add_recipe_base_env(const Recipe& r, const Topology& t, LaunchEnv& env);

RuntimeEnvDefaults runtime_env_defaults(const Recipe& r, const Topology& t,
                                        const std::string& adapter, const LaunchEnv& env,
                                        Diagnostics& diags);

}  // namespace bridge
