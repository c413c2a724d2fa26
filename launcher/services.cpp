#include "launcher/services.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace bridge {

std::string probe_dir_next_to_self() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path dir = self.parent_path();
  return fs::exists(dir / "bridge-probe", ec) ? dir.string() : "";
}

namespace {
[[maybe_unused]] void end_process_now(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

// The one logger of the process: to stderr, flushed at every message (run_cli sets its pattern
// and level). It is passed down (Services::log), never installed as spdlog's default.
std::shared_ptr<spdlog::logger> stderr_logger() {
  auto log = std::make_shared<spdlog::logger>(
      "bridge-launch", std::make_shared<spdlog::sinks::ostream_sink_mt>(std::cerr, true));
  log->set_pattern("bridge-launch: %l: %v");
  return log;
}
}  // namespace

RealServices::RealServices()
    : log_(stderr_logger()),
      services_{env_,
                runner_,
                clock_,
                sleeper_,
                random_,
                *log_,
                probe_dir_next_to_self(),
                executor_registry(),
                plugin_registry(),
                JobRegistry(JobRegistry::default_dir(env_), {clock_, sleeper_, random_, *log_}),
                nullptr,
                &cancel_} {
  // A sanitizer's leak check runs at exit: those builds end the usual way. (BRIDGE_SANITIZED
  // is CMake's BRIDGE_SANITIZE; the compiler's own macro also catches flags set by hand.)
#if !defined(BRIDGE_SANITIZED) && !defined(__SANITIZE_ADDRESS__)
  services_.end_process = end_process_now;
#endif
}

}  // namespace bridge
