// Error reporting and exit codes of bridge-probe.
//
// Contract: every failure the probe detects is raised as a ProbeError carrying one of the exit
// codes below (they are part of the probe's interface; the launcher and the tests rely on them).
// Whoever catches it (main, or the communication thread) passes it to Fatal(), which flushes
// stdout, prints one line `bridge-probe: error: rank R: <message>` to stderr and ends the whole
// process at once with _Exit, so no thread or open socket can keep a failing rank alive.
// StrPrintf() is a printf-style formatter used for all messages.
#ifndef BRIDGE_RUNTIME_PROBE_ERROR_H_
#define BRIDGE_RUNTIME_PROBE_ERROR_H_

#include <stdexcept>
#include <string>
#include <string_view>

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

class ProbeError : public std::runtime_error {
 public:
  ProbeError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// printf-style formatting into a std::string.
std::string StrPrintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Sets the rank shown in error messages (-1 = unknown yet).
void SetLogRank(int rank);

// Prints `message` as an error and terminates the process with `exit_code`. Thread-safe: the
// first caller wins, later callers block until the process is gone.
[[noreturn]] void Fatal(int exit_code, std::string_view message);

// Prints a non-fatal diagnostic line to stderr with the same prefix.
void LogWarning(std::string_view message);

}  // namespace bridge::probe

#endif  // BRIDGE_RUNTIME_PROBE_ERROR_H_
