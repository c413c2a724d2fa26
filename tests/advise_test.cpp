// Overlap advice (plan/advise.h): one test per decision rule (EP, TP, DP, P2P, their
// prerequisites and blockers), the check that no advice is refused by `validate`, and the
// `advise` command through the real binary, whose printed ablate commands must run as printed.
#include "plan/advise.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/shell_quote.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// An MoE plan with every EP-overlap prerequisite met and EP overlap off (the rules' default).
const char* kMoe = R"(name: moe
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  num_layers: 48
  hidden_size: 2048
  num_attention_heads: 32
  expert_model_parallel_size: 16
  num_moe_experts: 128
  moe_token_dispatcher_type: alltoall
  precision: bf16
ddp: {use_distributed_optimizer: true}
train: {micro_batch_size: 1, global_batch_size: 128, max_steps: 8}
runtime: {transformer_engine: "2.9.0", torch: "2.9.0"}
)";

// A dense plan on 16 H100s: tp 4 (sequence parallel off), pp 1, dp 4, hidden 12288, seq 2048:
// the shape of the userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048 preset.
const char* kDense = R"(name: dense
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  tensor_model_parallel_size: 4
  num_layers: 96
  hidden_size: 12288
  num_attention_heads: 96
  seq_length: 2048
  precision: bf16
ddp: {use_distributed_optimizer: true}
train: {micro_batch_size: 1, global_batch_size: 128, max_steps: 8}
runtime: {transformer_engine: "2.9.0", torch: "2.9.0"}
)";

void copy_items(const Diagnostics& from, Diagnostics& to) {
  for (const Diagnostic& d : from.items()) {
    if (d.severity == Severity::kError)
      to.error(d.code, d.path, d.loc, d.message, d.help);
    else if (d.severity == Severity::kWarning)
      to.warning(d.code, d.path, d.loc, d.message, d.help);
    else
      to.info(d.code, d.path, d.loc, d.message, d.help);
  }
}

std::string messages(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += d.code + ": " + d.message + "\n";
  return out;
}

class AdviseTest : public ::testing::Test {
 protected:
  Diagnostics plan_with(const std::string& text, std::vector<std::string> overrides) const {
    PlanRequest req;
    req.recipe_path = "r.yaml";
    req.overrides = std::move(overrides);
    req.strict = strict_;
    Diagnostics diags(strict_);
    build_plan_from_text(text, req, env_, plugin_registry(), diags);
    return diags;
  }

  std::vector<Advice> advise(const std::string& text, const std::vector<std::string>& overrides) {
    text_ = text;
    overrides_ = overrides;
    PlanRequest req;
    req.recipe_path = "r.yaml";
    req.overrides = overrides;
    req.strict = strict_;
    Diagnostics diags(strict_);
    plan_ = build_plan_from_text(text, req, env_, plugin_registry(), diags);
    EXPECT_TRUE(plan_.complete && !diags.has_errors()) << messages(diags);
    AdviceInvocation inv;
    inv.recipe_path = "r.yaml";
    inv.overrides = overrides;
    if (strict_) inv.option_args = {"--strict"};
    auto check = [&](const std::vector<std::string>& extra, Diagnostics& out) {
      std::vector<std::string> all = overrides;
      all.insert(all.end(), extra.begin(), extra.end());
      copy_items(plan_with(text, all), out);
      ++checks_;
    };
    return advise_overlap(plan_, inv, check);
  }

  static const Advice& find(const std::vector<Advice>& advice, const std::string& id) {
    auto it =
        std::find_if(advice.begin(), advice.end(), [&](const Advice& a) { return a.id == id; });
    if (it == advice.end()) throw std::runtime_error("no advice " + id);
    return *it;
  }

  static const AdviceCondition* condition(const Advice& a, const std::string& field) {
    for (const auto& c : a.conditions)
      if (c.field == field) return &c;
    return nullptr;
  }

  static std::vector<std::string> change_texts(const Advice& a) {
    std::vector<std::string> out;
    for (const auto& c : a.changes) out.push_back(c.override_text());
    return out;
  }

  // The advice of one family for the plan: a copy, so a later advise() leaves it as it was.
  Advice family_advice(const std::string& id, const std::string& text,
                       const std::vector<std::string>& overrides) {
    return find(advise(text, overrides), id);
  }

  // Blocked, with a blocker that says why.
  static void expect_blocked(const Advice& a, const std::string& why) {
    EXPECT_EQ(a.state, AdviceState::kBlocked) << a.id;
    EXPECT_THAT(a.blockers, Contains(HasSubstr(why))) << a.id;
  }

  // Allowed with a warning: the field's condition warns, and a note names validate's warning.
  static void expect_warned(const Advice& a, const std::string& field, const std::string& warning) {
    const AdviceCondition* c = condition(a, field);
    ASSERT_NE(c, nullptr) << field;
    EXPECT_EQ(c->status, ConditionStatus::kWarning) << field;
    EXPECT_THAT(a.notes, Contains(HasSubstr(warning))) << a.id;
  }

  // The ablate command's own overrides (after the recipe and the caller's overrides, before
  // --vary) must plan without an error, and so must the variant with the knob on.
  void expect_command_validates(const Advice& a) {
    ASSERT_GE(a.ablate_argv.size(), 5u) << a.id;
    EXPECT_EQ(a.ablate_argv[0], "bridge-launch");
    EXPECT_EQ(a.ablate_argv[1], "ablate");
    auto recipe = std::find(a.ablate_argv.begin(), a.ablate_argv.end(), "r.yaml");
    ASSERT_NE(recipe, a.ablate_argv.end());
    auto vary = std::find(a.ablate_argv.begin(), a.ablate_argv.end(), "--vary");
    ASSERT_EQ(vary + 2, a.ablate_argv.end()) << "--vary KNOB=false,true comes last";
    EXPECT_EQ(*(vary + 1), a.knob + "=false,true");
    std::vector<std::string> baseline(recipe + 1, vary);
    Diagnostics base = plan_with(text_, baseline);
    EXPECT_FALSE(base.has_errors()) << a.id << ": " << messages(base);
    baseline.push_back(a.knob + "=true");
    Diagnostics variant = plan_with(text_, baseline);
    EXPECT_FALSE(variant.has_errors()) << a.id << ": " << messages(variant);
  }

  MapEnvironment env_{std::map<std::string, std::string>{{"HOME", "/home/test"}}};
  bool strict_ = false;
  std::string text_;
  std::vector<std::string> overrides_;
  Plan plan_;
  int checks_ = 0;
};

// ---------------------------------------------------------------------------------------
// EP: MoE expert-parallel overlap (M3).

TEST_F(AdviseTest, EpOverlapIsSuggestedWhenEpIsAboveOneAndItIsOff) {
  const Advice ep = family_advice("ep-overlap", kMoe, {});
  EXPECT_EQ(ep.state, AdviceState::kSuggested) << ep.why;
  EXPECT_EQ(ep.knob, "comm_overlap.overlap_moe_expert_parallel_comm");
  EXPECT_THAT(ep.why, HasSubstr("ep 16"));
  EXPECT_THAT(ep.changes, IsEmpty());
  // Every M3 prerequisite is listed with the plan's value, the shared-expert and VPP ones too.
  for (const char* field :
       {"model.expert_model_parallel_size", "model.num_moe_experts",
        "model.moe_token_dispatcher_type", "model.precision", "runtime.torch",
        "model.virtual_pipeline_model_parallel_size", "model.recompute_granularity",
        "model.recompute_method", "model.recompute_num_layers", "model.recompute_modules",
        "model.moe_shared_expert_overlap", "model.mtp_num_layers"}) {
    const AdviceCondition* c = condition(ep, field);
    ASSERT_NE(c, nullptr) << field;
    EXPECT_EQ(c->status, ConditionStatus::kMet) << field;
    EXPECT_EQ(c->rule, "M3");
  }
  EXPECT_THAT(ep.ablate_argv,
              ElementsAre("bridge-launch", "ablate", "r.yaml",
                          "comm_overlap.overlap_moe_expert_parallel_comm=false", "--vary",
                          "comm_overlap.overlap_moe_expert_parallel_comm=false,true"));
  EXPECT_EQ(ep.ablate_command,
            "bridge-launch ablate r.yaml comm_overlap.overlap_moe_expert_parallel_comm=false "
            "--vary comm_overlap.overlap_moe_expert_parallel_comm=false,true");
  expect_command_validates(ep);
}

TEST_F(AdviseTest, EpOverlapAlreadyOnIsReportedOn) {
  const Advice ep =
      family_advice("ep-overlap", kMoe, {"comm_overlap.overlap_moe_expert_parallel_comm=true"});
  EXPECT_EQ(ep.state, AdviceState::kOn);
  EXPECT_THAT(ep.ablate_argv, IsEmpty());
}

TEST_F(AdviseTest, EpOverlapDoesNotApplyWithoutExpertParallelismOrExperts) {
  const Advice ep1 = family_advice("ep-overlap", kMoe, {"model.expert_model_parallel_size=1"});
  EXPECT_EQ(ep1.state, AdviceState::kNotApplicable);
  EXPECT_THAT(ep1.why, HasSubstr("model.expert_model_parallel_size is 1"));
  const Advice dense = family_advice("ep-overlap", kDense, {});
  EXPECT_EQ(dense.state, AdviceState::kNotApplicable);
  EXPECT_THAT(dense.why, HasSubstr("not an MoE model"));
}

TEST_F(AdviseTest, EpOverlapTurnsTheSharedExpertOverlapOff) {
  const Advice ep = family_advice("ep-overlap", kMoe, {"model.moe_shared_expert_overlap=true"});
  ASSERT_EQ(ep.state, AdviceState::kSuggested) << ::testing::PrintToString(ep.blockers);
  EXPECT_EQ(condition(ep, "model.moe_shared_expert_overlap")->status, ConditionStatus::kChange);
  EXPECT_THAT(change_texts(ep), ElementsAre("model.moe_shared_expert_overlap=false"));
  EXPECT_THAT(ep.ablate_argv, Contains("model.moe_shared_expert_overlap=false"));
  expect_command_validates(ep);
}

// E6: full recompute is replaced by selective recompute without `moe`.
TEST_F(AdviseTest, EpOverlapReplacesFullRecomputeWithSelective) {
  const Advice ep =
      family_advice("ep-overlap", kMoe,
                    {"model.recompute_granularity=full", "model.recompute_method=uniform",
                     "model.recompute_num_layers=1", "model.recompute_modules=[moe]"});
  ASSERT_EQ(ep.state, AdviceState::kSuggested) << ::testing::PrintToString(ep.blockers);
  EXPECT_THAT(
      change_texts(ep),
      ElementsAre("model.recompute_granularity=selective", "model.recompute_modules=[core_attn]",
                  "model.recompute_method=null", "model.recompute_num_layers=null"));
  expect_command_validates(ep);
}

TEST_F(AdviseTest, EpOverlapDropsMoeFromSelectiveRecompute) {
  const Advice ep = family_advice(
      "ep-overlap", kMoe,
      {"model.recompute_granularity=selective", "model.recompute_modules=[core_attn,moe,mlp]"});
  EXPECT_THAT(change_texts(ep), ElementsAre("model.recompute_modules=[core_attn,mlp]"));
  expect_command_validates(ep);
}

TEST_F(AdviseTest, EpOverlapWithPipelineParallelismNeedsAVirtualPipeline) {
  const Advice ep =
      family_advice("ep-overlap", kMoe,
                    {"model.pipeline_model_parallel_size=2", "model.expert_model_parallel_size=8"});
  ASSERT_EQ(ep.state, AdviceState::kSuggested) << ::testing::PrintToString(ep.blockers);
  EXPECT_EQ(condition(ep, "model.virtual_pipeline_model_parallel_size")->status,
            ConditionStatus::kChange);
  EXPECT_THAT(change_texts(ep), ElementsAre("model.virtual_pipeline_model_parallel_size=2"));
  expect_command_validates(ep);
}

TEST_F(AdviseTest, EpOverlapSwitchesTheDispatcherAndPrecision) {
  const Advice ep = family_advice(
      "ep-overlap", kMoe, {"model.moe_token_dispatcher_type=allgather", "model.precision=fp32"});
  EXPECT_THAT(change_texts(ep),
              ElementsAre("model.moe_token_dispatcher_type=alltoall", "model.precision=bf16"));
  expect_command_validates(ep);
}

// torch >= 2.6.0 in PEP 440 order: NGC's 2.6.0 pre-release blocks; an undeclared one warns.
TEST_F(AdviseTest, EpOverlapIsBlockedByAnOldTorchAndWarnsOnAnUnknownOne) {
  const Advice old =
      family_advice("ep-overlap", kMoe, {"runtime.torch=\"2.6.0a0+ecf3bae40a.nv25.01\""});
  expect_blocked(old, "hangs with torch < 2.6.0");
  EXPECT_EQ(condition(old, "runtime.torch")->status, ConditionStatus::kBlocker);
  EXPECT_THAT(old.ablate_argv, IsEmpty());

  const Advice unknown = family_advice("ep-overlap", kMoe, {"runtime.torch=null"});
  EXPECT_EQ(unknown.state, AdviceState::kSuggested);
  expect_warned(unknown, "runtime.torch", "unverified-version");
  expect_command_validates(unknown);
}

TEST_F(AdviseTest, EpOverlapIsBlockedByMoreThanOneMtpLayer) {
  const Advice ep = family_advice("ep-overlap", kMoe, {"model.mtp_num_layers=2"});
  expect_blocked(ep, "multi-token-prediction");
}

TEST_F(AdviseTest, EpVisibilityNoteSaysWhetherTheAllToAllLeavesTheNvlinkDomain) {
  const Advice across = family_advice("ep-overlap", kMoe, {});
  EXPECT_THAT(across.notes, Contains(HasSubstr("crosses the network")));
  const Advice within = family_advice("ep-overlap", kMoe, {"model.expert_model_parallel_size=8"});
  EXPECT_THAT(within.notes, Contains(HasSubstr("within one NVLink domain")));
}

// ---------------------------------------------------------------------------------------
// TP: tensor-parallel overlap (M1 gate, M6 userbuffers preset).

TEST_F(AdviseTest, TpOverlapNeedsSequenceParallelAndGetsThePresetTunedForThePlan) {
  const Advice tp = family_advice("tp-overlap", kDense, {});
  ASSERT_EQ(tp.state, AdviceState::kSuggested) << ::testing::PrintToString(tp.blockers);
  EXPECT_EQ(condition(tp, "model.sequence_parallel")->status, ConditionStatus::kChange);
  EXPECT_THAT(change_texts(tp), ElementsAre("model.sequence_parallel=true",
                                            "comm_overlap.tp_comm_overlap_cfg="
                                            "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048"));
  expect_command_validates(tp);
}

TEST_F(AdviseTest, TpOverlapWithoutAMatchingPresetWarns) {
  const Advice tp = family_advice("tp-overlap", kDense,
                                  {"model.hidden_size=4096", "model.sequence_parallel=true"});
  ASSERT_EQ(tp.state, AdviceState::kSuggested);
  EXPECT_THAT(tp.changes, IsEmpty());
  expect_warned(tp, "comm_overlap.tp_comm_overlap_cfg", "no-userbuffers-preset");
  expect_command_validates(tp);
}

TEST_F(AdviseTest, TpOverlapIsBlockedWithoutTransformerEngine) {
  const Advice tp = family_advice("tp-overlap", kDense, {"runtime.transformer_engine=false"});
  expect_blocked(tp, "Transformer Engine");
}

TEST_F(AdviseTest, TpOverlapIsOnOrDoesNotApply) {
  const Advice on =
      family_advice("tp-overlap", kDense,
                    {"model.sequence_parallel=true", "comm_overlap.tp_comm_overlap=true",
                     "comm_overlap.tp_comm_overlap_cfg="
                     "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048"});
  EXPECT_EQ(on.state, AdviceState::kOn);
  EXPECT_THAT(on.why, HasSubstr("userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048"));
  EXPECT_EQ(family_advice("tp-overlap", kMoe, {}).state, AdviceState::kNotApplicable);
}

// A request the M1 gate turned off: the recipe says true, so the baseline sets it false.
TEST_F(AdviseTest, TpOverlapTurnedOffByTheGateIsSuggestedWithTheFix) {
  const Advice tp = family_advice("tp-overlap", kDense, {"comm_overlap.tp_comm_overlap=true"});
  ASSERT_EQ(tp.state, AdviceState::kSuggested);
  EXPECT_THAT(change_texts(tp), Contains("model.sequence_parallel=true"));
  EXPECT_THAT(tp.ablate_argv, Contains("comm_overlap.tp_comm_overlap=false"));
  expect_command_validates(tp);
}

// ---------------------------------------------------------------------------------------
// DP: grad-reduce / param-gather overlap with the distributed optimizer (D1).

TEST_F(AdviseTest, DpOverlapNeedsTheDistributedOptimizer) {
  auto advice = advise(kMoe, {"ddp.use_distributed_optimizer=false"});
  for (const char* id : {"dp-grad-reduce-overlap", "dp-param-gather-overlap"}) {
    const Advice& dp = find(advice, id);
    ASSERT_EQ(dp.state, AdviceState::kSuggested) << id;
    EXPECT_THAT(change_texts(dp), ElementsAre("ddp.use_distributed_optimizer=true")) << id;
    expect_command_validates(dp);
  }
  EXPECT_EQ(find(advice, "dp-grad-reduce-overlap").knob, "comm_overlap.overlap_grad_reduce");
  EXPECT_EQ(find(advice, "dp-param-gather-overlap").knob, "comm_overlap.overlap_param_gather");
}

TEST_F(AdviseTest, DpOverlapIsOnByD1AndSuggestedWhenTurnedOff) {
  auto on = advise(kMoe, {});
  EXPECT_EQ(find(on, "dp-grad-reduce-overlap").state, AdviceState::kOn);
  EXPECT_EQ(find(on, "dp-param-gather-overlap").state, AdviceState::kOn);
  auto off = advise(kMoe, {"comm_overlap.overlap_grad_reduce=false"});
  const Advice& dp = find(off, "dp-grad-reduce-overlap");
  ASSERT_EQ(dp.state, AdviceState::kSuggested);
  EXPECT_THAT(dp.changes, IsEmpty());
  // The caller's override already makes the baseline false: it is not repeated.
  EXPECT_THAT(dp.ablate_argv, ElementsAre("bridge-launch", "ablate", "r.yaml",
                                          "comm_overlap.overlap_grad_reduce=false", "--vary",
                                          "comm_overlap.overlap_grad_reduce=false,true"));
  EXPECT_EQ(find(off, "dp-param-gather-overlap").state, AdviceState::kOn);
  expect_command_validates(dp);
}

TEST_F(AdviseTest, DpOverlapDoesNotApplyAtDpOne) {
  auto advice = advise(kDense, {"cluster.num_gpus=4", "cluster.gpus_per_node=4"});
  EXPECT_EQ(find(advice, "dp-grad-reduce-overlap").state, AdviceState::kNotApplicable);
  EXPECT_EQ(find(advice, "dp-param-gather-overlap").state, AdviceState::kNotApplicable);
}

// ---------------------------------------------------------------------------------------
// P2P: pipeline overlap needs a virtual pipeline (M2, E5).

TEST_F(AdviseTest, P2pOverlapNeedsAVirtualPipeline) {
  const Advice p2p = family_advice("p2p-overlap", kDense, {"model.pipeline_model_parallel_size=2"});
  ASSERT_EQ(p2p.state, AdviceState::kSuggested) << ::testing::PrintToString(p2p.blockers);
  EXPECT_THAT(change_texts(p2p), ElementsAre("model.virtual_pipeline_model_parallel_size=2"));
  EXPECT_THAT(p2p.notes, Contains(HasSubstr("virtual pipeline also changes the schedule")));
  expect_command_validates(p2p);
}

TEST_F(AdviseTest, P2pOverlapIsOnWithVppAndSuggestedWhenForcedOff) {
  const Advice on = family_advice(
      "p2p-overlap", kDense,
      {"model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2"});
  EXPECT_EQ(on.state, AdviceState::kOn);
  const Advice p2p = family_advice(
      "p2p-overlap", kDense,
      {"model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2",
       "comm_overlap.overlap_p2p_comm=false", "comm_overlap.batch_p2p_comm=true"});
  ASSERT_EQ(p2p.state, AdviceState::kSuggested) << ::testing::PrintToString(p2p.blockers);
  EXPECT_THAT(change_texts(p2p), ElementsAre("comm_overlap.batch_p2p_comm=null"));
  expect_command_validates(p2p);
  EXPECT_EQ(family_advice("p2p-overlap", kDense, {}).state, AdviceState::kNotApplicable);
}

TEST_F(AdviseTest, AdvisedVppDividesTheLayersOrIsZero) {
  Recipe r;
  Topology t;
  t.pp = 2;
  EXPECT_EQ(advised_vpp(r, t), 2);  // num_layers unset
  r.model.num_layers.value = 48;
  EXPECT_EQ(advised_vpp(r, t), 2);
  r.model.num_layers.value = 6;
  EXPECT_EQ(advised_vpp(r, t), 3);
  r.model.num_layers.value = 2;
  EXPECT_EQ(advised_vpp(r, t), 0);
}

TEST_F(AdviseTest, P2pOverlapIsBlockedWhenNoVirtualPipelineDividesTheLayers) {
  const Advice p2p = family_advice("p2p-overlap", kDense,
                                   {"model.pipeline_model_parallel_size=2", "model.num_layers=2"});
  expect_blocked(p2p, "no virtual pipeline size");
}

// ---------------------------------------------------------------------------------------
// Advice never suggests what validate refuses; the command carries the caller's options.

// Under --strict a preset tuned for another plan is an error: the rules cannot see that,
// the check does, and the advice is blocked with validate's own words.
TEST_F(AdviseTest, WhatValidateRefusesIsBlockedNotSuggested) {
  strict_ = true;
  const Advice tp = family_advice("tp-overlap", kDense,
                                  {"model.sequence_parallel=true",
                                   "comm_overlap.tp_comm_overlap_cfg="
                                   "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192"});
  expect_blocked(tp, "userbuffers-preset-mismatch");
  EXPECT_THAT(tp.ablate_argv, IsEmpty());
  EXPECT_GT(checks_, 0);
}

TEST_F(AdviseTest, TheCommandReproducesTheCallersOptionsAndQuotesItsWords) {
  PlanRequest req;
  req.recipe_path = "my recipe.yaml";
  req.overrides = {"model.recompute_granularity=full"};
  Diagnostics diags;
  Plan plan = build_plan_from_text(kMoe, req, env_, plugin_registry(), diags);
  ASSERT_TRUE(plan.complete) << messages(diags);
  AdviceInvocation inv;
  inv.recipe_path = "my recipe.yaml";
  inv.option_args = {"-ng", "16", "-E", "NCCL_DEBUG=INFO"};
  inv.overrides = req.overrides;
  auto advice = advise_overlap(plan, inv, [](const std::vector<std::string>&, Diagnostics&) {});
  const Advice& ep = find(advice, "ep-overlap");
  EXPECT_EQ(ep.ablate_command,
            "bridge-launch ablate -ng 16 -E NCCL_DEBUG=INFO 'my recipe.yaml' "
            "model.recompute_granularity=full model.recompute_granularity=selective "
            "'model.recompute_modules=[core_attn]' "
            "comm_overlap.overlap_moe_expert_parallel_comm=false "
            "--vary comm_overlap.overlap_moe_expert_parallel_comm=false,true");
}

TEST_F(AdviseTest, OneAdvicePerFamilyInAFixedOrderAndTheGuidesCaveats) {
  auto advice = advise(kMoe, {});
  std::vector<std::string> ids;
  for (const auto& a : advice) ids.push_back(a.id);
  EXPECT_THAT(ids, ElementsAre("ep-overlap", "tp-overlap", "dp-grad-reduce-overlap",
                               "dp-param-gather-overlap", "p2p-overlap"));
  std::string caveats;
  for (const auto& c : advice_caveats()) caveats += c + "\n";
  EXPECT_THAT(caveats, HasSubstr("once the run is stable"));
  EXPECT_THAT(caveats, HasSubstr("how visible the communication is"));
  EXPECT_THAT(caveats, HasSubstr("one knob at a time"));
  EXPECT_THAT(caveats, HasSubstr("iterations 3-8"));
}

// ---------------------------------------------------------------------------------------
// The command, through the real binary.

class AdviseCliTest : public ::testing::Test {
 protected:
  test::ChildResult run(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv, {{"HOME", home_.path()}});
  }

  // Runs a printed command exactly as printed (through the shell), with --dry-run in front
  // of the subcommand so that nothing is submitted.
  test::ChildResult run_printed(const std::string& line) {
    const std::string program = "bridge-launch ";
    EXPECT_EQ(line.rfind(program, 0), 0u) << line;
    std::string command =
        shell_word(BRIDGE_LAUNCH_BIN) + " --dry-run " + line.substr(program.size());
    return test::run_command({"/bin/bash", "-c", command}, {{"HOME", home_.path()}});
  }

  static std::vector<std::string> printed_commands(const std::string& out) {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      size_t at = line.find("bridge-launch ablate ");
      if (at != std::string::npos && line.find_first_not_of(' ') == at)
        lines.push_back(line.substr(at));
    }
    return lines;
  }

  static std::string example(const std::string& name) {
    return std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/" + name;
  }

  test::TempDir home_;
};

// The acceptance: the Qwen3 MoE example with EP overlap off.
TEST_F(AdviseCliTest, QwenWithEpOverlapOffSuggestsItAndItsCommandRunsAsPrinted) {
  auto r = run({"advise", example("qwen3-30b-a3b-ep-overlap.yaml"),
                "comm_overlap.overlap_moe_expert_parallel_comm=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[suggested] MoE expert-parallel overlap: "
                               "comm_overlap.overlap_moe_expert_parallel_comm"));
  EXPECT_THAT(r.out, HasSubstr("model.moe_shared_expert_overlap false (exclusive with EP "
                               "overlap): false"));
  EXPECT_THAT(r.out, HasSubstr("model.virtual_pipeline_model_parallel_size set when pp > 1"));
  EXPECT_THAT(r.out, HasSubstr("once the run is stable"));
  auto commands = printed_commands(r.out);
  ASSERT_EQ(commands.size(), 1u) << r.out;
  EXPECT_THAT(commands[0],
              HasSubstr("--vary comm_overlap.overlap_moe_expert_parallel_comm=false,true"));
  auto ablate = run_printed(commands[0]);
  EXPECT_EQ(ablate.exit_code, 0) << commands[0] << "\n" << ablate.err;
  EXPECT_THAT(ablate.err, HasSubstr("ablate: 2 jobs (baseline + 1 variant)"));
  EXPECT_THAT(ablate.out,
              HasSubstr("# ablate 2 of 2: comm_overlap.overlap_moe_expert_parallel_comm=true"));
}

TEST_F(AdviseCliTest, JsonHasEveryAdviceAndTheArgvRunsAsIs) {
  auto r = run({"advise", "--format", "json", "-ng", "16", example("qwen3-30b-a3b-ep-overlap.yaml"),
                "comm_overlap.overlap_moe_expert_parallel_comm=false",
                "model.moe_shared_expert_overlap=true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["topology"]["ep"], 16);
  ASSERT_EQ(j["advice"].size(), 5u);
  const auto& ep = j["advice"][0];
  EXPECT_EQ(ep["id"], "ep-overlap");
  EXPECT_EQ(ep["state"], "suggested");
  EXPECT_EQ(ep["changes"][0]["key"], "model.moe_shared_expert_overlap");
  EXPECT_EQ(ep["changes"][0]["value"], "false");
  EXPECT_EQ(j["advice"][2]["state"], "on");
  EXPECT_EQ(j["advice"][1]["ablate"], nullptr);
  EXPECT_EQ(j["caveats"].size(), 4u);
  auto argv = ep["ablate"]["argv"].get<std::vector<std::string>>();
  ASSERT_GE(argv.size(), 2u);
  EXPECT_THAT(argv, Contains("-ng"));
  argv[0] = BRIDGE_LAUNCH_BIN;
  argv.insert(argv.begin() + 1, "--dry-run");
  auto ablate = test::run_command(argv, {{"HOME", home_.path()}});
  EXPECT_EQ(ablate.exit_code, 0) << ablate.err;
}

// Every example recipe: advise succeeds and each command it prints runs as printed.
TEST_F(AdviseCliTest, EveryPrintedCommandRunsForEveryExampleRecipe) {
  size_t commands_run = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes")) {
    if (entry.path().extension() != ".yaml") continue;
    // Turned off, so that each example has something to suggest.
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{},
          std::vector<std::string>{"comm_overlap.overlap_grad_reduce=false",
                                   "comm_overlap.overlap_moe_expert_parallel_comm=null"}}) {
      std::vector<std::string> args{"advise", entry.path().string()};
      args.insert(args.end(), extra.begin(), extra.end());
      auto r = run(args);
      ASSERT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
      for (const auto& line : printed_commands(r.out)) {
        auto ablate = run_printed(line);
        EXPECT_EQ(ablate.exit_code, 0) << line << "\n" << ablate.err;
        ++commands_run;
      }
    }
  }
  EXPECT_GE(commands_run, 6u);
}

TEST_F(AdviseCliTest, AnInvalidRecipeGetsItsDiagnosticsAndExitTwo) {
  auto r = run({"advise", example("qwen3-30b-a3b-ep-overlap.yaml"), "model.tp=4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("tensor_model_parallel_size"));
  auto j =
      run({"advise", "--format", "json", example("qwen3-30b-a3b-ep-overlap.yaml"), "model.tp=4"});
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_FALSE(nlohmann::json::parse(j.out)["ok"].get<bool>());
}

}  // namespace
}  // namespace bridge
