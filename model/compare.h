// Overlap experiments: parsing Megatron iteration lines and comparing steady-state step
// times of several jobs.
//
// parse_iteration_lines understands Megatron's training log format (which bridge-probe
// prints too): "iteration  3/  8 | ... | elapsed time per iteration (ms): 412.7 | ...".
// window_stats summarizes the steady-state window [first, last] (inclusive): mean, min, max
// and sample standard deviation. knob_differences names the inputs in which two jobs differ.
#pragma once

#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bridge {

struct IterationSample {
  int iteration = 0;
  int total = 0;
  double step_ms = 0;
};

std::vector<IterationSample> parse_iteration_lines(std::istream& in);

struct WindowStats {
  size_t samples = 0;
  double mean = 0, min = 0, max = 0, stddev = 0;
};

WindowStats window_stats(const std::vector<IterationSample>& samples, int first, int last);

// Keys whose values differ (or exist in only one of the two maps).
// `name` and `description` are labels (ablate gives every variant its own name), not knobs.
std::vector<std::string> knob_differences(const std::map<std::string, std::string>& a,
                                          const std::map<std::string, std::string>& b);

// "3:8" -> {3, 8}; nullopt when malformed or first > last.
std::optional<std::pair<int, int>> parse_window(const std::string& text);

}  // namespace bridge
