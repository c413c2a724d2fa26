// The parallel layout bridge-probe emulates, read from the plan it receives, and the process
// groups of one rank, ordered as Megatron-Core orders ranks.
//
// Contract: read_layout() takes the Hydra overrides the probe adapter forwards
// (model.tensor_model_parallel_size, model.pipeline_model_parallel_size,
// model.virtual_pipeline_model_parallel_size, model.context_parallel_size,
// model.expert_model_parallel_size, model.expert_tensor_parallel_size, model.sequence_parallel)
// and the world size. An absent size or `null` is 1 (vpp: unset). It returns the layout, or an
// error text when a value is not a positive integer or the sizes do not fit the world
// (tp*pp*cp must divide it, and so must etp*ep*pp). Pure: no I/O.
//
// groups_of() lists, for one rank, the ranks of each of its groups in group order, with the
// rank orders of Megatron-Core's RankGenerator: dense layers "tp-cp-dp-pp" (tp varies fastest),
// expert layers "etp-ep-edp-pp" (edp = world/(etp*ep*pp)). So the TP group is tp consecutive
// ranks, the PP group strides by tp*cp*dp, and the EP group strides by etp inside a block of
// etp*ep ranks. The DP group used for gradients is the dense data-parallel group with context
// parallelism folded in (Megatron's "dp-cp" group), since gradients are reduced over both.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bridge::probe {

struct Layout {
  int world = 1;
  int tp = 1;
  int pp = 1;
  std::optional<int> vpp;  // Unset (null): the non-interleaved schedule.
  int cp = 1;
  int ep = 1;
  int etp = 1;
  int dp = 1;   // world / (tp * pp * cp)
  int edp = 1;  // world / (etp * ep * pp)
  bool sequence_parallel = false;

  int chunks_per_stage() const { return vpp.value_or(1); }
};

struct LayoutResult {
  std::optional<Layout> layout;
  std::string error;  // Set when layout is empty.
};

LayoutResult read_layout(const std::vector<std::string>& overrides, int world_size);

// One process group as seen by a member: the member ranks in group order and this rank's index.
struct Group {
  std::vector<int> ranks;
  int index = 0;

  int size() const { return static_cast<int>(ranks.size()); }
  int next() const { return ranks[static_cast<size_t>((index + 1) % size())]; }
  int prev() const { return ranks[static_cast<size_t>((index + size() - 1) % size())]; }
};

struct RankGroups {
  Group tp;
  Group pp;
  Group dp;  // dp-cp
  Group ep;
};

RankGroups groups_of(const Layout& layout, int rank);

// The ranks this rank needs a direct connection to: its ring neighbours in the TP, PP and DP
// groups and every member of its EP group (the all-to-all talks to all of them). The relation
// is symmetric, so both ends agree on which connections exist. Sorted, without `rank`.
std::vector<int> peers_of(const Layout& layout, int rank);

}  // namespace bridge::probe
