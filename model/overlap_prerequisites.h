// The overlap prerequisites: one row per (feature, field) that a feature needs from the recipe,
// the one table that validation (resolve_comm_overlap: the M1 gate, the M3 errors) and advice
// (plan/advise.cpp) both read, so that what `validate` refuses and what `advise` proposes
// cannot drift apart (tests/overlap_prerequisites_test.cpp checks them against each other row
// by row).
//
// Contract: rows are in the order the runtime checks them. prerequisite_state() is the only
// evaluation of a row; every reader calls it. A row's kind says what its failure means:
//   kScope    without it the feature has nothing to do (ep 1, no experts, tp 1): validation
//             reports it like any other failure, advice says "not applicable" with its reason;
//   kSetting  a key the user can change: advice proposes prerequisite_remedy();
//   kFixed    only another model or container fixes it: advice is blocked;
//   kVersion  a minimum version of torch or Transformer Engine: an undeclared or unparsable
//             version is kUnverified (validation warns `unverified-version`).
// The schedule checks on resolved values (E5: overlap_p2p_comm against the final
// batch_p2p_comm and the virtual pipeline) are not prerequisites of the recipe and stay checks
// in overlap_rules.cpp; advice plans every suggestion through validation for those.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

// One overlap feature: the knob that turns it on and how messages name it.
struct OverlapFeature {
  const char* knob;      // "comm_overlap.overlap_moe_expert_parallel_comm"
  const char* name;      // "expert-parallel overlap"
  const char* turn_off;  // the last way out a fix offers: "turn off comm_overlap...."
};

extern const OverlapFeature kTpOverlapFeature;
extern const OverlapFeature kEpOverlapFeature;
extern const OverlapFeature kDpGradReduceFeature;
extern const OverlapFeature kDpParamGatherFeature;

// What a kVersion row shows when the recipe declares no version.
inline constexpr const char* kVersionNotDeclared = "not declared";

enum class PrerequisiteKind { kScope, kSetting, kFixed, kVersion };
enum class PrerequisiteState { kHolds, kFails, kUnverified };

// One key a remedy sets, with why.
struct PrerequisiteChange {
  std::string key;
  std::string value;
  std::string why;
};

// What makes a failing row hold: changes to the recipe, or, when none does, why not.
struct PrerequisiteRemedy {
  std::vector<PrerequisiteChange> changes;
  std::string blocked_because;  // set when changes is empty
};

struct OverlapPrerequisite {
  const char* rule;  // "M1", "M3" (docs/overlap.md)
  const OverlapFeature* feature;
  const char* field;        // "model.precision"
  const char* requirement;  // "bf16 or fp16": read after the field name
  PrerequisiteKind kind;
  // kScope/kSetting/kFixed: whether it holds. kVersion rows leave it null.
  bool (*holds)(const Recipe&, const Topology&);
  // The plan's value as a reader sees it ("null (fp32)", "2.6.0a0+...").
  std::string (*shown)(const Recipe&, const Topology&);
  const char* reason;    // why the feature needs it
  const char* help;      // how to fix it (validation's help, before "or <turn_off>")
  const char* fix = "";  // kSetting: the value that makes it hold, when one value does
  // kSetting: a remedy that needs the plan (several keys, a computed value); else `fix`.
  PrerequisiteRemedy (*remedy)(const Recipe&, const Topology&) = nullptr;
  const char* min_version = "";  // kVersion: "2.6.0"
  const char* component = "";    // kVersion: "torch" | "Transformer Engine"
};

const std::vector<OverlapPrerequisite>& overlap_prerequisites();

// Whether the job runs the distributed optimizer: the recipe's ddp.use_distributed_optimizer,
// unset on under Megatron-Bridge (its recipes turn it on), off elsewhere (Megatron-Core).
bool distributed_optimizer_on(const Recipe& r, const Topology& t);
std::vector<const OverlapPrerequisite*> prerequisites_of(const OverlapFeature& feature);

PrerequisiteState prerequisite_state(const OverlapPrerequisite& row, const Recipe& r,
                                     const Topology& t);
PrerequisiteRemedy prerequisite_remedy(const OverlapPrerequisite& row, const Recipe& r,
                                       const Topology& t);

// "model.precision bf16 or fp16, got null (fp32)": what a failing row asks for and finds.
std::string prerequisite_shortfall(const OverlapPrerequisite& row, const Recipe& r,
                                   const Topology& t);

// The smallest virtual pipeline size >= 2 that divides num_layers by pp (2 when num_layers
// is unset); 0 when none does.
int64_t advised_vpp(const Recipe& recipe, const Topology& topo);

}  // namespace bridge
