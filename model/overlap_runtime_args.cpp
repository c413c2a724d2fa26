// overlap_runtime_args: the resolved model-level overlap fields as Hydra-style overrides
// (`comm_overlap.<field>=<value>`) for runtime.pass_overrides.
//
// Every resolved field is forwarded, the data-parallel ones (D1-D3) included: a runtime that
// re-derived them could reach another value than the plan (its D1 would silently turn an
// explicit `false` back on, or pick its own bucket size), and the launch env was derived
// from the plan's values. Null fields are omitted: the runtime's own default (the same M0
// value) applies.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/overlap.h"

namespace bridge {

namespace {

std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(int64_t v) { return std::to_string(v); }
std::string value_text(const std::string& v) { return v; }

// A value the runtime already holds from its recipe (D4) is shown by the plan, not sent.
template <class T>
bool sent(const Resolved<T>& r) {
  return r.value.has_value() && r.rule != "D4";
}

template <class T>
void add(std::vector<std::string>& out, const char* field, const Resolved<T>& r) {
  if (sent(r)) out.push_back(fmt::format("comm_overlap.{}={}", field, value_text(*r.value)));
}

// The preset NAME when one was used (the runtime knows the presets and the line stays
// readable); an inline mapping as a Hydra dict, so it is not silently lost.
void add_tp_config(std::vector<std::string>& out, const ResolvedOverlap& o) {
  if (!o.tp_comm_overlap_cfg.value) return;
  std::string value = o.tp_comm_overlap_preset.empty()
                          ? userbuffers_hydra_value(*o.tp_comm_overlap_cfg.value)
                          : o.tp_comm_overlap_preset;
  out.push_back("comm_overlap.tp_comm_overlap_cfg=" + value);
}

}  // namespace

namespace {

// The scalar fields after tp_comm_overlap and its config, in the order both forms send them.
template <class Fn>
void for_each_scalar_field(const ResolvedOverlap& o, Fn&& fn) {
  fn("tp_comm_bootstrap_backend", o.tp_comm_bootstrap_backend);
  fn("overlap_p2p_comm", o.overlap_p2p_comm);
  fn("batch_p2p_comm", o.batch_p2p_comm);
  fn("defer_embedding_wgrad_compute", o.defer_embedding_wgrad_compute);
  fn("wgrad_deferral_limit", o.wgrad_deferral_limit);
  fn("overlap_moe_expert_parallel_comm", o.overlap_moe_expert_parallel_comm);
  fn("delay_wgrad_compute", o.delay_wgrad_compute);
  fn("overlap_grad_reduce", o.overlap_grad_reduce);
  fn("overlap_param_gather", o.overlap_param_gather);
  fn("overlap_param_gather_with_optimizer_step", o.overlap_param_gather_with_optimizer_step);
  fn("align_param_gather", o.align_param_gather);
  fn("bucket_size", o.bucket_size);
}

}  // namespace

const std::vector<std::string>& overlap_field_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names{"tp_comm_overlap", "tp_comm_overlap_cfg"};
    for_each_scalar_field(ResolvedOverlap{},
                          [&](const char* name, const auto&) { names.emplace_back(name); });
    return names;
  }();
  return kNames;
}

std::vector<std::string> overlap_runtime_args(const OverlapResolution& r) {
  const ResolvedOverlap& o = r.overlap;
  std::vector<std::string> out;
  add(out, "tp_comm_overlap", o.tp_comm_overlap);
  add_tp_config(out, o);
  for_each_scalar_field(o,
                        [&](const char* name, const auto& resolved) { add(out, name, resolved); });
  return out;
}

std::string megatron_bridge_comm_overlap_value(const OverlapResolution& r) {
  constexpr const char* kModule = "megatron.bridge.training.comm_overlap";
  const ResolvedOverlap& o = r.overlap;
  std::vector<std::string> fields{
      fmt::format("_target_:{}.CommOverlapConfig", kModule),
      fmt::format("tp_comm_overlap:{}", value_text(o.tp_comm_overlap.value.value_or(false)))};
  // A preset is sent as its layers too, not by reference: the release's preset objects keep
  // PipelineOverlapCfg's default fp8_buf, the tuple (False,), which Python reads as true
  // (docs/overlap.md, "Userbuffers presets"); spelled out, every layer holds the plan's value.
  if (o.tp_comm_overlap_cfg.value)
    fields.push_back("tp_comm_overlap_cfg:" +
                     userbuffers_megatron_bridge_value(*o.tp_comm_overlap_cfg.value));
  for_each_scalar_field(o, [&](const char* name, const auto& resolved) {
    if (sent(resolved)) fields.push_back(fmt::format("{}:{}", name, value_text(*resolved.value)));
  });
  return fmt::format("{{{}}}", fmt::join(fields, ","));
}

}  // namespace bridge
