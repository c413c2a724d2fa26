#include "system/host_env.h"

#include <cstdlib>
#include <filesystem>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace bridge {

std::optional<std::string> ProcessEnvironment::get(const std::string& name) const {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::vector<std::pair<std::string, std::string>> ProcessEnvironment::all() const {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // not NAME=VALUE: nothing to pass on
    vars.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return vars;
}

std::string ProcessEnvironment::current_directory() const {
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ec ? std::string("/") : cwd.string();
}

std::string state_root(const HostEnvironment& env) {
  if (auto d = env.get("BRIDGE_LAUNCH_STATE_DIR"); d && !d->empty()) return *d;
  // The XDG base directory rules: a relative XDG_STATE_HOME is invalid and ignored.
  if (auto x = env.get("XDG_STATE_HOME"); x && !x->empty() && x->front() == '/')
    return *x + "/bridge-launch";
  return env.get("HOME").value_or("/tmp") + "/.local/state/bridge-launch";
}

}  // namespace bridge
