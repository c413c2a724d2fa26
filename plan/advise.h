// Overlap advice (`bridge-launch advise`): which communication-overlap knobs apply to this
// plan's topology and are off, what else must change for each, and how to measure it.
//
// Contract:
// - advise_overlap(plan, invocation, check) reads a complete plan (recipe, topology, resolved
//   overlap) and returns one Advice per overlap family, in a fixed order: MoE expert-parallel
//   overlap, tensor-parallel overlap, data-parallel grad-reduce overlap, data-parallel
//   param-gather overlap, pipeline P2P overlap. Each is `suggested`, `blocked`, `on` or
//   `not-applicable`, with the reason.
// - A suggestion lists the prerequisites the overlap validation enforces, each with the plan's
//   value and whether it is met, and the overrides that make the unmet ones hold (`changes`):
//   M1, M3 and D1 are the rows of model/overlap_prerequisites.h, which validation reads too;
//   the pipeline schedule's (M2, E5) are advice's own, checked by the planning below.
// - Advice never suggests something `validate` would refuse: every suggestion is checked by
//   planning it through `check` twice, as the ablate command's baseline (changes applied, the
//   knob false) and as its variant (the knob true). If either has an error, the advice is
//   `blocked` and lists the errors instead of a command. Warnings the variant adds (e.g.
//   `unverified-version`, `no-userbuffers-preset`) become notes.
// - Each suggestion carries the exact `bridge-launch ablate` command that measures it, one
//   knob at a time: the recipe, the caller's plan options and overrides, the changes and the
//   knob set false as the baseline, then `--vary KNOB=false,true`.
// - Pure: no I/O. `check` is the only way out (the CLI plans and renders; tests plan text).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "model/overlap_prerequisites.h"  // advised_vpp
#include "plan/plan.h"

namespace bridge {

enum class AdviceState { kSuggested, kBlocked, kOn, kNotApplicable };
const char* advice_state_name(AdviceState s);  // "suggested" | "blocked" | "on" | "not-applicable"

// How a prerequisite stands: met as planned; unmet but fixed by one of the advice's changes;
// unmet and not fixable by an override (a blocker); or allowed with a warning (e.g. a torch
// version that is not declared, so `validate` cannot verify it).
enum class ConditionStatus { kMet, kChange, kBlocker, kWarning };
const char* condition_status_name(ConditionStatus s);  // "met" | "change" | "blocker" | "warning"

// One prerequisite of an overlap, as the plan has it now.
struct AdviceCondition {
  std::string field;        // dotted recipe path, e.g. "model.moe_shared_expert_overlap"
  std::string requirement;  // e.g. "false (exclusive with EP overlap)"
  std::string value;        // the plan's value as text, e.g. "true", "null (allgather)"
  ConditionStatus status = ConditionStatus::kMet;
  std::string rule;  // the validation rule that enforces it: "M3", "M1", ...
};

// One override the suggestion needs besides the knob.
struct AdviceChange {
  std::string key;    // dotted recipe path
  std::string value;  // as written after `=`
  std::string why;
  std::string override_text() const { return key + "=" + value; }
};

struct Advice {
  std::string id;     // "ep-overlap", "tp-overlap", "dp-grad-reduce-overlap", ...
  std::string title;  // "MoE expert-parallel overlap"
  std::string knob;   // "comm_overlap.overlap_moe_expert_parallel_comm"
  std::string rules;  // the rules that decide it, e.g. "M3"
  AdviceState state = AdviceState::kNotApplicable;
  std::string why;  // why it applies (or does not), or why it is on
  std::vector<AdviceCondition> conditions;
  std::vector<AdviceChange> changes;
  std::vector<std::string> blockers;  // what stops it: a fact no override fixes, or an error
  std::vector<std::string> notes;     // visibility, follow-ups, warnings the variant adds
  // The measuring command as argv (argv[0] = "bridge-launch") and as one shell line; empty
  // unless suggested.
  std::vector<std::string> ablate_argv;
  std::string ablate_command;
};

// How `advise` was called, so that the ablate command reproduces the same plan.
struct AdviceInvocation {
  std::string recipe_path;                // as given
  std::vector<std::string> option_args;   // plan options as argv words: {"-ng", "16", ...}
  std::vector<std::string> overrides;     // the trailing KEY=VALUE arguments, in order
  std::string program = "bridge-launch";  // argv[0] of the printed command
};

// Plans the recipe with `extra` appended to the invocation's overrides; records every
// problem in `diags` (the CLI also renders for the chosen executor, as `validate` does).
using AdviceCheck = std::function<void(const std::vector<std::string>& extra, Diagnostics& diags)>;

std::vector<Advice> advise_overlap(const Plan& plan, const AdviceInvocation& invocation,
                                   const AdviceCheck& check);

// The caveats printed with every advice (docs/advise.md, "The caveats"): when to enable
// overlap, what decides the gain, how to measure it.
const std::vector<std::string>& advice_caveats();

}  // namespace bridge
