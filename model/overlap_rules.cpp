// resolve_comm_overlap: the model-level overlap rules (M0-M6) and the E-rule warnings, in the
// order the runtime applies them, with the provenance of every resolved field.
//
// The order matters and mirrors CommOverlapConfig.setup(): defaults, then the TP gate (which
// turns the user's request off for good), then pipeline selection, then the prerequisite
// checks, then user precedence, then the userbuffers config that depends on the final
// tp_comm_overlap. Data-parallel fields are resolved last (overlap_data_parallel.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "base/suggest.h"
#include "model/overlap.h"
#include "model/overlap_prerequisites.h"
#include "model/runtime_kind.h"

namespace bridge {

const char* value_source_name(ValueSource s) {
  switch (s) {
    case ValueSource::kUser:
      return "user";
    case ValueSource::kDefault:
      return "default";
    case ValueSource::kRule:
      return "rule";
  }
  return "default";
}

namespace {

using overlap_detail::take_user;

template <class T>
Resolved<T> m0(std::optional<T> value) {
  return Resolved<T>{std::move(value), ValueSource::kDefault, "M0"};
}

template <class T>
Resolved<T> by_rule(T value, const char* rule) {
  return Resolved<T>{std::move(value), ValueSource::kRule, rule};
}

// M0: the runtime's defaults before any rule; the remaining fields start null.
void apply_defaults(ResolvedOverlap& o) {
  o.tp_comm_overlap = m0<bool>(false);
  o.tp_comm_overlap_cfg = m0<UserbuffersConfig>(std::nullopt);
  o.tp_comm_bootstrap_backend = m0<std::string>("nccl");
  o.overlap_p2p_comm = m0<bool>(std::nullopt);
  o.batch_p2p_comm = m0<bool>(std::nullopt);
  o.overlap_grad_reduce = m0<bool>(std::nullopt);
  o.overlap_param_gather = m0<bool>(std::nullopt);
  o.overlap_param_gather_with_optimizer_step = m0<bool>(std::nullopt);
  o.align_param_gather = m0<bool>(std::nullopt);
  o.bucket_size = m0<int64_t>(std::nullopt);
  o.defer_embedding_wgrad_compute = m0<bool>(false);
  o.wgrad_deferral_limit = m0<int64_t>(-1);
  o.overlap_moe_expert_parallel_comm = m0<bool>(false);
  o.delay_wgrad_compute = m0<bool>(false);
}

struct GateFailure {
  std::string why;
  std::string help;
};

// M1: the first failing row of the prerequisite table wins, in the runtime's order (tp,
// sequence_parallel, TE).
std::optional<GateFailure> tp_gate_failure(const Recipe& r, const Topology& t) {
  for (const OverlapPrerequisite* row : prerequisites_of(kTpOverlapFeature)) {
    if (prerequisite_state(*row, r, t) != PrerequisiteState::kFails) continue;
    return GateFailure{
        fmt::format("{} is {} (needs {})", row->field, row->shown(r, t), row->requirement),
        fmt::format("{}, or {}", row->help, kTpOverlapFeature.turn_off)};
  }
  return std::nullopt;
}

// Returns true when the user's tp_comm_overlap request was turned off (it then stays off).
bool apply_tp_gate(const Recipe& r, const Topology& t, ResolvedOverlap& o, Diagnostics& diags) {
  const Field<bool>& requested = r.comm_overlap.tp_comm_overlap;
  if (!requested.get_or(false)) return false;
  auto failure = tp_gate_failure(r, t);
  if (!failure) return false;
  o.tp_comm_overlap = by_rule(false, "M1");
  diags.dropped("tp-overlap-disabled", "comm_overlap.tp_comm_overlap", requested.loc,
                fmt::format("tp_comm_overlap was requested but is turned off: {}", failure->why),
                failure->help);
  return true;
}

// M2: P2P overlap needs the interleaved schedule; without it, batched P2P is the better bet.
void apply_pipeline_rule(const Topology& t, ResolvedOverlap& o) {
  bool interleaved = t.pp > 1 && t.vp() > 1;
  bool batched = t.pp > 1 && !interleaved;
  o.overlap_p2p_comm = by_rule(interleaved, "M2");
  o.batch_p2p_comm = by_rule(batched, "M2");
}

// M5: user values replace M0/M2, except a tp_comm_overlap request turned off by M1.
void apply_user_values(const CommOverlapSpec& u, bool tp_gated, ResolvedOverlap& o) {
  if (!tp_gated) take_user(o.tp_comm_overlap, u.tp_comm_overlap, "M5");
  take_user(o.tp_comm_bootstrap_backend, u.tp_comm_bootstrap_backend, "M5");
  take_user(o.overlap_p2p_comm, u.overlap_p2p_comm, "M5");
  take_user(o.batch_p2p_comm, u.batch_p2p_comm, "M5");
  take_user(o.defer_embedding_wgrad_compute, u.defer_embedding_wgrad_compute, "M5");
  take_user(o.wgrad_deferral_limit, u.wgrad_deferral_limit, "M5");
  take_user(o.overlap_moe_expert_parallel_comm, u.overlap_moe_expert_parallel_comm, "M5");
  take_user(o.delay_wgrad_compute, u.delay_wgrad_compute, "M5");
}

void check_bootstrap_backend(const CommOverlapSpec& u, Diagnostics& diags) {
  static const std::vector<std::string> kBackends{"nccl", "mpi", "gloo"};
  const auto& f = u.tp_comm_bootstrap_backend;
  if (!f.is_set() || std::find(kBackends.begin(), kBackends.end(), *f.value) != kBackends.end())
    return;
  diags.error("unknown-bootstrap-backend", "comm_overlap.tp_comm_bootstrap_backend", f.loc,
              fmt::format("tp_comm_bootstrap_backend must be nccl, mpi or gloo, got `{}`{}",
                          *f.value, did_you_mean(*f.value, kBackends)),
              "use nccl (the default) unless your cluster needs mpi or gloo bootstrapping");
}

// A preset name or an inline mapping, validated whether or not TP overlap ends up on: a typo
// is worth fixing before the day the overlap is switched on.
std::optional<UserbuffersConfig> read_tp_config(const YamlNode& node, std::string& preset,
                                                Diagnostics& diags) {
  const std::string path = "comm_overlap.tp_comm_overlap_cfg";
  if (node.is_map()) return read_userbuffers_mapping(node, path, diags);
  if (node.is_scalar()) {
    auto expanded = expand_userbuffers_preset(node.scalar);
    if (expanded) {
      preset = node.scalar;
      return expanded;
    }
    diags.error("unknown-userbuffers-preset", path, node.loc,
                fmt::format("unknown userbuffers preset `{}`{}", node.scalar,
                            did_you_mean(node.scalar, userbuffers_preset_names())),
                "use one of the 19 preset names listed in docs/overlap.md, or an inline "
                "per-layer mapping");
    return std::nullopt;
  }
  diags.error("wrong-type", path, node.loc,
              fmt::format("`{}` expects a preset name or a per-layer mapping, got {}", path,
                          node.kind_name()),
              "write e.g. tp_comm_overlap_cfg: userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048");
  return std::nullopt;
}

void warn_no_preset(const Recipe& r, const Topology& t, Diagnostics& diags) {
  std::string hint = overlap_detail::preset_for_plan(r, t);
  diags.warning("no-userbuffers-preset", "comm_overlap.tp_comm_overlap_cfg",
                r.comm_overlap.tp_comm_overlap.loc,
                "tp_comm_overlap is on without a tp_comm_overlap_cfg: TE will use its default "
                "userbuffers config, which is rarely tuned for the model",
                hint.empty() ? "set comm_overlap.tp_comm_overlap_cfg to a preset for your GPU, "
                               "precision, hidden size, TP size, micro batch size and sequence "
                               "length (docs/overlap.md lists the 19 names)"
                             : fmt::format("e.g. comm_overlap.tp_comm_overlap_cfg: {}", hint));
}

// M6: expand/validate the userbuffers config; it only takes effect with TP overlap on.
void resolve_tp_config(const Recipe& r, const Topology& t, bool tp_gated, ResolvedOverlap& o,
                       Diagnostics& diags) {
  const CommOverlapSpec& u = r.comm_overlap;
  check_bootstrap_backend(u, diags);
  std::optional<UserbuffersConfig> cfg;
  if (u.tp_comm_overlap_cfg.is_set())
    cfg = read_tp_config(*u.tp_comm_overlap_cfg.value, o.tp_comm_overlap_preset, diags);
  if (!o.tp_comm_overlap.value.value_or(false)) {
    if (!u.tp_comm_overlap_cfg.is_set()) return;
    o.tp_comm_overlap_cfg = Resolved<UserbuffersConfig>{std::nullopt, ValueSource::kRule, "M6"};
    if (!tp_gated)  // the M1 warning already explains a gated request
      diags.warning("tp-overlap-cfg-unused", "comm_overlap.tp_comm_overlap_cfg",
                    u.tp_comm_overlap_cfg.loc,
                    "tp_comm_overlap_cfg has no effect because tp_comm_overlap is off",
                    "set comm_overlap.tp_comm_overlap: true, or remove tp_comm_overlap_cfg");
    return;
  }
  if (!u.tp_comm_overlap_cfg.is_set()) {
    o.tp_comm_overlap_cfg.rule = "M6";
    warn_no_preset(r, t, diags);
    return;
  }
  o.tp_comm_overlap_cfg = Resolved<UserbuffersConfig>{std::move(cfg), ValueSource::kUser, "M6"};
  // Only a preset that takes effect is compared with the plan: an unused one already has
  // its tp-overlap-cfg-unused warning.
  if (!o.tp_comm_overlap_preset.empty())
    overlap_detail::check_preset_matches_plan(r, t, o.tp_comm_overlap_preset, diags);
}

// E5: what Megatron-Core's pipeline schedules do with the final P2P values at the first
// training step (megatron/core/pipeline_parallel/schedules.py):
// - get_forward_backward_func picks forward_backward_pipelining_without_interleaving when
//   pp > 1 and the virtual pipeline size is None, and the interleaved schedule whenever it is
//   set, 1 included (Megatron-Bridge passes model.virtual_pipeline_model_parallel_size as is).
// - forward_backward_pipelining_without_interleaving raises ValueError as soon as
//   overlap_p2p_comm is true: the flag is refused, not ignored. (Only Megatron-LM's own
//   argument parsing resets it to false; Megatron-Bridge does not go through that path.)
// - forward_backward_pipelining_with_interleaving raises ValueError when overlap_p2p_comm and
//   batch_p2p_comm are both true (ModelParallelConfig documents them as exclusive).
// - With vpp 1 the interleaved schedule runs one model chunk per stage: the P2P overlap is
//   used, but with nothing to interleave the pipeline bubble is the non-interleaved one.
// E7: Megatron-Core's TransformerConfig refuses defer_embedding_wgrad_compute with a negative
// wgrad_deferral_limit (ValueError when the model is built), and -1 is the default limit.
void check_wgrad_deferral(const Recipe& r, const ResolvedOverlap& o, Diagnostics& diags) {
  if (!o.defer_embedding_wgrad_compute.value.value_or(false)) return;
  int64_t limit = o.wgrad_deferral_limit.value.value_or(-1);
  if (limit >= 0) return;
  const CommOverlapSpec& u = r.comm_overlap;
  diags.error("wgrad-deferral-limit-negative", "comm_overlap.wgrad_deferral_limit",
              u.wgrad_deferral_limit.is_set() ? u.wgrad_deferral_limit.loc
                                              : u.defer_embedding_wgrad_compute.loc,
              fmt::format("defer_embedding_wgrad_compute=true with wgrad_deferral_limit {}{}: "
                          "Megatron-Core refuses a negative limit when the deferral is on "
                          "(ValueError when the model is built)",
                          limit, u.wgrad_deferral_limit.is_set() ? "" : " (the default)"),
              "set comm_overlap.wgrad_deferral_limit: 0 defers the embedding weight gradient of "
              "every micro-batch, N > 0 of the first N (NeMo's recipes use 22 or 50)");
}

// E8-E10: what Megatron-Core's config checks refuse at start-up on the final values
// (ValueError in TransformerConfig/OptimizerConfig __post_init__, after the queue wait), found
// by running the released Megatron-Bridge in the conformance suite (tests/conformance/).
void check_megatron_core_refusals(const Recipe& r, const Topology& t, const OverlapResolution& res,
                                  Diagnostics& diags) {
  const ResolvedOverlap& o = res.overlap;
  const CommOverlapSpec& u = r.comm_overlap;
  if (o.defer_embedding_wgrad_compute.value.value_or(false)) {
    if (t.pp <= 1)
      diags.error("defer-wgrad-needs-pipeline", "comm_overlap.defer_embedding_wgrad_compute",
                  u.defer_embedding_wgrad_compute.loc,
                  "defer_embedding_wgrad_compute=true without pipeline parallelism: "
                  "Megatron-Core refuses it (\"Cannot defer embedding wgrad compute when "
                  "pipeline model parallel is not used\"); the deferral hides the embedding's "
                  "weight gradient behind the last pipeline stage",
                  "set comm_overlap.defer_embedding_wgrad_compute: false, or use "
                  "model.pipeline_model_parallel_size > 1");
    if (!gradient_accumulation_fusion_on(r))
      diags.error("defer-wgrad-needs-ga-fusion", "model.gradient_accumulation_fusion",
                  r.model.gradient_accumulation_fusion.loc,
                  "defer_embedding_wgrad_compute=true with gradient_accumulation_fusion false: "
                  "Megatron-Core refuses it (\"Cannot defer embedding wgrad compute when "
                  "gradient accumulation fusion is not used\")",
                  "set model.gradient_accumulation_fusion: true (Megatron-Bridge's default "
                  "when Transformer Engine is installed), or "
                  "comm_overlap.defer_embedding_wgrad_compute: false");
  }
  if (res.optimizer.overlap_param_gather_with_optimizer_step.value_or(false) &&
      r.model.compute_dtype.get_or("") == "fp8_mx")
    diags.error("param-gather-step-vs-mxfp8",
                "comm_overlap.overlap_param_gather_with_optimizer_step",
                u.overlap_param_gather_with_optimizer_step.is_set()
                    ? u.overlap_param_gather_with_optimizer_step.loc
                    : r.model.compute_dtype.loc,
                "overlap_param_gather_with_optimizer_step=true with compute_dtype fp8_mx: "
                "MXFP8's mixed-precision recipe reuses the gradient buffer for the parameter "
                "all-gather (reuse_grad_buf_for_mxfp8_param_ag), which Megatron-Core refuses "
                "with this overlap (\"overlap_param_gather_with_optimizer_step is not supported "
                "with reuse_grad_buf_for_mxfp8_param_ag\")",
                "set comm_overlap.overlap_param_gather_with_optimizer_step: false, or use "
                "another compute_dtype");
}

void check_pipeline_overlap(const Recipe& r, const Topology& t, const ResolvedOverlap& o,
                            Diagnostics& diags) {
  if (t.pp <= 1) return;  // no pipeline schedule: the P2P flags are unused
  const CommOverlapSpec& u = r.comm_overlap;
  bool overlap = o.overlap_p2p_comm.value.value_or(false);
  bool batch = o.batch_p2p_comm.value.value_or(false);
  if (overlap && !t.vpp) {
    diags.error("p2p-overlap-without-vpp", "comm_overlap.overlap_p2p_comm", u.overlap_p2p_comm.loc,
                fmt::format("overlap_p2p_comm=true with pipeline_model_parallel_size {} and no "
                            "virtual pipeline: Megatron-Core runs the non-interleaved schedule, "
                            "which refuses overlap_p2p_comm with a ValueError at the first "
                            "training step",
                            t.pp),
                "set model.virtual_pipeline_model_parallel_size (e.g. 2; num_layers must divide "
                "by pp * vpp), or remove comm_overlap.overlap_p2p_comm so that M2 picks "
                "batch_p2p_comm");
    return;
  }
  if (!overlap || !t.vpp) return;
  if (batch) {
    bool by_m2 = o.batch_p2p_comm.source == ValueSource::kRule;
    diags.error("p2p-comm-conflict", "comm_overlap.batch_p2p_comm",
                u.batch_p2p_comm.is_set() ? u.batch_p2p_comm.loc : u.overlap_p2p_comm.loc,
                fmt::format("overlap_p2p_comm and batch_p2p_comm are both true{}; the "
                            "interleaved pipeline schedule refuses that combination with a "
                            "ValueError at the first training step",
                            by_m2 ? " (M2 picks batch_p2p_comm because "
                                    "virtual_pipeline_model_parallel_size is 1)"
                                  : ""),
                t.vp() > 1 ? "set comm_overlap.batch_p2p_comm: false (or remove it: M2 picks "
                             "false with vpp > 1)"
                           : "set model.virtual_pipeline_model_parallel_size >= 2 (M2 then "
                             "picks batch_p2p_comm: false), or set comm_overlap.batch_p2p_comm: "
                             "false");
    return;
  }
  if (t.vp() == 1)
    diags.warning("p2p-overlap-single-chunk", "comm_overlap.overlap_p2p_comm",
                  u.overlap_p2p_comm.is_set() ? u.overlap_p2p_comm.loc
                                              : r.model.virtual_pipeline_model_parallel_size.loc,
                  "virtual_pipeline_model_parallel_size 1 makes Megatron-Core run the interleaved "
                  "schedule with one model chunk per stage: P2P communication is overlapped, but "
                  "nothing is interleaved, so the pipeline bubble is that of the non-interleaved "
                  "schedule",
                  "set model.virtual_pipeline_model_parallel_size >= 2 to shrink the bubble, or "
                  "remove it and comm_overlap.overlap_p2p_comm to use batched P2P (M2)");
}

// The runtime copies the RESOLVED value onto the model config, so a model-level true without
// the comm_overlap request is silently reset to false.
void check_model_ep_flag(const Recipe& r, const ResolvedOverlap& o, Diagnostics& diags) {
  const Field<bool>& flag = r.model.overlap_moe_expert_parallel_comm;
  if (!flag.get_or(false) || o.overlap_moe_expert_parallel_comm.value.value_or(false)) return;
  diags.dropped("ep-overlap-flag-overridden", "model.overlap_moe_expert_parallel_comm", flag.loc,
                "model.overlap_moe_expert_parallel_comm=true is overwritten by the resolved "
                "comm_overlap value (false): expert-parallel overlap will be off",
                "set comm_overlap.overlap_moe_expert_parallel_comm: true instead (its "
                "prerequisites are then checked)");
}

// E4: the backend only means something with the flex dispatcher.
std::string effective_flex_backend(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  if (!m.moe_flex_dispatcher_backend.is_set()) return "";
  std::string dispatcher = m.moe_token_dispatcher_type.get_or("allgather");
  if (dispatcher == "flex") return *m.moe_flex_dispatcher_backend.value;
  diags.dropped("flex-backend-inactive", "model.moe_flex_dispatcher_backend",
                m.moe_flex_dispatcher_backend.loc,
                fmt::format("moe_flex_dispatcher_backend `{}` is ignored: the flex backend has "
                            "no effect unless moe_token_dispatcher_type is flex (it is {})",
                            *m.moe_flex_dispatcher_backend.value, dispatcher),
                "set model.moe_token_dispatcher_type: flex to use it, or remove "
                "model.moe_flex_dispatcher_backend");
  return "";
}

}  // namespace

OverlapResolution resolve_comm_overlap(const Recipe& recipe, const Topology& topo,
                                       Diagnostics& diags) {
  OverlapResolution out;
  ResolvedOverlap& o = out.overlap;
  apply_defaults(o);
  bool tp_gated = apply_tp_gate(recipe, topo, o, diags);
  apply_pipeline_rule(topo, o);
  overlap_detail::check_ep_overlap_prerequisites(recipe, topo, diags);
  apply_user_values(recipe.comm_overlap, tp_gated, o);
  resolve_tp_config(recipe, topo, tp_gated, o, diags);
  check_pipeline_overlap(recipe, topo, o, diags);
  check_wgrad_deferral(recipe, o, diags);
  check_model_ep_flag(recipe, o, diags);
  out.flex_dispatcher_backend = effective_flex_backend(recipe, diags);
  overlap_detail::resolve_data_parallel(recipe, topo, out, diags);
  overlap_detail::check_delay_wgrad_compute(recipe, out, diags);
  check_megatron_core_refusals(recipe, topo, out, diags);
  overlap_detail::check_model_config(recipe, topo, diags);
  return out;
}

}  // namespace bridge
