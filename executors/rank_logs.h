// Printing the per-rank log files of a job dir (rank<N>.log), shared by executors whose
// ranks write there (local, Slurm).
//
// With `rank` only that file is printed; otherwise every rank's file, each line prefixed
// "[rank N] ". With `follow`, new lines are printed as they arrive until `still_running`
// returns false (checked about twice a second, waiting through `sleeper`), then the
// remainder is drained, an unterminated last line included (executors/log_tail.h).
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "launcher/clock.h"
#include "launcher/diagnostics.h"
#include "launcher/jobs/failure_triage.h"

namespace bridge {

int print_rank_logs(const std::string& job_dir, std::optional<int> rank, bool follow,
                    std::ostream& out, Diagnostics& diags, Sleeper& sleeper,
                    const std::function<bool()>& still_running);

// The evidence a job dir holds for `why`: one unit per rank<N>.log (or node<N>.log under a
// per-node launcher), with the last kTriageTailLines lines of each. Exit codes, hosts and
// the failure order are the executor's to add.
std::vector<RankEvidence> job_dir_evidence(const std::string& job_dir);

}  // namespace bridge
