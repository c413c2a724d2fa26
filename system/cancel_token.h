// CancelToken: "stop what you are waiting for", settable from a signal handler.
//
// `--wait` asks the scheduler in a loop; a Ctrl-C (SIGINT, SIGTERM, SIGHUP) must end it at
// once, also while a client (squeue, scontrol, kubectl) hangs for up to its time limit. The
// wait loop's signal handler calls cancel(); the command runner (system/command_runner.h)
// watches fd() beside the running program's pipes and kills the program with its process
// group (every program has one of its own) as it would on a timeout, reporting the run as
// cancelled.
//
// cancel() is async-signal-safe: a lock-free atomic store and one write() to an eventfd. The
// eventfd closes the race a flag alone leaves open (a signal that lands between the runner's
// look at the flag and its poll() would otherwise wait out the program's whole time limit).
// A token whose eventfd could not be made (no descriptor left) still works as a flag, and the
// runner then also looks at it every 100 ms. main owns the one real token (launcher/services.h).
#pragma once

#include <atomic>

namespace bridge {

class CancelToken {
 public:
  CancelToken();
  ~CancelToken();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Async-signal-safe; idempotent.
  void cancel() noexcept;
  bool cancelled() const noexcept { return cancelled_.load(); }
  // Readable (POLLIN) once cancelled; -1 when there is none (see above).
  int fd() const noexcept { return fd_; }
  // Back to "not cancelled", for a new wait. Not async-signal-safe: call it while no handler
  // that cancels this token is installed.
  void reset() noexcept;

 private:
  static_assert(std::atomic<bool>::is_always_lock_free, "cancel() runs in a signal handler");
  std::atomic<bool> cancelled_{false};
  int fd_ = -1;
};

}  // namespace bridge
