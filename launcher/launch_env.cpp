#include "launcher/launch_env.h"

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

}  // namespace bridge
