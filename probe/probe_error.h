// Error reporting and exit codes of bridge-probe.
//
// Contract: errors are values. Every failure the probe detects is a ProbeStatus (or the error
// side of a ProbeResult<T>) carrying one of the exit codes below (they are part of the probe's
// interface; the launcher and the tests rely on them) and its message; functions return it up
// the call chain, nothing in runtime/ throws. Whoever ends the chain (main, or a communication
// thread) passes it to fatal(), which flushes stdout, prints one line
// `bridge-probe: error: rank R: <message>` to stderr and ends the whole process at once with
// _Exit, so no thread or open socket can keep a failing rank alive. The only catch is main's
// last resort for what the standard library throws (std::bad_alloc, std::system_error).
// str_printf() is a printf-style formatter used for all messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace bridge::probe {

enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,        // I/O error on this machine (e.g. --dump-env-dir not writable).
  kExitUsage = 2,           // Bad flag, missing/invalid identity, malformed BRIDGE_EXPECTED_*.
  kExitEnvMismatch = 3,     // Env or plan check failed on a rank (all ranks exit 3).
  kExitWrongSum = 4,        // All-reduce result differs from the closed-form sum.
  kExitComm = 5,            // Rendezvous failed, a peer timed out, or a peer connection was lost.
  kExitInjectedFault = 17,  // --fail-rank / --fail-at-step.
};

// Ok, or a failure: the exit code the process ends with and the message why.
class [[nodiscard]] ProbeStatus {
 public:
  ProbeStatus() = default;  // Ok.
  ProbeStatus(int exit_code, std::string why) : exit_code_(exit_code), why_(std::move(why)) {}

  bool ok() const { return exit_code_ == kExitOk; }
  int exit_code() const { return exit_code_; }
  const std::string& why() const { return why_; }

 private:
  int exit_code_ = kExitOk;
  std::string why_;
};

// A value of type T, or the failure that prevented it.
template <typename T>
class [[nodiscard]] ProbeResult {
 public:
  // Implicit both ways, so a function returns either `value` or a failed status.
  ProbeResult(T value) : value_(std::move(value)) {}
  // `status` must be a failure; an ok status without a value is reported as an internal error.
  ProbeResult(ProbeStatus status)
      : status_(status.ok() ? ProbeStatus(kExitInternal, "result without a value")
                            : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const ProbeStatus& status() const { return status_; }
  const std::string& why() const { return status_.why(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  ProbeStatus status_;
};

// printf-style formatting into a std::string.
std::string str_printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Sets the rank shown in error messages (-1 = unknown yet).
void set_log_rank(int rank);

// SIGTERM while training (the launcher's watchdog or cancel, Slurm's step kill): from
// watch_for_termination() on, SIGTERM only raises a flag, so a rank blocked on a peer can say
// whom it waited for ("terminated while waiting for rank 5", as torch's flight recorder
// would) before it ends; the waits check it at least every 200 ms. Anywhere else
// end_if_terminated() ends the process by SIGTERM, as the default action would have.
void watch_for_termination();
bool termination_requested();
void end_if_terminated();
// --hang-*: sleeps until SIGTERM, then ends by it, printing nothing (a hung process says
// nothing either).
[[noreturn]] void sleep_until_terminated();

// Prints `message` as an error and terminates the process with `exit_code`. Thread-safe: the
// first caller wins, later callers block until the process is gone.
[[noreturn]] void fatal(int exit_code, std::string_view message);

// fatal() with a failed status's exit code and message.
[[noreturn]] void fatal(const ProbeStatus& status);

// Prints a non-fatal diagnostic line to stderr with the same prefix.
void log_warning(std::string_view message);

}  // namespace bridge::probe
