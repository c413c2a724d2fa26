#include "jobs/job_watchdog.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "base/numbers.h"
#include "system/file_read.h"

namespace bridge {

std::string watchdog_event_line(const WatchdogEvent& e) {
  std::string line = e.kind;
  if (!e.stage.empty()) line += " stage=" + e.stage;
  line += fmt::format(" iteration={} total={} waited={} limit={} attempt={}", e.iteration, e.total,
                      e.waited, e.limit, e.attempt);
  if (e.node >= 0) line += fmt::format(" node={}", e.node);
  if (e.rank >= 0) line += fmt::format(" rank={}", e.rank);
  line += " at=" + (e.at.empty() ? std::string("-") : e.at);
  return line;
}

std::vector<WatchdogEvent> parse_watchdog_events(const std::string& text) {
  std::vector<WatchdogEvent> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    WatchdogEvent e;
    words >> e.kind;
    if (e.kind != "hang" && e.kind != "teardown") continue;  // a torn or foreign line
    std::string w;
    while (words >> w) {
      size_t eq = w.find('=');
      if (eq == std::string::npos) continue;
      std::string key = w.substr(0, eq), value = w.substr(eq + 1);
      if (key == "stage" && (value == "startup" || value == "progress")) e.stage = value;
      if (key == "iteration") e.iteration = parse_decimal<int>(value).value_or(-1);
      if (key == "total") e.total = parse_decimal<int>(value).value_or(0);
      if (key == "waited") e.waited = parse_decimal<long long>(value).value_or(0);
      if (key == "limit") e.limit = parse_decimal<long long>(value).value_or(0);
      if (key == "attempt") e.attempt = parse_decimal<int>(value).value_or(1);
      if (key == "node") e.node = parse_decimal<int>(value).value_or(-1);
      if (key == "rank") e.rank = parse_decimal<int>(value).value_or(-1);
      if (key == "at" && value != "-" && value.size() <= 32) e.at = value;
    }
    // A line is written whole, `at=` last: one without it was torn and is no verdict.
    if (line.find(" at=") == std::string::npos) continue;
    if (e.kind == "hang" && e.stage.empty()) e.stage = e.iteration < 0 ? "startup" : "progress";
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<WatchdogEvent> read_watchdog_events(const std::string& job_dir) {
  // A line an attempt (about 100 bytes): 256 KiB is thousands of attempts; a FIFO, a link
  // or a huge file in its place is no record (system/file_read.h).
  if (job_dir.empty()) return {};
  StatusOr<std::string> text =
      read_regular_file(std::filesystem::path(job_dir) / kWatchdogFile, size_t{256} << 10);
  return text.ok() ? parse_watchdog_events(*text) : std::vector<WatchdogEvent>{};
}

std::optional<WatchdogEvent> watchdog_event_of(const std::vector<WatchdogEvent>& events,
                                               int attempt) {
  for (auto it = events.rbegin(); it != events.rend(); ++it)
    if (it->attempt == attempt) return *it;
  return std::nullopt;
}

namespace {

// "; rank 5 (node 0) stopped first: ..." when the pod's watchdog could tell.
std::string stopped_first(const WatchdogEvent& e) {
  if (e.rank < 0) return "";
  return fmt::format(
      "; rank {}{} stopped first: the other ranks of its node were waiting for "
      "another rank, it was not",
      e.rank, e.node >= 0 ? fmt::format(" (node {})", e.node) : "");
}

}  // namespace

std::string watchdog_event_text(const WatchdogEvent& e) {
  if (e.kind == "teardown")
    return fmt::format(
        "bridge-launch watchdog: training reached iteration {}/{}, but the processes had not "
        "exited {} s later (runtime.watchdog.teardown_grace {} s): they were ended and the job "
        "counts as succeeded",
        e.iteration, e.total, e.waited, e.limit);
  if (e.stage == "startup" || e.iteration < 0)
    return fmt::format(
        "bridge-launch watchdog: hang: no iteration line {} s after the ranks started "
        "(runtime.watchdog.startup_timeout {} s); the ranks were ended{}",
        e.waited, e.limit, stopped_first(e));
  return fmt::format(
      "bridge-launch watchdog: hang: no iteration line for {} s after iteration {}/{} "
      "(runtime.watchdog.progress_timeout {} s); the ranks were ended{}",
      e.waited, e.iteration, e.total, e.limit, stopped_first(e));
}

std::optional<std::string> watchdog_verdict_line(const std::string& job_dir, int attempt) {
  std::optional<WatchdogEvent> e = watchdog_event_of(read_watchdog_events(job_dir), attempt);
  if (!e) return std::nullopt;
  return watchdog_event_text(*e);
}

ProgressWatch::ProgressWatch(const WatchdogSettings& settings, TimePoint start)
    : settings_(settings), start_(start), last_change_(start) {}

void ProgressWatch::on_line(int source, std::string_view line, TimePoint now) {
  std::optional<IterationMark> mark = iteration_of_line(line);
  if (!mark) return;
  auto [it, first] = last_.try_emplace(source, *mark);
  if (!first && it->second.iteration == mark->iteration) return;  // the same step again
  it->second = *mark;
  iteration_ = mark->iteration;
  total_ = mark->total;
  last_change_ = now;
}

std::optional<WatchdogEvent> ProgressWatch::due(TimePoint now) const {
  if (!settings_.enabled) return std::nullopt;
  WatchdogEvent e;
  e.iteration = iteration_;
  e.total = total_;
  e.waited = std::chrono::duration_cast<std::chrono::seconds>(
                 now - (iteration_ < 0 ? start_ : last_change_))
                 .count();
  if (iteration_ >= 0 && total_ > 0 && iteration_ >= total_) {
    e.kind = "teardown";
    e.limit = settings_.teardown_grace;
  } else {
    e.kind = "hang";
    e.stage = iteration_ < 0 ? "startup" : "progress";
    e.limit = iteration_ < 0 ? settings_.startup_timeout : settings_.progress_timeout;
  }
  if (e.waited < e.limit) return std::nullopt;
  return e;
}

}  // namespace bridge
