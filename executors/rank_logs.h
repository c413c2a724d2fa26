// Per-rank log files of a job dir (rank<N>.log, node<N>.log), shared by executors whose
// ranks write there (local, Slurm): printing them for `logs`, their tails for --wait's
// progress and for `why`, and the checks every executor makes on a LogQuery.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "executors/executor.h"
#include "jobs/failure_triage.h"
#include "system/clock.h"

namespace bridge {

// The rank or node a query names exists in `job` (exit 2, kExitUsage, otherwise: a usage
// error, the same on every executor). Returns false with the reason in `diags`.
bool check_log_query(const JobRecord& job, const LogQuery& query, Diagnostics& diags);

// Ranks per node of a job (its ranks over its nodes, at least 1): rank r runs on node
// r / ranks_per_node (block distribution, which every executor uses).
int ranks_per_node(const JobRecord& job);

// Prints the rank<N>.log files of `job_dir` that `query` selects; with more than one, each
// line is prefixed "[rank N host] " (`host_of_node(node)`; "" leaves the host out). With
// `query.follow`, new lines are printed as they arrive until `still_running` returns false
// (checked about twice a second, waiting through `sleeper`), then the remainder is drained,
// an unterminated last line included (system/log_tail.h).
int print_rank_logs(const JobRecord& job, const LogQuery& query,
                    const std::function<std::string(int)>& host_of_node, std::ostream& out,
                    Diagnostics& diags, Sleeper& sleeper,
                    const std::function<bool()>& still_running);

// What `logs -f` says while a job has not started: once that it waits and the scheduler's
// reason, again when the reason changes, and once when it starts.
class PendingNotice {
 public:
  void update(const JobRecord& job, const JobStatus& status, std::ostream& notes);

 private:
  bool waiting_ = false;
  std::string reason_;
};

// The hosts of a job's nodes in node-index order, from the `hosts` file the Slurm batch
// script writes into the job dir ({} when there is none: not started, or an older job).
std::vector<std::string> job_dir_hosts(const std::string& job_dir);

// The evidence a job dir holds for `why`: one unit per rank<N>.log (or node<N>.log under a
// per-node launcher), with the last kTriageTailLines lines of each. Exit codes, hosts and
// the failure order are the executor's to add.
std::vector<RankEvidence> job_dir_evidence(const std::string& job_dir);

// The same for one unit only: rank<N>.log, or node<N>.log with `per_node` (no lines when the
// file is missing).
RankEvidence job_dir_unit_evidence(const std::string& job_dir, int n, bool per_node);

}  // namespace bridge
