// advise_overlap: the overlap rules of docs/overlap.md applied to one plan (advise.h).
//
// The M1, M3 and D1 prerequisites are the rows of model/overlap_prerequisites.h, the table
// validation reads; the pipeline schedule's (M2, E5) are written here. Every suggestion is
// planned once more through the caller's check with the knob on, so a mismatch between these
// and the validation shows up as a blocked advice, never as a command `validate` refuses.
#include "plan/advise.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "base/shell_quote.h"
#include "model/overlap.h"
#include "model/overlap_prerequisites.h"

namespace bridge {

const char* advice_state_name(AdviceState s) {
  switch (s) {
    case AdviceState::kSuggested:
      return "suggested";
    case AdviceState::kBlocked:
      return "blocked";
    case AdviceState::kOn:
      return "on";
    case AdviceState::kNotApplicable:
      return "not-applicable";
  }
  return "not-applicable";
}

const char* condition_status_name(ConditionStatus s) {
  switch (s) {
    case ConditionStatus::kMet:
      return "met";
    case ConditionStatus::kChange:
      return "change";
    case ConditionStatus::kBlocker:
      return "blocker";
    case ConditionStatus::kWarning:
      return "warning";
  }
  return "met";
}

const std::vector<std::string>& advice_caveats() {
  static const std::vector<std::string> kCaveats{
      "Enable overlap once the run is stable: get the job running (and the loss going down) "
      "without it first, so that a failure or a slowdown can be blamed on the one knob you "
      "changed.",
      "The gain depends on how visible the communication is: an overlap only saves the time "
      "the communication sits on the critical path. Communication that is small, or already "
      "hidden, leaves nothing to win; an nsys profile of a few steady-state steps (plugins.nsys) "
      "shows how much is exposed.",
      "Measure one knob at a time: each ablate command below varies one knob against a "
      "baseline that already has the listed changes, so the comparison measures that knob "
      "alone. Apply a knob that wins before measuring the next.",
      "Compare steady-state step times, iterations 3-8 (ablate's default --window 3:8): the "
      "first iterations include warm-up, allocation and compilation. Run at least 8 steps "
      "(train.max_steps); with fewer than 5 samples compare calls the result directional.",
  };
  return kCaveats;
}

namespace {

std::string text(const Field<bool>& f, const char* unset) {
  return f.is_set() ? (*f.value ? "true" : "false") : unset;
}
std::string text(const Field<int64_t>& f, const char* unset) {
  return f.is_set() ? std::to_string(*f.value) : unset;
}

// The size of the NVLink domain a collective can stay inside: the GPU table's, else a node.
int64_t nvlink_domain(const Topology& t) {
  return t.nvlink_domain > 0 ? t.nvlink_domain : t.gpus_per_node;
}

// Builds one suggestion: conditions, the changes that make them hold, blockers.
class Builder {
 public:
  // Marks the advice suggested, for the reason `why`.
  Builder(Advice& a, std::string why) : a_(a) {
    a_.state = AdviceState::kSuggested;
    a_.why = std::move(why);
  }

  void met(std::string field, std::string requirement, std::string value, const char* rule) {
    add(std::move(field), std::move(requirement), std::move(value), ConditionStatus::kMet, rule);
  }
  void warn(std::string field, std::string requirement, std::string value, const char* rule,
            std::string note) {
    add(std::move(field), std::move(requirement), std::move(value), ConditionStatus::kWarning,
        rule);
    a_.notes.push_back(std::move(note));
  }
  void change(std::string field, std::string requirement, std::string value, const char* rule,
              std::vector<AdviceChange> changes) {
    add(std::move(field), std::move(requirement), std::move(value), ConditionStatus::kChange, rule);
    for (auto& c : changes) {
      auto same_key = [&](const AdviceChange& have) { return have.key == c.key; };
      auto it = std::find_if(a_.changes.begin(), a_.changes.end(), same_key);
      if (it == a_.changes.end()) a_.changes.push_back(std::move(c));
    }
  }
  void blocker(std::string field, std::string requirement, std::string value, const char* rule,
               std::string why) {
    add(std::move(field), std::move(requirement), std::move(value), ConditionStatus::kBlocker,
        rule);
    a_.blockers.push_back(std::move(why));
  }
  // A prerequisite on one field that either holds, or holds once the field is set to `fix`.
  void require(bool holds, const std::string& field, std::string requirement, std::string value,
               const char* rule, std::string fix, std::string why) {
    if (holds)
      met(field, std::move(requirement), std::move(value), rule);
    else
      change(field, std::move(requirement), std::move(value), rule,
             {{field, std::move(fix), std::move(why)}});
  }

 private:
  void add(std::string field, std::string requirement, std::string value, ConditionStatus status,
           const char* rule) {
    a_.conditions.push_back(
        AdviceCondition{std::move(field), std::move(requirement), std::move(value), status, rule});
  }
  Advice& a_;
};

// What names one overlap family in every state of its advice.
struct Family {
  const char* id;
  const char* title;
  const char* knob;
  const char* rules;
};
constexpr Family kEpOverlap{"ep-overlap", "MoE expert-parallel overlap",
                            "comm_overlap.overlap_moe_expert_parallel_comm", "M3"};
constexpr Family kTpOverlap{"tp-overlap", "tensor-parallel overlap (userbuffers)",
                            "comm_overlap.tp_comm_overlap", "M1, M6"};
constexpr Family kDpGradReduceOverlap{"dp-grad-reduce-overlap",
                                      "data-parallel gradient reduce-scatter overlap",
                                      "comm_overlap.overlap_grad_reduce", "D1"};
constexpr Family kDpParamGatherOverlap{"dp-param-gather-overlap",
                                       "data-parallel parameter all-gather overlap",
                                       "comm_overlap.overlap_param_gather", "D1"};
constexpr Family kP2pOverlap{"p2p-overlap", "pipeline P2P overlap", "comm_overlap.overlap_p2p_comm",
                             "M2, E5"};

// The family's advice before its rules decide: not applicable until they say otherwise.
Advice advice_for(const Family& f) {
  Advice a;
  a.id = f.id;
  a.title = f.title;
  a.knob = f.knob;
  a.rules = f.rules;
  return a;
}

// The virtual pipeline a suggestion needs when pp > 1 (EP overlap: M3; P2P overlap: M2/E5).
void require_vpp(Builder& b, const Recipe& r, const Topology& t, const char* rule,
                 const std::string& why) {
  const std::string field = "model.virtual_pipeline_model_parallel_size";
  if (t.pp <= 1) {
    b.met(field, "set when pp > 1", fmt::format("not needed: pp is {}", t.pp), rule);
    return;
  }
  std::string have = text(r.model.virtual_pipeline_model_parallel_size, "null");
  if (t.vp() >= 2) {
    b.met(field, ">= 2 when pp > 1", have, rule);
    return;
  }
  int64_t v = advised_vpp(r, t);
  if (v == 0) {
    b.blocker(field, ">= 2 when pp > 1", have, rule,
              fmt::format("no virtual pipeline size >= 2 divides model.num_layers ({}) by pp {} "
                          "(rule T5): change the layout first",
                          text(r.model.num_layers, "null"), t.pp));
    return;
  }
  b.change(field, ">= 2 when pp > 1", have, rule,
           {{field, std::to_string(v),
             fmt::format("{}; {} is the smallest vpp >= 2 that divides num_layers by pp * vpp", why,
                         v)}});
}

// The feature's scope rows (overlap_prerequisites.h): the first that fails says why the
// advice does not apply.
std::optional<std::string> out_of_scope(const OverlapFeature& f, const Recipe& r,
                                        const Topology& t) {
  for (const OverlapPrerequisite* row : prerequisites_of(f))
    if (row->kind == PrerequisiteKind::kScope &&
        prerequisite_state(*row, r, t) == PrerequisiteState::kFails)
      return fmt::format("{} is {}: {}", row->field, row->shown(r, t), row->reason);
  return std::nullopt;
}

// One condition per row of the table, as validation evaluates it: met, the changes that make
// it hold, a blocker no override fixes, or a warning for a version nobody declared.
void add_prerequisites(Builder& b, const OverlapFeature& f, const Recipe& r, const Topology& t) {
  for (const OverlapPrerequisite* row : prerequisites_of(f)) {
    std::string value = row->shown(r, t);
    switch (prerequisite_state(*row, r, t)) {
      case PrerequisiteState::kHolds:
        b.met(row->field, row->requirement, value, row->rule);
        break;
      case PrerequisiteState::kUnverified:
        b.warn(row->field, row->requirement, value, row->rule,
               fmt::format("{} does not declare a PEP 440 version, so `validate` cannot check {} "
                           "{} ({}) and warns `unverified-version`: declare the container's "
                           "version, e.g. {}: \"{}\"",
                           row->field, row->component, row->requirement, row->reason, row->field,
                           row->min_version));
        break;
      case PrerequisiteState::kFails: {
        PrerequisiteRemedy remedy = prerequisite_remedy(*row, r, t);
        if (remedy.changes.empty()) {
          b.blocker(row->field, row->requirement, value, row->rule, remedy.blocked_because);
          break;
        }
        std::vector<AdviceChange> changes;
        for (PrerequisiteChange& c : remedy.changes)
          changes.push_back({std::move(c.key), std::move(c.value), std::move(c.why)});
        b.change(row->field, row->requirement, value, row->rule, std::move(changes));
        break;
      }
    }
  }
}

// MoE expert-parallel overlap: the M3 rows (E6 for recompute).
Advice ep_advice(const Plan& p) {
  const Recipe& r = *p.recipe;
  const Topology& t = *p.topology;
  Advice a = advice_for(kEpOverlap);
  if (auto why = out_of_scope(kEpOverlapFeature, r, t)) {
    a.why = *why;
    return a;
  }
  std::string dispatcher = r.model.moe_token_dispatcher_type.get_or("allgather");
  if (p.overlap->overlap.overlap_moe_expert_parallel_comm.value.value_or(false)) {
    a.state = AdviceState::kOn;
    a.why = fmt::format("on: ep {} with the {} dispatcher", t.ep, dispatcher);
    return a;
  }
  Builder b(a, fmt::format("ep {} > 1 ({} experts): the expert-parallel all-to-all (token "
                           "dispatch and combine) can run while another micro-batch computes",
                           t.ep, *r.model.num_moe_experts.value));
  add_prerequisites(b, kEpOverlapFeature, r, t);
  int64_t span = t.ep * t.etp;
  int64_t domain = nvlink_domain(t);
  a.notes.push_back(
      span > domain
          ? fmt::format("visibility: the all-to-all spans {} GPUs (ep {} x etp {}), more than "
                        "one NVLink domain ({}): it crosses the network, where it is usually "
                        "exposed and the overlap has the most to hide",
                        span, t.ep, t.etp, domain)
          : fmt::format("visibility: the all-to-all stays within one NVLink domain ({} of {} "
                        "GPUs): it is fast, often little of it is exposed, expect a smaller gain",
                        span, domain));
  a.notes.push_back(
      "after EP overlap is measured, comm_overlap.delay_wgrad_compute can also hide the "
      "weight-gradient GEMMs behind the all-to-all (rule M4: Transformer Engine >= 2.7.0 with "
      "grad-reduce overlap or gradient_accumulation_fusion); measure it on its own");
  return a;
}

// Tensor-parallel overlap: the M1 rows, then the M6 userbuffers config.
Advice tp_advice(const Plan& p) {
  const Recipe& r = *p.recipe;
  const Topology& t = *p.topology;
  Advice a = advice_for(kTpOverlap);
  if (auto why = out_of_scope(kTpOverlapFeature, r, t)) {
    a.why = *why;
    return a;
  }
  const ResolvedOverlap& o = p.overlap->overlap;
  if (o.tp_comm_overlap.value.value_or(false)) {
    a.state = AdviceState::kOn;
    a.why = fmt::format("on: tp {} with sequence parallel, userbuffers config {}", t.tp,
                        o.tp_comm_overlap_preset.empty()
                            ? (o.tp_comm_overlap_cfg.value ? "inline" : "TE's default")
                            : o.tp_comm_overlap_preset);
    return a;
  }
  Builder b(a, fmt::format("tp {} >= 2: the sequence-parallel all-gather and reduce-scatter "
                           "around each layer's GEMMs can be split into chunks that overlap "
                           "with the GEMMs",
                           t.tp));
  add_prerequisites(b, kTpOverlapFeature, r, t);
  const std::string cfg_field = "comm_overlap.tp_comm_overlap_cfg";
  if (r.comm_overlap.tp_comm_overlap_cfg.is_set()) {
    const YamlNode& cfg = *r.comm_overlap.tp_comm_overlap_cfg.value;
    b.met(cfg_field, "a userbuffers preset or mapping for this plan",
          cfg.is_scalar() ? cfg.scalar : "inline mapping", "M6");
  } else if (std::string preset = overlap_detail::preset_for_plan(r, t); !preset.empty()) {
    b.change(cfg_field, "a userbuffers preset or mapping for this plan", "null", "M6",
             {{cfg_field, preset,
               "the preset tuned for this plan's GPU, precision, hidden size, TP/CP size, "
               "micro batch size and sequence length"}});
  } else {
    b.warn(cfg_field, "a userbuffers preset or mapping for this plan", "null", "M6",
           "no userbuffers preset is tuned for this plan (the 19 presets cover h100/b200, "
           "listed in docs/overlap.md; the plan must name cluster.gpu and model.hidden_size): "
           "TE then uses its default userbuffers config (`no-userbuffers-preset` warning); an "
           "inline mapping tuned for the plan is better");
  }
  int64_t domain = nvlink_domain(t);
  a.notes.push_back(
      t.tp * t.cp > domain
          ? fmt::format("visibility: tp {} does not fit in one NVLink domain ({} GPUs): the "
                        "collectives cross the network; the overlap helps, a smaller tp may "
                        "help more",
                        t.tp, domain)
          : fmt::format("visibility: tp {} runs over NVLink; its collectives sit on the "
                        "critical path of every layer, so the overlap usually shows at larger "
                        "hidden sizes and sequence lengths",
                        t.tp));
  return a;
}

// Data-parallel overlap of one field (D1 with the distributed optimizer).
Advice dp_advice(const Plan& p, bool grad_reduce) {
  const Recipe& r = *p.recipe;
  const Topology& t = *p.topology;
  Advice a = advice_for(grad_reduce ? kDpGradReduceOverlap : kDpParamGatherOverlap);
  if (t.dp <= 1) {
    a.why = "dp is 1: there is no data-parallel gradient or parameter communication";
    return a;
  }
  const DdpConfig& ddp = p.overlap->ddp;
  bool on = grad_reduce ? ddp.overlap_grad_reduce.value_or(false)
                        : ddp.use_distributed_optimizer && ddp.overlap_param_gather.value_or(false);
  if (on) {
    a.state = AdviceState::kOn;
    a.why = fmt::format("on: dp {}{}", t.dp,
                        ddp.use_distributed_optimizer ? " with the distributed optimizer" : "");
    return a;
  }
  Builder b(a, grad_reduce
                   ? fmt::format("dp {} > 1: each gradient bucket's reduce-scatter can start "
                                 "while the backward pass computes the next buckets",
                                 t.dp)
                   : fmt::format("dp {} > 1: the distributed optimizer's parameter all-gather "
                                 "can run during the next forward pass",
                                 t.dp));
  b.met("data_parallel_size", "> 1", std::to_string(t.dp), "D1");
  add_prerequisites(b, grad_reduce ? kDpGradReduceFeature : kDpParamGatherFeature, r, t);
  a.notes.push_back(
      t.nodes > 1
          ? fmt::format("visibility: the data-parallel group spans {} nodes: the collectives "
                        "cross the network and are usually worth hiding",
                        t.nodes)
          : "visibility: all data-parallel ranks share one node, so the collectives run over "
            "NVLink: expect a small gain");
  return a;
}

// Pipeline P2P overlap: M2 picks it only with a virtual pipeline (E5 refuses it without).
Advice p2p_advice(const Plan& p) {
  const Recipe& r = *p.recipe;
  const Topology& t = *p.topology;
  Advice a = advice_for(kP2pOverlap);
  if (t.pp <= 1) {
    a.why = fmt::format("pp is {}: there is no pipeline send/receive", t.pp);
    return a;
  }
  const ResolvedOverlap& o = p.overlap->overlap;
  if (o.overlap_p2p_comm.value.value_or(false)) {
    a.state = AdviceState::kOn;
    a.why = fmt::format("on: pp {} with vpp {}", t.pp, t.vp());
    return a;
  }
  Builder b(a, fmt::format("pp {} > 1: the activations sent between pipeline stages can "
                           "overlap with compute, but only in the interleaved schedule, which "
                           "needs a virtual pipeline (vpp >= 2)",
                           t.pp));
  b.met("model.pipeline_model_parallel_size", "> 1", std::to_string(t.pp), "M2");
  require_vpp(b, r, t, "E5",
              "P2P overlap needs the interleaved schedule: without a virtual pipeline "
              "Megatron-Core refuses overlap_p2p_comm");
  b.require(!r.comm_overlap.batch_p2p_comm.get_or(false), "comm_overlap.batch_p2p_comm",
            "not true (exclusive with overlap_p2p_comm)",
            text(r.comm_overlap.batch_p2p_comm, "null (M2 decides)"), "E5", "null",
            "the interleaved schedule refuses overlap_p2p_comm with batch_p2p_comm; unset, rule "
            "M2 picks false with vpp >= 2");
  if (t.vp() < 2)
    a.notes.push_back(
        "a virtual pipeline also changes the schedule by itself (a smaller pipeline bubble): "
        "the baseline below has it too, so the comparison measures the P2P overlap alone");
  return a;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A condition of the advice already warns about this field (its note says why).
bool explained(const Advice& a, const std::string& field) {
  return std::any_of(a.conditions.begin(), a.conditions.end(), [&](const AdviceCondition& c) {
    return c.field == field && c.status == ConditionStatus::kWarning;
  });
}

// Plans the ablate baseline and variant; errors block the advice, new warnings become notes.
void verify(Advice& a, const std::vector<std::string>& baseline_extra,
            const std::set<std::pair<std::string, std::string>>& known_warnings,
            const AdviceCheck& check) {
  std::vector<std::string> variant_extra = baseline_extra;
  variant_extra.push_back(a.knob + "=true");
  std::set<std::string> seen;
  const std::vector<std::string>* const runs[] = {&baseline_extra, &variant_extra};
  for (const std::vector<std::string>* extra : runs) {
    Diagnostics d;
    check(*extra, d);
    const char* which = extra == &baseline_extra ? "the baseline" : "the variant";
    for (const Diagnostic& item : d.items()) {
      std::string line = fmt::format("{} [{}]", item.message, item.code);
      if (!seen.insert(line).second) continue;
      if (item.severity == Severity::kError)
        a.blockers.push_back(fmt::format("validate refuses {}: {}", which, line));
      else if (item.severity == Severity::kWarning && extra == &variant_extra &&
               !known_warnings.count({item.code, item.path}) && !explained(a, item.path))
        a.notes.push_back("validate warns with the knob on: " + line);
    }
  }
}

void add_ablate_command(Advice& a, const Plan& p, const AdviceInvocation& inv) {
  std::vector<std::string> argv{inv.program, "ablate"};
  argv.insert(argv.end(), inv.option_args.begin(), inv.option_args.end());
  argv.push_back(inv.recipe_path);
  argv.insert(argv.end(), inv.overrides.begin(), inv.overrides.end());
  for (const auto& c : a.changes) argv.push_back(c.override_text());
  auto input = p.recipe->inputs.find(a.knob);
  if (input == p.recipe->inputs.end() || lower(input->second) != "false")
    argv.push_back(a.knob + "=false");
  argv.push_back("--vary");
  argv.push_back(a.knob + "=false,true");
  a.ablate_argv = argv;
  std::vector<std::string> words;
  words.reserve(argv.size());
  for (const auto& w : argv) words.push_back(shell_word(w));
  a.ablate_command = fmt::format("{}", fmt::join(words, " "));
}

}  // namespace

std::vector<Advice> advise_overlap(const Plan& plan, const AdviceInvocation& invocation,
                                   const AdviceCheck& check) {
  std::vector<Advice> out;
  if (!plan.recipe || !plan.topology || !plan.overlap) return out;
  out.push_back(ep_advice(plan));
  out.push_back(tp_advice(plan));
  out.push_back(dp_advice(plan, true));
  out.push_back(dp_advice(plan, false));
  out.push_back(p2p_advice(plan));
  std::set<std::pair<std::string, std::string>> known_warnings;
  bool planned_base = false;
  for (Advice& a : out) {
    if (a.state != AdviceState::kSuggested) continue;
    if (!a.blockers.empty()) {
      a.state = AdviceState::kBlocked;
      continue;
    }
    if (!planned_base) {  // the warnings the plan already has are not news
      Diagnostics base;
      check({}, base);
      for (const Diagnostic& d : base.items()) known_warnings.insert({d.code, d.path});
      planned_base = true;
    }
    add_ablate_command(a, plan, invocation);
    if (!plan.runtime_check.ran && (plan.adapter == "megatron_bridge" || plan.adapter == "hydra"))
      a.notes.push_back(
          "these prerequisites are bridge-launch's rules for megatron-bridge 0.6.2; with another "
          "or a patched release, add `--runtime-check PYTHON` to advise or validate so that "
          "release says whether it starts with the knob on (docs/runtime-check.md)");
    // The baseline's extra overrides: what the command adds after the caller's overrides.
    std::vector<std::string> baseline_extra(
        a.ablate_argv.begin() +
            static_cast<long>(2 + invocation.option_args.size() + 1 + invocation.overrides.size()),
        a.ablate_argv.end() - 2);
    verify(a, baseline_extra, known_warnings, check);
    if (!a.blockers.empty()) {
      a.state = AdviceState::kBlocked;
      a.ablate_argv.clear();
      a.ablate_command.clear();
    }
  }
  return out;
}

}  // namespace bridge
