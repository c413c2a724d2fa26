#include "probe/probe_error.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bridge::probe {
namespace {

std::atomic<int> g_log_rank{-1};
volatile std::sig_atomic_t g_terminated = 0;

extern "C" void on_sigterm(int) { g_terminated = 1; }

std::mutex& fatal_mutex() {
  static std::mutex mu;
  return mu;
}

void write_line(const char* kind, std::string_view message) {
  const int rank = g_log_rank.load();
  if (rank >= 0) {
    std::fprintf(stderr, "bridge-probe: %s: rank %d: %.*s\n", kind, rank,
                 static_cast<int>(message.size()), message.data());
  } else {
    std::fprintf(stderr, "bridge-probe: %s: %.*s\n", kind, static_cast<int>(message.size()),
                 message.data());
  }
  std::fflush(stderr);
}

}  // namespace

std::string str_printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out;
  if (size > 0) {
    out.resize(static_cast<size_t>(size) + 1);
    std::vsnprintf(out.data(), out.size(), format, args);
    out.resize(static_cast<size_t>(size));
  }
  va_end(args);
  return out;
}

void set_log_rank(int rank) { g_log_rank.store(rank); }

void watch_for_termination() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

bool termination_requested() { return g_terminated != 0; }

void end_if_terminated() {
  if (!termination_requested()) return;
  std::fflush(stdout);
  std::signal(SIGTERM, SIG_DFL);
  std::raise(SIGTERM);
  std::_Exit(128 + SIGTERM);  // not reached: SIGTERM's default action ends the process
}

void sleep_until_terminated() {
  std::fflush(stdout);
  watch_for_termination();
  for (;;) {
    end_if_terminated();
    ::usleep(100 * 1000);
  }
}

void fatal(int exit_code, std::string_view message) {
  fatal_mutex().lock();  // Never released: the process ends below.
  std::fflush(stdout);
  write_line("error", message);
  std::_Exit(exit_code);
}

void fatal(const ProbeStatus& status) { fatal(status.exit_code(), status.why()); }

void log_warning(std::string_view message) { write_line("warning", message); }

}  // namespace bridge::probe
