// The process exit codes of bridge-launch, in one place (README.md and `--help` list them).
//
// Contract: every command returns one of these, and an executor's logs/cancel/submit
// returns them too (its code becomes the process's). A job's own rank exit codes are not
// these: they are reported as the ranks gave them.
#pragma once

namespace bridge {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;        // a rank, the scheduler or the registry failed
inline constexpr int kExitUsage = 2;          // usage error or invalid recipe
inline constexpr int kExitInterrupted = 130;  // SIGINT (128 + 2), as a shell reports it

}  // namespace bridge
