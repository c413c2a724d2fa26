// Userbuffers presets and inline mappings (M6) and presets against the plan, data-parallel
// overlap (D1-D3), the launch-env and flex-backend pitfalls (E1-E4), runtime argument
// forwarding, unparseable versions, and the example recipes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/overlap.h"
#include "model/recipe_loader.h"
#include "model/topology.h"
#include "plan/plan_output.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr const char* kBase = "name: t\ncluster: {num_gpus: 8, gpus_per_node: 8}\n";

struct Outcome {
  explicit Outcome(bool strict) : diags(strict) {}
  Diagnostics diags;
  std::optional<Recipe> recipe;
  OverlapResolution res;
  const ResolvedOverlap& o() const { return res.overlap; }

  const Diagnostic* first(const std::string& code, const std::string& path = "") const {
    return test::find_diag(diags, code, path);
  }
  std::vector<std::string> paths(const std::string& code) const {
    std::vector<std::string> out;
    for (const auto& d : diags.items())
      if (d.code == code) out.push_back(d.path);
    return out;
  }
  std::string dump() const {
    std::string s;
    for (const auto& d : diags.items()) s += format_diagnostic(d, false);
    return s;
  }
};

Outcome resolve(const std::vector<std::string>& overrides, bool strict = false,
                const std::string& text = kBase) {
  Outcome run(strict);
  run.recipe = load_recipe_text(text, "t.yaml", overrides, run.diags);
  if (!run.recipe) {
    ADD_FAILURE() << "recipe did not load:\n" << run.dump();
    return run;
  }
  auto topo = compute_topology(*run.recipe, run.diags);
  if (!topo) {
    ADD_FAILURE() << "topology failed:\n" << run.dump();
    return run;
  }
  run.res = resolve_comm_overlap(*run.recipe, *topo, run.diags);
  return run;
}

const std::vector<std::string> kTpOn{"model.tensor_model_parallel_size=4",
                                     "model.sequence_parallel=true",
                                     "comm_overlap.tp_comm_overlap=true"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- the 19 presets, checked cell by cell against an independent copy of the table ----

// The preset table as Megatron-Bridge defines it: name then the ten cells.
const char* const kSpecTable[] = {
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192 | B(4,2) | B(24,2) | B(2,2) | B(4,2) | R | R "
    "| R | R | P(24,2) | P(16,2)",
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192 | B(4,2) | B(24,2) | B(2,2) | B(4,2) | R | R | "
    "R | R | Rm | Rm",
    "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192 | B(16,2) | B(24,2) | B(2,2) | B(4,2) | R | R "
    "| R | R | P(32,2) | P(16,2)",
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192 | B(4,2) | B(24,2) | B(2,2) | B(4,2) | R | R | "
    "R | R | Rm | Rm",
    "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192 | B(2,2) | B(24,2) | B(2,2) | B(2,2) | R "
    "| R | R | R | P(24,2) | P(8,2)",
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192 | B(2,2) | B(24,2) | B(2,2) | B(2,2) | R "
    "| "
    "R | R | R | Rm | Rm",
    "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192 | B(8,2) | B(24,2) | B(2,2) | B(2,2) | R "
    "| R | R | R | P(32,2) | P(8,2)",
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 | B(8,2) | B(32,2) | B(2,2) | B(8,2) | R "
    "| "
    "R | R | R | Rm | Rm",
    "userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora | B(2,2) | - | P8(16,2) | - | Rm | Rm | "
    "Rm "
    "| Rm | Rc | Rc",
    "userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora | B(2,2) | - | P8(16,2) | - | Ra | Ra | "
    "Ra | Ra | P8(32,2) | P8(16,2)",
    "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048 | B(8,2) | B(16,2) | B(4,2) | B(16,2) | R | R "
    "| R | R | P(16,2) | P(24,2)",
    "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048 | B(8,2) | B(16,2) | B(4,2) | B(16,2) | R | R "
    "| "
    "R | R | P8(16,2) | P8(24,2)",
    "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048 | B(4,2) | B(4,2) | B(2,2) | B(4,2) | R | R "
    "| "
    "R | R | P(24,2) | Rm",
    "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048 | B(4,2) | B(4,2) | B(2,2) | B(4,2) | R | R | "
    "R | R | Rm | Rm",
    "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048 | B(4,2) | B(16,2) | B(2,2) | B(8,2) | R | R "
    "| R | R | Rm | Rm",
    "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048 | B(4,2) | B(16,2) | B(2,2) | B(8,2) | R | R "
    "| "
    "R | R | Rm | Rm",
    "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096 | B(8,2) | B(32,2) | B(2,2) | B(8,2) | R | R "
    "| "
    "R | R | Rm | Rm",
    "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096 | B(8,2) | B(32,2) | B(2,2) | B(8,2) | R | R "
    "| R | R | Rm | P(24,2)",
    "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096 | B(8,2) | B(32,2) | B(2,2) | B(8,2) | R | R "
    "| "
    "R | R | Rm | Rm",
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The cell legend, written independently of the implementation.
ordered_json legend(const std::string& cell) {
  auto ring = [](bool aggregate, int cga, bool margin, bool fp8) {
    return ordered_json{{"method", "ring_exchange"}, {"aggregate", aggregate},  {"num_sm", 1},
                        {"cga_size", cga},           {"set_sm_margin", margin}, {"fp8_buf", fp8},
                        {"atomic_gemm", false}};
  };
  if (cell == "-") return nullptr;
  if (cell == "R") return ring(false, 1, false, false);
  if (cell == "Rm") return ring(false, 1, true, false);
  if (cell == "Ra") return ring(true, 1, false, false);
  if (cell == "Rc") return ring(false, 2, true, true);
  int n = 0, c = 0;
  std::string kind = cell.substr(0, cell.find('('));
  std::sscanf(cell.c_str() + kind.size(), "(%d,%d)", &n, &c);
  if (kind == "B")
    return ordered_json{
        {"method", "bulk"}, {"num_sm", n}, {"cga_size", c}, {"set_sm_margin", false}};
  return ordered_json{{"method", "pipeline"}, {"num_sm", n},           {"cga_size", c},
                      {"num_splits", 4},      {"set_sm_margin", true}, {"fp8_buf", kind == "P8"},
                      {"atomic_gemm", false}};
}

TEST(OverlapPresets, AllNineteenExistInTableOrder) {
  std::vector<std::string> expected;
  for (const char* row : kSpecTable)
    expected.push_back(trim(std::string(row).substr(0, std::string(row).find('|'))));
  EXPECT_EQ(userbuffers_preset_names(), expected);
  EXPECT_EQ(userbuffers_preset_names().size(), 19u);
}

TEST(OverlapPresets, EveryCellMatchesTheSpecTable) {
  const auto& layers = userbuffers_layer_names();
  ASSERT_THAT(layers,
              ElementsAre("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "qkv_fprop",
                          "proj_dgrad", "fc1_fprop", "fc2_dgrad", "proj_fprop", "fc2_fprop"));
  for (const char* row : kSpecTable) {
    std::stringstream ss(row);
    std::vector<std::string> cells;
    for (std::string c; std::getline(ss, c, '|');) cells.push_back(trim(c));
    ASSERT_EQ(cells.size(), 11u) << row;
    auto got = expand_userbuffers_preset(cells[0]);
    ASSERT_TRUE(got.has_value()) << cells[0];
    ordered_json expected = ordered_json::object();
    for (size_t i = 0; i < layers.size(); ++i) {
      ordered_json cell = legend(cells[i + 1]);
      if (!cell.is_null()) expected[layers[i]] = cell;
    }
    // dump() compares key order too: layers in table order, fields in legend order.
    EXPECT_EQ(userbuffers_to_json(*got).dump(), expected.dump()) << cells[0];
  }
}

TEST(OverlapPresets, NullLayersAreDropped) {
  auto expanded = expand_userbuffers_preset("userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora");
  ASSERT_TRUE(expanded.has_value());
  auto lora = std::optional<ordered_json>(userbuffers_to_json(*expanded));
  EXPECT_EQ(lora->size(), 8u);
  EXPECT_FALSE(lora->contains("qkv_wgrad"));
  EXPECT_FALSE(lora->contains("fc1_wgrad"));
  EXPECT_EQ((*lora)["fc1_dgrad"]["fp8_buf"], true);
  EXPECT_EQ((*lora)["proj_fprop"]["cga_size"], 2);
}

TEST(OverlapPresets, ExactShapeOfOneLayer) {
  auto expanded = expand_userbuffers_preset("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048");
  ASSERT_TRUE(expanded.has_value());
  auto p = std::optional<ordered_json>(userbuffers_to_json(*expanded));
  EXPECT_EQ((*p)["qkv_dgrad"].dump(),
            R"({"method":"bulk","num_sm":4,"cga_size":2,"set_sm_margin":false})");
  EXPECT_EQ((*p)["proj_fprop"].dump(),
            R"({"method":"pipeline","num_sm":24,"cga_size":2,"num_splits":4,)"
            R"("set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false})");
  EXPECT_EQ((*p)["fc2_fprop"].dump(),
            R"({"method":"ring_exchange","aggregate":false,"num_sm":1,"cga_size":1,)"
            R"("set_sm_margin":true,"fp8_buf":false,"atomic_gemm":false})");
  EXPECT_FALSE(expand_userbuffers_preset("userbuffers_nope").has_value());
}

// ---- M6 through resolve_comm_overlap ----

TEST(OverlapTpConfig, PresetIsExpandedWhenTpOverlapIsOn) {
  const std::string name = "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048";
  Outcome run = resolve(plus(kTpOn, {"comm_overlap.tp_comm_overlap_cfg=" + name}));
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
  EXPECT_EQ(run.o().tp_comm_overlap.value, true);
  ASSERT_TRUE(run.o().tp_comm_overlap_cfg.value.has_value());
  EXPECT_EQ(*run.o().tp_comm_overlap_cfg.value, *expand_userbuffers_preset(name));
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.source, ValueSource::kUser);
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.rule, "M6");
  EXPECT_EQ(run.o().tp_comm_overlap_preset, name);
  EXPECT_EQ(run.o().tp_comm_bootstrap_backend.value, "nccl");
}

TEST(OverlapTpConfig, UnknownPresetIsAnErrorWithSuggestion) {
  Outcome run = resolve(plus(
      kTpOn, {"comm_overlap.tp_comm_overlap_cfg=userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen248"}));
  const Diagnostic* d = run.first("unknown-userbuffers-preset");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.tp_comm_overlap_cfg");
  EXPECT_THAT(d->message,
              HasSubstr("did you mean `userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048`"));
  EXPECT_FALSE(run.o().tp_comm_overlap_cfg.value.has_value());
}

TEST(OverlapTpConfig, UnknownPresetIsReportedEvenWithTpOverlapOff) {
  Outcome run = resolve({"comm_overlap.tp_comm_overlap_cfg=userbuffers_typo"});
  EXPECT_TRUE(run.diags.has_code("unknown-userbuffers-preset")) << run.dump();
}

TEST(OverlapTpConfig, NoPresetWarnsAndSuggestsAMatchingOne) {
  Outcome run = resolve(plus(kTpOn, {"cluster.gpu=h100", "model.hidden_size=12288"}));
  const Diagnostic* d = run.first("no-userbuffers-preset");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_THAT(d->message, HasSubstr("TE will use its default userbuffers config"));
  EXPECT_THAT(d->help, HasSubstr("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048"));
  EXPECT_FALSE(run.o().tp_comm_overlap_cfg.value.has_value());
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.rule, "M6");
}

TEST(OverlapTpConfig, ConfigWithoutTpOverlapIsUnused) {
  Outcome run =
      resolve({"comm_overlap.tp_comm_overlap_cfg=userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"});
  EXPECT_TRUE(run.diags.has_code("tp-overlap-cfg-unused")) << run.dump();
  EXPECT_FALSE(run.o().tp_comm_overlap_cfg.value.has_value());
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.source, ValueSource::kRule);
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.rule, "M6");
  // Gated by M1: the tp-overlap-disabled warning already says why; no second warning.
  Outcome gated = resolve({"comm_overlap.tp_comm_overlap=true",
                           "comm_overlap.tp_comm_overlap_cfg=userbuffers_fp8_h100_h8192_tp4_mbs1_"
                           "seqlen8192"});
  EXPECT_TRUE(gated.diags.has_code("tp-overlap-disabled"));
  EXPECT_FALSE(gated.diags.has_code("tp-overlap-cfg-unused"));
}

// ---- presets against the plan (M6) ----

const char* const kPreset = "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048";

// A plan with every value the preset name encodes, all agreeing with kPreset.
std::vector<std::string> preset_plan(const std::vector<std::string>& extra) {
  return plus(plus(kTpOn, {"cluster.gpu=h100", "model.precision=bf16", "model.hidden_size=12288",
                           "train.micro_batch_size=1", "model.seq_length=2048",
                           std::string("comm_overlap.tp_comm_overlap_cfg=") + kPreset}),
              extra);
}

std::vector<const Diagnostic*> mismatches(const Outcome& run) {
  std::vector<const Diagnostic*> out;
  for (const auto& d : run.diags.items())
    if (d.code == "userbuffers-preset-mismatch") out.push_back(&d);
  return out;
}

TEST(OverlapPresetPlan, PresetNamesSayWhatTheyWereTunedFor) {
  for (const auto& name : userbuffers_preset_names())
    EXPECT_TRUE(userbuffers_preset_target(name).has_value()) << name;
  auto t = userbuffers_preset_target("userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->precision, "fp8");
  EXPECT_EQ(t->gpu, "b200");
  EXPECT_EQ(t->hidden_size, 16384);
  EXPECT_EQ(t->tp, 4);
  EXPECT_EQ(t->cp, 2);
  EXPECT_EQ(t->micro_batch_size, 1);
  EXPECT_EQ(t->seq_length, 8192);
  EXPECT_FALSE(t->lora);
  auto lora = userbuffers_preset_target("userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora");
  ASSERT_TRUE(lora.has_value());
  EXPECT_EQ(lora->cp, 1);
  EXPECT_EQ(lora->seq_length, 4096);
  EXPECT_TRUE(lora->lora);
  EXPECT_FALSE(userbuffers_preset_target("userbuffers_bf16_h100_tp4_mbs1_seqlen2048"));
  EXPECT_FALSE(userbuffers_preset_target("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048_x"));
}

TEST(OverlapPresetPlan, MatchingPresetIsSilent) {
  Outcome run = resolve(preset_plan({}));
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
  EXPECT_EQ(run.o().tp_comm_overlap_preset, kPreset);
}

TEST(OverlapPresetPlan, UnsetPlanValuesAreNotCompared) {
  // Only tp (4, the topology's) and cp (1) are known: both agree with the preset.
  Outcome run = resolve(plus(kTpOn, {std::string("comm_overlap.tp_comm_overlap_cfg=") + kPreset}));
  EXPECT_TRUE(mismatches(run).empty()) << run.dump();
}

struct FieldCase {
  std::string override_arg;  // changes one plan value
  std::string what;          // the field as the message names it
  std::string preset_value;
  std::string plan_value;
  std::string path;
  std::string suggestion;  // "" when no preset is tuned for the changed plan
};

TEST(OverlapPresetPlan, EachDisagreeingFieldIsAWarningWithBothValues) {
  const std::vector<FieldCase> cases{
      {"cluster.gpu=b200", "GPU", "h100", "b200", "cluster.gpu",
       "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048"},
      {"model.precision=fp16", "precision", "bf16", "fp16", "model.precision", ""},
      {"model.compute_dtype=fp8_cs", "precision", "bf16", "fp8", "model.compute_dtype",
       "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048"},
      {"model.hidden_size=8192", "hidden size", "12288", "8192", "model.hidden_size", ""},
      {"model.tensor_model_parallel_size=8", "tensor-parallel size", "4", "8",
       "model.tensor_model_parallel_size", ""},
      {"model.context_parallel_size=2", "context-parallel size", "1", "2",
       "model.context_parallel_size", ""},
      {"train.micro_batch_size=2", "micro batch size", "1", "2", "train.micro_batch_size", ""},
      {"model.seq_length=4096", "sequence length", "2048", "4096", "model.seq_length", ""},
  };
  for (const auto& c : cases) {
    Outcome run = resolve(preset_plan({c.override_arg}));
    auto hits = mismatches(run);
    ASSERT_EQ(hits.size(), 1u) << c.override_arg << "\n" << run.dump();
    const Diagnostic& d = *hits[0];
    EXPECT_EQ(d.severity, Severity::kWarning) << c.override_arg;
    EXPECT_EQ(d.path, "comm_overlap.tp_comm_overlap_cfg");
    EXPECT_THAT(d.message, HasSubstr(std::string("`") + kPreset + "` is tuned for " + c.what + " " +
                                     c.preset_value))
        << c.override_arg;
    EXPECT_THAT(d.message,
                HasSubstr("the plan's " + c.what + " is " + c.plan_value + " (" + c.path + ")"))
        << c.override_arg;
    std::string expected_help = c.suggestion.empty() ? "no preset is tuned for this plan"
                                                     : "tp_comm_overlap_cfg: " + c.suggestion;
    EXPECT_THAT(d.help, HasSubstr(expected_help)) << c.override_arg;
    EXPECT_FALSE(run.diags.has_errors()) << run.dump();
    EXPECT_EQ(run.o().tp_comm_overlap_preset, kPreset);  // a warning, the preset is still used
  }
}

TEST(OverlapPresetPlan, SuggestsThePresetTunedForThePlan) {
  // An h6144 / tp2 / mbs2 plan given the h12288 / tp4 / mbs1 preset: three disagreements,
  // each suggesting the preset whose every field agrees with the plan.
  Outcome run = resolve(preset_plan({"model.tensor_model_parallel_size=2", "model.hidden_size=6144",
                                     "train.micro_batch_size=2"}));
  auto hits = mismatches(run);
  ASSERT_EQ(hits.size(), 3u) << run.dump();
  std::vector<std::string> messages;
  for (const auto* d : hits) {
    EXPECT_THAT(d->help, HasSubstr("use comm_overlap.tp_comm_overlap_cfg: "
                                   "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048"));
    messages.push_back(d->message);
  }
  EXPECT_THAT(messages[0], HasSubstr("hidden size 12288"));
  EXPECT_THAT(messages[1], HasSubstr("tensor-parallel size 4"));
  EXPECT_THAT(messages[2], HasSubstr("micro batch size 1"));
}

TEST(OverlapPresetPlan, StrictMakesAMismatchAnError) {
  Outcome run = resolve(preset_plan({"model.seq_length=8192"}), /*strict=*/true);
  auto hits = mismatches(run);
  ASSERT_EQ(hits.size(), 1u) << run.dump();
  EXPECT_EQ(hits[0]->severity, Severity::kError);
  EXPECT_THAT(hits[0]->help, HasSubstr("--strict"));
  EXPECT_TRUE(run.diags.has_errors());
  Outcome ok = resolve(preset_plan({}), /*strict=*/true);
  EXPECT_FALSE(ok.diags.has_errors()) << ok.dump();
}

TEST(OverlapPresetPlan, UnusedPresetIsNotCompared) {
  // TP overlap off: tp-overlap-cfg-unused already says the preset does nothing.
  Outcome run = resolve({"cluster.gpu=b200", "model.hidden_size=4096",
                         std::string("comm_overlap.tp_comm_overlap_cfg=") + kPreset});
  EXPECT_TRUE(run.diags.has_code("tp-overlap-cfg-unused")) << run.dump();
  EXPECT_TRUE(mismatches(run).empty()) << run.dump();
}

TEST(OverlapPresetPlan, InlineMappingIsNotCompared) {
  Outcome run =
      resolve(plus(kTpOn, {"cluster.gpu=b200", "model.hidden_size=4096"}), false,
              std::string(kBase) +
                  "comm_overlap:\n  tp_comm_overlap_cfg:\n    qkv_dgrad: {method: bulk}\n");
  EXPECT_TRUE(mismatches(run).empty()) << run.dump();
}

TEST(OverlapPresetPlan, NoPresetHintHonoursEveryPlanValue) {
  // h100 / h8192 / tp4: the seqlen8192 preset only when the plan's sequence length allows it.
  Outcome seq8k =
      resolve(plus(kTpOn, {"cluster.gpu=h100", "model.hidden_size=8192", "model.seq_length=8192"}));
  const Diagnostic* d = seq8k.first("no-userbuffers-preset");
  ASSERT_NE(d, nullptr) << seq8k.dump();
  EXPECT_THAT(d->help, HasSubstr("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192"));
  Outcome fp8 = resolve(
      plus(kTpOn, {"cluster.gpu=h100", "model.hidden_size=8192", "model.compute_dtype=fp8_mx"}));
  d = fp8.first("no-userbuffers-preset");
  ASSERT_NE(d, nullptr) << fp8.dump();
  EXPECT_THAT(d->help, HasSubstr("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"));
  Outcome seq4k =
      resolve(plus(kTpOn, {"cluster.gpu=h100", "model.hidden_size=8192", "model.seq_length=4096"}));
  d = seq4k.first("no-userbuffers-preset");
  ASSERT_NE(d, nullptr) << seq4k.dump();
  EXPECT_THAT(d->help, ::testing::Not(HasSubstr("userbuffers_")));
  // Without the GPU there is no basis for a hint.
  Outcome no_gpu = resolve(plus(kTpOn, {"model.hidden_size=8192"}));
  d = no_gpu.first("no-userbuffers-preset");
  ASSERT_NE(d, nullptr) << no_gpu.dump();
  EXPECT_THAT(d->help, ::testing::Not(HasSubstr("userbuffers_")));
}

std::string inline_recipe(const std::string& cfg) {
  return std::string(kBase) +
         "model: {tensor_model_parallel_size: 4, sequence_parallel: true}\n"
         "comm_overlap:\n"
         "  tp_comm_overlap: true\n"
         "  tp_comm_overlap_cfg:\n" +
         cfg;
}

TEST(OverlapTpConfig, InlineMappingIsNormalized) {
  Outcome run =
      resolve({}, false,
              inline_recipe("    fc2_fprop: {set_sm_margin: true, method: ring_exchange}\n"
                            "    proj_fprop: null\n"
                            "    qkv_dgrad: {method: bulk, num_sm: 4, cga_size: 2, "
                            "set_sm_margin: false}\n"));
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
  ASSERT_TRUE(run.o().tp_comm_overlap_cfg.value.has_value());
  EXPECT_EQ(userbuffers_to_json(*run.o().tp_comm_overlap_cfg.value).dump(),
            R"({"qkv_dgrad":{"method":"bulk","num_sm":4,"cga_size":2,"set_sm_margin":false},)"
            R"("fc2_fprop":{"method":"ring_exchange","set_sm_margin":true}})");
  EXPECT_EQ(run.o().tp_comm_overlap_preset, "");
  EXPECT_EQ(run.o().tp_comm_overlap_cfg.source, ValueSource::kUser);
}

TEST(OverlapTpConfig, InlineUnknownLayerHasSuggestionAndPosition) {
  Outcome run = resolve({}, false, inline_recipe("    qkv_dgard: {method: bulk}\n"));
  const Diagnostic* d = run.first("unknown-userbuffers-layer");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->path, "comm_overlap.tp_comm_overlap_cfg.qkv_dgard");
  EXPECT_THAT(d->message, HasSubstr("did you mean `qkv_dgrad`"));
  EXPECT_EQ(d->loc.line, 7);
  EXPECT_EQ(d->loc.column, 5);
}

TEST(OverlapTpConfig, InlineUnknownAndForeignKeysRejected) {
  Outcome run = resolve({}, false,
                        inline_recipe("    qkv_dgrad: {method: bulk, num_smm: 4}\n"
                                      "    fc2_fprop: {method: ring_exchange, num_splits: 4}\n"));
  EXPECT_THAT(run.paths("unknown-userbuffers-key"),
              ElementsAre("comm_overlap.tp_comm_overlap_cfg.qkv_dgrad.num_smm",
                          "comm_overlap.tp_comm_overlap_cfg.fc2_fprop.num_splits"));
  EXPECT_THAT(run.first("unknown-userbuffers-key")->message, HasSubstr("did you mean `num_sm`"));
}

TEST(OverlapTpConfig, InlineValueTypesAndMethodAreChecked) {
  Outcome run = resolve({}, false,
                        inline_recipe("    qkv_dgrad: {method: bulk, num_sm: four}\n"
                                      "    qkv_wgrad: {method: bulk, set_sm_margin: 1}\n"
                                      "    fc1_dgrad: {num_sm: 2}\n"
                                      "    fc1_wgrad: {method: bulck}\n"
                                      "    qkv_fprop: [1, 2]\n"
                                      "    proj_dgrad: {method: pipeline, num_splits: 0}\n"));
  EXPECT_THAT(run.paths("bad-userbuffers-value"),
              ElementsAre("comm_overlap.tp_comm_overlap_cfg.qkv_dgrad.num_sm",
                          "comm_overlap.tp_comm_overlap_cfg.qkv_wgrad.set_sm_margin",
                          "comm_overlap.tp_comm_overlap_cfg.fc1_dgrad.method",
                          "comm_overlap.tp_comm_overlap_cfg.fc1_wgrad.method",
                          "comm_overlap.tp_comm_overlap_cfg.qkv_fprop",
                          "comm_overlap.tp_comm_overlap_cfg.proj_dgrad.num_splits"));
  const Diagnostic* method =
      run.first("bad-userbuffers-value", "comm_overlap.tp_comm_overlap_cfg.fc1_wgrad.method");
  ASSERT_NE(method, nullptr);
  EXPECT_THAT(method->message, HasSubstr("did you mean `bulk`"));
  EXPECT_FALSE(run.o().tp_comm_overlap_cfg.value.has_value());
}

TEST(OverlapTpConfig, SequenceIsAWrongType) {
  Outcome run = resolve(plus(kTpOn, {"comm_overlap.tp_comm_overlap_cfg=[a,b]"}));
  const Diagnostic* d = run.first("wrong-type", "comm_overlap.tp_comm_overlap_cfg");
  ASSERT_NE(d, nullptr) << run.dump();
}

// ---- D1-D3 ----

const std::vector<std::string> kDistOpt{"ddp.use_distributed_optimizer=true"};

template <class T>
void expect_field(const Resolved<T>& r, const std::optional<T>& value, ValueSource source,
                  const std::string& rule) {
  EXPECT_EQ(r.value, value);
  EXPECT_EQ(r.source, source);
  EXPECT_EQ(r.rule, rule);
}

TEST(OverlapDp, Dp4Defaults) {
  Outcome run = resolve(plus(kDistOpt, {"cluster.num_gpus=4", "cluster.gpus_per_node=4"}));
  const ResolvedOverlap& o = run.o();
  expect_field<int64_t>(o.bucket_size, 134217728, ValueSource::kRule, "D1");
  expect_field<bool>(o.overlap_grad_reduce, true, ValueSource::kRule, "D1");
  expect_field<bool>(o.overlap_param_gather, true, ValueSource::kRule, "D1");
  expect_field<bool>(o.align_param_gather, false, ValueSource::kRule, "D1");
  expect_field<bool>(o.overlap_param_gather_with_optimizer_step, false, ValueSource::kRule, "D1");
  const DdpConfig& d = run.res.ddp;
  EXPECT_TRUE(d.use_distributed_optimizer);
  EXPECT_EQ(d.bucket_size, 134217728);
  EXPECT_EQ(d.overlap_grad_reduce, true);
  EXPECT_EQ(d.overlap_param_gather, true);
  EXPECT_EQ(d.align_param_gather, false);
  EXPECT_EQ(run.res.optimizer.overlap_param_gather_with_optimizer_step, false);
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
}

TEST(OverlapDp, Dp1Defaults) {
  Outcome run = resolve(plus(kDistOpt, {"cluster.num_gpus=1", "cluster.gpus_per_node=1"}));
  const ResolvedOverlap& o = run.o();
  expect_field<int64_t>(o.bucket_size, std::nullopt, ValueSource::kRule, "D2");
  expect_field<bool>(o.overlap_grad_reduce, false, ValueSource::kRule, "D2");
  expect_field<bool>(o.overlap_param_gather, false, ValueSource::kRule, "D2");
  expect_field<bool>(o.align_param_gather, false, ValueSource::kRule, "D2");
  expect_field<bool>(o.overlap_param_gather_with_optimizer_step, false, ValueSource::kRule, "D2");
  EXPECT_EQ(run.res.ddp.bucket_size, std::nullopt);
  EXPECT_EQ(run.res.ddp.overlap_grad_reduce, false);
  EXPECT_EQ(run.res.ddp.overlap_param_gather, false);
}

TEST(OverlapDp, AlignParamGatherOnlyWithInterleavedPipeline) {
  Outcome interleaved = resolve(plus(kDistOpt, {"cluster.num_gpus=16", "cluster.gpus_per_node=8",
                                                "model.pipeline_model_parallel_size=4",
                                                "model.virtual_pipeline_model_parallel_size=2"}));
  EXPECT_EQ(interleaved.o().align_param_gather.value, true);
  EXPECT_EQ(interleaved.res.ddp.align_param_gather, true);
  Outcome no_vpp = resolve(plus(kDistOpt, {"cluster.num_gpus=16", "cluster.gpus_per_node=8",
                                           "model.pipeline_model_parallel_size=4"}));
  EXPECT_EQ(no_vpp.o().align_param_gather.value, false);
  Outcome no_pp = resolve(kDistOpt);
  EXPECT_EQ(no_pp.o().align_param_gather.value, false);
  // dp == 1 (pp=4 on 4 GPUs): D2 leaves it false even with vpp.
  Outcome dp1 = resolve(plus(kDistOpt, {"cluster.num_gpus=4", "cluster.gpus_per_node=4",
                                        "model.pipeline_model_parallel_size=4",
                                        "model.virtual_pipeline_model_parallel_size=2"}));
  EXPECT_EQ(dp1.o().align_param_gather.value, false);
}

TEST(OverlapDp, UserCommOverlapValuesWin) {
  Outcome run = resolve(
      plus(kDistOpt, {"comm_overlap.overlap_grad_reduce=false", "comm_overlap.bucket_size=40000000",
                      "comm_overlap.overlap_param_gather_with_optimizer_step=true",
                      "comm_overlap.align_param_gather=true"}));
  expect_field<bool>(run.o().overlap_grad_reduce, false, ValueSource::kUser, "D3");
  expect_field<int64_t>(run.o().bucket_size, 40000000, ValueSource::kUser, "D3");
  expect_field<bool>(run.o().overlap_param_gather, true, ValueSource::kRule, "D1");
  EXPECT_EQ(run.res.ddp.overlap_grad_reduce, false);
  EXPECT_EQ(run.res.ddp.bucket_size, 40000000);
  EXPECT_EQ(run.res.ddp.align_param_gather, true);
  EXPECT_EQ(run.res.optimizer.overlap_param_gather_with_optimizer_step, true);
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
}

TEST(OverlapDp, DdpValuesOverwrittenByTheRulesAreReported) {
  Outcome run =
      resolve(plus(kDistOpt, {"ddp.overlap_grad_reduce=false", "ddp.bucket_size=134217728",
                              "optimizer.overlap_param_gather_with_optimizer_step=true"}));
  EXPECT_EQ(run.res.ddp.overlap_grad_reduce, true);
  EXPECT_EQ(run.res.optimizer.overlap_param_gather_with_optimizer_step, false);
  // bucket_size equals the rule's value: nothing is lost, nothing reported.
  EXPECT_THAT(
      run.paths("ddp-field-overridden"),
      ElementsAre("ddp.overlap_grad_reduce", "optimizer.overlap_param_gather_with_optimizer_step"));
  const Diagnostic* d = run.first("ddp-field-overridden");
  EXPECT_THAT(d->help, HasSubstr("comm_overlap.overlap_grad_reduce: false"));
}

TEST(OverlapDp, WithoutDistributedOptimizerDdpPassesThrough) {
  Outcome run = resolve({"ddp.overlap_grad_reduce=true", "ddp.bucket_size=1000",
                         "ddp.align_param_gather=false",
                         "optimizer.overlap_param_gather_with_optimizer_step=false"});
  const DdpConfig& d = run.res.ddp;
  EXPECT_FALSE(d.use_distributed_optimizer);
  EXPECT_EQ(d.overlap_grad_reduce, true);
  EXPECT_EQ(d.overlap_param_gather, std::nullopt);
  EXPECT_EQ(d.align_param_gather, false);
  EXPECT_EQ(d.bucket_size, 1000);
  EXPECT_EQ(run.res.optimizer.overlap_param_gather_with_optimizer_step, false);
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
  expect_field<bool>(run.o().overlap_grad_reduce, std::nullopt, ValueSource::kDefault, "M0");
}

TEST(OverlapDp, CommOverlapDpFieldsWithoutDistributedOptimizerWarn) {
  Outcome run =
      resolve({"ddp.use_distributed_optimizer=false", "comm_overlap.overlap_grad_reduce=true",
               "comm_overlap.overlap_param_gather=true",
               "comm_overlap.overlap_param_gather_with_optimizer_step=false",
               "comm_overlap.align_param_gather=true", "comm_overlap.bucket_size=1000"});
  EXPECT_THAT(
      run.paths("dp-overlap-ignored"),
      UnorderedElementsAre("comm_overlap.overlap_grad_reduce", "comm_overlap.overlap_param_gather",
                           "comm_overlap.overlap_param_gather_with_optimizer_step",
                           "comm_overlap.align_param_gather", "comm_overlap.bucket_size"));
  const Diagnostic* d = run.first("dp-overlap-ignored");
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_THAT(d->message, HasSubstr("has no effect without the distributed optimizer"));
  expect_field<bool>(run.o().overlap_grad_reduce, std::nullopt, ValueSource::kRule, "D");
  expect_field<int64_t>(run.o().bucket_size, std::nullopt, ValueSource::kRule, "D");
  EXPECT_EQ(run.res.ddp.overlap_grad_reduce, std::nullopt);
  EXPECT_EQ(run.res.ddp.bucket_size, std::nullopt);
}

TEST(OverlapDp, IgnoredDpFieldIsAnErrorUnderStrict) {
  Outcome run = resolve({"comm_overlap.overlap_grad_reduce=true"}, /*strict=*/true);
  const Diagnostic* d = run.first("dp-overlap-ignored");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
}

// ---- E1-E3 (enforced by the loader) ----

std::vector<Diagnostic> load_errors(const std::string& section_text) {
  Diagnostics diags;
  auto recipe = load_recipe_text(std::string(kBase) + section_text, "t.yaml", {}, diags);
  EXPECT_FALSE(recipe.has_value());
  return diags.items();
}

TEST(OverlapEnvSeparation, CudaDeviceMaxConnectionsPointsToPerfEnv) {
  auto errors = load_errors("comm_overlap:\n  cuda_device_max_connections: 1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, "env-in-overlap-config");
  EXPECT_EQ(errors[0].path, "comm_overlap.cuda_device_max_connections");
  EXPECT_EQ(errors[0].loc.line, 4);
  EXPECT_THAT(errors[0].help, HasSubstr("plugins.perf_env"));
  EXPECT_THAT(errors[0].help, HasSubstr("env:"));
}

TEST(OverlapEnvSeparation, OtherLaunchSettingsAreRejectedToo) {
  auto errors = load_errors(
      "comm_overlap:\n  layernorm_sm_margin: 16\n  NVTE_FWD_LAYERNORM_SM_MARGIN: 16\n"
      "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n");
  std::vector<std::string> paths;
  for (const auto& d : errors) {
    EXPECT_EQ(d.code, "env-in-overlap-config");
    paths.push_back(d.path);
  }
  EXPECT_THAT(paths, ElementsAre("comm_overlap.layernorm_sm_margin",
                                 "comm_overlap.NVTE_FWD_LAYERNORM_SM_MARGIN",
                                 "comm_overlap.CUDA_DEVICE_MAX_CONNECTIONS"));
}

TEST(OverlapEnvSeparation, MixedPrecisionKeysUnderDdpRejected) {
  auto errors = load_errors("ddp:\n  grad_reduce_in_fp32: true\n  fp8_param_gather: false\n");
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& d : errors) {
    EXPECT_EQ(d.code, "misplaced-mixed-precision-key");
    EXPECT_THAT(d.message, HasSubstr("set under mixed_precision"));
  }
  EXPECT_EQ(errors[0].path, "ddp.grad_reduce_in_fp32");
  EXPECT_EQ(errors[1].path, "ddp.fp8_param_gather");
}

TEST(OverlapEnvSeparation, BucketSizeIsAParameterCount) {
  for (const char* text :
       {"comm_overlap:\n  bucket_size: 128MB\n", "comm_overlap:\n  bucket_size: \"512MiB\"\n",
        "ddp:\n  bucket_size: \"134217728\"\n"}) {
    auto errors = load_errors(text);
    ASSERT_EQ(errors.size(), 1u) << text;
    EXPECT_EQ(errors[0].code, "bucket-size-units");
    EXPECT_THAT(errors[0].message, HasSubstr("PARAMETER count"));
  }
}

// ---- E4 ----

TEST(OverlapFlex, BackendWithoutFlexDispatcherIsInactive) {
  Outcome run = resolve(
      {"model.moe_token_dispatcher_type=alltoall", "model.moe_flex_dispatcher_backend=deepep"});
  const Diagnostic* d = run.first("flex-backend-inactive");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "model.moe_flex_dispatcher_backend");
  EXPECT_THAT(d->message,
              HasSubstr("the flex backend has no effect unless moe_token_dispatcher_type is flex"));
  EXPECT_EQ(run.res.flex_dispatcher_backend, "");
  Outcome unset = resolve({"model.moe_flex_dispatcher_backend=hybridep"});
  EXPECT_TRUE(unset.diags.has_code("flex-backend-inactive"));
  EXPECT_EQ(unset.res.flex_dispatcher_backend, "");
}

TEST(OverlapFlex, BackendWithFlexDispatcherIsEffective) {
  Outcome run = resolve(
      {"model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep"});
  EXPECT_FALSE(run.diags.has_code("flex-backend-inactive"));
  EXPECT_EQ(run.res.flex_dispatcher_backend, "hybridep");
}

TEST(OverlapFlex, StrictTurnsTheWarningIntoAnError) {
  Outcome run = resolve({"model.moe_flex_dispatcher_backend=deepep"}, /*strict=*/true);
  const Diagnostic* d = run.first("flex-backend-inactive");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_TRUE(run.diags.has_errors());
}

// ---- runtime arguments ----

TEST(OverlapRuntimeArgs, ModelLevelFieldsInOrder) {
  Outcome run = resolve({"model.expert_model_parallel_size=2", "model.num_moe_experts=2",
                         "model.moe_token_dispatcher_type=alltoall", "model.precision=bf16",
                         "runtime.torch=\"2.9.0\"", "ddp.use_distributed_optimizer=true",
                         "comm_overlap.overlap_moe_expert_parallel_comm=true"});
  EXPECT_THAT(
      overlap_runtime_args(run.res),
      ElementsAre("comm_overlap.tp_comm_overlap=false",
                  "comm_overlap.tp_comm_bootstrap_backend=nccl",
                  "comm_overlap.overlap_p2p_comm=false", "comm_overlap.batch_p2p_comm=false",
                  "comm_overlap.defer_embedding_wgrad_compute=false",
                  "comm_overlap.wgrad_deferral_limit=-1",
                  "comm_overlap.overlap_moe_expert_parallel_comm=true",
                  "comm_overlap.delay_wgrad_compute=false",
                  // The data-parallel fields as D1-D3 resolved them (dp > 1, dist. optimizer).
                  "comm_overlap.overlap_grad_reduce=true", "comm_overlap.overlap_param_gather=true",
                  "comm_overlap.overlap_param_gather_with_optimizer_step=false",
                  "comm_overlap.align_param_gather=false", "comm_overlap.bucket_size=134217728"));
}

TEST(OverlapRuntimeArgs, PresetIsForwardedByName) {
  const std::string name = "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048";
  Outcome run = resolve(plus(kTpOn, {"comm_overlap.tp_comm_overlap_cfg=" + name}));
  auto args = overlap_runtime_args(run.res);
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[0], "comm_overlap.tp_comm_overlap=true");
  EXPECT_EQ(args[1], "comm_overlap.tp_comm_overlap_cfg=" + name);
}

TEST(OverlapRuntimeArgs, InlineMappingIsForwardedAsAHydraDict) {
  Outcome run = resolve({}, false,
                        inline_recipe("    qkv_dgrad: {method: bulk, num_sm: 4, cga_size: 2, "
                                      "set_sm_margin: false}\n"
                                      "    fc2_fprop: {method: ring_exchange, aggregate: true}\n"));
  auto args = overlap_runtime_args(run.res);
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[1],
            "comm_overlap.tp_comm_overlap_cfg={qkv_dgrad:{method:bulk,num_sm:4,cga_size:2,"
            "set_sm_margin:false},fc2_fprop:{method:ring_exchange,aggregate:true}}");
}

// Rule-derived data-parallel values are forwarded too: a runtime that re-derived them could
// reach other values than the plan that the launch env was derived from. Null fields are not.
TEST(OverlapRuntimeArgs, NullFieldsAreOmittedRuleDerivedDataParallelFieldsAreForwarded) {
  Outcome run = resolve(plus(kDistOpt, {"comm_overlap.overlap_grad_reduce=false"}));
  auto args = overlap_runtime_args(run.res);
  for (const auto& a : args) EXPECT_THAT(a, ::testing::Not(HasSubstr("tp_comm_overlap_cfg")));
  EXPECT_THAT(args, ::testing::Contains("comm_overlap.overlap_grad_reduce=false"));
  EXPECT_THAT(args, ::testing::Contains(HasSubstr("comm_overlap.bucket_size=")));
}

// ---- versions ----

TEST(OverlapVersion, GarbageVersionIsUnverified) {
  Outcome run =
      resolve({"model.expert_model_parallel_size=2", "model.num_moe_experts=2",
               "model.moe_token_dispatcher_type=alltoall", "model.precision=bf16",
               "runtime.torch=nightly", "comm_overlap.overlap_moe_expert_parallel_comm=true"});
  const Diagnostic* d = run.first("unverified-version");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_THAT(d->message, HasSubstr("`nightly`, which is not a PEP 440 version"));
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
}

// ---- example recipes (examples/recipes/) ----

Outcome resolve_file(const std::string& name) {
  Outcome run(false);
  std::string path = std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/" + name;
  run.recipe = load_recipe(path, {}, run.diags);
  if (!run.recipe) {
    ADD_FAILURE() << name << " did not load:\n" << run.dump();
    return run;
  }
  auto topo = compute_topology(*run.recipe, run.diags);
  if (!topo) {
    ADD_FAILURE() << name << " topology failed:\n" << run.dump();
    return run;
  }
  run.res = resolve_comm_overlap(*run.recipe, *topo, run.diags);
  return run;
}

TEST(OverlapExamples, Qwen3MoeEpOverlap) {
  Outcome run = resolve_file("qwen3-30b-a3b-ep-overlap.yaml");
  // Infos only: what the recipe base's own values resolve to (its TP overlap off at tp 1).
  EXPECT_EQ(run.diags.count(Severity::kWarning) + run.diags.count(Severity::kError), 0u)
      << run.dump();
  EXPECT_EQ(run.o().overlap_moe_expert_parallel_comm.value, true);
  EXPECT_EQ(run.o().tp_comm_overlap.value, false);
  EXPECT_EQ(run.res.ddp.overlap_grad_reduce, true);
  EXPECT_EQ(run.res.ddp.bucket_size, 134217728);
  ASSERT_TRUE(run.recipe.has_value());
  EXPECT_EQ(run.recipe->cluster.num_gpus.value, 16);
  EXPECT_EQ(run.recipe->model.expert_model_parallel_size.value, 16);
  EXPECT_EQ(run.recipe->train.global_batch_size.value, 1024);
}

TEST(OverlapExamples, Gpt175bTpPpDp) {
  Outcome run = resolve_file("gpt-175b-tp-pp-dp.yaml");
  // Infos only: what the library recipe base's own values resolve to.
  EXPECT_EQ(run.diags.count(Severity::kWarning) + run.diags.count(Severity::kError), 0u)
      << run.dump();
  EXPECT_EQ(run.o().tp_comm_overlap.value, true);
  EXPECT_EQ(run.o().tp_comm_overlap_preset, "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048");
  EXPECT_EQ(run.o().overlap_p2p_comm.value, true);
  EXPECT_EQ(run.o().batch_p2p_comm.value, false);
  EXPECT_EQ(run.res.ddp.align_param_gather, true);
  EXPECT_EQ(run.res.ddp.overlap_param_gather, true);
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// A user-set data-parallel value must reach the runtime, or its own D1 turns it back on.
TEST(OverlapRuntimeArgsUserDp, UserSetDataParallelFieldsAreForwarded) {
  Diagnostics diags;
  auto recipe = load_recipe_text(
      "name: t\ncluster: {num_gpus: 8, gpus_per_node: 8}\n"
      "ddp: {use_distributed_optimizer: true}\n"
      "comm_overlap: {overlap_grad_reduce: false}\n",
      "t.yaml", {}, diags);
  ASSERT_TRUE(recipe);
  auto topo = compute_topology(*recipe, diags);
  ASSERT_TRUE(topo);
  auto args = overlap_runtime_args(resolve_comm_overlap(*recipe, *topo, diags));
  EXPECT_NE(std::find(args.begin(), args.end(), "comm_overlap.overlap_grad_reduce=false"),
            args.end());
  // Rule-derived DP values are forwarded as resolved, so the runtime cannot derive others.
  EXPECT_NE(std::find(args.begin(), args.end(), "comm_overlap.overlap_param_gather=true"),
            args.end());
}

}  // namespace
}  // namespace bridge
