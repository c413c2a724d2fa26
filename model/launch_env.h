// LaunchEnv and the other launch-time contributions (runtime arguments, setup steps,
// executor changes) that plugins, the recipe's env: and -E produce from a validated plan.
//
// Every entry records its source ("plugin:perf_env", "recipe env", "-E") and a one-line
// reason, which `plan` prints. Secret values are held here (they must reach the ranks) but
// every renderer and printer shows them as <secret>; see `redacted_value`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bridge {

struct EnvVar {
  std::string name;
  std::string value;
  std::string source;  // "plugin:perf_env" | "recipe env" | "-E"
  std::string reason;
  bool secret = false;
  bool expand = false;  // the user opted in to shell expansion on the rank
};

struct LaunchEnv {
  std::vector<EnvVar> vars;  // in the order they were set; names unique

  const EnvVar* find(const std::string& name) const;
  EnvVar* find(const std::string& name);
};

// "<secret>" for secrets, the value otherwise.
std::string redacted_value(const EnvVar& v);

// Who sets `name` on every rank, when bridge-launch or the executor does (the rank variables
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK; bridge-launch's own checks such as
// BRIDGE_EXPECTED_ENV); nullptr for a name a recipe's env: or -E may set. A value from the
// user would be replaced on the rank or break the job's start, so both refuse these names.
const char* launcher_set_env_owner(const std::string& name);

struct RuntimeArg {
  std::string text;  // exactly as passed to the runtime, e.g. "train.manual_gc=true"
  std::string source;
  std::string reason;
};

struct SetupStep {
  std::string command;  // a shell command, run once per node before the job
  std::string source;
  std::string reason;
};

// Changes a plugin asks of the executor.
// Each setting carries the plugin that set it ("plugin:NAME") and a one-line reason, shown
// by `plan` like the reasons of env variables.
struct ExecutorChanges {
  std::optional<int64_t> preempt_signal_seconds;  // Slurm --signal=TERM@N, k8s grace period
  std::string preempt_source, preempt_reason;
  std::optional<int64_t> retries;
  std::string retries_source, retries_reason;
  std::vector<std::string> launcher_wrapper;  // e.g. ft_launcher + its flags (per node)
  std::string launcher_source, launcher_reason;
  std::vector<std::string> command_prefix;  // e.g. nsys profile ... (per rank)
  std::string command_prefix_source, command_prefix_reason;
};

}  // namespace bridge
