#include "executors/rank_env.h"

#include "plan/plan_confirm.h"
#include "probe/env_hash.h"

namespace bridge {

std::string expected_env_spec(const LaunchEnv& env) {
  std::string spec;
  for (const auto& v : env.vars) {
    if (!spec.empty()) spec += ';';
    spec += (v.secret || v.expand) ? v.name + "?" : v.name + "=" + fnv1a64_hex(v.value);
  }
  return spec;
}

std::string overlap_grad_reduce_flag(const Plan& plan) {
  if (!plan.overlap || !plan.overlap->overlap.overlap_grad_reduce.value) return {};
  return *plan.overlap->overlap.overlap_grad_reduce.value ? "1" : "0";
}

std::vector<std::string> rank_command(const Plan& plan, const std::string& files_dir,
                                      const std::string& verdict_file) {
  std::vector<std::string> cmd = plan.executor_changes.command_prefix;
  for (auto& word : confirmed_argv(plan, runtime_argv(plan), files_dir, verdict_file))
    cmd.push_back(std::move(word));
  return cmd;
}

std::vector<std::pair<std::string, std::string>> bridge_check_vars(const Plan& plan) {
  std::vector<std::pair<std::string, std::string>> vars;
  vars.emplace_back("BRIDGE_EXPECTED_ENV", expected_env_spec(plan.env));
  std::string flag = overlap_grad_reduce_flag(plan);
  if (!flag.empty()) vars.emplace_back("BRIDGE_OVERLAP_GRAD_REDUCE", flag);
  if (!plan.expected_plan.empty()) {
    std::string spec;
    for (const auto& [key, value] : plan.expected_plan)
      spec += (spec.empty() ? "" : ";") + key + "=" + value;
    vars.emplace_back("BRIDGE_EXPECTED_PLAN", spec);
  }
  return vars;
}

bool runs_bridge_probe(const Plan& plan) {
  if (plan.adapter == "probe") return true;
  std::vector<std::string> argv = runtime_argv(plan);
  if (argv.empty()) return false;
  const std::string& program = argv.front();
  size_t slash = program.rfind('/');
  return (slash == std::string::npos ? program : program.substr(slash + 1)) == "bridge-probe";
}

}  // namespace bridge
