// What CPU and memory binding this rank actually got, as the kernel reports it.
//
// Contract: binding_from_status(text) reads the Cpus_allowed_list and Mems_allowed_list
// fields of a /proc/<pid>/status text ("?" for a field that is missing);
// binding_report_line(rank) reads /proc/self/status and returns the one line every probe rank
// prints at start (`bridge-probe: rank R binding: cpus LIST mems LIST`), so that a NUMA
// binding (runtime.binding, docs/executors/slurm.md) can be checked from the rank logs. A
// missing /proc (not Linux) gives "?" for both; the line is informational and never fails a rank.
#pragma once

#include <string>
#include <string_view>

namespace bridge::probe {

struct Binding {
  std::string cpus = "?";  // Cpus_allowed_list, e.g. "0-15,32-47"
  std::string mems = "?";  // Mems_allowed_list, e.g. "0"
};

Binding binding_from_status(std::string_view status_text);

std::string binding_report_line(int rank);

}  // namespace bridge::probe
