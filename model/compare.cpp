#include "model/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

#include "base/numbers.h"

namespace bridge {

constexpr size_t kMaxParsedLine = 4096;

std::vector<IterationSample> parse_iteration_lines(std::istream& in) {
  static const std::regex kIteration(R"(iteration\s+(\d+)\s*/\s*(\d+)\s*\|)");
  static const std::regex kElapsed(R"(elapsed time per iteration \(ms\):\s*([0-9.eE+-]+))");
  std::vector<IterationSample> out;
  std::string line;
  while (std::getline(in, line)) {
    // Megatron's iteration line is well under 1 KiB; std::regex recursion overflows the stack
    // on very long lines (a 30 000-character run after "iteration" once crashed `compare`).
    if (line.size() > kMaxParsedLine) continue;
    std::smatch it, el;
    if (!std::regex_search(line, it, kIteration) || !std::regex_search(line, el, kElapsed))
      continue;
    auto iteration = parse_decimal<int>(it[1].str());
    auto total = parse_decimal<int>(it[2].str());
    char* end = nullptr;
    std::string elapsed = el[1].str();
    double ms = std::strtod(elapsed.c_str(), &end);
    // A number too large for its type (or no number): not a line we can use.
    if (!iteration || !total || end != elapsed.c_str() + elapsed.size() || !std::isfinite(ms))
      continue;
    out.push_back({*iteration, *total, ms});
  }
  return out;
}

WindowStats window_stats(const std::vector<IterationSample>& samples, int first, int last) {
  std::vector<double> v;
  for (const auto& s : samples)
    if (s.iteration >= first && s.iteration <= last) v.push_back(s.step_ms);
  WindowStats w;
  w.samples = v.size();
  if (v.empty()) return w;
  w.min = *std::min_element(v.begin(), v.end());
  w.max = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  w.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - w.mean) * (x - w.mean);
    w.stddev = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return w;
}

namespace {

std::optional<std::string> knob_value(const KnobValues& job, const std::string& key) {
  auto it = job.inputs.find(key);
  if (it == job.inputs.end()) it = job.resolved.find(key);
  if (it == job.resolved.end()) return std::nullopt;
  std::string lower;
  for (char ch : it->second)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "true" || lower == "false") return lower;
  return it->second;
}

}  // namespace

std::vector<KnobDifference> knob_differences(const KnobValues& baseline, const KnobValues& job) {
  std::set<std::string> keys;
  for (const auto& [k, v] : baseline.inputs) keys.insert(k);
  for (const auto& [k, v] : job.inputs) keys.insert(k);
  std::vector<KnobDifference> diff;
  for (const auto& k : keys) {
    if (k == "name" || k == "description") continue;  // labels of a job, not knobs
    std::optional<std::string> a = knob_value(baseline, k), b = knob_value(job, k);
    if (a != b) diff.push_back({k, a, b});
  }
  return diff;
}

std::string describe_knob_value(const KnobDifference& d) {
  return d.key + "=" + d.value.value_or("unset");
}

std::string describe_knob_baseline(const KnobDifference& d) {
  return d.key + "=" + d.baseline.value_or("unset");
}

std::optional<std::pair<int, int>> parse_window(const std::string& text) {
  static const std::regex kWindow(R"((\d{1,6}):(\d{1,6}))");
  std::smatch m;
  if (text.size() > 16 || !std::regex_match(text, m, kWindow)) return std::nullopt;
  int first = *parse_decimal<int>(m[1].str()), last = *parse_decimal<int>(m[2].str());
  if (first > last) return std::nullopt;
  return std::pair{first, last};
}

}  // namespace bridge
