// The only file that uses Boost.Process; its exceptions stop here.
#include "launcher/command_runner.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/process.hpp>
#include <csignal>
#include <future>
#include <map>
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

CommandResult BoostCommandRunner::run(const CommandSpec& spec) {
  CommandResult result;
  if (spec.argv.empty()) {
    result.started = false;
    result.err = "empty command";
    return result;
  }
  try {
    boost::filesystem::path exe = spec.argv[0].find('/') == std::string::npos
                                      ? bp::search_path(spec.argv[0])
                                      : boost::filesystem::path(spec.argv[0]);
    if (exe.empty()) {
      result.started = false;
      result.err = spec.argv[0] + ": command not found";
      return result;
    }
    bp::environment env = child_environment(spec.extra_env);
    std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
    boost::asio::io_context io;
    std::future<std::string> out, err;
    bp::async_pipe in_pipe(io);
    bool exited = false;
    // A command that does not read its stdin must not kill us with SIGPIPE.
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old);
    // on_exit fires from the io_context once the child has been reaped, so the exit code is
    // final; polling child.running() right after the pipes close races with the reaping.
    bp::child child(exe, bp::args(args), env, bp::std_out > out, bp::std_err > err,
                    bp::std_in < in_pipe, io, bp::on_exit([&](int code, const std::error_code&) {
                      exited = true;
                      result.exit_code = code;
                    }));
    boost::asio::async_write(in_pipe, boost::asio::buffer(spec.stdin_text),
                             [&](const boost::system::error_code&, size_t) { in_pipe.close(); });
    io.run_for(spec.timeout);
    if (!exited) {
      std::error_code ec;
      child.terminate(ec);
      result.timed_out = true;
      result.exit_code = 128 + SIGKILL;
    }
    sigaction(SIGPIPE, &old, nullptr);
    if (out.wait_for(std::chrono::seconds(0)) == std::future_status::ready) result.out = out.get();
    if (err.wait_for(std::chrono::seconds(0)) == std::future_status::ready) result.err = err.get();
  } catch (const std::exception& e) {
    result.started = false;
    result.err = e.what();
  }
  return result;
}

}  // namespace bridge
