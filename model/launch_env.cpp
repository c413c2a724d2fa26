#include "model/launch_env.h"

#include <string_view>

namespace bridge {

const EnvVar* LaunchEnv::find(const std::string& name) const {
  for (const auto& v : vars)
    if (v.name == name) return &v;
  return nullptr;
}

EnvVar* LaunchEnv::find(const std::string& name) {
  for (auto& v : vars)
    if (v.name == name) return &v;
  return nullptr;
}

std::string redacted_value(const EnvVar& v) { return v.secret ? "<secret>" : v.value; }

const char* launcher_set_env_owner(const std::string& name) {
  // MASTER_ADDR and MASTER_PORT are not among them: a user's value there works (the Slurm
  // script exports the recipe's env after its own rendezvous values), and moving the port off
  // a collision on a shared node is a real need.
  static constexpr std::string_view kRendezvous[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                     "LOCAL_WORLD_SIZE", "NODE_RANK"};
  static constexpr std::string_view kChecks[] = {"BRIDGE_EXPECTED_ENV", "BRIDGE_EXPECTED_PLAN",
                                                 "BRIDGE_JOB_DIR", "BRIDGE_OVERLAP_GRAD_REDUCE"};
  for (std::string_view n : kRendezvous)
    if (name == n) return "the executor (the rendezvous of the ranks)";
  for (std::string_view n : kChecks)
    if (name == n) return "bridge-launch";
  return nullptr;
}

}  // namespace bridge
