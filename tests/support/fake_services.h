// Test doubles for the composition root's seams: a Sleeper that records waits and returns at
// once, a CommandRunner that forwards to whichever fake a test installs, and TestServices,
// which bundles them into the ExecutorServices an executor is built with.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "executors/executor.h"
#include "launcher/clock.h"
#include "launcher/command_runner.h"
#include "launcher/host_env.h"

namespace bridge::testing {

class RecordingSleeper : public Sleeper {
 public:
  std::vector<std::chrono::milliseconds> waits;
  void sleep_for(std::chrono::milliseconds duration) override { waits.push_back(duration); }
};

// Forwards to `target` (the test's fake); a test swaps fakes without rebuilding executors.
class ForwardingRunner : public CommandRunner {
 public:
  CommandRunner* target = nullptr;
  CommandResult run(const CommandSpec& spec) override {
    if (target == nullptr) {
      CommandResult r;
      r.started = false;
      r.err = "no fake command runner installed by the test";
      return r;
    }
    return target->run(spec);
  }
  // Records what was started early (CommandRunner::start); it runs through `run` at finish.
  std::unique_ptr<StartedCommand> start(const CommandSpec& spec) override {
    started.push_back(spec);
    return CommandRunner::start(spec);
  }
  std::vector<CommandSpec> started;
};

// Executor seams for a test: commands go to `runner`, waits return at once, the host
// environment is a MapEnvironment the test may fill.
class TestServices {
 public:
  explicit TestServices(CommandRunner& runner) : runner_(runner) {}
  ExecutorServices services() { return {runner_, env, clock, sleeper, probe_dir}; }

  MapEnvironment env;
  SystemClock clock;
  RecordingSleeper sleeper;
  std::string probe_dir;

 private:
  CommandRunner& runner_;
};

// A `logs` query for one rank (or all), optionally following.
inline LogQuery rank_query(std::optional<int> rank, bool follow = false) {
  LogQuery q;
  q.rank = rank;
  q.follow = follow;
  return q;
}

}  // namespace bridge::testing
