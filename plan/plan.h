// The planning pipeline: recipe file + command line -> Plan.
//
// build_plan runs, top to bottom: load recipe -> apply overrides -> validate (schema,
// topology) -> resolve overlap -> run plugins. Each stage appends to one Diagnostics list;
// a stage runs only if the earlier ones succeeded, and the Plan says how far it got so that
// `plan --format json` can print partial content for an invalid recipe. Pure apart from
// reading the recipe file and the host environment seam. The plugins come from the table the
// caller passes (Services::plugins), never from a table the planner looks up itself.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "model/overlap.h"
#include "model/placement.h"
#include "model/recipe.h"
#include "model/topology.h"
#include "model/watchdog.h"
#include "plan/code_plan.h"
#include "plan/runtime_env_defaults.h"
#include "plugins/plugin.h"
#include "system/host_env.h"

namespace bridge {

// What the runtime check (plan/runtime_check.h) found, when it ran.
struct RuntimeCheckOutcome {
  bool ran = false;
  bool passed = false;
  std::string python;
  std::string versions;  // "megatron.bridge 0.6.2, megatron.core 0.19.2, ..."
  std::string recipe;    // the config function the runtime builds from
  double seconds = 0;
  size_t findings = 0;
};

// What the command line asks for, beyond the recipe file.
struct PlanRequest {
  std::string recipe_path;
  std::vector<std::string> overrides;  // trailing KEY=VALUE, then -ng/-gn/-g as overrides
  std::vector<std::string> cli_env;    // -E KEY=VALUE, in order
  std::string executor;                // "" = recipe's executor.default, else local
  bool template_from_cli = false;      // --template was given (sbatch only)
  bool strict = false;
};

// What executors read of the recipe, and nothing more: the job's name, the cluster, runtime
// and executor sections, each value with the source location a diagnostic points at. Set by
// build_plan as soon as the recipe is read. Executors render from the Plan's typed values
// (topology, env, setup steps, runtime argv, executor changes) and this view; they never read
// Plan::recipe (scripts/check-layers.sh refuses it), so what they submit is what the plan
// shows.
struct JobSpec {
  std::string file;  // the recipe file, for a diagnostic about a key it does not set
  Field<std::string> name;
  ClusterSpec cluster;
  RuntimeSpec runtime;
  ExecutorSpec executor;
  std::map<std::string, SourceLoc> env_locations;  // where the recipe's env: sets each name
  CheckpointSpec checkpoint;  // where the ranks save (an executor checks its ranks see it)
};

struct Plan {
  std::optional<Recipe> recipe;  // for the plan layer and the commands; executors read `job`
  JobSpec job;
  std::string executor;
  std::optional<Topology> topology;
  std::optional<OverlapResolution> overlap;
  LaunchEnv env;
  // What the runtime sets itself at rank start where `env` leaves a variable unset.
  RuntimeEnvDefaults runtime_env;
  std::string adapter;                   // runtime adapter in effect (runtime_adapter.h)
  std::vector<std::string> user_args;    // runtime.args, {plan.NAME} placeholders expanded
  std::vector<RuntimeArg> runtime_args;  // what the adapter forwards, then plugin args
  // The plan values each rank must have received (probe adapter: BRIDGE_EXPECTED_PLAN).
  std::vector<std::pair<std::string, std::string>> expected_plan;
  std::vector<SetupStep> setup_steps;
  ExecutorChanges executor_changes;
  std::string job_dir;
  // The rank whose log carries the iteration lines (runtime.progress_rank; by default the
  // last rank under the megatron_bridge adapter, which prints them there, else rank 0).
  int progress_rank = 0;
  RuntimeCheckOutcome runtime_check;
  // Every rank's runtime starts through the plan confirmation (plan/plan_confirm.h).
  bool confirm = false;
  // When the executor ends a job that stopped making progress (model/watchdog.h).
  WatchdogSettings watchdog;
  // How each rank is bound to its GPU's NUMA node (runtime.binding, model/placement.h).
  NumaBinding binding;
  // Blocks of nodes inside one NVLink domain (executor.<name>.segment, model/placement.h).
  NvlinkPlacement nvlink;
  // runtime.code: the source tree shipped into the job (plan/code_plan.h); its inspection
  // (git state, files, hash) is added by the commands, which hold the CommandRunner.
  std::optional<CodePlan> code;
  bool complete = false;  // every stage ran and no error was recorded
};

// The argument vector every rank's runtime process starts with: runtime.command, runtime.args
// (placeholders expanded), what the adapter forwards, then plugin arguments. A launcher
// wrapper (torchrun, ft_launcher) or a command prefix (nsys) is not part of it.
std::vector<std::string> runtime_argv(const Plan& plan);

// Retries the chosen executor will make: executor.<name>.retries when set (it wins over a
// plugin's value), else the plugin's, else 0. The local executor never retries.
int64_t effective_retries(const Plan& plan);

// `plugins`: the table the recipe's `plugins:` entries are looked up in (Services::plugins).
Plan build_plan(const PlanRequest& request, const HostEnvironment& host_env,
                const std::vector<PluginInfo>& plugins, Diagnostics& diags);

// The same pipeline on recipe text already in memory (tests, benchmarks, ablate variants).
Plan build_plan_from_text(const std::string& text, const PlanRequest& request,
                          const HostEnvironment& host_env, const std::vector<PluginInfo>& plugins,
                          Diagnostics& diags);

}  // namespace bridge
