#include "jobs/job_progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <sstream>

#include "model/compare.h"

namespace bridge {

namespace {

constexpr size_t kEtaWindow = 5;  // recent steps the ETA averages over

}  // namespace

std::vector<int> progress_ranks(int progress_rank, int ranks) {
  int last = std::max(1, ranks) - 1;
  std::vector<int> out;
  for (int r : {progress_rank, last, 0})
    if (r >= 0 && r <= last && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  return out;
}

std::vector<int> progress_ranks(const JobRecord& job) {
  return progress_ranks(job.progress_rank, job.ranks);
}

std::optional<JobProgress> progress_from_lines(int rank, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  std::istringstream in(text);
  std::vector<IterationSample> samples = parse_iteration_lines(in);
  if (samples.empty()) return std::nullopt;
  JobProgress p;
  p.rank = rank;
  p.iteration = samples.back().iteration;
  p.total = samples.back().total;
  size_t n = std::min(kEtaWindow, samples.size());
  double sum = 0;
  for (size_t i = samples.size() - n; i < samples.size(); ++i) sum += samples[i].step_ms;
  double mean = sum / static_cast<double>(n);
  if (std::isfinite(mean) && mean >= 0) {
    p.step_ms = mean;
    int left = std::max(0, p.total - p.iteration);
    double seconds = mean * left / 1000.0;
    if (seconds < 1e9) p.eta = std::chrono::seconds(static_cast<int64_t>(std::llround(seconds)));
  }
  return p;
}

std::string progress_text(const JobProgress& p) {
  std::string text = fmt::format("iteration {}/{} (rank {})", p.iteration, p.total, p.rank);
  if (p.step_ms) text += fmt::format(", {:.2f} s/step", *p.step_ms / 1000.0);
  if (p.eta && p.iteration < p.total) text += ", ETA " + duration_text(*p.eta);
  return text;
}

std::optional<SystemTime> parse_utc_time(const std::string& iso8601) {
  std::tm tm{};
  const char* end = strptime(iso8601.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  if (*end == '.')  // fractions of a second: not needed for a run time
    for (++end; *end >= '0' && *end <= '9'; ++end) {
    }
  if (std::string(end) != "Z") return std::nullopt;
  std::time_t t = timegm(&tm);
  if (t == -1) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

std::string utc_time_text(SystemTime t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&tt, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string duration_text(std::chrono::seconds d) {
  int64_t s = std::max<int64_t>(0, d.count());
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h {:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d {:02}h", s / 86400, s % 86400 / 3600);
}

std::optional<std::chrono::seconds> job_elapsed(const JobRecord& job, SystemTime now) {
  auto start = parse_utc_time(job.started_at);
  if (!start) return std::nullopt;
  auto end = is_final(job.state) ? parse_utc_time(job.ended_at) : std::optional<SystemTime>(now);
  if (!end) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(*end - *start);
}

}  // namespace bridge
