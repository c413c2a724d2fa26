// What every rank receives, shared by all executors: the planned launch env, the
// rendezvous variables, and the probe's self-check variables.
//
// expected_env_spec builds BRIDGE_EXPECTED_ENV (`NAME=FNV1A64HEX` entries joined by ';',
// `NAME?` for secrets and shell-expanded values whose final bytes only the rank knows), so
// bridge-probe can prove on every rank that the plan's env arrived byte-for-byte.
#pragma once

#include <string>
#include <vector>

#include "base/shell_quote.h"  // shell_quote, shell_word: used with these vars
#include "plan/plan.h"

namespace bridge {

std::string expected_env_spec(const LaunchEnv& env);

// "1" or "0" from the resolved overlap_grad_reduce (absent when unresolved).
std::string overlap_grad_reduce_flag(const Plan& plan);

// The runtime command line of one rank: command prefix (e.g. nsys), runtime.command,
// runtime.args, then the plan's runtime arguments. With `files_dir` (where the ranks find
// plan_confirmation_files: the job's directory, or the pods' ConfigMap mount) the runtime
// starts through the plan
// confirmation when the plan asks for it (plan/plan_confirm.h); `verdict_file` when the
// verdict goes elsewhere than into `files_dir`.
std::vector<std::string> rank_command(const Plan& plan, const std::string& files_dir = "",
                                      const std::string& verdict_file = "");

// The job's launch variables (name, value) that are not secret and not rendezvous-related,
// plus BRIDGE_EXPECTED_ENV, BRIDGE_OVERLAP_GRAD_REDUCE and (probe adapter) BRIDGE_EXPECTED_PLAN:
// what every rank gets verbatim.
std::vector<std::pair<std::string, std::string>> bridge_check_vars(const Plan& plan);

// True when the ranks run bridge-probe (the probe adapter, or a command whose program is
// bridge-probe): the only runtime that reads bridge_check_vars.
bool runs_bridge_probe(const Plan& plan);

}  // namespace bridge
