// Launch plugins: the interface, the registry, and the runner that merges their
// contributions with the recipe's env: and -E values.
//
// A plugin reads the validated plan (recipe, topology, RESOLVED overlap config) and adds
// environment variables, runtime arguments, setup steps and executor changes, each with a
// one-line reason. Plugins never change the overlap config. The registry is an explicit
// name -> factory table, defined by plugin_registry() and read there only by the composition
// root (launcher/services.cpp): the planner and the CLI are handed it (Services::plugins); unknown
// names get a did-you-mean. Precedence for
// env: -E > recipe env: > plugins; two plugins setting one variable to different values is an
// error naming both. The runner stamps every contribution with its source "plugin:<name>", so
// plugins only fill in values and reasons. See docs/plugins.md for the user-facing rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "model/executor_kind.h"
#include "model/launch_env.h"
#include "model/overlap.h"
#include "model/recipe.h"
#include "model/topology.h"
#include "system/host_env.h"

namespace bridge {

struct PluginContext {
  const Recipe& recipe;
  const Topology& topology;
  const OverlapResolution& overlap;
  std::string executor;  // one of executor_names(); ask its traits with executor_kind()
  std::string job_dir;   // where profiles, snapshots and tracker files go
  const HostEnvironment& host_env;

  // The executor's row of traits (model/executor_kind.h); a plugin asks these, never the name.
  // A row with every trait off for a name that is not an executor.
  const ExecutorKind& executor_kind() const {
    static const ExecutorKind kNone{};
    const ExecutorKind* kind = find_executor_kind(executor);
    return kind ? *kind : kNone;
  }
};

struct PluginContribution {
  std::vector<EnvVar> env;
  std::vector<RuntimeArg> args;
  std::vector<SetupStep> setup;
  ExecutorChanges changes;
};

class LaunchPlugin {
 public:
  virtual ~LaunchPlugin() = default;
  // `options` is the plugin's mapping from the recipe (possibly empty); `loc` the position
  // of its name. Problems go to `diags` with paths like "plugins.perf_env.manual_gc_interval".
  virtual void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                          PluginContribution& out, Diagnostics& diags) const = 0;
};

struct PluginInfo {
  const char* name;
  const char* description;  // one line, shown by `bridge-launch plugins`
  std::unique_ptr<LaunchPlugin> (*make)();
};

// Where the table of plugins is defined; only the composition root reads it.
const std::vector<PluginInfo>& plugin_registry();

// The registry entry named `name`, or nullptr.
const PluginInfo* find_plugin(const std::vector<PluginInfo>& registry, const std::string& name);

// Reports each entry that names no plugin of `registry` (with a did-you-mean); returns
// whether all were known. The plan checks them even when the recipe has other errors, so a
// misspelled plugin is reported in the same pass as the rest.
bool check_plugin_names(const std::vector<PluginInfo>& registry,
                        const std::vector<PluginEntry>& entries, Diagnostics& diags);

// Everything the launch gets besides the overlap config.
struct LaunchContributions {
  LaunchEnv env;
  std::vector<RuntimeArg> runtime_args;
  std::vector<SetupStep> setup_steps;
  ExecutorChanges executor;
};

// Runs the recipe's plugins (made from `registry`) in order, then applies recipe env: and
// `cli_env` ("KEY=VALUE" strings from -E) with the precedence rules, `${VAR}` expansion of
// recipe env values from ctx.host_env, secret handling and contradiction warnings.
LaunchContributions run_plugins(const std::vector<PluginInfo>& registry, const PluginContext& ctx,
                                const std::vector<std::string>& cli_env, Diagnostics& diags);

}  // namespace bridge
