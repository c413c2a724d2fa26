// What the hang watchdog (model/watchdog.h) did to a job, as every executor records it in the
// job dir, and the state machine the local launcher runs.
//
// Contract:
// - <job dir>/watchdog gets one line per verdict, `hang` or `teardown`, followed by key=value
//   words without blanks (stage, iteration, total, waited, limit, attempt, at; node and rank
//   from a pod). The Slurm batch script and the pods' entrypoint write the same words
//   (templates/sbatch.mustache, templates/k8s-watchdog.sh.tmpl). parse_watchdog_events reads them
//   back, tolerating unknown keys and torn lines.
// - watchdog_event_text() is the sentence `why` and `status` show; a hang's starts with
//   "bridge-launch watchdog: hang", the needle of `why`'s `hang` signature
//   (jobs/failure_triage.h), so a hang is named as the job's cause.
// - ProgressWatch is pure: the caller feeds it the lines of the ranks that may print
//   iteration lines (progress_ranks, jobs/job_progress.h), each with its source and the time it
//   saw it, and asks due(now). Before the first iteration line the start-up timeout runs;
//   after it, the progress timeout from the newest line that changed a source's iteration
//   (a lower one too: an in-job restart resumes from an older checkpoint); once the newest
//   iteration is the last (iteration == total, train_iters reached), the teardown grace.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/watchdog.h"

namespace bridge {

inline constexpr const char* kWatchdogFile = "watchdog";

struct WatchdogEvent {
  std::string kind;    // "hang" | "teardown"
  std::string stage;   // hang: "startup" | "progress"
  int iteration = -1;  // the newest iteration seen, -1 none
  int total = 0;
  long long waited = 0;  // seconds without progress (or since the last iteration)
  long long limit = 0;   // the timeout or grace that ran out
  int attempt = 1;
  // Kubernetes: the pod (node rank) whose watchdog acted, and the one rank of it that was not
  // waiting for another when the others were (it stopped first); -1 when not known.
  int node = -1;
  int rank = -1;
  std::string at;  // ISO 8601 UTC
};

std::string watchdog_event_line(const WatchdogEvent& e);
std::vector<WatchdogEvent> parse_watchdog_events(const std::string& text);
// The events in <job dir>/watchdog (bounded read; none when the file is absent or odd).
std::vector<WatchdogEvent> read_watchdog_events(const std::string& job_dir);
// The event of attempt `attempt`, nullopt when the watchdog did not act in it.
std::optional<WatchdogEvent> watchdog_event_of(const std::vector<WatchdogEvent>& events,
                                               int attempt);
std::string watchdog_event_text(const WatchdogEvent& e);
// The sentence for attempt `attempt` of the job in `job_dir`, for FailureEvidence's
// scheduler_lines; nullopt when the watchdog did not act in it.
std::optional<std::string> watchdog_verdict_line(const std::string& job_dir, int attempt);

class ProgressWatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  ProgressWatch(const WatchdogSettings& settings, TimePoint start);
  void on_line(int source, std::string_view line, TimePoint now);
  // The verdict once a limit ran out (kind, stage, iteration, total, waited, limit set).
  std::optional<WatchdogEvent> due(TimePoint now) const;

 private:
  WatchdogSettings settings_;
  TimePoint start_;
  TimePoint last_change_;
  std::map<int, IterationMark> last_;  // per source, its newest iteration line
  int iteration_ = -1;                 // the newest line's, of any source
  int total_ = 0;
};

}  // namespace bridge
