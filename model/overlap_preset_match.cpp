// M6: userbuffers presets against the plan. A preset's SM counts and split sizes were tuned
// for one GPU, precision, hidden size, TP/CP size, micro batch size and sequence length; used
// on another plan it still runs, but the tuning no longer fits, so a disagreement is a
// "dropped" warning (an error under --strict) naming the field and both values, with the
// preset tuned for the plan suggested when one exists. The same matcher supplies the hint
// of the no-userbuffers-preset warning.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "model/overlap.h"

namespace bridge {

namespace {

using PresetValue = std::string (*)(const UserbuffersPresetTarget&);

// One field a preset name encodes, with the plan's value (nullopt = unset, not compared).
struct Facet {
  const char* what;  // "hidden size"
  std::string path;  // where the plan's value comes from: "model.hidden_size"
  std::optional<std::string> plan;
  PresetValue preset;
};

std::optional<std::string> number_if_set(const Field<int64_t>& f) {
  if (!f.is_set()) return std::nullopt;
  return std::to_string(*f.value);
}

// The plan's precision as the preset names spell it: an fp8 compute_dtype means the fp8
// presets whatever model.precision says (the GEMMs, and so the userbuffers, run in fp8).
Facet precision_facet(const ModelSpec& m) {
  Facet f{"precision", "model.precision", std::nullopt,
          [](const UserbuffersPresetTarget& p) { return p.precision; }};
  if (m.compute_dtype.get_or("").rfind("fp8", 0) == 0) {
    f.path = "model.compute_dtype";
    f.plan = "fp8";
  } else if (m.precision.is_set()) {
    f.plan = *m.precision.value;
  }
  return f;
}

// In the order the preset names spell them. TP and CP always have a plan value (the
// topology's, 1 when unset, which is Megatron's default too).
std::vector<Facet> plan_facets(const Recipe& r, const Topology& t) {
  std::vector<Facet> out;
  out.push_back(precision_facet(r.model));
  out.push_back(Facet{"GPU", "cluster.gpu",
                      t.gpu.empty() ? std::nullopt : std::optional<std::string>(t.gpu),
                      [](const UserbuffersPresetTarget& p) { return p.gpu; }});
  out.push_back(
      Facet{"hidden size", "model.hidden_size", number_if_set(r.model.hidden_size),
            [](const UserbuffersPresetTarget& p) { return std::to_string(p.hidden_size); }});
  out.push_back(Facet{"tensor-parallel size", "model.tensor_model_parallel_size",
                      std::to_string(t.tp),
                      [](const UserbuffersPresetTarget& p) { return std::to_string(p.tp); }});
  out.push_back(Facet{"context-parallel size", "model.context_parallel_size", std::to_string(t.cp),
                      [](const UserbuffersPresetTarget& p) { return std::to_string(p.cp); }});
  out.push_back(
      Facet{"micro batch size", "train.micro_batch_size", number_if_set(r.train.micro_batch_size),
            [](const UserbuffersPresetTarget& p) { return std::to_string(p.micro_batch_size); }});
  out.push_back(
      Facet{"sequence length", "model.seq_length", number_if_set(r.model.seq_length),
            [](const UserbuffersPresetTarget& p) { return std::to_string(p.seq_length); }});
  return out;
}

bool fits(const std::vector<Facet>& facets, const UserbuffersPresetTarget& p) {
  for (const auto& f : facets)
    if (f.plan && *f.plan != f.preset(p)) return false;
  return true;
}

const Facet& facet(const std::vector<Facet>& facets, const char* what) {
  for (const auto& f : facets)
    if (std::string_view(f.what) == what) return f;
  return facets.front();
}

// "h100, bf16, hidden size 12288, ..." for the plan values that are set.
std::string describe_plan(const std::vector<Facet>& facets) {
  std::string out;
  for (const auto& f : facets) {
    if (!f.plan) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", f.what, *f.plan);
  }
  return out;
}

}  // namespace

namespace overlap_detail {

// A preset "for the plan" agrees with every plan value that is set, and the plan must at
// least name the GPU and the hidden size: without them any preset would be a guess. Among
// several, a full-training preset beats a LoRA one, and with no precision in the plan the
// bf16 preset beats the fp8 one (fp8 GEMMs need an explicit fp8 compute_dtype).
std::string preset_for_plan(const Recipe& r, const Topology& t) {
  std::vector<Facet> facets = plan_facets(r, t);
  if (!facet(facets, "GPU").plan || !facet(facets, "hidden size").plan) return "";
  std::string best;
  int best_rank = -1;
  for (const auto& name : userbuffers_preset_names()) {
    auto target = userbuffers_preset_target(name);
    if (!target || !fits(facets, *target)) continue;
    int rank = (target->lora ? 0 : 2) + (target->precision == "bf16" ? 1 : 0);
    if (rank > best_rank) {
      best = name;
      best_rank = rank;
    }
  }
  return best;
}

void check_preset_matches_plan(const Recipe& r, const Topology& t, const std::string& preset,
                               Diagnostics& diags) {
  auto target = userbuffers_preset_target(preset);
  if (!target) return;
  std::vector<Facet> facets = plan_facets(r, t);
  std::string better = preset_for_plan(r, t);
  std::string help =
      better.empty()
          ? fmt::format(
                "no preset is tuned for this plan ({}): keep `{}` knowingly, or write an "
                "inline per-layer tp_comm_overlap_cfg tuned for it",
                describe_plan(facets), preset)
          : fmt::format("use comm_overlap.tp_comm_overlap_cfg: {} (tuned for {})", better,
                        describe_plan(facets));
  const SourceLoc& loc = r.comm_overlap.tp_comm_overlap_cfg.loc;
  for (const auto& f : facets) {
    if (!f.plan || *f.plan == f.preset(*target)) continue;
    diags.dropped("userbuffers-preset-mismatch", "comm_overlap.tp_comm_overlap_cfg", loc,
                  fmt::format("userbuffers preset `{}` is tuned for {} {}, but the plan's {} is "
                              "{} ({}): its SM counts and splits were tuned for another shape",
                              preset, f.what, f.preset(*target), f.what, *f.plan, f.path),
                  help);
  }
}

}  // namespace overlap_detail

}  // namespace bridge
