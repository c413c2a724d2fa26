// Talking to Slurm's client commands: parsing what sbatch/squeue/sacct/scontrol print,
// mapping Slurm job states onto JobState, and running commands with bounded retries.
//
// Pure functions except SlurmClient::run, which runs commands through the CommandRunner and
// waits through the Sleeper it was built with (tests pass fakes of both).
// Transient errors (see is_transient_slurm_error) are retried; "Unable to contact slurm
// controller" is NOT transient here: the client already retried for MessageTimeout seconds,
// so a stopped controller fails once, in bounded time, with Slurm's own message.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "jobs/job_record.h"
#include "system/clock.h"
#include "system/command_runner.h"

namespace spdlog {
class logger;
}

namespace bridge {

// One job as a Slurm client command reported it.
struct SlurmJobInfo {
  std::string id;
  std::string state;      // Slurm's state name, e.g. "COMPLETED", "CANCELLED"
  std::string reason;     // squeue/scontrol Reason, "" when none
  std::string exit_code;  // "A:B" (exit status : signal), "" when unknown
  // StartTime / EndTime as Slurm prints them ("2026-11-30T20:15:02", local time of the
  // client), "" when not reported. For a pending job they are estimates, for a running one
  // the end is the time limit's: to_job_status keeps only times that happened.
  std::string start_time;
  std::string end_time;
};

// "2026-11-30T20:15:02" (Slurm's local time) -> "2026-11-30T20:15:02Z" (UTC); "" for
// "Unknown", "N/A", "None" or anything that is not such a time.
std::string slurm_time_to_utc(const std::string& slurm_time);

// COMPLETED -> SUCCEEDED; FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE,
// PREEMPTED, SPECIAL_EXIT, REVOKED -> FAILED; CANCELLED (also "CANCELLED by N") -> CANCELLED;
// PENDING, CONFIGURING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD -> PENDING;
// RUNNING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT, RESIZING -> RUNNING;
// anything else -> UNKNOWN.
JobState map_slurm_state(const std::string& state);

// The status bridge-launch reports: state, a detail in Slurm's own words
// ("FAILED (NonZeroExitCode, ExitCode=17:0)") and the exit code when known.
JobStatus to_job_status(const SlurmJobInfo& info);

// `sbatch --parsable` prints "ID" or "ID;CLUSTER"; returns ID when it is a job id.
std::optional<std::string> parse_sbatch_id(const std::string& out);

// `squeue --noheader --format=%i|%T|%r` lines.
std::vector<SlurmJobInfo> parse_squeue(const std::string& out);
// `sacct --noheader --parsable2 --format=JobIDRaw,State,ExitCode` lines (steps skipped).
std::vector<SlurmJobInfo> parse_sacct(const std::string& out);
// `scontrol --oneliner show job` records (one per line).
std::vector<SlurmJobInfo> parse_scontrol_jobs(const std::string& out);

// srun's report of tasks that ended badly, one per line of the batch stderr, in the order srun
// printed them: "srun: error: node2: task 11: Exited with exit code 17",
// "srun: error: node1: tasks 0-7,9: Terminated". Lines over 4 KiB or of another shape are
// skipped; a task list is cut at 65536 tasks.
struct SrunTaskReport {
  std::string host;
  std::vector<int> tasks;
  std::optional<int> exit_code;  // "Exited with exit code N"
  std::optional<int> signal;     // "Terminated", "Killed", "Segmentation fault", "Aborted", ...
  std::string text;              // srun's words after the task list
};
std::vector<SrunTaskReport> parse_srun_task_reports(const std::vector<std::string>& lines);

bool is_transient_slurm_error(const std::string& text);
// The client's message: stderr (else stdout) with blank lines dropped, or why it did not run.
std::string slurm_error_text(const std::string& program, const CommandResult& r);

struct SlurmRetryPolicy {
  int attempts = 3;                               // tries in all, for transient errors
  std::chrono::milliseconds first_backoff{1000};  // doubled after each try
  std::chrono::milliseconds timeout{60000};       // per command
};

// Runs Slurm client commands with the retry policy.
class SlurmClient {
 public:
  SlurmClient(CommandRunner& runner, Sleeper& sleeper, spdlog::logger& log,
              SlurmRetryPolicy policy = {})
      : runner_(runner), sleeper_(sleeper), log_(log), policy_(policy) {}
  // Runs `spec` (its timeout replaced by the policy's), retrying transient failures with
  // backoff. `attempts_made` (optional) receives the number of runs. Before each retry,
  // `settled` (optional) may look around and return true to stop retrying (sbatch uses it
  // to find a job that a timed-out submission did create).
  CommandResult run(CommandSpec spec, int* attempts_made = nullptr,
                    const std::function<bool()>& settled = {}) const;

 private:
  CommandRunner& runner_;
  Sleeper& sleeper_;
  spdlog::logger& log_;  // each retry is logged
  SlurmRetryPolicy policy_;
};

}  // namespace bridge
