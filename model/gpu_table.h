// The GPU table: every GPU type bridge-launch knows, in one place (docs/recipe.md, "The GPU
// table", prints it as a table).
//
// Contract: find_gpu(name) returns the entry for a lower-case GPU name, or nullptr. The
// architecture decides perf_env's rules (Hopper-or-older vs Blackwell-or-newer), the NVLink
// domain decides HybridEP settings and, on trays whose domain spans nodes, the Slurm segment
// (nvlink_domain_nodes), and default_gpus_per_node is gn when neither -gn nor
// cluster.gpus_per_node is given. node_gpus is what one node (one tray) holds: a larger -gn is
// refused unless cluster.gpus_per_node_max says the nodes are unusual. numa_nodes gives the
// rule that binds a rank to its GPU's NUMA node (gpus_per_numa_node). `megatron_bridge_name`
// is true for the types Megatron-Bridge's run_script.py accepts as `-g` (the megatron_bridge
// runtime adapter refuses the others). A GPU missing here is declared in a recipe with
// `cluster.gpu_arch` (see docs/recipe.md).
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
  int node_gpus;   // GPUs in one node (tray); 0 = not known (-gn is not capped)
  int numa_nodes;  // NUMA nodes per node, GPUs split evenly in PCI order; 0 = not known
};

const std::vector<GpuType>& gpu_table();
const GpuType* find_gpu(std::string_view name);
std::vector<std::string> gpu_names();

// The table's binding rule: local rank r sits on NUMA node r / gpus_per_numa_node. 0 where
// the table does not know the layout (the node count or the NUMA nodes are unknown, or the
// GPUs do not split evenly); the NUMA node is then read from sysfs at run time.
int gpus_per_numa_node(const GpuType& gpu);

// Nodes in one NVLink domain where the domain spans nodes (GB200/GB300/VR200 NVL72: 72 / 4 =
// 18), else 0.
int nvlink_domain_nodes(const GpuType& gpu);

// "ampere", "hopper", "blackwell", "rubin" (the values of cluster.gpu_arch).
std::string_view arch_name(GpuArch arch);
bool parse_arch(std::string_view name, GpuArch& out);

inline bool blackwell_or_newer(GpuArch arch) { return arch >= GpuArch::kBlackwell; }

}  // namespace bridge
