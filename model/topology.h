// Topology: the parallel layout of the job, derived from the recipe (rules T1-T6 of
// docs/overlap.md).
//
// compute_topology checks that the GPU counts divide as the parallel sizes require and
// returns the layout with dp and the node count computed; it records errors (and the T6
// sequence-parallel warning) and returns std::nullopt when the layout is impossible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/diagnostics.h"
#include "model/gpu_table.h"
#include "model/recipe.h"

namespace bridge {

struct Topology {
  std::string gpu;  // lower-case GPU type, "" when not given
  // From the GPU table (gpu_table.h) or the recipe's cluster.gpu_arch; unset without a GPU.
  std::optional<GpuArch> arch;
  int nvlink_domain = 0;  // 0 = not known
  int64_t num_gpus = 1;
  int64_t gpus_per_node = 1;
  // GPUs one node holds: cluster.gpus_per_node_max, else the GPU table's node; 0 = not known.
  int64_t node_gpus = 0;
  int64_t nodes = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  std::optional<int64_t> vpp;
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t etp = 1;
  int64_t dp = 1;

  int64_t vp() const { return vpp.value_or(1); }
  bool blackwell_or_newer() const { return arch && bridge::blackwell_or_newer(*arch); }
};

std::optional<Topology> compute_topology(const Recipe& recipe, Diagnostics& diags);

// Directories that are local to each node on the clusters our users run on (tmpfs or a local
// disk: /tmp, /var/tmp, /dev/shm, /run and below): what a multi-node job writes there is
// split across its nodes.
bool on_node_local_storage(std::string_view dir);

// `dir` is `root` or a path below it ("/lustre/a" is below "/lustre", "/lustre2" is not). Both
// absolute and without a trailing slash, as the recipe checks leave them; "/" holds all.
bool path_at_or_below(std::string_view dir, std::string_view root);

}  // namespace bridge
