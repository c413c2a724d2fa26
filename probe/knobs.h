// The resolved overlap fields bridge-probe receives (comm_overlap.* overrides from the probe
// adapter; the data-parallel ones also as ddp.*), and what the probe does with each.
//
// Contract: read_knobs() reads the last occurrence of each key (Hydra order); a boolean is
// true/false (any case) or 1/0; anything else counts as false. describe_knobs() returns one line
// per forwarded field, in the adapter's order: `field=value` and what it changes in this run (the
// emulated phase it switches, why that phase is inactive in this layout, or why the probe does not
// model it). Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probe/layout.h"

namespace bridge::probe {

struct OverlapKnobs {
  bool tp_comm_overlap = false;
  bool overlap_p2p_comm = false;
  bool batch_p2p_comm = false;
  bool overlap_moe_expert_parallel_comm = false;
  bool delay_wgrad_compute = false;
  bool distributed_optimizer = false;
  bool overlap_param_gather = false;
  bool overlap_param_gather_with_optimizer_step = false;
  bool align_param_gather = false;
  bool defer_embedding_wgrad_compute = false;
  // Megatron-Core's meaning: 0 defers every micro-batch's embedding wgrad, N > 0 the first N;
  // absent is Megatron-Core's default 0. Negative with the deferral on is refused.
  int64_t wgrad_deferral_limit = 0;
  std::optional<std::string> tp_comm_overlap_cfg;  // A preset name or an inline Hydra mapping.
  std::optional<bool> overlap_grad_reduce;         // Only a fallback: --overlap and the env win.
  std::optional<int64_t> bucket_size;              // Parameters per gradient bucket.
};

OverlapKnobs read_knobs(const std::vector<std::string>& overrides);

// What the probe derives for the DP phase: the bucket count and where it came from.
struct BucketPlan {
  int buckets = 1;
  std::string source;
};
BucketPlan plan_buckets(int64_t params, std::optional<int> buckets_flag,
                        std::optional<int64_t> bucket_size);

// How many chunks each TP GEMM (with its all-gather and reduce-scatter) is split into when
// tp_comm_overlap applies, from tp_comm_overlap_cfg's fc2_fprop layer (the reduce-scatter that
// ends a layer, the one layer whose method differs between the userbuffers presets):
// `pipeline` splits into num_splits chunks (Transformer Engine's default 4), `ring_exchange`
// into tp chunks (one per ring step), `bulk` or a dropped layer is not split (1). Without a
// cfg, or with one the probe cannot read, TE's default pipeline split (4). `source` says which.
struct TpSplit {
  int chunks = 4;
  std::string source;
};
TpSplit plan_tp_split(const std::optional<std::string>& cfg, int tp);

// How many micro-batches' embedding weight gradients are deferred to the end of the backward
// (defer_embedding_wgrad_compute with wgrad_deferral_limit), 0 when the deferral is off.
int deferred_embedding_wgrads(const OverlapKnobs& knobs, int microbatches);

std::vector<std::string> describe_knobs(const std::vector<std::string>& overrides,
                                        const Layout& layout, const OverlapKnobs& knobs,
                                        const BucketPlan& buckets);

}  // namespace bridge::probe
