// Signals around submitting and waiting: held back while a scheduler takes a job
// (DeferredInterrupts), turned into a cancelled token while --wait polls or a snapshot is
// copied (WaitInterrupts), and the wait itself (wait_for_jobs in launcher/cli_support.h).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <ctime>

#include "system/cancel_token.h"

namespace bridge {

// Ctrl-C or SIGTERM while a scheduler takes the job must not leave a job that runs but is
// not recorded: the two signals are held back from before `sbatch`/`kubectl apply` until the
// registry entry is written (bounded by the command runner's timeout), then taken. sbatch
// runs in a process group of its own, so a terminal's Ctrl-C (sent to the whole foreground
// group) does not cut it off half-way either.
class DeferredInterrupts {
 public:
  DeferredInterrupts() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~DeferredInterrupts() { release(); }
  DeferredInterrupts(const DeferredInterrupts&) = delete;
  DeferredInterrupts& operator=(const DeferredInterrupts&) = delete;

  // Whether one of the signals is held back now (nothing is consumed).
  bool arrived() const {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) != 0) return false;
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
      if (sigismember(&pending, sig) == 1) return true;
    return false;
  }

  // Consumes a held-back SIGINT/SIGTERM and restores the mask; true when one arrived.
  bool release() {
    if (released_) return interrupted_;
    released_ = true;
    timespec no_wait{0, 0};
    while (sigtimedwait(&set_, nullptr, &no_wait) > 0) interrupted_ = true;
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    return interrupted_;
  }

 private:
  sigset_t set_{}, old_{};
  bool released_ = false;
  bool interrupted_ = false;
};

// The handler WaitInterrupts installs: cancels the token it holds (async-signal-safe), the
// one set last by set_wait_cancel.
void on_wait_signal(int);
void set_wait_cancel(CancelToken* token);

// While `--wait` polls: SIGINT, SIGTERM and SIGHUP cancel `token` instead of ending the
// process. The token is the runner's (Services::cancel), so a scheduler client that hangs is
// killed at once instead of at its time limit; the wait loop sees the token and stops.
class WaitInterrupts {
 public:
  explicit WaitInterrupts(CancelToken& token) : token_(token) {
    token_.reset();
    set_wait_cancel(&token_);
    struct sigaction sa {};
    sa.sa_handler = on_wait_signal;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGHUP, &sa, &old_hup_);
  }
  ~WaitInterrupts() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    set_wait_cancel(nullptr);
    token_.reset();  // later scheduler commands of this process run as usual
  }
  WaitInterrupts(const WaitInterrupts&) = delete;
  WaitInterrupts& operator=(const WaitInterrupts&) = delete;
  bool interrupted() const { return token_.cancelled(); }

 private:
  CancelToken& token_;
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{};
};

}  // namespace bridge
