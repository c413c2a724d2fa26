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

// A job's knobs: what its recipe and command line set (`inputs`, flattened "section.key" ->
// value text), and what its plan resolved recipe keys to (`resolved`, the same spelling), for
// the keys the job left unset.
struct KnobValues {
  std::map<std::string, std::string> inputs;
  std::map<std::string, std::string> resolved;
};

// A key in which two jobs differ, with each job's value; nullopt: the job leaves it unset and
// its plan does not say what it resolved to.
struct KnobDifference {
  std::string key;
  std::optional<std::string> baseline;
  std::optional<std::string> value;
  bool operator==(const KnobDifference&) const = default;
};

// The keys either job sets whose values differ. A key one job leaves unset takes the value its
// plan resolved it to, so a key set to what the other job resolves anyway is no difference.
// `name` and `description` are labels (ablate gives every variant its own name), not knobs;
// true/false are compared as booleans whatever their case.
std::vector<KnobDifference> knob_differences(const KnobValues& baseline, const KnobValues& job);

// "key=value" with the job's value, or with the baseline's; `unset` for a value nullopt.
std::string describe_knob_value(const KnobDifference& d);
std::string describe_knob_baseline(const KnobDifference& d);

// "3:8" -> {3, 8}; nullopt when malformed or first > last.
std::optional<std::pair<int, int>> parse_window(const std::string& text);

}  // namespace bridge
