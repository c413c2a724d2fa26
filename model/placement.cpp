#include "model/placement.h"

#include <fmt/format.h>

namespace bridge {

namespace {

// The table's divisor for this job's nodes, or 0 when the table cannot know the layout.
int table_gpus_per_numa(const Recipe& r, const Topology& t) {
  const GpuType* gpu = find_gpu(t.gpu);
  if (!gpu) return 0;
  // Nodes declared unlike the table's (cluster.gpus_per_node_max) are not the table's layout.
  if (r.cluster.gpus_per_node_max.is_set() && *r.cluster.gpus_per_node_max.value != gpu->node_gpus)
    return 0;
  return gpus_per_numa_node(*gpu);
}

std::string numa_rule_text(const Topology& t, int gpus_per_numa) {
  if (gpus_per_numa == 0)
    return "NUMA node of the rank's GPU, read from sysfs at run time "
           "(/sys/bus/pci/devices/<GPU>/numa_node); numactl --cpunodebind=N --membind=N";
  const GpuType* gpu = find_gpu(t.gpu);
  return fmt::format(
      "NUMA node = local rank / {} ({}: {} GPUs and {} NUMA nodes per node); "
      "numactl --cpunodebind=N --membind=N",
      gpus_per_numa, t.gpu, gpu ? gpu->node_gpus : 0, gpu ? gpu->numa_nodes : 0);
}

}  // namespace

std::string_view binding_mode_name(BindingMode mode) {
  switch (mode) {
    case BindingMode::kNuma:
      return "numa";
    case BindingMode::kCustom:
      return "custom";
    case BindingMode::kNone:
      break;
  }
  return "none";
}

NumaBinding resolve_binding(const Recipe& r, const Topology& t, const ExecutorKind& executor,
                            Diagnostics& diags) {
  NumaBinding b;
  int per_numa = table_gpus_per_numa(r, t);
  const Field<std::string>& asked = r.runtime.binding;
  if (!executor.numa_binding) {
    b.source = fmt::format("the {} executor", executor.name);
    b.rule = fmt::format("not bound: the {} executor does not bind ranks to NUMA nodes yet",
                         executor.name);
    if (asked.is_set() && *asked.value == "numa")
      diags.warning("binding-not-applied", "runtime.binding", asked.loc,
                    fmt::format("runtime.binding is numa, but the {} executor does not bind ranks "
                                "to NUMA nodes yet; its ranks run unbound",
                                executor.name),
                    "use the Slurm executor for bound ranks, or drop runtime.binding");
    return b;
  }
  if (!asked.is_set()) {
    const GpuType* gpu = find_gpu(t.gpu);
    if (per_numa == 0 || !gpu || gpu->numa_nodes < 2) {
      b.source = "default (the GPU table knows no NUMA layout of more than one node for this GPU)";
      b.rule = "not bound: each rank runs where the scheduler starts it";
      return b;
    }
    b.mode = BindingMode::kNuma;
    b.gpus_per_numa = per_numa;
    b.source = fmt::format("default ({} nodes have {} NUMA nodes)", t.gpu, gpu->numa_nodes);
    b.rule = numa_rule_text(t, per_numa);
    return b;
  }
  b.source = "runtime.binding";
  if (*asked.value == "none") {
    b.rule = "not bound: each rank runs where the scheduler starts it";
  } else if (*asked.value == "custom") {
    b.mode = BindingMode::kCustom;
    b.rule =
        "the recipe's own: bridge-launch binds nothing (e.g. executor.slurm.srun_args "
        "--cpu-bind=..., or a wrapper in runtime.command)";
  } else {
    b.mode = BindingMode::kNuma;
    b.gpus_per_numa = per_numa;
    b.rule = numa_rule_text(t, per_numa);
    if (per_numa == 0)
      diags.info("binding-from-sysfs", "runtime.binding", asked.loc,
                 fmt::format("the GPU table has no NUMA layout for {}; each rank reads its GPU's "
                             "NUMA node from sysfs when it starts",
                             t.gpu.empty() ? std::string("this job's nodes") : t.gpu));
  }
  return b;
}

NvlinkPlacement resolve_nvlink_placement(const Recipe& r, const Topology& t,
                                         const ExecutorKind& executor) {
  NvlinkPlacement p;
  if (!executor.segment) return p;
  const Field<int64_t>& asked = *executor.segment(r.executor);
  if (asked.is_set()) {
    p.segment = *asked.value;
    p.source = fmt::format("executor.{}.segment", executor.name);
    p.loc = asked.loc;
    return p;
  }
  p.segment = default_nvlink_segment(t);
  if (p.segment > 0) {
    const GpuType* gpu = find_gpu(t.gpu);
    p.source = fmt::format("default ({}: an NVLink domain of {} nodes)", t.gpu,
                           gpu ? nvlink_domain_nodes(*gpu) : 0);
  }
  return p;
}

int64_t default_nvlink_segment(const Topology& t) {
  const GpuType* gpu = find_gpu(t.gpu);
  int64_t domain_nodes = gpu ? nvlink_domain_nodes(*gpu) : 0;
  if (domain_nodes == 0 || t.nodes < 1) return 0;
  if (t.nodes <= domain_nodes) return t.nodes;
  for (int64_t s = domain_nodes; s > 1; --s)
    if (t.nodes % s == 0) return s;
  return 1;
}

}  // namespace bridge
