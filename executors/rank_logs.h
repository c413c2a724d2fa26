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

namespace bridge {

int print_rank_logs(const std::string& job_dir, std::optional<int> rank, bool follow,
                    std::ostream& out, Diagnostics& diags, Sleeper& sleeper,
                    const std::function<bool()>& still_running);

}  // namespace bridge
