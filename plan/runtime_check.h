// The runtime check: a plan through the config code of the Megatron-Bridge installed in a
// Python (`--runtime-check PYTHON`, recipe key runtime.check).
//
// bridge-launch's own rules describe one Megatron-Bridge release; a user's container often
// holds a newer or a patched one. When asked, validate, plan and a launch run the program
// embedded from python/bridge_config_check.py in that Python, on this machine: no GPU, no
// distributed start, no training. It builds the config from exactly the job's argv (the words
// of runtime.command after the script, runtime.args and the adapter's words: a recipe named in
// the command is the one checked), finalises it at the plan's world size and the GPU's
// capability, and answers which words the runtime refuses and which planned values it holds
// differently. It runs offline (HF_HUB_OFFLINE=1, the user's HF_HOME): a recipe whose Hugging
// Face config is not in that cache is refused in seconds with the model id and how to cache
// it, since the job's ranks need the same config.
//
// Contract of run_runtime_check: when the plan asks for the check (runtime.check.python set)
// and is complete, it runs the program once through `runner` with runtime.check.timeout
// (default kDefaultRuntimeCheckSeconds) and records every finding as an error diagnostic at
// the recipe line or override that set the value (the file itself when no single line did),
// with the runtime's own message. The check's own failure (the program cannot start, does
// not answer in time, Megatron-Bridge does not import there) is one error that says so.
// Adapters other than megatron_bridge and hydra forward nothing Megatron-Bridge reads: the
// check is skipped with a warning. An empty runtime.check.python (`--runtime-check ""`) is
// an error, never a silent "no check". Fills plan.runtime_check. Nothing else has side
// effects.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/diagnostics.h"
#include "plan/plan.h"
#include "system/clock.h"
#include "system/command_runner.h"

namespace bridge {

inline constexpr int kDefaultRuntimeCheckSeconds = 180;

bool runtime_check_asked(const Plan& plan);

// The request the check program reads on stdin (see python/bridge_config_check.py).
std::string runtime_check_request(const Plan& plan);
// The same request as JSON (the plan confirmation adds to it).
nlohmann::json runtime_check_request_json(const Plan& plan);

// Whether `argv` is `python SCRIPT ...`: the shape whose words after the script are the
// script's own arguments (and in front of whose script the confirmation can start).
bool is_python_script_command(const std::vector<std::string>& argv);

// Turns the program's answer (one JSON object) into diagnostics and the outcome.
RuntimeCheckOutcome read_runtime_check_answer(const Plan& plan, const std::string& answer,
                                              Diagnostics& diags);

void run_runtime_check(Plan& plan, CommandRunner& runner, const Clock& clock, Diagnostics& diags);

}  // namespace bridge
