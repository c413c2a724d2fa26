// The overlap prerequisite table (overlap_prerequisites.h). A new prerequisite is a new row
// here; validation and advice pick it up (docs/contributing.md, "Adding an overlap rule").
#include "model/overlap_prerequisites.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/overlap.h"
#include "model/runtime_kind.h"

namespace bridge {

const OverlapFeature kTpOverlapFeature{"comm_overlap.tp_comm_overlap", "tensor-parallel overlap",
                                       "remove comm_overlap.tp_comm_overlap"};
const OverlapFeature kEpOverlapFeature{
    "comm_overlap.overlap_moe_expert_parallel_comm",
    "expert-parallel overlap (comm_overlap.overlap_moe_expert_parallel_comm)",
    "turn off comm_overlap.overlap_moe_expert_parallel_comm"};
const OverlapFeature kDpGradReduceFeature{"comm_overlap.overlap_grad_reduce",
                                          "data-parallel gradient reduce-scatter overlap",
                                          "remove comm_overlap.overlap_grad_reduce"};
const OverlapFeature kDpParamGatherFeature{"comm_overlap.overlap_param_gather",
                                           "data-parallel parameter all-gather overlap",
                                           "remove comm_overlap.overlap_param_gather"};

namespace {

std::string shown_bool(const Field<bool>& f, const char* unset) {
  return f.is_set() ? (*f.value ? "true" : "false") : unset;
}
std::string shown_int(const Field<int64_t>& f, const char* unset) {
  return f.is_set() ? std::to_string(*f.value) : unset;
}
std::string shown_string(const Field<std::string>& f, const char* unset) {
  return f.is_set() ? *f.value : unset;
}
std::string yaml_list(const StringList& l) { return fmt::format("[{}]", fmt::join(l, ",")); }
std::string shown_list(const Field<StringList>& f, const char* unset) {
  return f.is_set() ? yaml_list(*f.value) : unset;
}
bool contains(const StringList& l, const char* item) {
  return std::find(l.begin(), l.end(), item) != l.end();
}

// --- tensor-parallel overlap: the M1 gate, in the runtime's order ---

bool sequence_parallel_on(const Recipe& r, const Topology& t) {
  return runtime_forced_sequence_parallel(r, t.tp).value_or(
      r.model.sequence_parallel.get_or(false));
}
std::string shown_sequence_parallel(const Recipe& r, const Topology& t) {
  if (auto forced = runtime_forced_sequence_parallel(r, t.tp))
    return *forced ? "true (the runtime turns it on at tp > 1)" : "false (the runtime's)";
  return shown_bool(r.model.sequence_parallel, "false (unset)");
}
bool te_present(const Recipe& r, const Topology&) {
  const auto& te = r.runtime.transformer_engine;
  return !te.is_set() || te.value->present;
}
std::string shown_te(const Recipe& r, const Topology&) {
  const auto& te = r.runtime.transformer_engine;
  if (te.is_set() && !te.value->present) return "false (Transformer Engine absent)";
  if (te.is_set() && !te.value->version.empty()) return te.value->version;
  return "present (version not declared)";
}

// --- expert-parallel overlap: M3 (E6 for recompute) ---

std::string precision(const Recipe& r) { return r.model.precision.get_or("fp32"); }
std::string dispatcher(const Recipe& r) {
  return r.model.moe_token_dispatcher_type.get_or("allgather");
}

// Selective recompute of the same modules without `moe`, the attention core when none remain.
StringList selective_modules(const Recipe& r) {
  StringList modules = r.model.recompute_modules.get_or({});
  modules.erase(std::remove(modules.begin(), modules.end(), "moe"), modules.end());
  if (modules.empty()) modules = {"core_attn"};
  return modules;
}

PrerequisiteRemedy selective_recompute(const Recipe& r, const Topology&) {
  return {{{"model.recompute_granularity", "selective",
            "EP overlap refuses full activation recompute; selective recompute of the "
            "attention core saves most of the memory at a fraction of the cost"},
           {"model.recompute_modules", yaml_list(selective_modules(r)),
            "selective recompute of these modules (never `moe` with EP overlap)"}},
          ""};
}

PrerequisiteRemedy modules_without_moe(const Recipe& r, const Topology&) {
  return {{{"model.recompute_modules", yaml_list(selective_modules(r)),
            "recomputing the MoE layer would repeat the overlapped all-to-all"}},
          ""};
}

PrerequisiteRemedy smallest_vpp(const Recipe& r, const Topology& t) {
  const char* field = "model.virtual_pipeline_model_parallel_size";
  int64_t v = advised_vpp(r, t);
  if (v == 0)
    return {{},
            fmt::format("no virtual pipeline size >= 2 divides model.num_layers ({}) by pp {} "
                        "(rule T5): change the layout first",
                        shown_int(r.model.num_layers, "null"), t.pp)};
  return {{{field, std::to_string(v),
            fmt::format("EP overlap with pp > 1 needs the interleaved schedule (a virtual "
                        "pipeline); {} is the smallest vpp >= 2 that divides num_layers by pp * "
                        "vpp",
                        v)}},
          ""};
}

// --- data-parallel overlap: D1 ---

std::string shown_distributed_optimizer(const Recipe& r, const Topology& t) {
  if (r.ddp.use_distributed_optimizer.is_set())
    return shown_bool(r.ddp.use_distributed_optimizer, "");
  return distributed_optimizer_on(r, t) ? "null (true: Megatron-Bridge's recipes turn it on)"
                                        : "null (false)";
}

const char* kDistributedOptimizerReason =
    "the runtime applies data-parallel overlap only through the distributed optimizer (rule "
    "D); it also shards the optimizer state, so the baseline gets it too";

std::vector<OverlapPrerequisite> build_rows() {
  using K = PrerequisiteKind;
  const OverlapFeature* tp = &kTpOverlapFeature;
  const OverlapFeature* ep = &kEpOverlapFeature;
  std::vector<OverlapPrerequisite> rows{
      {"M1", tp, "model.tensor_model_parallel_size", ">= 2", K::kScope,
       [](const Recipe&, const Topology& t) { return t.tp >= 2; },
       [](const Recipe&, const Topology& t) { return std::to_string(t.tp); },
       "there is no tensor-parallel communication to hide",
       "set model.tensor_model_parallel_size >= 2 with model.sequence_parallel: true"},
      {"M1", tp, "model.sequence_parallel", "true", K::kSetting, sequence_parallel_on,
       shown_sequence_parallel,
       "TP overlap hides the sequence-parallel all-gather/reduce-scatter; without sequence "
       "parallel the M1 gate turns it off",
       "set model.sequence_parallel: true (TP overlap hides the sequence-parallel "
       "all-gather/reduce-scatter)",
       "true"},
      {"M1", tp, "runtime.transformer_engine", "present", K::kFixed, te_present, shown_te,
       "TP overlap is Transformer Engine's userbuffers",
       "use a container with Transformer Engine and declare its version in "
       "runtime.transformer_engine"},
      {"M3", ep, "model.num_moe_experts", "> 1", K::kScope,
       [](const Recipe& r, const Topology&) { return r.model.num_moe_experts.get_or(0) > 1; },
       [](const Recipe& r, const Topology&) {
         return shown_int(r.model.num_moe_experts, "null (not an MoE model)");
       },
       "without experts there is no expert-parallel all-to-all",
       "set model.num_moe_experts to the model's expert count"},
      {"M3", ep, "model.expert_model_parallel_size", "> 1", K::kScope,
       [](const Recipe&, const Topology& t) { return t.ep > 1; },
       [](const Recipe&, const Topology& t) { return std::to_string(t.ep); },
       "every GPU holds all experts, so there is no expert-parallel all-to-all to hide",
       "set model.expert_model_parallel_size to 2 or more"},
      {"M3", ep, "model.moe_token_dispatcher_type", "alltoall or flex", K::kSetting,
       [](const Recipe& r, const Topology&) {
         return dispatcher(r) == "alltoall" || dispatcher(r) == "flex";
       },
       [](const Recipe& r, const Topology&) {
         return shown_string(r.model.moe_token_dispatcher_type, "null (allgather)");
       },
       "EP overlap works with the all-to-all dispatchers (alltoall, flex) only",
       "set model.moe_token_dispatcher_type: alltoall", "alltoall"},
      {"M3", ep, "model.precision", "bf16 or fp16", K::kSetting,
       [](const Recipe& r, const Topology&) {
         return precision(r) == "bf16" || precision(r) == "fp16";
       },
       [](const Recipe& r, const Topology&) {
         return shown_string(r.model.precision, "null (fp32)");
       },
       "EP overlap needs bf16 or fp16 training", "set model.precision: bf16", "bf16"},
      {"M3", ep, "runtime.torch", ">= 2.6.0", K::kVersion, nullptr,
       [](const Recipe& r, const Topology&) {
         return shown_string(r.runtime.torch, kVersionNotDeclared);
       },
       "the overlapped all-to-all hangs with torch < 2.6.0 (a 2.6.0 pre-release counts as older)",
       "use a container with torch >= 2.6.0 (a released 2.6.0 or later, not a 2.6.0 "
       "pre-release) and declare it in runtime.torch",
       "", nullptr, "2.6.0", "torch"},
      {"M3", ep, "model.virtual_pipeline_model_parallel_size", "set when pp > 1", K::kSetting,
       [](const Recipe&, const Topology& t) { return t.pp <= 1 || t.vpp.has_value(); },
       [](const Recipe& r, const Topology& t) {
         return t.pp <= 1 ? fmt::format("not needed: pp is {}", t.pp)
                          : shown_int(r.model.virtual_pipeline_model_parallel_size, "null");
       },
       "EP overlap with pp > 1 needs the interleaved schedule (a virtual pipeline)",
       "set virtual_pipeline_model_parallel_size (e.g. 2; num_layers must divide by pp * vpp) "
       "or use pipeline_model_parallel_size 1",
       "", smallest_vpp},
      {"M3", ep, "model.recompute_granularity", "not full (selective or null)", K::kSetting,
       [](const Recipe& r, const Topology&) {
         return r.model.recompute_granularity.get_or("") != "full";
       },
       [](const Recipe& r, const Topology&) {
         return shown_string(r.model.recompute_granularity, "null");
       },
       "EP overlap refuses full activation recompute",
       "use selective recompute instead (recompute_granularity: selective, recompute_modules "
       "without `moe`, e.g. [core_attn]) and leave recompute_method/recompute_num_layers unset",
       "", selective_recompute},
      {"M3", ep, "model.recompute_method", "null", K::kSetting,
       [](const Recipe& r, const Topology&) { return !r.model.recompute_method.is_set(); },
       [](const Recipe& r, const Topology&) {
         return shown_string(r.model.recompute_method, "null");
       },
       "it only applies to full recompute",
       "remove model.recompute_method (it only applies to full recompute)", "null"},
      {"M3", ep, "model.recompute_num_layers", "null", K::kSetting,
       [](const Recipe& r, const Topology&) { return !r.model.recompute_num_layers.is_set(); },
       [](const Recipe& r, const Topology&) {
         return shown_int(r.model.recompute_num_layers, "null");
       },
       "it only applies to full recompute",
       "remove model.recompute_num_layers (it only applies to full recompute)", "null"},
      {"M3", ep, "model.recompute_modules", "without moe", K::kSetting,
       [](const Recipe& r, const Topology&) {
         return !contains(r.model.recompute_modules.get_or({}), "moe");
       },
       [](const Recipe& r, const Topology&) {
         return shown_list(r.model.recompute_modules, "null");
       },
       "recomputing the MoE layer would repeat the overlapped all-to-all",
       "remove `moe` from model.recompute_modules (e.g. [core_attn])", "", modules_without_moe},
      {"M3", ep, "model.moe_shared_expert_overlap", "false (exclusive with EP overlap)",
       K::kSetting,
       [](const Recipe& r, const Topology&) {
         return !r.model.moe_shared_expert_overlap.get_or(false);
       },
       [](const Recipe& r, const Topology&) {
         return shown_bool(r.model.moe_shared_expert_overlap, "null (false)");
       },
       "the shared-expert overlap and the EP overlap are exclusive",
       "set model.moe_shared_expert_overlap: false (the two overlaps are exclusive)", "false"},
      {"M3", ep, "model.mtp_num_layers", "null, 0 or 1", K::kFixed,
       [](const Recipe& r, const Topology&) { return r.model.mtp_num_layers.get_or(0) <= 1; },
       [](const Recipe& r, const Topology&) { return shown_int(r.model.mtp_num_layers, "null"); },
       "EP overlap allows at most one multi-token-prediction layer, and changing that changes "
       "the model",
       "set model.mtp_num_layers to 1 or less"},
      {"D1", &kDpGradReduceFeature, "ddp.use_distributed_optimizer", "true", K::kSetting,
       distributed_optimizer_on, shown_distributed_optimizer, kDistributedOptimizerReason,
       "set `ddp.use_distributed_optimizer: true`", "true"},
      {"D1", &kDpParamGatherFeature, "ddp.use_distributed_optimizer", "true", K::kSetting,
       distributed_optimizer_on, shown_distributed_optimizer, kDistributedOptimizerReason,
       "set `ddp.use_distributed_optimizer: true`", "true"},
  };
  return rows;
}

}  // namespace

const std::vector<OverlapPrerequisite>& overlap_prerequisites() {
  static const std::vector<OverlapPrerequisite> kRows = build_rows();
  return kRows;
}

std::vector<const OverlapPrerequisite*> prerequisites_of(const OverlapFeature& feature) {
  std::vector<const OverlapPrerequisite*> out;
  for (const OverlapPrerequisite& row : overlap_prerequisites())
    if (row.feature == &feature) out.push_back(&row);
  return out;
}

PrerequisiteState prerequisite_state(const OverlapPrerequisite& row, const Recipe& r,
                                     const Topology& t) {
  if (row.kind != PrerequisiteKind::kVersion)
    return row.holds(r, t) ? PrerequisiteState::kHolds : PrerequisiteState::kFails;
  auto have = parse_version(row.shown(r, t));
  auto need = parse_version(row.min_version);
  if (!have || !need) return PrerequisiteState::kUnverified;
  return compare_versions(*have, *need) >= 0 ? PrerequisiteState::kHolds
                                             : PrerequisiteState::kFails;
}

PrerequisiteRemedy prerequisite_remedy(const OverlapPrerequisite& row, const Recipe& r,
                                       const Topology& t) {
  if (row.kind != PrerequisiteKind::kSetting)
    return {{}, fmt::format("{} is {}: {}; {}", row.field, row.shown(r, t), row.reason, row.help)};
  if (row.remedy) return row.remedy(r, t);
  return {{{row.field, row.fix, row.reason}}, ""};
}

std::string prerequisite_shortfall(const OverlapPrerequisite& row, const Recipe& r,
                                   const Topology& t) {
  return fmt::format("{} {}, got {}", row.field, row.requirement, row.shown(r, t));
}

int64_t advised_vpp(const Recipe& recipe, const Topology& topo) {
  if (!recipe.model.num_layers.is_set()) return 2;
  int64_t layers = *recipe.model.num_layers.value;
  for (int64_t v = 2; topo.pp * v <= layers; ++v)
    if (layers % (topo.pp * v) == 0) return v;
  return 0;
}

// Unset, Megatron-Bridge's recipes turn the distributed optimizer on and Megatron-Core leaves
// it off: the D1 rows' predicate, and the value overlap_data_parallel.cpp plans.
bool distributed_optimizer_on(const Recipe& r, const Topology&) {
  return r.ddp.use_distributed_optimizer.get_or(runtime_is_megatron_bridge(r.runtime));
}

}  // namespace bridge
