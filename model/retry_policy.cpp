#include "model/retry_policy.h"

namespace bridge {

const std::vector<RetryClass>& retry_classes() {
  // A collective that timed out is a transient fault more often than not (a flaky link, a
  // slow node); `why` names it nccl-timeout when the rank says so itself and
  // watchdog-timeout when torch's watchdog does.
  static const std::vector<RetryClass> kClasses = {
      {"nccl-timeout",
       "an NCCL collective or connection timed out",
       {"nccl-timeout", "watchdog-timeout"},
       true},
      {"gpu-xid",
       "a GPU fault the driver reports (Xid, ECC error, GPU off the bus)",
       {"gpu-xid"},
       true},
      {"node-failure", "Slurm saw a node fail", {"node-failure"}, true},
      {"nccl-error", "another NCCL error", {"nccl-error"}, false},
      {"cuda-error", "a CUDA error", {"cuda-error"}, false},
      {"cuda-oom", "GPU out of memory (a retry usually fails the same way)", {"cuda-oom"}, false},
      {"host-oom", "host out of memory", {"host-oom"}, false},
      {"segfault", "a segmentation fault", {"segfault"}, false},
      // Not by default: a hang that repeats (rank 0 building an index the others time out on)
      // would spend every attempt the same way.
      {"hang",
       "no progress: the hang watchdog (runtime.watchdog) ended the ranks",
       {"hang"},
       false},
  };
  return kClasses;
}

std::vector<std::string> default_retry_on() {
  std::vector<std::string> out;
  for (const auto& c : retry_classes())
    if (c.by_default) out.emplace_back(c.id);
  return out;
}

std::vector<std::string> retry_on_values() {
  std::vector<std::string> out;
  for (const auto& c : retry_classes()) out.emplace_back(c.id);
  out.emplace_back(kRetryAnyFailure);
  return out;
}

}  // namespace bridge
