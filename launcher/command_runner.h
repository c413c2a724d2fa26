// CommandRunner: the one seam through which bridge-launch runs scheduler commands (sbatch,
// squeue, sacct, scontrol, scancel, kubectl) and waits for them.
//
// main builds the one real runner (app/services.h) and hands it to the executors; nothing
// reaches for a process-wide runner. BoostCommandRunner runs the real program with Boost.Process
// (stdin text in, stdout and stderr captured, an optional time limit); tests substitute a recording
// fake. A program that cannot be started is reported as `started == false` with the reason in
// `err`, never as an exception.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace bridge {

struct CommandResult {
  bool started = true;
  int exit_code = 0;
  std::string out;
  std::string err;
  bool timed_out = false;

  bool ok() const { return started && !timed_out && exit_code == 0; }
};

struct CommandSpec {
  std::vector<std::string> argv;
  std::string stdin_text;
  std::map<std::string, std::string> extra_env;  // added to the inherited environment
  std::chrono::milliseconds timeout{60000};
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual CommandResult run(const CommandSpec& spec) = 0;
};

class BoostCommandRunner : public CommandRunner {
 public:
  CommandResult run(const CommandSpec& spec) override;
};

}  // namespace bridge
