// HostEnvironment: the one seam through which bridge-launch reads the submitting host's
// environment (`${VAR}` expansion, API keys that activate trackers, $HOME for job dirs, and
// the environment local ranks inherit). Built once in main (launcher/services.h) and passed down.
//
// ProcessEnvironment reads the real process environment; MapEnvironment is the test double.
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

class MapEnvironment : public HostEnvironment {
 public:
  MapEnvironment() = default;
  explicit MapEnvironment(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  std::optional<std::string> get(const std::string& name) const override;
  std::vector<std::pair<std::string, std::string>> all() const override {
    return {vars_.begin(), vars_.end()};
  }
  // $PWD of the map, else "/".
  std::string current_directory() const override {
    auto it = vars_.find("PWD");
    return it == vars_.end() ? "/" : it->second;
  }
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace bridge
