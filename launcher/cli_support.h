// Helpers shared by the CLI command files (internal to launcher/).
#pragma once

#include <ostream>
#include <string>

#include "launcher/cli_commands.h"
#include "launcher/diagnostics.h"
#include "launcher/plan.h"
#include "launcher/registry.h"

namespace bridge {

PlanRequest make_request(const Options& o);

// Diagnostics to `err`; with errors before submission, the "nothing was submitted" line.
void print_diagnostics(const Diagnostics& diags, std::ostream& err, bool color,
                       bool before_submit = true);

// Checks before a submission that the registry can take the entry (no half-done job):
// writes `sample` (the entry's text, so that a nearly full disk is caught too) to a probe
// file and removes it.
bool registry_writable(const JobRegistry& reg, Diagnostics& diags,
                       const std::string& sample = "{}\n");

// "3/8" from the newest Megatron iteration line in the job's rank logs, "" if none yet.
std::string last_iteration_seen(const std::string& job_dir);

// Plans and launches; `job_id` (optional) receives the registry id once chosen.
int launch_planned(const Options& o, const Context& c, Plan& plan, Diagnostics& diags,
                   std::string* job_id);

}  // namespace bridge
