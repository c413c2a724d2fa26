// HostEnvironment: the one seam through which the planner reads the submitting host's
// environment (`${VAR}` expansion, API keys that activate trackers, $HOME for job dirs).
//
// ProcessEnvironment reads the real process environment; MapEnvironment is the test double.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace bridge {

class HostEnvironment {
 public:
  virtual ~HostEnvironment() = default;
  virtual std::optional<std::string> get(const std::string& name) const = 0;
};

class ProcessEnvironment : public HostEnvironment {
 public:
  std::optional<std::string> get(const std::string& name) const override;
};

class MapEnvironment : public HostEnvironment {
 public:
  MapEnvironment() = default;
  explicit MapEnvironment(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  std::optional<std::string> get(const std::string& name) const override;
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace bridge
