// Services: the composition root. main builds the real seams once (RealServices) and every
// command receives them through Context; nothing below launcher/ reaches for a process global.
//
//   host env      -> the planner (${VAR}, tracker keys), the registry dir, local ranks' env
//   command runner, clock, sleeper, probe dir, logger -> the executors (ExecutorServices)
//   clock, sleeper, random, logger            -> the job registry (RegistrySeams)
//   cancel token                              -> `--wait` (its signal handler cancels the
//                                                scheduler client the runner is running)
//   executor table -> every executor made or looked up (`--executor`, status, logs, ...)
//   plugin table   -> the planner (build_plan), `plugins`, `schema`, completion
//   job registry                              -> launch, list, status, logs, cancel, compare
//
// The executor and plugin tables are defined in executors/registry.cpp and
// plugins/registry.cpp; only RealServices reads those definitions: everything else gets the
// table it uses from here, so a test can hand in a table of its own.
//
// Tests build a Services from fakes (MapEnvironment, a recording CommandRunner, a FakeClock, a
// Sleeper that returns at once, a SequenceRandom, a logger writing to a string) and call the
// commands directly.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executors/executor.h"
#include "jobs/registry.h"
#include "plugins/plugin.h"
#include "system/cancel_token.h"
#include "system/clock.h"
#include "system/command_runner.h"
#include "system/host_env.h"

namespace spdlog {
class logger;
}

namespace bridge {

struct Services {
  const HostEnvironment& env;
  CommandRunner& runner;
  const Clock& clock;
  Sleeper& sleeper;
  Random& random;
  // Where logs go (stderr in main); run_cli sets its pattern and level from -v/-q.
  spdlog::logger& log;
  std::string probe_dir;  // where the bridge-probe built with this binary is ("" when none)
  const std::vector<ExecutorInfo>& executors;
  const std::vector<PluginInfo>& plugins;
  JobRegistry registry;
  // Ends the process with `code` once a command has nothing left to do, after flushing the
  // standard streams, without tearing down what it built: freeing the plan, its JSON and the
  // rendered scripts took 0.13-0.16 ms of a 5-7 ms Slurm submission (docs/performance.md).
  // Empty (sanitizer builds, whose leak check runs at exit; tests, unless they record the
  // call): the command returns as usual. Only a plain launch calls it, once its submission
  // is over, accepted or not (never an ablate, which submits more than one job).
  std::function<void(int code)> end_process;
  // Cancelling it kills the program `runner` runs (system/cancel_token.h): `--wait`'s
  // SIGINT/SIGTERM/SIGHUP handler does, so a hung squeue does not hold the launcher for its
  // time limit. Null where the runner watches none (tests with a fake runner): the wait then
  // uses a token of its own, which still ends its sleeps.
  CancelToken* cancel = nullptr;

  ExecutorServices executor_services() const {
    return {runner, env, clock, sleeper, log, probe_dir};
  }
  std::unique_ptr<Executor> executor(const std::string& name) const {
    return make_executor(executors, name, executor_services());
  }
};

// The real seams, owned by main for the life of the process.
class RealServices {
 public:
  RealServices();
  RealServices(const RealServices&) = delete;  // services_ refers to the members
  RealServices& operator=(const RealServices&) = delete;
  const Services& services() const { return services_; }

 private:
  ProcessEnvironment env_;
  CancelToken cancel_;
  SpawnCommandRunner runner_{&cancel_};
  SystemClock clock_;
  ThreadSleeper sleeper_;
  SystemRandom random_;
  std::shared_ptr<spdlog::logger> log_;
  Services services_;
};

// The directory of the running binary when it holds a `bridge-probe`, else "".
std::string probe_dir_next_to_self();

}  // namespace bridge
