// ProcessGroup: runs the ranks of a local job as one POSIX process group.
//
// Each rank is fork/exec'ed with an explicit environment into a shared process group, its
// stdout+stderr read through one pipe, split into lines and handed to a LineSink with the
// rank number (so output is never interleaved within a line). When a rank fails, or the
// launcher gets SIGINT/SIGTERM, the whole group gets the signal, then SIGKILL after the
// grace period; run() returns only when every process of the group is gone. With
// `subreaper` (the default) the launcher is a child subreaper while the ranks run, so
// processes they started outside the group (`setsid daemon &`) are re-parented to it and
// stopped when the ranks are done (SIGTERM, SIGKILL after 1 s); none outlives the job.
// What this cannot hold: descendants of a launcher that is itself SIGKILLed (only the ranks
// get SIGKILL then, through PR_SET_PDEATHSIG).
// Why not Boost.Process: a job needs setpgid, group-wide signals and one poll() loop over
// all rank pipes plus a signal self-pipe; Boost.Process 1.74 offers none of these directly.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bridge {

struct RankSpec {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=VALUE", the complete environment
};

struct RankOutcome {
  int rank = 0;
  int exit_code = 0;  // valid when !signaled
  int signal = 0;     // valid when signaled
  bool signaled = false;
  bool ok() const { return !signaled && exit_code == 0; }
};

struct GroupResult {
  std::vector<RankOutcome> ranks;
  std::optional<RankOutcome> first_failure;  // the first rank to fail on its own
  bool interrupted = false;                  // SIGINT/SIGTERM reached the launcher
  int interrupt_signal = 0;
  bool timed_out = false;
  bool stopped_on_request = false;  // GroupOptions::stop_requested said so (the watchdog)
  std::string spawn_error;          // exec/fork failure, "" when every rank started
  int leftovers_stopped = 0;        // processes outside the group stopped after the ranks
  bool leftovers_tracked = false;   // the launcher could become a child subreaper
};

using LineSink = std::function<void(int rank, const std::string& line)>;

struct GroupOptions {
  std::chrono::milliseconds grace{5000};
  std::chrono::milliseconds timeout{0};  // 0 = none
  bool subreaper = true;  // stop what the ranks left running outside the group (see above)
  // Asked about every 50 ms while no shutdown runs: true stops the group as a timeout does
  // (SIGTERM, SIGKILL after the grace period). The local executor's hang watchdog.
  std::function<bool()> stop_requested;
};

GroupResult run_process_group(const std::vector<RankSpec>& ranks, const GroupOptions& options,
                              const LineSink& sink);

}  // namespace bridge
