// CommandRunner: the one seam through which bridge-launch runs scheduler commands (sbatch,
// squeue, sacct, scontrol, scancel, kubectl) and waits for them.
//
// main builds the one real runner (launcher/services.h) and hands it to the executors; nothing
// reaches for a process-wide runner. SpawnCommandRunner runs the real program with posix_spawn
// (stdin text in, stdout and stderr captured, an optional time limit); tests substitute a recording
// fake. A program that cannot be started is reported as `started == false` with the reason in
// `err`, never as an exception. A runner given a CancelToken (system/cancel_token.h) kills
// the program it runs as soon as the token is cancelled (a Ctrl-C during `--wait`) and
// reports `cancelled`, instead of waiting for the program or its time limit.
//
// Every program starts in a process group of its own and is killed as a group (time limit,
// cancel, a command dropped unfinished): a wrapper script's children (`python` started by a
// script given to --runtime-check, a helper of a kubectl wrapper) go with it. A Ctrl-C at the
// terminal reaches only the launcher's group, so while a program runs and SIGINT, SIGTERM or
// SIGHUP would end the launcher (their default action), the runner passes them on to every
// running program's group first. What a program writes on stdout and on stderr is kept up to
// kMaxCapturedOutput bytes each: the first and the last half of that, with a line saying
// "output cut at N bytes" between them (300 MB from a runtime check cost 862 MiB).
//
// Why not Boost.Process (1.74, Debian's): starting a command through it cost 0.7-1.0 ms of a
// 9 ms submission (a full fork, five pipes, an asio reactor, and a std::locale("") that reads
// every locale file to search $PATH), and its vfork mode does not build with async pipes.
// posix_spawn is glibc's vfork+exec: start() waits only for the exec to begin, and the
// program's start-up then overlaps the caller's work until finish.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "system/cancel_token.h"

namespace bridge {

// Bytes of one stream (stdout or stderr) a CommandResult keeps at most, marker line aside.
inline constexpr size_t kMaxCapturedOutput = size_t{16} << 20;

struct CommandResult {
  bool started = true;
  int exit_code = 0;
  std::string out;
  std::string err;
  bool timed_out = false;
  // Killed because the runner's CancelToken was cancelled (exit_code 128 + SIGKILL).
  bool cancelled = false;
  // Bytes left out of `out` and `err` (more than kMaxCapturedOutput was written): the text
  // then holds a line "[... output cut at N bytes: M bytes left out ...]" where they were.
  size_t out_cut = 0;
  size_t err_cut = 0;
  // Returned before the program ended (WhileRunning::leave_when_found): its exit code is
  // not known.
  bool left_running = false;

  bool ok() const { return started && !timed_out && !cancelled && exit_code == 0; }
};

struct CommandSpec {
  std::vector<std::string> argv;
  std::string stdin_text;
  std::map<std::string, std::string> extra_env;  // added to the inherited environment
  std::chrono::milliseconds timeout{60000};
};

// What a caller overlaps with a started program's run (docs/performance.md). Both may be
// empty. Both run on the caller's thread inside finish, and their time does not count
// against the program's time limit (an fsync on a slow file system must not turn a program
// that already answered into a timed-out one).
struct WhileRunning {
  // Once, as soon as stdin is closed (the program has all its input, or closed stdin
  // itself), while the program still runs (Slurm: the registry entry's fsync while sbatch
  // talks to the controller). Not run when the program never got its stdin closed (not
  // started, timed out first).
  std::function<void()> input_given;
  // Each complete line the program writes on stdout (without its '\n'), in order, until it
  // returns true (the caller found what it waited for), while the program may still be
  // running or exiting (Slurm: sbatch's job id, recorded and announced while sbatch tears
  // down, about half a millisecond). Lines come only once the input was given (after
  // input_given); none when it never was, and none past the first half of
  // kMaxCapturedOutput (the rest of stdout is read, its head and tail kept).
  std::function<bool(const std::string& line)> until_line;
  // Once until_line returned true, finish returns at once instead of waiting for the
  // program's end: what it wrote so far is kept, and it is neither killed nor waited for (it
  // ends on its own; the launcher's own exit hands it to init, and what it writes after the
  // launcher closed its pipes meets a closed pipe: SIGPIPE). The result then has
  // `left_running` and exit code 0, its real exit status unknown. Only for a caller that
  // ends right after (a program left unreaped stays a zombie until then): a launch without
  // --wait leaves sbatch's teardown, a quarter of a millisecond, to sbatch.
  bool leave_when_found = false;
};

// A program started by CommandRunner::start that waits for its stdin: it starts up while the
// caller prepares what to write. Destroying it unfinished kills the program before it got any
// input (a program that acts on its input, like sbatch, then does nothing).
class StartedCommand {
 public:
  virtual ~StartedCommand() = default;
  // Writes `stdin_text`, closes stdin and waits for the end (the spec's time limit), running
  // `while_running`'s callbacks on the way.
  //
  // An input of up to 1 MiB is written with one write() into a pipe grown to hold it: a
  // launcher killed at any moment has given the program all of it or none of it, never a cut
  // script. A larger one, or one for a pipe the system does not let grow (pipe-max-size,
  // pipe-user-pages-soft), is written in pieces.
  virtual CommandResult finish(const std::string& stdin_text,
                               const WhileRunning& while_running) = 0;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual CommandResult run(const CommandSpec& spec) = 0;
  // Starts `spec` (its stdin_text is ignored; finish gives it) so that the program's start-up
  // overlaps what the caller does before finish. The default starts nothing until finish and
  // then runs the whole command: the same result, without the overlap (test fakes).
  virtual std::unique_ptr<StartedCommand> start(const CommandSpec& spec);
};

class SpawnCommandRunner : public CommandRunner {
 public:
  SpawnCommandRunner() = default;
  // Every program this runner runs is killed once `cancel` is cancelled (at once when it
  // already is); `cancel` must outlive the runner.
  explicit SpawnCommandRunner(const CancelToken* cancel) : cancel_(cancel) {}
  CommandResult run(const CommandSpec& spec) override;
  std::unique_ptr<StartedCommand> start(const CommandSpec& spec) override;

 private:
  const CancelToken* cancel_ = nullptr;
};

}  // namespace bridge
