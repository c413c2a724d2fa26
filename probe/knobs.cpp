#include "probe/knobs.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "probe/options.h"
#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

std::optional<bool> bool_value(const std::vector<std::string>& overrides, const std::string& key) {
  auto text = override_value(overrides, key);
  if (!text || *text == "null") return std::nullopt;
  std::transform(text->begin(), text->end(), text->begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return *text == "true" || *text == "1";
}

// comm_overlap.<field>, else ddp.<field> (what the resolution applied to the DDP config).
std::optional<bool> dp_bool(const std::vector<std::string>& overrides, const std::string& field) {
  if (auto value = bool_value(overrides, "comm_overlap." + field)) return value;
  return bool_value(overrides, "ddp." + field);
}

bool flag(const std::vector<std::string>& overrides, const std::string& field) {
  return bool_value(overrides, "comm_overlap." + field).value_or(false);
}

// The fields in the order the adapter forwards them (model/overlap_runtime_args.cpp).
constexpr const char* kFields[] = {"tp_comm_overlap",
                                   "tp_comm_overlap_cfg",
                                   "tp_comm_bootstrap_backend",
                                   "overlap_p2p_comm",
                                   "batch_p2p_comm",
                                   "defer_embedding_wgrad_compute",
                                   "wgrad_deferral_limit",
                                   "overlap_moe_expert_parallel_comm",
                                   "delay_wgrad_compute",
                                   "overlap_grad_reduce",
                                   "overlap_param_gather",
                                   "overlap_param_gather_with_optimizer_step",
                                   "align_param_gather",
                                   "bucket_size"};

// The fc2_fprop method of each of the launcher's 19 userbuffers presets
// (model/userbuffers_presets.cpp; a unit test compares the two). Every `pipeline` cell of
// the presets expands to num_splits 4.
struct PresetSplit {
  std::string_view name;
  bool ring_exchange;
};
constexpr std::array<PresetSplit, 19> kPresetSplits{{
    {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", false},
    {"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", true},
    {"userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", false},
    {"userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", true},
    {"userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", false},
    {"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", true},
    {"userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", false},
    {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", true},
    {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora", true},
    {"userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora", false},
    {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048", false},
    {"userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048", false},
    {"userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048", true},
    {"userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048", true},
    {"userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048", true},
    {"userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048", true},
    {"userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096", true},
    {"userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096", false},
    {"userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096", true},
}};

constexpr int kTeDefaultSplits = 4;

// `key:value` inside one layer's `{...}` of an inline mapping, e.g. method:pipeline.
std::optional<std::string> layer_setting(std::string_view layer, std::string_view key) {
  const std::string needle = std::string(key) + ":";
  size_t at = 0;
  while ((at = layer.find(needle, at)) != std::string_view::npos) {
    if (at == 0 || layer[at - 1] == '{' || layer[at - 1] == ',') {
      const size_t begin = at + needle.size();
      const size_t end = layer.find_first_of(",}", begin);
      return std::string(layer.substr(begin, end - begin));
    }
    at += needle.size();
  }
  return std::nullopt;
}

TpSplit split_of_method(const std::string& method, std::optional<int64_t> num_splits, int tp,
                        const std::string& where) {
  if (method == "ring_exchange") {
    return {tp, where + ": fc2_fprop ring_exchange, one chunk per ring step (tp=" +
                    std::to_string(tp) + ")"};
  }
  if (method == "pipeline") {
    const int splits = static_cast<int>(std::clamp<int64_t>(num_splits.value_or(4), 1, 64));
    return {splits, where + ": fc2_fprop pipeline, num_splits=" + std::to_string(splits)};
  }
  return {1, where + ": fc2_fprop " + method + ", not split"};
}

std::string tp_effect(const Layout& l, const OverlapKnobs& k) {
  if (l.tp == 1) return "inactive: tp=1, no TP group";
  if (!l.sequence_parallel) {
    return k.tp_comm_overlap ? "REFUSED: needs sequence_parallel (Megatron-Bridge turns TP overlap "
                               "off the same way); tp phase runs GEMM + exposed all-reduce"
                             : "tp phase: no sequence parallel, GEMM then exposed all-reduce";
  }
  return k.tp_comm_overlap ? "tp phase: all-gather/reduce-scatter split into chunks pipelined "
                             "with the GEMM chunks"
                           : "tp phase: all-gather, GEMM, reduce-scatter one after another";
}

std::string p2p_effect(const Layout& l, const OverlapKnobs& k, bool overlap_field) {
  if (l.pp == 1) return "inactive: pp=1, no pipeline stages";
  if (overlap_field) {
    return k.overlap_p2p_comm ? "pp phase: each stage's send/recv overlaps the next chunk's compute"
                              : "pp phase: send/recv exposed after each chunk";
  }
  return k.batch_p2p_comm ? "pp phase: send and recv batched into one exchange"
                          : "pp phase: send and recv one after the other (unbatched order)";
}

std::string ep_effect(const Layout& l, const OverlapKnobs& k, bool delay_field) {
  if (l.ep == 1) return "inactive: ep=1, no all-to-all";
  if (delay_field) {
    return k.delay_wgrad_compute ? "ep phase: weight-gradient compute runs behind the combine "
                                   "all-to-all"
                                 : "ep phase: weight-gradient compute before the combine";
  }
  return k.overlap_moe_expert_parallel_comm
             ? "ep phase: a micro-batch's dispatch/combine all-to-all overlaps another's expert "
               "compute"
             : "ep phase: dispatch, expert compute, combine one after another";
}

std::string dp_effect(const Layout& l, const OverlapKnobs& k, const std::string& field,
                      const BucketPlan& buckets) {
  if (l.dp == 1) return "inactive: dp=1, no data-parallel group";
  if (field == "overlap_grad_reduce") {
    return "dp-grad phase: bucket all-reduce (the probe's --overlap/BRIDGE_OVERLAP_GRAD_REDUCE "
           "decide; this value is the fallback)";
  }
  if (field == "bucket_size") {
    return str_printf("dp-grad phase: %d gradient bucket%s (%s)", buckets.buckets,
                      buckets.buckets == 1 ? "" : "s", buckets.source.c_str());
  }
  if (!k.distributed_optimizer) return "inactive: no distributed optimizer, no param all-gather";
  return k.overlap_param_gather
             ? "dp-param phase: bucket b's param all-gather overlaps bucket b-1's forward"
             : "dp-param phase: every param all-gather before the forward";
}

std::string cfg_effect(const Layout& l, const OverlapKnobs& k) {
  const TpSplit split = plan_tp_split(k.tp_comm_overlap_cfg, l.tp);
  if (l.tp == 1) return "inactive: tp=1, no TP group";
  const std::string chunks = str_printf("%d chunk%s per TP GEMM (%s)", split.chunks,
                                        split.chunks == 1 ? "" : "s", split.source.c_str());
  if (!l.sequence_parallel || !k.tp_comm_overlap) {
    return "tp phase: would split into " + chunks + ", but tp_comm_overlap does not apply here";
  }
  return "tp phase: " + chunks + "; SM counts, CGA sizes and fp8/atomic settings are not modeled";
}

std::string defer_effect(const Layout& l, const OverlapKnobs& k, const std::string& field) {
  if (l.pp == 1) return "inactive: pp=1, no pipeline flush to defer the embedding wgrad into";
  if (!k.defer_embedding_wgrad_compute) {
    return field == "wgrad_deferral_limit"
               ? "pp phase: unused, defer_embedding_wgrad_compute is off"
               : "pp phase: the last stage's output-layer wgrad runs in each micro-batch's "
                 "backward, before its gradients are sent";
  }
  if (field == "wgrad_deferral_limit") {
    return k.wgrad_deferral_limit == 0
               ? "pp phase: 0 = every micro-batch's embedding wgrad is deferred"
               : str_printf("pp phase: the first %lld micro-batches' embedding wgrads are deferred",
                            static_cast<long long>(k.wgrad_deferral_limit));
  }
  return "pp phase: the last stage's output-layer wgrad moves out of the backward's critical "
         "path to the end, where it runs while the last send/recv is in flight";
}

std::string param_gather_effect(const Layout& l, const OverlapKnobs& k, const std::string& field) {
  if (l.dp == 1) return "inactive: dp=1, no data-parallel group";
  if (!k.distributed_optimizer) return "inactive: no distributed optimizer, no param all-gather";
  if (!k.overlap_param_gather) return "inactive: needs overlap_param_gather";
  if (field == "overlap_param_gather_with_optimizer_step") {
    return k.overlap_param_gather_with_optimizer_step
               ? "dp-param phase: the first bucket's param all-gather starts during the "
                 "optimizer step instead of at the forward"
               : "dp-param phase: the first bucket's param all-gather waits for the forward";
  }
  if (l.pp == 1 || l.chunks_per_stage() == 1) {
    return "inactive: one model chunk per rank (needs pp > 1 and vpp > 1)";
  }
  return k.align_param_gather
             ? "dp-param phase: every model chunk's param all-gather launched together at the "
               "start of the forward"
             : "dp-param phase: each model chunk's param all-gather launched when that chunk "
               "first runs";
}

std::string effect(const std::string& field, const Layout& l, const OverlapKnobs& k,
                   const BucketPlan& buckets) {
  if (field == "tp_comm_overlap") return tp_effect(l, k);
  if (field == "tp_comm_overlap_cfg") return cfg_effect(l, k);
  if (field == "tp_comm_bootstrap_backend") {
    return "bootstrap only: no effect on step time, nothing to emulate (it picks how Transformer "
           "Engine sets up its userbuffers communicator once at start-up)";
  }
  if (field == "overlap_p2p_comm") return p2p_effect(l, k, true);
  if (field == "batch_p2p_comm") return p2p_effect(l, k, false);
  if (field == "defer_embedding_wgrad_compute" || field == "wgrad_deferral_limit") {
    return defer_effect(l, k, field);
  }
  if (field == "overlap_moe_expert_parallel_comm") return ep_effect(l, k, false);
  if (field == "delay_wgrad_compute") return ep_effect(l, k, true);
  if (field == "overlap_param_gather_with_optimizer_step" || field == "align_param_gather") {
    return param_gather_effect(l, k, field);
  }
  return dp_effect(l, k, field, buckets);
}

}  // namespace

OverlapKnobs read_knobs(const std::vector<std::string>& overrides) {
  OverlapKnobs k;
  k.tp_comm_overlap = flag(overrides, "tp_comm_overlap");
  k.overlap_p2p_comm = flag(overrides, "overlap_p2p_comm");
  k.batch_p2p_comm = flag(overrides, "batch_p2p_comm");
  k.overlap_moe_expert_parallel_comm = flag(overrides, "overlap_moe_expert_parallel_comm");
  k.delay_wgrad_compute = flag(overrides, "delay_wgrad_compute");
  k.distributed_optimizer = bool_value(overrides, "ddp.use_distributed_optimizer").value_or(false);
  k.overlap_param_gather = dp_bool(overrides, "overlap_param_gather").value_or(false);
  k.align_param_gather = dp_bool(overrides, "align_param_gather").value_or(false);
  k.overlap_param_gather_with_optimizer_step =
      bool_value(overrides, "comm_overlap.overlap_param_gather_with_optimizer_step")
          .value_or(bool_value(overrides, "optimizer.overlap_param_gather_with_optimizer_step")
                        .value_or(false));
  k.defer_embedding_wgrad_compute = flag(overrides, "defer_embedding_wgrad_compute");
  if (auto limit = override_value(overrides, "comm_overlap.wgrad_deferral_limit")) {
    if (const auto value = parse_int64(*limit)) k.wgrad_deferral_limit = *value;
  }
  k.tp_comm_overlap_cfg = override_value(overrides, "comm_overlap.tp_comm_overlap_cfg");
  if (k.tp_comm_overlap_cfg == "null") k.tp_comm_overlap_cfg.reset();
  k.overlap_grad_reduce = dp_bool(overrides, "overlap_grad_reduce");
  auto size = override_value(overrides, "comm_overlap.bucket_size");
  if (!size) size = override_value(overrides, "ddp.bucket_size");
  if (size) {
    const auto value = parse_int64(*size);
    if (value && *value > 0) k.bucket_size = *value;
  }
  return k;
}

TpSplit plan_tp_split(const std::optional<std::string>& cfg, int tp) {
  if (!cfg) return {kTeDefaultSplits, "no tp_comm_overlap_cfg: Transformer Engine's default split"};
  for (const PresetSplit& p : kPresetSplits) {
    if (p.name == *cfg) {
      return split_of_method(p.ring_exchange ? "ring_exchange" : "pipeline", kTeDefaultSplits, tp,
                             "preset");
    }
  }
  if (cfg->empty() || cfg->front() != '{') {
    return {kTeDefaultSplits, "unknown preset name: Transformer Engine's default split"};
  }
  // An inline mapping: {qkv_dgrad:{method:bulk,...},...,fc2_fprop:{method:pipeline,...}}.
  const std::string_view text(*cfg);
  const size_t at = text.find("fc2_fprop:{");
  if (at == std::string_view::npos) return {1, "inline mapping without fc2_fprop: not split"};
  const size_t begin = at + std::string_view("fc2_fprop:").size();
  const std::string_view layer = text.substr(begin, text.find('}', begin) - begin + 1);
  const auto method = layer_setting(layer, "method");
  if (!method) return {kTeDefaultSplits, "inline fc2_fprop without a method: default split"};
  const auto splits = layer_setting(layer, "num_splits");
  return split_of_method(*method, splits ? parse_int64(*splits) : std::nullopt, tp,
                         "inline mapping");
}

int deferred_embedding_wgrads(const OverlapKnobs& knobs, int microbatches) {
  if (!knobs.defer_embedding_wgrad_compute || knobs.wgrad_deferral_limit < 0) return 0;
  if (knobs.wgrad_deferral_limit == 0) return microbatches;
  return static_cast<int>(std::min<int64_t>(knobs.wgrad_deferral_limit, microbatches));
}

BucketPlan plan_buckets(int64_t params, std::optional<int> buckets_flag,
                        std::optional<int64_t> bucket_size) {
  if (buckets_flag) return {*buckets_flag, "--buckets"};
  if (bucket_size) {
    const int64_t count = (params + *bucket_size - 1) / *bucket_size;
    return {static_cast<int>(std::clamp<int64_t>(count, 1, 1 << 20)),
            str_printf("bucket_size=%lld for %lld params", static_cast<long long>(*bucket_size),
                       static_cast<long long>(params))};
  }
  return {8, "default"};
}

std::vector<std::string> describe_knobs(const std::vector<std::string>& overrides,
                                        const Layout& layout, const OverlapKnobs& knobs,
                                        const BucketPlan& buckets) {
  std::vector<std::string> lines;
  for (const std::string field : kFields) {
    const auto value = override_value(overrides, "comm_overlap." + field);
    if (!value) continue;
    lines.push_back(field + "=" + *value + ": " + effect(field, layout, knobs, buckets));
  }
  return lines;
}

}  // namespace bridge::probe
