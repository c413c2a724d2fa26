// Executors: turn a Plan into something that runs.
//
// Contract:
// - An executor is built with the seams it uses (ExecutorServices: command runner, host env,
//   clock, sleeper, logger, where bridge-probe lives); it reads no process globals.
// - `render` is pure and deterministic: the plan and the SubmissionIdentity the CLI fixed
//   once (job id; the Kubernetes name suffix derives from it) give the same bytes every
//   time. It returns a typed PreparedJob: what --dry-run prints and golden tests compare,
//   plus everything `submit` needs, so submit never renders again or parses text.
// - `submit` performs the side effects through the seams; `status`, `logs` and `cancel`
//   work on registry records. Executors are listed in one name -> factory table with traits,
//   so callers ask a trait ("does it run here?") instead of comparing names. The table is
//   defined by executor_registry() and read there only by the composition root
//   (launcher/services.cpp): callers get it as Services::executors and pass it in.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "jobs/failure_triage.h"
#include "jobs/job_record.h"
#include "model/executor_kind.h"
#include "plan/plan.h"
#include "plan/plan_confirm.h"
#include "system/clock.h"
#include "system/command_runner.h"
#include "system/host_env.h"
#include "system/log_tail.h"

namespace spdlog {
class logger;
}

namespace bridge {

// What executors may use from the outside world; built once in main.
struct ExecutorServices {
  CommandRunner& runner;
  const HostEnvironment& env;
  const Clock& clock;
  Sleeper& sleeper;
  spdlog::logger& log;
  // The directory holding the bridge-probe built with this bridge-launch ("" when none):
  // a runtime command `bridge-probe` runs that binary.
  std::string probe_dir;
};

// The per-submission inputs of render, fixed once by the CLI before anything is rendered.
struct SubmissionIdentity {
  std::string job_id;  // the registry id; "<name>-dry-run" for --dry-run, validate and plan
  // The job's place among the jobs one command submits (0; an ablate's jobs 0, 1, 2, ...):
  // the local executor's scheduler id is "<launcher pid>.<sequence>", one per job.
  int sequence = 0;
};

struct SubmitOptions {
  bool wait = true;  // local always waits; schedulers only with --wait
  // The process ends once this submission returned (a launch without --wait, alone in its
  // command): a scheduler command's teardown after its answer need not be waited for.
  bool ends_after = false;
  int verbosity = 0;
  // Writes the job's pending registry entry; false: submit nothing and return not accepted
  // (the reason is in the diagnostics). A PreparedJob whose calls_before_submit() is true
  // calls it exactly once, before the scheduler can take the job, while its submission
  // command starts up (Slurm: sbatch starts and waits for the script on stdin), so the write
  // overlaps that start-up; for any other job the CLI calls it before submit.
  std::function<bool()> before_submit;
  // Completes that entry (knobs, plan) and flushes it to disk (fsync); a failure is a
  // warning, as the submission is under way. A PreparedJob that calls before_submit calls
  // this once its submission command has all its input, so that the work overlaps the
  // command's exchange with the scheduler (Slurm: sbatch has its script); for any other job
  // the CLI completes and flushes the entry itself right after before_submit, where a
  // failure stops the launch before anything runs.
  std::function<void()> while_submitting;
};

// What a submission produced. `accepted` means the scheduler took the job (or the local
// ranks started): only then does the registry get an entry.
struct SubmitResult {
  int exit_code = 0;
  bool accepted = false;
  std::string scheduler_id;
  std::string job_dir;
  JobState final_state = JobState::kUnknown;  // when the executor waited for the end
  std::string state_detail;
  std::optional<int> exit_code_of_rank;  // the failing rank's code (128+N for signal N)
  // Where status/logs/cancel find the job again (Kubernetes: kubeconfig context and
  // namespace; "" elsewhere). The CLI copies them into the registry entry.
  std::string context;
  std::string namespace_;
};

using OnAccepted = std::function<void(const SubmitResult&)>;

// What `logs` shows. Filters combine: a rank or a node (not both; the CLI refuses that),
// then the last `tail` lines of each log, then the lines `grep` keeps. Each line of a job
// with more than one log is prefixed "[rank N host] " (per-node logs: "[node N host] ").
struct LogQuery {
  std::optional<int> rank;
  std::optional<int> node;  // node index, 0 .. nodes-1 (Slurm's SLURM_NODEID order)
  std::optional<size_t> tail;
  LineFilter grep;
  bool follow = false;
};

// A rendered job that submits itself. It refers to the Plan it was rendered from, which
// must outlive it.
class PreparedJob {
 public:
  virtual ~PreparedJob() = default;
  const std::string& dry_run_text() const { return dry_run_text_; }
  // Whether submit calls SubmitOptions::before_submit itself (see there).
  bool calls_before_submit() const { return calls_before_submit_; }
  // Runs or submits the job. `on_accepted` is called once the scheduler accepted it (before
  // any waiting), so the CLI can write the registry entry while the job runs.
  virtual SubmitResult submit(const SubmitOptions& options, std::ostream& out, Diagnostics& diags,
                              const OnAccepted& on_accepted) const = 0;

 protected:
  std::string dry_run_text_;  // exactly what --dry-run prints; never a secret value
  bool calls_before_submit_ = false;
};

// A PreparedJob whose submit calls back into the executor that rendered it, with what the
// render bound (the plan, the identity, the rendered artifacts). Every executor uses it.
class BoundJob : public PreparedJob {
 public:
  using SubmitFn = std::function<SubmitResult(const SubmitOptions&, std::ostream&, Diagnostics&,
                                              const OnAccepted&)>;
  BoundJob(std::string dry_run_text, SubmitFn submit, bool calls_before_submit = false)
      : submit_(std::move(submit)) {
    dry_run_text_ = std::move(dry_run_text);
    calls_before_submit_ = calls_before_submit;
  }
  SubmitResult submit(const SubmitOptions& options, std::ostream& out, Diagnostics& diags,
                      const OnAccepted& on_accepted) const override {
    return submit_(options, out, diags, on_accepted);
  }

 private:
  SubmitFn submit_;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Called before planning when the command will submit to this executor: starts what a
  // submission needs that does not depend on the plan (Slurm: an sbatch waiting for its
  // script on stdin), so that its start-up overlaps planning. It never submits anything by
  // itself: an executor destroyed without submitting stops what it started. The default
  // starts nothing.
  virtual void prepare_to_submit() {}
  // nullptr, with the reasons in `diags`, when the plan cannot run on this executor.
  virtual std::unique_ptr<PreparedJob> render(const Plan& plan, const SubmissionIdentity& identity,
                                              Diagnostics& diags) const = 0;
  // States of many jobs of this executor with ONE scheduler query (not one per job).
  virtual std::vector<JobStatus> status(const std::vector<JobRecord>& jobs,
                                        Diagnostics& diags) const = 0;
  // The state of one job by the cheapest query the scheduler offers: what --wait asks,
  // possibly every few seconds for days. The same answer as status({job}).
  virtual JobStatus poll(const JobRecord& job, Diagnostics& diags) const {
    return status({job}, diags).front();
  }
  // Prints a job's logs to `out` as `query` selects, optionally following until the job
  // ends. Following a pending job says on `notes` (stderr) that it waits and why, then
  // follows once it starts.
  virtual int logs(const JobRecord& job, const LogQuery& query, std::ostream& out,
                   std::ostream& notes, Diagnostics& diags) const = 0;
  // The last lines (at most `max_lines`) of the log that holds `rank`'s output, for the live
  // progress of --wait. Never waits; {} when there is none (yet). The default reads the job
  // dir (rank<N>.log, or node<N>.log under a per-node launcher).
  virtual std::vector<std::string> rank_log_tail(const JobRecord& job, int rank,
                                                 size_t max_lines) const;
  // The plan confirmation's verdict (plan/plan_confirm.h) of a job whose recorded plan
  // confirms; nullopt when there is none (yet), or for any other job. The default reads the
  // job dir; an executor whose job dir may not be visible here also looks where the job's
  // output is (Kubernetes: the head of pod 0's log). Never waits for the job.
  virtual std::optional<PlanConfirmationVerdict> plan_confirmation(const JobRecord& job) const;
  virtual int cancel(const JobRecord& job, Diagnostics& diags) const = 0;
  // The scheduler's id of what cancel and status act on now: the recorded one, except for a
  // job resubmitted after a failure (a Slurm retry: the newest attempt's id, which cancel
  // stops and `cancel` names).
  virtual std::string current_scheduler_id(const JobRecord& job) const { return job.scheduler_id; }
  // One line per attempt of a job that was resubmitted after a failure (Slurm retries,
  // executors/slurm_retry.h), for `status JOB`; {} when there is nothing to tell.
  virtual std::vector<std::string> attempt_history(const JobRecord&) const { return {}; }
  // What `why` reads: per rank (or node/pod) how it ended, where, in which order the
  // scheduler saw the failures, and the last lines of its log. Never waits for the job.
  virtual FailureEvidence failure_evidence(const JobRecord& job, Diagnostics& diags) const = 0;
  // The cheap part of it, for the summary `status JOB` and --wait print: the scheduler's
  // report of the failing units and those units' logs only (a 4096-rank job's other logs are
  // `why`'s to read). The default is the whole evidence.
  virtual FailureEvidence failure_summary_evidence(const JobRecord& job, Diagnostics& diags) const {
    return failure_evidence(job, diags);
  }
};

// The implementation of one row of model/executor_kind.h (its traits are there, named
// `kind`: what every layer asks instead of comparing names).
struct ExecutorInfo {
  const char* name;
  const char* description;
  std::unique_ptr<Executor> (*make)(const ExecutorServices& services);
  const ExecutorKind& kind() const { return *find_executor_kind(name); }
};

// The table of executors, in the order `--executor` documents them: where it is defined. Only
// the composition root reads it (Services::executors); everything else is handed a table.
const std::vector<ExecutorInfo>& executor_registry();
// The row of `table` named `name`, or nullptr.
const ExecutorInfo* find_executor(const std::vector<ExecutorInfo>& table, const std::string& name);
// An executor made by the row of `table` named `name`, or nullptr.
std::unique_ptr<Executor> make_executor(const std::vector<ExecutorInfo>& table,
                                        const std::string& name, const ExecutorServices& services);

// The identity --dry-run, validate and plan render with (no registry id is reserved).
SubmissionIdentity dry_run_identity(const Plan& plan);

}  // namespace bridge
