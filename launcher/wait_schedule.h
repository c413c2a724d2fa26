// How often `--wait` asks the scheduler about a job: a good citizen of slurmctld and the
// Kubernetes API server, yet quick to notice the end.
//
// Two early polls (1 s and 3 s after submission, when a state change is likely: the job
// starts, or fails at once), then every max(6 s, elapsed / 10), at most every 60 s. So the
// end of a job is noticed at most 6 s late for jobs up to a minute and at most 10% of its
// run time late after that, and a 60-second job costs about a dozen polls (one squeue each,
// two controller RPCs) instead of thirty.
#pragma once

#include <algorithm>
#include <chrono>

namespace bridge {

inline std::chrono::milliseconds wait_poll_delay(std::chrono::milliseconds elapsed,
                                                 int polls_done) {
  using std::chrono::milliseconds;
  if (polls_done == 0) return milliseconds(1000);
  if (polls_done == 1) return std::max(milliseconds(0), milliseconds(3000) - elapsed);
  return std::clamp(elapsed / 10, milliseconds(6000), milliseconds(60000));
}

}  // namespace bridge
