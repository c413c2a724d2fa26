// Job progress and times, as `--wait` and `status` show them.
//
// Contract:
// - Progress comes from Megatron iteration lines ("iteration 3/ 8 | ... | elapsed time per
//   iteration (ms): 412.7 | ..."), which Megatron prints on the LAST rank (print_rank_last)
//   and bridge-probe on rank 0. progress_ranks lists, in order, the ranks whose logs the live
//   line tries: the plan's progress rank, then the last rank, then rank 0 (so a job whose
//   iteration lines come from an unexpected one of those still shows them). The first whose
//   log holds an iteration line is followed.
// - The ETA is (total - done) x the mean step time of the last (up to) 5 iterations: the
//   first iterations (warm-up, compilation) are slower and would overstate it.
// - Times are ISO 8601 UTC text, as the registry stores them; durations print as
//   "45s", "3m 07s", "2h 05m", "3d 04h". All functions are pure (the caller passes "now").
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "jobs/job_record.h"

namespace bridge {

struct JobProgress {
  int rank = 0;  // whose log the numbers come from
  int iteration = 0;
  int total = 0;
  std::optional<double> step_ms;            // mean of the recent steps
  std::optional<std::chrono::seconds> eta;  // until iteration == total
};

// The ranks whose log tails the live progress (and the hang watchdog) reads, most likely
// first, without repeats: the plan's progress rank, the last rank, rank 0.
std::vector<int> progress_ranks(int progress_rank, int ranks);
std::vector<int> progress_ranks(const JobRecord& job);

// Progress from the tail of one rank's log; nullopt when it holds no iteration line.
std::optional<JobProgress> progress_from_lines(int rank, const std::vector<std::string>& lines);

// "iteration 5/8 (rank 15), 0.41 s/step, ETA 1s".
std::string progress_text(const JobProgress& p);

using SystemTime = std::chrono::system_clock::time_point;

std::optional<SystemTime> parse_utc_time(const std::string& iso8601);
std::string utc_time_text(SystemTime t);  // "2026-11-30T20:15:02Z"
std::string duration_text(std::chrono::seconds d);

// Run time of a job: from started_at to ended_at, or to `now` while it runs; nullopt when
// it has not started (or the times are unknown).
std::optional<std::chrono::seconds> job_elapsed(const JobRecord& job, SystemTime now);

}  // namespace bridge
