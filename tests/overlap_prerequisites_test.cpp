// The overlap prerequisite table (model/overlap_prerequisites.h) read by its two readers:
// for every row, a plan where that row alone fails is refused (or warned about) by validation
// naming the row's field, and advice shows the same field unmet; with every row holding,
// validation is quiet and advice finds every condition met. A row added to the table without
// a case here fails FailingCasesCoverEveryRow.
#include "model/overlap_prerequisites.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "plan/advise.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;

// Every prerequisite of TP, EP and DP overlap holds: tp 2 with sequence parallel, ep 8 of 64
// experts with the all-to-all dispatcher, bf16, declared torch and TE, the distributed
// optimizer.
const char* kAllHold = R"(name: prerequisites
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  num_layers: 48
  hidden_size: 2048
  num_attention_heads: 32
  tensor_model_parallel_size: 2
  sequence_parallel: true
  expert_model_parallel_size: 8
  num_moe_experts: 64
  moe_token_dispatcher_type: alltoall
  precision: bf16
ddp: {use_distributed_optimizer: true}
train: {micro_batch_size: 1, global_batch_size: 128, max_steps: 8}
runtime: {transformer_engine: "2.9.0", torch: "2.9.0"}
)";

// The override that makes one row fail, by field (one per row of the table).
const std::map<std::string, std::vector<std::string>>& failing_cases() {
  static const std::map<std::string, std::vector<std::string>> kCases{
      {"model.tensor_model_parallel_size", {"model.tensor_model_parallel_size=1"}},
      {"model.sequence_parallel", {"model.sequence_parallel=false"}},
      {"runtime.transformer_engine", {"runtime.transformer_engine=false"}},
      // Fewer experts than ep is refused on its own (experts-not-multiple-of-ep): ep 1 too.
      {"model.num_moe_experts", {"model.num_moe_experts=1", "model.expert_model_parallel_size=1"}},
      {"model.expert_model_parallel_size", {"model.expert_model_parallel_size=1"}},
      {"model.moe_token_dispatcher_type", {"model.moe_token_dispatcher_type=allgather"}},
      {"model.precision", {"model.precision=fp32"}},
      {"runtime.torch", {"runtime.torch=\"2.5.1\""}},
      {"model.virtual_pipeline_model_parallel_size",
       {"model.pipeline_model_parallel_size=2", "model.expert_model_parallel_size=4"}},
      {"model.recompute_granularity", {"model.recompute_granularity=full"}},
      {"model.recompute_method", {"model.recompute_method=uniform"}},
      {"model.recompute_num_layers", {"model.recompute_num_layers=1"}},
      {"model.recompute_modules",
       {"model.recompute_granularity=selective", "model.recompute_modules=[moe]"}},
      {"model.moe_shared_expert_overlap", {"model.moe_shared_expert_overlap=true"}},
      {"model.mtp_num_layers", {"model.mtp_num_layers=2"}},
      {"ddp.use_distributed_optimizer", {"ddp.use_distributed_optimizer=false"}},
  };
  return kCases;
}

struct Planned {
  Plan plan;
  Diagnostics diags;
};

Planned plan_of(const std::vector<std::string>& overrides) {
  static const MapEnvironment env{std::map<std::string, std::string>{{"HOME", "/home/test"}}};
  PlanRequest req;
  req.recipe_path = "r.yaml";
  req.overrides = overrides;
  Planned out;
  out.plan = build_plan_from_text(kAllHold, req, env, plugin_registry(), out.diags);
  return out;
}

// The advice for the row's feature, planned as `advise` plans it.
Advice advice_for(const OverlapPrerequisite& row, const std::vector<std::string>& overrides) {
  Planned p = plan_of(overrides);
  EXPECT_TRUE(p.plan.complete) << row.field;
  AdviceInvocation inv;
  inv.recipe_path = "r.yaml";
  inv.overrides = overrides;
  auto check = [&](const std::vector<std::string>& extra, Diagnostics& out) {
    std::vector<std::string> all = overrides;
    all.insert(all.end(), extra.begin(), extra.end());
    Planned planned = plan_of(all);
    for (const Diagnostic& d : planned.diags.items())
      if (d.severity == Severity::kError) out.error(d.code, d.path, d.loc, d.message, d.help);
  };
  for (Advice& a : advise_overlap(p.plan, inv, check))
    if (a.knob == row.feature->knob) return a;
  ADD_FAILURE() << "no advice for " << row.feature->knob;
  return {};
}

const AdviceCondition* condition_of(const Advice& a, const std::string& field) {
  for (const AdviceCondition& c : a.conditions)
    if (c.field == field) return &c;
  return nullptr;
}

// Validation names the field: an M3 error on it, or the M1/D1 message that turns the request
// off and names it.
bool validation_names(const Diagnostics& diags, const std::string& field) {
  return std::any_of(diags.items().begin(), diags.items().end(), [&](const Diagnostic& d) {
    bool loud = d.severity == Severity::kError || d.severity == Severity::kWarning;
    return loud && (d.path == field || d.message.find(field) != std::string::npos);
  });
}

std::string dump(const Diagnostics& diags) {
  std::string out;
  for (const Diagnostic& d : diags.items()) out += d.code + " " + d.path + ": " + d.message + "\n";
  return out;
}

TEST(OverlapPrerequisites, FailingCasesCoverEveryRow) {
  for (const OverlapPrerequisite& row : overlap_prerequisites())
    EXPECT_TRUE(failing_cases().count(row.field)) << "no failing case for " << row.field;
}

// docs/overlap.md explains every prerequisite: a row's field is named there.
TEST(OverlapPrerequisites, DocsNameEveryRowsField) {
  const std::string docs = test::read_file(std::string(BRIDGE_SOURCE_DIR) + "/docs/overlap.md");
  ASSERT_FALSE(docs.empty());
  for (const OverlapPrerequisite& row : overlap_prerequisites()) {
    std::string leaf = std::string(row.field).substr(std::string(row.field).find('.') + 1);
    EXPECT_NE(docs.find(leaf), std::string::npos) << row.field << " is not in docs/overlap.md";
  }
}

TEST(OverlapPrerequisites, WithEveryRowHoldingValidationIsQuietAndAdviceFindsThemMet) {
  for (const OverlapPrerequisite& row : overlap_prerequisites()) {
    SCOPED_TRACE(row.field);
    Planned on = plan_of({std::string(row.feature->knob) + "=true"});
    EXPECT_FALSE(validation_names(on.diags, row.field)) << dump(on.diags);
    EXPECT_FALSE(on.diags.has_errors()) << dump(on.diags);
    // Off on purpose: D1 turns data-parallel overlap on with the distributed optimizer, and
    // advice lists its conditions only for an overlap that is off.
    Advice a = advice_for(row, {std::string(row.feature->knob) + "=false"});
    const AdviceCondition* c = condition_of(a, row.field);
    ASSERT_NE(c, nullptr) << a.why;
    EXPECT_EQ(c->status, ConditionStatus::kMet);
    EXPECT_EQ(c->rule, row.rule);
    EXPECT_EQ(c->requirement, row.requirement);
  }
}

TEST(OverlapPrerequisites, ARowThatFailsIsNamedByValidationAndByAdvice) {
  for (const OverlapPrerequisite& row : overlap_prerequisites()) {
    SCOPED_TRACE(row.field);
    const std::vector<std::string>& failing = failing_cases().at(row.field);
    Planned off = plan_of(failing);
    ASSERT_FALSE(off.diags.has_errors())
        << "the case must plan with the knob off: " << dump(off.diags);
    EXPECT_EQ(prerequisite_state(row, *off.plan.recipe, *off.plan.topology),
              PrerequisiteState::kFails);
    std::vector<std::string> on_overrides = failing;
    on_overrides.push_back(std::string(row.feature->knob) + "=true");
    Planned on = plan_of(on_overrides);
    EXPECT_TRUE(validation_names(on.diags, row.field)) << dump(on.diags);

    Advice a = advice_for(row, failing);
    if (row.kind == PrerequisiteKind::kScope) {
      EXPECT_EQ(a.state, AdviceState::kNotApplicable);
      EXPECT_THAT(a.why, HasSubstr(row.field));
      continue;
    }
    const AdviceCondition* c = condition_of(a, row.field);
    ASSERT_NE(c, nullptr) << a.why;
    EXPECT_NE(c->status, ConditionStatus::kMet);
    if (row.kind == PrerequisiteKind::kSetting) {
      EXPECT_EQ(c->status, ConditionStatus::kChange);
      EXPECT_EQ(a.state, AdviceState::kSuggested) << testing::PrintToString(a.blockers);
    } else {
      EXPECT_EQ(c->status, ConditionStatus::kBlocker);
      EXPECT_EQ(a.state, AdviceState::kBlocked);
    }
  }
}

}  // namespace
}  // namespace bridge
