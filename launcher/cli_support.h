// Helpers shared by the CLI command files (internal to launcher/).
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "base/diagnostics.h"
#include "executors/executor.h"
#include "jobs/job_progress.h"
#include "jobs/registry.h"
#include "launcher/cli_commands.h"
#include "plan/plan.h"

namespace bridge {

// What `--window` must look like (compare, ablate).
inline constexpr std::string_view kBadWindow =
    "--window must be FIRST:LAST, two iterations with FIRST <= LAST, e.g. 3:8";

PlanRequest make_request(const Options& o);

// Whether the recipe key `dotted_key` ("env", "env.NAME", "env.NAME.value") holds a secret of
// `plan` (an env name the plan does not know counts as one): its values are shown and
// recorded as <secret>.
bool names_secret(const Plan& plan, const std::string& dotted_key);

// The plan of `o`, rendered by its executor as a pre-flight check (nothing is written or
// run): what validate, plan and advise report, so validate ok implies --dry-run ok.
// runtime.code's tree is inspected to `depth` (plan/code_plan.h): plan asks for the hash.
Plan build_checked_plan(const Options& o, const Context& c, Diagnostics& diags,
                        CodeDepth depth = CodeDepth::kList);

// Inspects the plan's runtime.code tree (git through the Services runner; reads only):
// false, with the plan marked incomplete and the reasons in `diags`, when it cannot ship.
// Nothing to do (true) without runtime.code or for a plan that has errors already.
bool inspect_plan_code(Plan& plan, const Context& c, CodeDepth depth, Diagnostics& diags);

// A command's own error (a bad option value, a file it cannot write), not a recipe's (those
// are Diagnostics, printed by print_diagnostics): "bridge-launch: error: MESSAGE" on `err`,
// then each of `more` ("  help: ...", a usage hint) on a line of its own. Every such message
// of launcher/ goes through here, so its prefix and stream are decided in one place.
void report_error(std::ostream& err, std::string_view message,
                  std::initializer_list<std::string_view> more = {});

// Diagnostics to `err`; with errors before submission, the "nothing was submitted" line.
void print_diagnostics(const Diagnostics& diags, std::ostream& err, bool color,
                       bool before_submit = true);

// The live progress of a running job: the newest Megatron iteration line among the logs of
// progress_ranks(job) (jobs/job_progress.h), read through the executor; nullopt
// before the first one.
std::optional<JobProgress> live_progress(const Executor& executor, const JobRecord& job);

// The one-screen failure summary of a finished job (`why` without the log excerpt), printed
// after `--wait` and `status JOB` end on a failure. Prints nothing for other states.
void print_failure_summary(const Executor& executor, const JobRecord& job, std::ostream& out);

// Follows a submitted scheduler job until it ends (adaptive polling, the live line on
// stderr, the failure summary); SIGINT stops the waiting only. Returns the exit code.
int wait_for_job(const Executor& executor, JobRecord& rec, const JobRegistry& reg,
                 const Context& c);
// The same for several jobs of one executor (an ablate): each poll asks the scheduler about
// all the jobs not yet ended with one query. Exit code: 0 when every job succeeded.
int wait_for_jobs(const Executor& executor, const std::vector<JobRecord*>& records,
                  const JobRegistry& reg, const Context& c);

// How launch_planned launches, beyond the plan: `sequence` is the job's place among the
// jobs of this command (SubmissionIdentity::sequence). `prepared` (optional) is an executor
// that prepare_to_submit already ran on: it is used when the plan chose the same executor
// (`prepared_name`), and otherwise dropped unused. `ends_command`: nothing follows this
// launch in its command (a plain launch), so once the job was submitted and reported, or
// the dry-run printed, the process may end there (Services::end_process).
struct LaunchSettings {
  int sequence = 0;
  std::unique_ptr<Executor> prepared;
  std::string prepared_name;
  bool ends_command = false;
};

// What launch_planned did: the exit code, and the registry id once one was reserved ("" when
// the launch stopped before: an invalid plan, --dry-run).
struct LaunchOutcome {
  int exit_code = kExitOk;
  std::string job_id;
};

// Plans and launches `plan` (built from `o`, its diagnostics in `diags`).
LaunchOutcome launch_planned(const Options& o, const Context& c, Plan& plan, Diagnostics& diags,
                             LaunchSettings settings = {});

}  // namespace bridge
