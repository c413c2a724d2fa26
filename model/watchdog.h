// The hang watchdog (runtime.watchdog, docs/long-jobs.md): when a job whose ranks stopped
// printing iteration lines is ended, and when one that finished training but does not exit is.
//
// Contract:
// - resolve_watchdog() is pure: the recipe's keys over the defaults below, each value with
//   where it came from. Unset `enabled` is on where the runtime prints Megatron iteration
//   lines (the megatron_bridge, hydra and probe adapters) and off under `none`, whose command
//   may print none: a watchdog would end a healthy job there.
// - The same settings drive every executor's enforcement (the Slurm batch script, the local
//   launcher, the entrypoint of the Kubernetes pods); jobs/job_watchdog.h holds what they
//   record when they end a job.
// - kIterationLineEre is the one definition of an iteration line the watchdog counts as
//   progress, an ERE both std::regex (extended) and awk read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/recipe.h"

namespace bridge {

// Megatron's "iteration  20/  60 |" (bridge-probe prints the same).
inline constexpr const char* kIterationLineEre =
    "iteration[ \t]+[0-9]+[ \t]*/[ \t]*[0-9]+[ \t]*[|]";

inline constexpr int64_t kMaxWatchdogSeconds = int64_t{30} * 24 * 3600;  // 30 days

// Defaults and their reasons (docs/long-jobs.md repeats them).
// Start-up: building dataset indexes, loading a checkpoint of a large model and compiling
// can take well over half an hour before the first iteration line.
inline constexpr int64_t kDefaultStartupTimeout = 3600;
// Progress: a checkpoint save or an evaluation runs between two iteration lines; 30 minutes
// is above both for large models and above torch's default 10-minute collective timeout, so
// a rank that times out on its own is seen first.
inline constexpr int64_t kDefaultProgressTimeout = 1800;
// Teardown: Megatron saves its final checkpoint after the last iteration line, then async
// saves finalize and trackers upload: as long as a save may take between two lines.
inline constexpr int64_t kDefaultTeardownGrace = kDefaultProgressTimeout;
// The exit code of a Kubernetes pod whose ranks the watchdog ended for a hang (timeout(1)'s):
// the pod fails, and its termination message holds the verdict.
inline constexpr int kWatchdogHangExitCode = 124;
// After the watchdog's SIGTERM, the ranks get this long to exit before SIGKILL.
inline constexpr int64_t kWatchdogKillAfter = 20;

struct WatchdogSettings {
  bool enabled = false;
  int64_t startup_timeout = kDefaultStartupTimeout;
  int64_t progress_timeout = kDefaultProgressTimeout;
  int64_t teardown_grace = kDefaultTeardownGrace;
  std::string source;  // "default", "runtime.watchdog", "off under adapter none"
  // Seconds between two looks at the progress log: a tenth of the shortest limit, 1..30.
  int64_t poll_seconds() const;
};

// Every executor enforces it: the local launcher, the Slurm batch script, the Kubernetes pods.
WatchdogSettings resolve_watchdog(const WatchdogSpec& spec, const std::string& adapter);

struct IterationMark {
  int iteration = 0;
  int total = 0;
};

// The iteration an iteration line reports (kIterationLineEre); nullopt for any other line
// and for lines over 4096 bytes.
std::optional<IterationMark> iteration_of_line(std::string_view line);

// "startup 3600 s, progress 1800 s, teardown grace 300 s" or "off".
std::string watchdog_text(const WatchdogSettings& w);

}  // namespace bridge
