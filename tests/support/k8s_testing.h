// Test support for the Kubernetes executor's unit tests (header-only; not part of
// bridge_core's sources): plans from recipe text, the manifest
// validator, and a small reader for the YAML the executor prints.
//
//   K8sPlan p = k8s_plan(kRecipe);                      // executor "kubernetes"
//   auto m = render_k8s_manifests(*p.plan, {"a1b2"}, p.diags);
//   ScriptedRunner fake;  fake.respond = [](const CommandSpec& s) { ... };  // fake_services.h
//   TestServices use(fake);
//   auto ex = make_executor(executor_registry(), "kubernetes", use.services()); // commands go to
//   the fake
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "system/command_runner.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_services.h"
#include "tests/support/map_environment.h"

namespace bridge::testing {

struct K8sPlan {
  Diagnostics diags;
  std::unique_ptr<Plan> plan;
};

inline std::unique_ptr<K8sPlan> k8s_plan(const std::string& recipe_text,
                                         std::vector<std::string> overrides = {},
                                         std::map<std::string, std::string> host = {}) {
  auto p = std::make_unique<K8sPlan>();
  PlanRequest req;
  req.recipe_path = "recipe.yaml";
  req.overrides = std::move(overrides);
  req.executor = "kubernetes";
  MapEnvironment env(std::move(host));
  env.set("HOME", "/home/test");
  p->plan = std::make_unique<Plan>(
      build_plan_from_text(recipe_text, req, env, plugin_registry(), p->diags));
  return p;
}

// A two-node H100 job running `python train.py` on Kubernetes whose executor.kubernetes
// section ends the text, so that a test appends its own keys (indented four spaces).
inline std::unique_ptr<K8sPlan> k8s_pod_plan(const std::string& executor_keys,
                                             std::vector<std::string> overrides = {}) {
  return k8s_plan(std::string(R"(name: pods
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, train.py]
  pass_overrides: false
  container_image: nvcr.io/nvidia/nemo:25.11
executor:
  kubernetes:
    job_dir: /lustre/jobs
)") + executor_keys,
                  std::move(overrides));
}

// Every diagnostic as `code path: message`, one a line: what a test's failure message shows
// and what its expectations search.
inline std::string diag_lines(const Diagnostics& d) {
  std::string out;
  for (const auto& i : d.items()) out += i.code + " " + i.path + ": " + i.message + "\n";
  return out;
}

inline CommandResult ok_result(std::string out = {}) {
  CommandResult r;
  r.out = std::move(out);
  return r;
}

inline CommandResult failed_result(std::string err, int code = 1) {
  CommandResult r;
  r.exit_code = code;
  r.err = std::move(err);
  return r;
}

// The offline manifest validator of the development machines (outside the repository), or ""
// when it (or /usr/bin/python3) is absent. BRIDGE_K8S_VALIDATE in the environment wins over
// the build's default (CMake option BRIDGE_K8S_VALIDATE, see tests/CMakeLists.txt).
inline std::string k8s_validator() {
  const char* from_env = std::getenv("BRIDGE_K8S_VALIDATE");
  std::string path = from_env && *from_env ? from_env : BRIDGE_K8S_VALIDATE_DEFAULT;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || !std::filesystem::exists("/usr/bin/python3", ec))
    return {};
  return path;
}

inline constexpr const char* kNoValidator =
    "k8s-validate not found (set BRIDGE_K8S_VALIDATE to its path; default: "
    "the CMake option BRIDGE_K8S_VALIDATE) or no /usr/bin/python3: manifest validation "
    "skipped";

// YAML (as yaml-cpp reads it) -> JSON, with quoted scalars kept as strings and plain ones
// typed (int, bool, null) as Kubernetes would read them.
inline nlohmann::json yaml_to_json(const YAML::Node& n) {
  using nlohmann::json;
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& v : n) j.push_back(yaml_to_json(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() != "?") return s;  // quoted or block scalar: a string
      if (s == "true" || s == "false") return s == "true";
      if (s == "null" || s == "~") return nullptr;
      if (!s.empty() && s.find_first_not_of("-0123456789") == std::string::npos && s != "-")
        return std::stoll(s);
      return s;
    }
    default:
      return nullptr;
  }
}

inline std::vector<nlohmann::json> parse_yaml_docs(const std::string& text) {
  std::vector<nlohmann::json> docs;
  for (const auto& d : YAML::LoadAll(text))
    if (!d.IsNull()) docs.push_back(yaml_to_json(d));
  return docs;
}

}  // namespace bridge::testing
