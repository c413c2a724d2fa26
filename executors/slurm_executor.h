// The Slurm executor: one sbatch script per job (see slurm_script.h for the pure rendering),
// submitted with `sbatch --parsable`, followed with squeue/sacct/scontrol, logs read from
// the per-rank files on the shared file system, cancelled with scancel.
//
// Contract (docs/executors/slurm.md has the user-facing version):
// - render: pure; the PreparedJob's dry_run_text is the exact script sbatch receives.
// - submit: creates `<plan.job_dir>` (sbatch writes slurm-<id>.out/.err there; the script
//   itself creates `<plan.job_dir>/<id>/`), runs `sbatch --parsable` with the script on stdin
//   and the secrets in sbatch's environment only, calls on_accepted exactly once when Slurm
//   returned a job id, never otherwise. Scheduler errors are reported with Slurm's own
//   message (exit 1) and leave nothing behind (a job dir created for this submission is
//   removed again). Transient errors are retried with bounded backoff; a submission that
//   timed out but did create a job is found by its unique --comment and not submitted twice.
// - status: ONE squeue call for all jobs; jobs squeue does not know go to sacct (skipped once
//   "accounting storage is disabled" was seen), then to ONE `scontrol show job` call.
// - logs: `<job_dir>/rank<N>.log` (srun launcher) or `node<N>.log` (torchrun), plus the batch
//   script's slurm-<id>.out/.err; `follow` polls until the job is final.
// - cancel: `scancel <id>`.
// All scheduler commands go through the CommandRunner of ExecutorServices and waits through
// its Sleeper; tests pass fakes of both (and a shorter SlurmRetryPolicy).
#pragma once

#include <memory>
#include <string>

#include "executors/executor.h"
#include "executors/slurm_scheduler.h"

namespace bridge {

// A runtime command `bridge-probe` is rendered with ExecutorServices::probe_dir, so the
// cluster runs the probe built alongside bridge-launch (job dir and build tree are on a
// shared file system).
std::unique_ptr<Executor> make_slurm_executor(const ExecutorServices& services);
std::unique_ptr<Executor> make_slurm_executor(const ExecutorServices& services,
                                              SlurmRetryPolicy policy);

}  // namespace bridge
