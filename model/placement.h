// Placement: where a job's ranks sit inside their nodes and across NVLink domains, derived
// from the GPU table (gpu_table.h), the topology and the recipe.
//
// Contract: resolve_binding never fails; it records at most one diagnostic and returns
// the binding every rank gets (runtime.binding; by default `numa` where the GPU table knows a
// layout of more than one NUMA node per node). With kNuma and gpus_per_numa > 0 the rank's
// NUMA node is the table's rule, local rank / gpus_per_numa; with gpus_per_numa == 0 it is read
// at run time from sysfs (the numa_node of the rank's GPU), because the table cannot know
// the node (an unknown GPU, an A100, or cluster.gpus_per_node_max). The shell that applies it
// lives with the executors (executors/numa_bind.h). default_nvlink_segment is the Slurm
// `--segment` Megatron-Bridge's performance harness asks for on trays whose NVLink domain spans
// nodes; 0 where there is none to ask for. resolve_nvlink_placement is the plan's one answer
// for every executor that places by NVLink domain (Slurm --segment, Kubernetes topology).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/diagnostics.h"
#include "model/executor_kind.h"
#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

enum class BindingMode { kNone, kNuma, kCustom };

struct NumaBinding {
  BindingMode mode = BindingMode::kNone;
  int gpus_per_numa = 0;  // with kNuma: the table's divisor; 0 = from sysfs at run time
  std::string source;     // "runtime.binding" or "default (...)"
  std::string rule;       // what a rank does, in words (plan, dry-run comments)
};

std::string_view binding_mode_name(BindingMode mode);

// `executor`: the chosen executor's row; one that does not bind (ExecutorKind::numa_binding)
// gets kNone, with a warning when the recipe asked for numa.
NumaBinding resolve_binding(const Recipe& recipe, const Topology& topology,
                            const ExecutorKind& executor, Diagnostics& diags);

// Where the job's nodes go across NVLink domains: blocks of `segment` nodes, each inside one
// domain (Slurm: sbatch --segment; Kubernetes: a Kueue topology request or pod affinity).
struct NvlinkPlacement {
  int64_t segment = 0;  // nodes per block; 0 = nothing asked
  std::string source;   // "executor.<slurm|kubernetes>.segment" or "default (...)"
  SourceLoc loc;        // of the recipe's key, when set
};

// The executor's executor.<name>.segment when set, else default_nvlink_segment; 0 for an
// executor that cannot place by NVLink domain (ExecutorKind::segment).
NvlinkPlacement resolve_nvlink_placement(const Recipe& recipe, const Topology& topology,
                                         const ExecutorKind& executor);

// Nodes per NVLink-domain block for `nodes` nodes of a tray type (GB200/GB300/VR200: a domain
// of 18 nodes): all of them up to a domain, else the largest divisor of the node count within
// a domain. 0 when the GPU's NVLink domain is one node or not known.
int64_t default_nvlink_segment(const Topology& topology);

}  // namespace bridge
