// Runtime adapters: how the plan reaches the training process.
//
// bridge-launch validates a layout (tp, pp, vpp, cp, ep, etp, dp), a precision, a GPU type,
// batch sizes and steps, and derives the launch env from them. That is only worth something
// if the runtime trains with exactly those values, so an adapter turns the plan into the
// arguments the runtime understands (recipe key `runtime.adapter`):
//
//   megatron_bridge  run_script.py's flags (-m -mr -g -c -ng -gn -tp ... --task), then Hydra
//   hydra            `section.key=value` overrides only (ConfigContainer-style runtimes)
//   probe            Hydra overrides bridge-probe reads, plus BRIDGE_EXPECTED_PLAN for its
//                    plan check on every rank
//   none             nothing; validate/plan warn by name about every section not forwarded
//
// Contract of adapt_runtime: given a validated recipe, topology and overlap resolution, it
// returns the arguments in order (each carrying the plan key it forwards), expands the
// `{plan.NAME}` placeholders of runtime.args, and reports as errors the runtime.args values
// that contradict an emitted value (naming both) and as warnings those that repeat it. Pure.
// Each adapter lives in its own file (runtime_adapter_<name>.cpp) and is listed in
// runtime_adapters(); adding one for another runtime is one file and one table row.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "model/overlap.h"
#include "model/recipe.h"
#include "model/runtime_kind.h"
#include "model/topology.h"

namespace bridge {

// One value the adapter hands to the runtime. `flag` empty: a Hydra override `key=value`;
// otherwise the two words `flag value`.
struct AdapterArg {
  std::string key;  // the plan key it carries, e.g. "model.tensor_model_parallel_size"
  std::string flag;
  std::string value;
  std::string reason;
  // How the runtime spells the key in `KEY=value`, when not as the plan does (the hydra
  // adapter's train.train_iters for train.max_steps); "" = `key`.
  std::string runtime_key = "";
};

// A runtime flag that carries a plan key (for contradiction checks of runtime.args).
struct AdapterFlag {
  std::string_view short_name;  // "" when the flag has only a long form
  std::string_view long_name;
  std::string_view key;
};

struct AdapterInput {
  const Recipe& recipe;
  const Topology& topology;
  const OverlapResolution& overlap;
};

struct AdapterOutput {
  std::vector<AdapterArg> args;
  std::vector<std::pair<std::string, std::string>> expected_plan;  // probe: BRIDGE_EXPECTED_PLAN
};

// How an adapter sends the comm_overlap fields.
enum class CommOverlapForm {
  kFields,  // `comm_overlap.<field>=<value>`, one per resolved field
  // The runtime is Megatron-Bridge's ConfigContainer built from a recipe bridge-launch does not
  // know: the resolved fields as one `++comm_overlap={_target_:...CommOverlapConfig,...}`
  // override (megatron_bridge_comm_overlap_value), which holds on a recipe without that
  // section and for a userbuffers preset.
  kWholeSection,
  // The runtime builds the recipe base (model/recipe_base.h): only the fields the user set, one
  // override each; where the base recipe has no comm_overlap section, one
  // `++comm_overlap={...}` holding only those.
  kUserFields,
  // The hydra adapter: kUserFields where the script builds a library recipe the plan has as
  // its base (its tuned comm_overlap values stay), kWholeSection where it builds a config
  // bridge-launch does not know.
  kUserFieldsOnBase,
};

struct RuntimeAdapter {
  std::string_view name;
  std::string_view description;
  std::vector<AdapterFlag> flags;
  void (*emit)(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags);
  // How the comm_overlap fields reach the runtime (CommOverlapForm).
  CommOverlapForm comm_overlap_form = CommOverlapForm::kFields;
};

const std::vector<RuntimeAdapter>& runtime_adapters();
const RuntimeAdapter* find_runtime_adapter(std::string_view name);

// The adapter a recipe uses is effective_adapter_name (model/recipe.h).

struct AdaptedRuntime {
  std::string adapter;
  std::vector<std::string> args;         // runtime.args with placeholders expanded
  std::vector<RuntimeArg> adapter_args;  // what the adapter emits, as words
  std::vector<std::pair<std::string, std::string>> expected_plan;
};

AdaptedRuntime adapt_runtime(const AdapterInput& in, Diagnostics& diags);

// Shared by the adapters -------------------------------------------------------------------

// The plan values every adapter forwards, as Hydra key -> text, in a fixed order: topology
// (always), then precision, sizes and steps when the plan has them.
std::vector<std::pair<std::string, std::string>> plan_values(const AdapterInput& in);

// The same, only the values the user set (in the recipe file or an override), and the keys
// of `always` whatever their source.
std::vector<std::pair<std::string, std::string>> user_plan_values(
    const AdapterInput& in, const std::vector<std::string>& always);

// The user's own keys under model/train/ddp/optimizer/mixed_precision (after overrides),
// with Hydra value syntax (lowercase booleans, `null`, lists without spaces), except the keys
// in `skip` and keys that only bridge-launch reads (model.family, model.recipe, train.task).
// Megatron-Bridge refuses a PEFT config without the checkpoint it adapts ("PEFT requires a
// pretrained checkpoint path", when the config is finalised), and NVIDIA's PEFT recipes leave
// it to the command line: an error at `key`/`loc` saying `what` unless runtime.args gives
// `checkpoint.pretrained_checkpoint=...`.
void require_peft_checkpoint(const Recipe& r, const std::string& key, const SourceLoc& loc,
                             const std::string& what, Diagnostics& diags);

std::vector<std::pair<std::string, std::string>> user_hydra_values(
    const Recipe& recipe, const std::vector<std::string>& skip);

// The resolved overlap fields as comm_overlap.* overrides (overlap_runtime_args).
void add_overlap_args(const AdapterInput& in, AdapterOutput& out);

// Only the overlap, ddp and optimizer fields the user set (user_set), with their resolved
// values: the runtime's own recipe (the recipe base) decides the others.
void add_user_overlap_args(const AdapterInput& in, AdapterOutput& out);

// checkpoint: (docs/long-jobs.md) as the runtime's own keys: checkpoint.save and
// checkpoint.load both the directory, so that every attempt resumes from the newest complete
// checkpoint, then save_interval, most_recent_k and async_save where the recipe sets them.
void add_checkpoint_args(const Recipe& r, AdapterOutput& out);

// Adapters (one file each).
void emit_megatron_bridge(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags);
void emit_hydra(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags);
void emit_probe(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags);
void emit_none(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags);
const std::vector<AdapterFlag>& megatron_bridge_flags();

}  // namespace bridge
