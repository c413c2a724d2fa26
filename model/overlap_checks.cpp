// Checks that only produce diagnostics: the expert-parallel overlap prerequisites (M3, E6;
// rows of overlap_prerequisites.cpp),
// and the delay_wgrad_compute requirements (M4). Versions are compared in PEP 440 order by
// overlap_version.cpp, as the runtime compares them.
//
// The runtime asserts these at model init, after the job has queued and the container has
// started; reporting them here, all at once and pointing at the offending field, is the point.
#include <fmt/format.h>

#include <algorithm>

#include "model/overlap.h"
#include "model/overlap_prerequisites.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

enum class VersionCheck { kOk, kTooOld, kAbsent, kUnknown };

// A declared version that does not parse is unknown, like an absent one: the runtime may
// still satisfy the need, so it is a warning, not an error.
VersionCheck at_least(const std::string& declared, std::string_view min) {
  auto have = parse_version(declared);
  auto need = parse_version(min);
  if (!have || !need) return VersionCheck::kUnknown;
  return compare_versions(*have, *need) >= 0 ? VersionCheck::kOk : VersionCheck::kTooOld;
}

// "2.6.0a0+..." against 2.6.0 looks like the same version to a reader; say why it is not.
std::string why_older(const std::string& declared, std::string_view min) {
  auto have = parse_version(declared);
  auto need = parse_version(min);
  if (!have || !need || !have->is_prerelease()) return "";
  Version have_release = *have;
  have_release.pre.reset();
  have_release.dev.reset();
  have_release.post.reset();
  if (compare_versions(have_release, *need) != 0) return "";
  return fmt::format(
      " (a pre-release of {}, which orders before the {} release: versions are "
      "compared in PEP 440 order, as the runtime compares them)",
      min, min);
}

// A minimum-version requirement of one feature on TE or torch.
struct VersionNeed {
  const char* component = "";  // "Transformer Engine" | "torch"
  const char* path = "";       // "runtime.transformer_engine" | "runtime.torch"
  std::string min;
  std::string what;  // the feature that needs it, for the message
  std::string code;  // error code when the declared version is too old / TE absent
  std::string help;
  SourceLoc loc;
  VersionCheck result = VersionCheck::kOk;
  std::string declared;
};

VersionNeed te_need(const Recipe& r, std::string min, const SourceLoc& fallback) {
  const auto& te = r.runtime.transformer_engine;
  VersionNeed n;
  n.component = "Transformer Engine";
  n.path = "runtime.transformer_engine";
  n.min = std::move(min);
  n.loc = te.is_set() ? te.loc : fallback;
  if (!te.is_set()) {
    n.result = VersionCheck::kUnknown;
  } else if (!te.value->present) {
    n.result = VersionCheck::kAbsent;
  } else {
    n.declared = te.value->version;
    n.result = at_least(n.declared, n.min);
  }
  return n;
}

// Unknown version: a warning, since the runtime may well satisfy it. Too old / absent: error.
void report(const VersionNeed& n, Diagnostics& diags) {
  std::string leaf = std::string(n.path).substr(std::string(n.path).find('.') + 1);
  switch (n.result) {
    case VersionCheck::kOk:
      return;
    case VersionCheck::kUnknown:
      diags.warning("unverified-version", n.path, n.loc,
                    n.declared.empty()
                        ? fmt::format("{} needs {} >= {}, but `{}` does not declare a known "
                                      "version, so this is unverified",
                                      n.what, n.component, n.min, n.path)
                        : fmt::format("{} needs {} >= {}, but `{}` is `{}`, which is not a PEP "
                                      "440 version, so this is unverified",
                                      n.what, n.component, n.min, n.path, n.declared),
                    fmt::format("declare the container's version, e.g. `{}: \"{}\"`", leaf, n.min));
      return;
    case VersionCheck::kAbsent:
      diags.error(n.code, n.path, n.loc,
                  fmt::format("{} needs {} >= {}, but `{}` is false (not installed)", n.what,
                              n.component, n.min, n.path),
                  n.help);
      return;
    case VersionCheck::kTooOld:
      diags.error(n.code, n.path, n.loc,
                  fmt::format("{} needs {} >= {}, but `{}` is {}{}", n.what, n.component, n.min,
                              n.path, n.declared, why_older(n.declared, n.min)),
                  n.help);
      return;
  }
}

// Where the user wrote a prerequisite's field (the recipe line or the override), else where
// they asked for the feature.
SourceLoc field_location(const Recipe& r, const char* field, const SourceLoc& fallback) {
  auto it = r.input_locations.find(field);
  return it != r.input_locations.end() ? it->second : fallback;
}

// M3 (E6 for recompute), from the prerequisite table: every failing row is an error of its
// own, naming its field, so that one run of `validate` lists everything to fix.
void check_prerequisites(const Recipe& r, const Topology& t, const OverlapFeature& feature,
                         const char* code, const SourceLoc& fallback, Diagnostics& diags) {
  for (const OverlapPrerequisite* row : prerequisites_of(feature)) {
    PrerequisiteState state = prerequisite_state(*row, r, t);
    if (state == PrerequisiteState::kHolds) continue;
    const std::string help = fmt::format("{}, or {}", row->help, feature.turn_off);
    SourceLoc loc = field_location(r, row->field, fallback);
    if (row->kind == PrerequisiteKind::kVersion) {
      VersionNeed n;
      n.component = row->component;
      n.path = row->field;
      n.min = row->min_version;
      n.what = feature.name;
      n.code = code;
      n.help = fmt::format("{}: {}", row->reason, help);
      n.loc = loc;
      n.declared = row->shown(r, t) == kVersionNotDeclared ? "" : row->shown(r, t);
      n.result =
          state == PrerequisiteState::kFails ? VersionCheck::kTooOld : VersionCheck::kUnknown;
      report(n, diags);
      continue;
    }
    diags.error(code, row->field, loc,
                fmt::format("{} requires {}", feature.name, prerequisite_shortfall(*row, r, t)),
                help);
  }
}

bool in_list(const Field<StringList>& f, const char* item) {
  const StringList& l = f.value ? *f.value : StringList{};
  return std::find(l.begin(), l.end(), item) != l.end();
}

// M4(a)/(b): TE >= 2.7.0 when delayed wgrad meets grad-reduce overlap or GA fusion. The
// grad-reduce overlap is the one the job gets, the resolved value (a rule turns it on with
// the distributed optimizer, D1/D2), not only what the user wrote.
void check_delay_wgrad_te(const Recipe& r, const OverlapResolution& resolved, Diagnostics& diags) {
  const auto& u = r.comm_overlap;
  bool grad_reduce = resolved.ddp.overlap_grad_reduce.value_or(false);
  bool ga_fusion = gradient_accumulation_fusion_on(r);
  if (!grad_reduce && !ga_fusion) return;
  const Resolved<bool>& reduce = resolved.overlap.overlap_grad_reduce;
  std::string reduce_text =
      reduce.source == ValueSource::kRule && !reduce.rule.empty()
          ? fmt::format("overlap_grad_reduce (turned on by rule {})", reduce.rule)
          : std::string("overlap_grad_reduce");
  VersionNeed n = te_need(r, "2.7.0", u.delay_wgrad_compute.loc);
  n.what = fmt::format("delay_wgrad_compute with {}",
                       grad_reduce && ga_fusion ? reduce_text + " and gradient_accumulation_fusion"
                       : grad_reduce            ? reduce_text
                                                : std::string("gradient_accumulation_fusion"));
  n.code = "delay-wgrad-te-version";
  n.help =
      "use Transformer Engine >= 2.7.0 (declare it in runtime.transformer_engine), or set "
      "comm_overlap.delay_wgrad_compute: false";
  report(n, diags);
}

// M4(c): delaying the wgrad only pays off hidden behind the expert-parallel all-to-all.
// Megatron-Bridge's CommOverlapConfig.setup() writes the comm_overlap value over the model's
// flag (false when unset), so there only the comm_overlap request counts.
void check_delay_wgrad_ep(const Recipe& r, Diagnostics& diags) {
  const auto& u = r.comm_overlap;
  bool model_flag_counts = !runtime_is_megatron_bridge(r.runtime);
  if ((model_flag_counts && r.model.overlap_moe_expert_parallel_comm.get_or(false)) ||
      u.overlap_moe_expert_parallel_comm.get_or(false))
    return;
  diags.error("delay-wgrad-requires-ep-overlap", "comm_overlap.delay_wgrad_compute",
              u.delay_wgrad_compute.loc,
              "delay_wgrad_compute requires expert-parallel overlap, but "
              "overlap_moe_expert_parallel_comm is off",
              "set comm_overlap.overlap_moe_expert_parallel_comm: true (its prerequisites "
              "apply), or set comm_overlap.delay_wgrad_compute: false");
}

// M4(d): graphed attention (or a graphed router with a non-overlapped shared expert) needs
// TE >= 2.12, gradient-accumulation fusion, and bias-free attention.
void check_delay_wgrad_cuda_graph(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  bool graphs_on = m.cuda_graph_impl.get_or("none") != "none";
  bool attn = graphs_on && in_list(m.cuda_graph_scope, "attn");
  bool router = graphs_on && in_list(m.cuda_graph_scope, "moe_router") &&
                m.moe_shared_expert_intermediate_size.is_set() &&
                !m.moe_shared_expert_overlap.get_or(false);
  if (!attn && !router) return;
  const SourceLoc& scope_loc = m.cuda_graph_scope.loc;
  std::string scope = attn ? "CUDA-graph scope `attn`" : "CUDA-graph scope `moe_router`";
  std::string what = "delay_wgrad_compute with " + scope;
  std::string help_tail =
      ", or remove it from model.cuda_graph_scope, or set "
      "comm_overlap.delay_wgrad_compute: false";
  VersionNeed n = te_need(r, "2.12.0", scope_loc);
  n.what = what;
  n.code = "cuda-graph-scope-unsupported";
  n.help = "use Transformer Engine >= 2.12.0" + help_tail;
  report(n, diags);
  if (!gradient_accumulation_fusion_on(r))
    diags.error(
        "cuda-graph-scope-unsupported", "model.gradient_accumulation_fusion",
        m.gradient_accumulation_fusion.is_set() ? m.gradient_accumulation_fusion.loc : scope_loc,
        what + " requires model.gradient_accumulation_fusion: true",
        "set model.gradient_accumulation_fusion: true" + help_tail);
  if (!attn) return;
  // Unset fields take the runtime's defaults (runtime_model_defaults): add_bias_linear is
  // TRUE in Megatron-Core's TransformerConfig and GPT-3 recipes, false in Qwen3's;
  // add_qkv_bias is false. So an unset add_bias_linear fails where the runtime's does.
  struct BiasField {
    const Field<bool>* field;
    const char* name;
    bool megatron_default;
  };
  const RuntimeModelDefaults defaults = runtime_model_defaults(r);
  for (const BiasField& b :
       {BiasField{&m.add_bias_linear, "add_bias_linear", defaults.add_bias_linear},
        BiasField{&m.add_qkv_bias, "add_qkv_bias", false}}) {
    if (!b.field->get_or(b.megatron_default)) continue;
    if (!b.field->is_set() && !defaults.known) continue;  // the recipe's own default: unknown
    diags.error("cuda-graph-scope-unsupported", std::string("model.") + b.name,
                b.field->is_set() ? b.field->loc : scope_loc,
                fmt::format("{} requires attention without bias, but model.{} is {}", what, b.name,
                            b.field->is_set()
                                ? std::string("true")
                                : fmt::format("unset, which means true ({})", defaults.source)),
                fmt::format("set model.{}: false", b.name) + help_tail);
  }
}

// M4(e): Megatron-Core asserts TE >= 2.10.0 for delay_wgrad_compute whenever Transformer
// Engine captures CUDA graphs ("TE version >= 2.10.0 is required for delay_wgrad_compute with
// partial cuda graph").
void check_delay_wgrad_te_graphs(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  if (m.cuda_graph_impl.get_or("none") != "transformer_engine") return;
  VersionNeed n = te_need(r, "2.10.0", m.cuda_graph_impl.loc);
  n.what =
      "delay_wgrad_compute with Transformer Engine CUDA graphs (cuda_graph_impl "
      "transformer_engine)";
  n.code = "delay-wgrad-te-version";
  n.help =
      "use Transformer Engine >= 2.10.0 (declare it in runtime.transformer_engine), or set "
      "model.cuda_graph_impl: none, or comm_overlap.delay_wgrad_compute: false";
  report(n, diags);
}

}  // namespace

namespace overlap_detail {

void check_ep_overlap_prerequisites(const Recipe& r, const Topology& t, Diagnostics& diags) {
  // Only the user's comm_overlap request triggers M3; the model-level flag alone does not.
  const auto& request = r.comm_overlap.overlap_moe_expert_parallel_comm;
  if (!request.get_or(false)) return;
  check_prerequisites(r, t, kEpOverlapFeature, "ep-overlap-prerequisite", request.loc, diags);
}

void check_delay_wgrad_compute(const Recipe& r, const OverlapResolution& resolved,
                               Diagnostics& diags) {
  if (!r.comm_overlap.delay_wgrad_compute.get_or(false)) return;
  check_delay_wgrad_te(r, resolved, diags);
  check_delay_wgrad_ep(r, diags);
  check_delay_wgrad_cuda_graph(r, diags);
  check_delay_wgrad_te_graphs(r, diags);
}

}  // namespace overlap_detail

}  // namespace bridge
