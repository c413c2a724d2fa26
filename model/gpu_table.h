// The GPU table: every GPU type bridge-launch knows, in one place.
//
// Contract: find_gpu(name) returns the entry for a lower-case GPU name, or nullptr. The
// architecture decides perf_env's rules (Hopper-or-older vs Blackwell-or-newer), the NVLink
// domain decides HybridEP settings, and default_gpus_per_node is gn when neither -gn nor
// cluster.gpus_per_node is given. `megatron_bridge_name` is true for the types Megatron-Bridge's
// run_script.py accepts as `-g` (the megatron_bridge runtime adapter refuses the others).
// A GPU missing here is declared in a recipe with `cluster.gpu_arch` (see docs/recipe.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bridge {

enum class GpuArch { kAmpere, kHopper, kBlackwell, kRubin };

struct GpuType {
  std::string_view name;
  GpuArch arch;
  int nvlink_domain;  // GPUs in one NVLink domain; 0 = not known
  int default_gpus_per_node;
  bool megatron_bridge_name;
};

const std::vector<GpuType>& gpu_table();
const GpuType* find_gpu(std::string_view name);
std::vector<std::string> gpu_names();

// "ampere", "hopper", "blackwell", "rubin" (the values of cluster.gpu_arch).
std::string_view arch_name(GpuArch arch);
bool parse_arch(std::string_view name, GpuArch& out);

inline bool blackwell_or_newer(GpuArch arch) { return arch >= GpuArch::kBlackwell; }

}  // namespace bridge
