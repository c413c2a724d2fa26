#include "probe/probe_error.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bridge::probe {
namespace {

std::atomic<int> g_log_rank{-1};

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

void fatal(int exit_code, std::string_view message) {
  fatal_mutex().lock();  // Never released: the process ends below.
  std::fflush(stdout);
  write_line("error", message);
  std::_Exit(exit_code);
}

void fatal(const ProbeStatus& status) { fatal(status.exit_code(), status.why()); }

void log_warning(std::string_view message) { write_line("warning", message); }

}  // namespace bridge::probe
