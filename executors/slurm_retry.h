// Resubmission of a failed Slurm job after a transient failure, decided in the batch script
// (docs/executors/slurm.md, "Retries"), and the record of its attempts that `status` and `why`
// read back.
//
// Contract:
// - slurm_retry(plan) is the policy the script carries: how many retries, which failure
//   classes (model/retry_policy.h), whether the next attempt excludes the blamed node.
// - retry_triage_program(policy, per_node) is pure: an awk program that finds, in the job
//   dir of the attempt that just ended, the failure `why` would name first (srun's task
//   reports in the batch stderr, in order; each reported unit's last kTriageTailLines lines,
//   classified by error_signatures() in table order, the generic Python exception check at its
//   place) and prints one line "<signature> <kind> <class> <host> <unit>" ("-" for unknown).
//   It reads BRIDGE_JOB_DIR and SLURM_JOB_ID from the environment, so no path is quoted into
//   it. It differs from `why` in one way only: a hang is blamed on the first rank reporting
//   it, not on the rank it waited for.
// - The script appends one line per event to <job dir>/attempts: `start`, and `retry` or
//   `end`, each followed by key=value words without blanks. parse_slurm_attempts reads them
//   back, tolerating unknown keys and torn lines (a reader never fails on this file).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"

namespace bridge {

struct SlurmRetry {
  int64_t retries = 0;                // attempts after the first
  std::vector<std::string> retry_on;  // class ids, or {"any"}
  bool exclude_failed_nodes = true;
  // The hard cap on attempts: retries + 1 without checkpoints (every failure counts); with
  // them, attempts that moved the newest checkpoint do not count against `retries`, and
  // kProgressAttemptFactor x (retries + 1) attempts in all still end a job that never stops
  // failing.
  int64_t max_attempts = 1;
};

inline constexpr int64_t kProgressAttemptFactor = 4;

SlurmRetry slurm_retry(const Plan& plan);

// The awk program described above (unquoted; the caller quotes it for the shell).
std::string retry_triage_program(const SlurmRetry& policy, bool per_node);

// `text` as an awk string literal, as the program's table spells its needles: in double
// quotes, `\` and `"` escaped, control bytes (and DEL) as three-digit octal escapes.
std::string awk_string_literal(std::string_view text);

// The file, in a job dir, that lists the attempts.
inline constexpr const char* kAttemptsFile = "attempts";

struct SlurmAttempt {
  int number = 0;
  int of = 0;              // attempts allowed in all (retries + 1); 0 unknown
  std::string slurm_job;   // this attempt's Slurm job id
  std::string nodes;       // its allocation (Slurm's node list), "" until it started
  std::string started_at;  // ISO 8601 UTC, "" until it started
  bool ended = false;      // a `retry` or `end` line was written for it
  std::string ended_at;
  std::optional<int> rc;       // srun's exit status
  std::string signature;       // `why`'s signature of the failure, "" unknown
  std::string failure_class;   // the retry class it belongs to, "" none
  std::string host;            // the node it was blamed on, "" unknown
  std::string unit;            // "rank 3" / "node 1", "" unknown
  std::string excluded;        // node(s) the next attempt excludes because of it, "" none
  std::string next_slurm_job;  // the attempt submitted after it, "" none
  std::string not_retried;     // why not ("not-retried", "no-attempts-left", ...), "" none
  std::optional<long long> checkpoint_at_start;  // newest checkpoint's iteration, -1 none
  std::optional<long long> checkpoint_at_end;
  std::string progress;  // "yes": it moved the newest checkpoint (not counted), "no", "" unknown
};

// The attempts in order of their number; {} for a job dir without the file, or whose
// `attempts` is not a regular file of at most 1 MiB (system/file_read.h).
std::vector<SlurmAttempt> parse_slurm_attempts(const std::string& text);
std::vector<SlurmAttempt> read_slurm_attempts(const std::string& job_dir);

// The Slurm id of the newest attempt (submitted, maybe not started), "" when the list is empty.
std::string latest_slurm_job(const std::vector<SlurmAttempt>& attempts);
// The Slurm id of the newest attempt that started (whose logs the job dir holds), "" none.
std::string started_slurm_job(const std::vector<SlurmAttempt>& attempts);

// What `status` says instead of Slurm's reason for an attempt after the first: "attempt 2 of 3
// after nccl-timeout on node1 (excluded)"; "" for a first attempt.
std::string attempt_headline(const std::vector<SlurmAttempt>& attempts);

// One line per attempt, for `status JOB`: "1: Slurm job 134 on node1, failed (exit 1):
// nccl-timeout on node1 (rank 3); attempt 2 is Slurm job 135, node1 excluded".
std::vector<std::string> attempt_lines(const std::vector<SlurmAttempt>& attempts);

}  // namespace bridge
