#include "model/gpu_table.h"

#include <algorithm>

namespace bridge {

// gn defaults follow Megatron-Bridge's NUM_GPUS_PER_NODE_MAP for its seven types; h200 and
// a100 are the common 8-GPU HGX boards. NVL72 systems (GB200/GB300/VR200) put 4 GPUs in a
// node but 72 in one NVLink domain. R100's domain and node are not published yet (0: perf_env
// and -gn say so). NUMA: an HGX board of 8 GPUs sits on two CPU sockets, GPUs 0-3 on the first
// (Megatron-Bridge's performance harness binds SLURM_LOCALID / 4); a GB200/GB300/VR200 tray
// has two CPUs with two GPUs each (SLURM_LOCALID / 2). DGX A100 spreads its GPUs over eight
// NUMA nodes in no rank order, so its layout is left to sysfs (0).
const std::vector<GpuType>& gpu_table() {
  static const std::vector<GpuType> kTable{
      {"a100", GpuArch::kAmpere, 8, 8, false, 8, 0},
      {"h100", GpuArch::kHopper, 8, 8, true, 8, 2},
      {"h200", GpuArch::kHopper, 8, 8, false, 8, 2},
      {"b200", GpuArch::kBlackwell, 8, 8, true, 8, 2},
      {"b300", GpuArch::kBlackwell, 8, 8, true, 8, 2},
      {"gb200", GpuArch::kBlackwell, 72, 4, true, 4, 2},
      {"gb300", GpuArch::kBlackwell, 72, 4, true, 4, 2},
      {"vr200", GpuArch::kRubin, 72, 4, true, 4, 2},
      {"r100", GpuArch::kRubin, 0, 1, true, 0, 0},
  };
  return kTable;
}

const GpuType* find_gpu(std::string_view name) {
  const auto& table = gpu_table();
  auto it =
      std::find_if(table.begin(), table.end(), [&](const GpuType& g) { return g.name == name; });
  return it == table.end() ? nullptr : &*it;
}

int gpus_per_numa_node(const GpuType& gpu) {
  if (gpu.node_gpus <= 0 || gpu.numa_nodes <= 0 || gpu.node_gpus % gpu.numa_nodes != 0) return 0;
  return gpu.node_gpus / gpu.numa_nodes;
}

int nvlink_domain_nodes(const GpuType& gpu) {
  if (gpu.node_gpus <= 0 || gpu.nvlink_domain <= gpu.node_gpus) return 0;
  return gpu.nvlink_domain / gpu.node_gpus;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const auto& g : gpu_table()) names.emplace_back(g.name);
  return names;
}

namespace {
constexpr std::pair<GpuArch, std::string_view> kArchNames[] = {{GpuArch::kAmpere, "ampere"},
                                                               {GpuArch::kHopper, "hopper"},
                                                               {GpuArch::kBlackwell, "blackwell"},
                                                               {GpuArch::kRubin, "rubin"}};
}  // namespace

std::string_view arch_name(GpuArch arch) {
  for (auto [a, name] : kArchNames)
    if (a == arch) return name;
  return "unknown";
}

bool parse_arch(std::string_view name, GpuArch& out) {
  for (auto [a, n] : kArchNames)
    if (n == name) {
      out = a;
      return true;
    }
  return false;
}

}  // namespace bridge
