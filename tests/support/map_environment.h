// MapEnvironment: the HostEnvironment test double (system/host_env.h) for tests, benchmarks
// and fuzzers: the variables of a map, the working directory from its $PWD (else "/").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "system/host_env.h"

namespace bridge {

class MapEnvironment : public HostEnvironment {
 public:
  MapEnvironment() = default;
  explicit MapEnvironment(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  std::optional<std::string> get(const std::string& name) const override {
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::pair<std::string, std::string>> all() const override {
    return {vars_.begin(), vars_.end()};
  }
  std::string current_directory() const override {
    auto it = vars_.find("PWD");
    return it == vars_.end() ? "/" : it->second;
  }
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace bridge
