#include "runtime/probe_error.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bridge::probe {
namespace {

std::atomic<int> g_log_rank{-1};

std::mutex& FatalMutex() {
  static std::mutex mu;
  return mu;
}

void WriteLine(const char* kind, std::string_view message) {
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

std::string StrPrintf(const char* format, ...) {
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

void SetLogRank(int rank) { g_log_rank.store(rank); }

void Fatal(int exit_code, std::string_view message) {
  FatalMutex().lock();  // Never released: the process ends below.
  std::fflush(stdout);
  WriteLine("error", message);
  std::_Exit(exit_code);
}

void LogWarning(std::string_view message) { WriteLine("warning", message); }

}  // namespace bridge::probe
