// Test doubles for the composition root's seams, one per seam: a Clock that stands still
// until told (FakeClock), a Sleeper that records waits and returns at once (advancing a
// FakeClock when given one), a Random that returns a known sequence, a logger that writes to
// a string, a CommandRunner that records commands and answers them as the test scripts, and
// TestServices, which bundles them into the ExecutorServices an executor is built with and
// the RegistrySeams a JobRegistry is built with.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "executors/executor.h"
#include "jobs/registry.h"
#include "launcher/services.h"
#include "system/clock.h"
#include "system/command_runner.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace bridge::testing {

// Shows `system` (by default 2025-12-01T12:00:00Z) and a steady time that starts at 0; both
// move only by advance() (a RecordingSleeper built with this clock advances it by each wait).
class FakeClock : public Clock {
 public:
  static constexpr std::time_t kDefaultTime = 1764590400;  // 2025-12-01T12:00:00Z
  std::chrono::system_clock::time_point system =
      std::chrono::system_clock::from_time_t(kDefaultTime);
  std::chrono::steady_clock::time_point steady{};

  std::chrono::system_clock::time_point now() const override { return system; }
  std::chrono::steady_clock::time_point steady_now() const override { return steady; }
  void advance(std::chrono::milliseconds by) {
    system += by;
    steady += by;
  }
};

class RecordingSleeper : public Sleeper {
 public:
  RecordingSleeper() = default;
  // Each wait also advances `clock`, so a loop that waits for a deadline ends.
  explicit RecordingSleeper(FakeClock* clock) : clock_(clock) {}
  std::vector<std::chrono::milliseconds> waits;
  void pause_for(std::chrono::milliseconds duration) override {
    waits.push_back(duration);
    if (clock_ != nullptr) clock_->advance(duration);
  }

 private:
  FakeClock* clock_ = nullptr;
};

// Returns the values queued in `next_values` in order, then `counter`, `counter + 1`, ...
// (distinct values, so a registry never runs out of free job ids).
class SequenceRandom : public Random {
 public:
  std::deque<uint32_t> next_values;
  uint32_t counter = 0;
  std::vector<uint32_t> drawn;  // every value returned, in order
  uint32_t next() override {
    uint32_t value = counter;
    if (next_values.empty()) {
      ++counter;
    } else {
      value = next_values.front();
      next_values.pop_front();
    }
    drawn.push_back(value);
    return value;
  }
};

// A logger whose lines land in `text` (spdlog's default pattern).
class CapturedLog {
 public:
  std::ostringstream text;
  spdlog::logger logger{"test", std::make_shared<spdlog::sinks::ostream_sink_mt>(text)};
};

// The one CommandRunner fake: records every command run or started and answers each with
// `respond`, which a test sets (or passes to the constructor) and may replace between steps,
// since executors keep the runner they were built with. Until a test sets it, every command
// fails to start ("no answer scripted"), so a render that ran one would show.
class ScriptedRunner : public CommandRunner {
 public:
  using Respond = std::function<CommandResult(const CommandSpec&)>;
  ScriptedRunner() = default;
  explicit ScriptedRunner(Respond answer) : respond(std::move(answer)) {}

  Respond respond = [](const CommandSpec&) {
    CommandResult r;
    r.started = false;
    r.err = "no answer scripted by the test";
    return r;
  };
  std::vector<CommandSpec> calls;    // every command run (a started one when it finishes)
  std::vector<CommandSpec> started;  // every command started early (CommandRunner::start)

  CommandResult run(const CommandSpec& spec) override {
    calls.push_back(spec);
    return respond(spec);
  }
  std::unique_ptr<StartedCommand> start(const CommandSpec& spec) override {
    started.push_back(spec);
    return CommandRunner::start(spec);
  }
  // How many commands ran `program`.
  int count(const std::string& program) const {
    int n = 0;
    for (const auto& c : calls) n += c.argv.at(0) == program;
    return n;
  }
  // The commands whose argv contains `word`.
  std::vector<CommandSpec> with(const std::string& word) const {
    std::vector<CommandSpec> hits;
    for (const auto& c : calls)
      for (const auto& a : c.argv)
        if (a == word) {
          hits.push_back(c);
          break;
        }
    return hits;
  }
};

// Executor and registry seams for a test: commands go to `runner` (by default a
// ScriptedRunner of its own with no answer scripted), the clock is fake, waits return at once and
// advance it, random bits count up, logs go to `log.text`, the host environment is a MapEnvironment
// the test may fill.
class TestServices {
 public:
  TestServices() : runner_(unscripted_) {}
  explicit TestServices(CommandRunner& runner) : runner_(runner) {}
  TestServices(const TestServices&) = delete;  // the seams refer to the members
  TestServices& operator=(const TestServices&) = delete;
  ExecutorServices services() { return {runner_, env, clock, sleeper, log.logger, probe_dir}; }
  RegistrySeams registry_seams() { return {clock, sleeper, random, log.logger}; }
  // A whole Services on these seams, for running commands (run_cli): the real executor and
  // plugin tables, and a registry in `state_dir`.
  Services command_services(const std::string& state_dir) {
    return Services{env,
                    runner_,
                    clock,
                    sleeper,
                    random,
                    log.logger,
                    probe_dir,
                    executor_registry(),
                    plugin_registry(),
                    JobRegistry(state_dir, registry_seams()),
                    nullptr};
  }

  MapEnvironment env;
  FakeClock clock;
  RecordingSleeper sleeper{&clock};
  SequenceRandom random;
  CapturedLog log;
  std::string probe_dir;

 private:
  ScriptedRunner unscripted_;
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
