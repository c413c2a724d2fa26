// HostEnvironment: the one seam through which bridge-launch reads the submitting host's
// environment (`${VAR}` expansion, API keys that activate trackers, $HOME for job dirs, and
// the environment local ranks inherit). Built once in main (launcher/services.h) and passed down.
//
// ProcessEnvironment reads the real process environment; the tests' double is MapEnvironment
// (tests/support/map_environment.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bridge {

class HostEnvironment {
 public:
  virtual ~HostEnvironment() = default;
  virtual std::optional<std::string> get(const std::string& name) const = 0;
  // Every variable, in the order the environment holds them (local ranks inherit these).
  virtual std::vector<std::pair<std::string, std::string>> all() const = 0;
  // The directory relative paths of the command line and recipe are taken from.
  virtual std::string current_directory() const = 0;
};

// bridge-launch's own state (docs/experiments.md, "Where things are"): the job registry in
// <root>/jobs and the local executor's job files in <root>/logs. The root is
// $BRIDGE_LAUNCH_STATE_DIR when set, else $XDG_STATE_HOME/bridge-launch, else
// $HOME/.local/state/bridge-launch (the XDG base directory default).
std::string state_root(const HostEnvironment& env);

class ProcessEnvironment : public HostEnvironment {
 public:
  std::optional<std::string> get(const std::string& name) const override;
  std::vector<std::pair<std::string, std::string>> all() const override;
  std::string current_directory() const override;
};

}  // namespace bridge
