#include "model/gpu_table.h"

#include <algorithm>

namespace bridge {

// gn defaults follow Megatron-Bridge's NUM_GPUS_PER_NODE_MAP for its seven types; h200 and
// a100 are the common 8-GPU HGX boards. NVL72 systems (GB200/GB300/VR200) put 4 GPUs in a
// node but 72 in one NVLink domain. R100's domain is not published yet (0: perf_env says so).
const std::vector<GpuType>& gpu_table() {
  static const std::vector<GpuType> kTable{
      {"a100", GpuArch::kAmpere, 8, 8, false},     {"h100", GpuArch::kHopper, 8, 8, true},
      {"h200", GpuArch::kHopper, 8, 8, false},     {"b200", GpuArch::kBlackwell, 8, 8, true},
      {"b300", GpuArch::kBlackwell, 8, 8, true},   {"gb200", GpuArch::kBlackwell, 72, 4, true},
      {"gb300", GpuArch::kBlackwell, 72, 4, true}, {"vr200", GpuArch::kRubin, 72, 4, true},
      {"r100", GpuArch::kRubin, 0, 1, true},
  };
  return kTable;
}

const GpuType* find_gpu(std::string_view name) {
  const auto& table = gpu_table();
  auto it =
      std::find_if(table.begin(), table.end(), [&](const GpuType& g) { return g.name == name; });
  return it == table.end() ? nullptr : &*it;
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
