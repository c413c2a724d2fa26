// The only file that uses Boost.Process; its exceptions stop here.
#include "launcher/command_runner.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/process.hpp>
#include <csignal>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launcher/host_env.h"

namespace bridge {

namespace bp = boost::process;

namespace {

// The inherited environment plus `extra` (which wins). Boost.Process 1.74 looks a name up by
// comparing `NAME=` with std::equal against every entry, which reads past the end of an
// entry shorter than that (AddressSanitizer: heap-buffer-overflow). So the environment is
// built from an empty one, longest entries first: every entry present is then at least as
// long as the `NAME=` of each entry added after it, and no comparison leaves its entry.
bp::environment child_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> vars;
  for (auto& [name, value] : ProcessEnvironment().all()) vars.emplace(name, value);
  for (const auto& [name, value] : extra) vars[name] = value;
  std::vector<std::pair<std::string, std::string>> longest_first(vars.begin(), vars.end());
  std::stable_sort(longest_first.begin(), longest_first.end(), [](const auto& a, const auto& b) {
    return a.first.size() + a.second.size() > b.first.size() + b.second.size();
  });
  bp::environment env;
  for (const auto& [name, value] : longest_first) env[name] = value;
  return env;
}

}  // namespace

namespace {

// CommandRunner::start's default: nothing runs before finish.
class DeferredCommand : public StartedCommand {
 public:
  DeferredCommand(CommandRunner& runner, CommandSpec spec)
      : runner_(runner), spec_(std::move(spec)) {}
  CommandResult finish(const std::string& stdin_text) override {
    spec_.stdin_text = stdin_text;
    return runner_.run(spec_);
  }

 private:
  CommandRunner& runner_;
  CommandSpec spec_;
};

// A program that could not be started: finish reports why.
class NotStarted : public StartedCommand {
 public:
  explicit NotStarted(std::string why) { result_.started = false, result_.err = std::move(why); }
  CommandResult finish(const std::string&) override { return result_; }

 private:
  CommandResult result_;
};

// A running child whose stdin is an open pipe that nothing was written to yet.
class BoostStartedCommand : public StartedCommand {
 public:
  BoostStartedCommand(const boost::filesystem::path& exe, const std::vector<std::string>& args,
                      const bp::environment& env, std::chrono::milliseconds timeout)
      : in_pipe_(io_), timeout_(timeout) {
    // A command that does not read its stdin must not kill us with SIGPIPE.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old_pipe_);
    try {
      // on_exit fires from the io_context once the child has been reaped, so the exit code
      // is final; polling child.running() right after the pipes close races with the reaping.
      child_ = bp::child(exe, bp::args(args), env, bp::std_out > out_, bp::std_err > err_,
                         bp::std_in < in_pipe_, io_,
                         bp::on_exit([this](int code, const std::error_code&) {
                           exited_ = true;
                           exit_code_ = code;
                         }));
    } catch (...) {
      sigaction(SIGPIPE, &old_pipe_, nullptr);
      throw;
    }
  }
  ~BoostStartedCommand() override {
    std::error_code ec;
    if (!finished_ && child_.valid()) child_.terminate(ec);  // before it read any input
    boost::system::error_code bec;
    in_pipe_.close(bec);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  BoostStartedCommand(const BoostStartedCommand&) = delete;
  BoostStartedCommand& operator=(const BoostStartedCommand&) = delete;

  CommandResult finish(const std::string& stdin_text) override {
    CommandResult result;
    finished_ = true;
    try {
      boost::asio::async_write(in_pipe_, boost::asio::buffer(stdin_text),
                               [&](const boost::system::error_code&, size_t) { in_pipe_.close(); });
      io_.run_for(timeout_);
      result.exit_code = exit_code_;
      if (!exited_) {
        std::error_code ec;
        child_.terminate(ec);
        result.timed_out = true;
        result.exit_code = 128 + SIGKILL;
      }
      if (out_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        result.out = out_.get();
      if (err_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        result.err = err_.get();
    } catch (const std::exception& e) {
      result.started = false;
      result.err = e.what();
    }
    return result;
  }

 private:
  boost::asio::io_context io_;
  std::future<std::string> out_, err_;
  bp::async_pipe in_pipe_;
  bp::child child_;
  std::chrono::milliseconds timeout_;
  struct sigaction old_pipe_ {};
  bool exited_ = false;
  int exit_code_ = 0;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<StartedCommand> CommandRunner::start(const CommandSpec& spec) {
  return std::make_unique<DeferredCommand>(*this, spec);
}

std::unique_ptr<StartedCommand> BoostCommandRunner::start(const CommandSpec& spec) {
  if (spec.argv.empty()) return std::make_unique<NotStarted>("empty command");
  try {
    boost::filesystem::path exe = spec.argv[0].find('/') == std::string::npos
                                      ? bp::search_path(spec.argv[0])
                                      : boost::filesystem::path(spec.argv[0]);
    if (exe.empty()) return std::make_unique<NotStarted>(spec.argv[0] + ": command not found");
    std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
    return std::make_unique<BoostStartedCommand>(exe, args, child_environment(spec.extra_env),
                                                 spec.timeout);
  } catch (const std::exception& e) {
    return std::make_unique<NotStarted>(e.what());
  }
}

CommandResult BoostCommandRunner::run(const CommandSpec& spec) {
  return start(spec)->finish(spec.stdin_text);
}

}  // namespace bridge
