// The resolved communication-overlap config (rules M, D and E; docs/overlap.md explains each).
//
// resolve_comm_overlap reproduces what the training runtime decides at model init: defaults
// (M0), the TP-overlap gate (M1), pipeline overlap (M2), expert-parallel prerequisites (M3),
// delay_wgrad_compute checks (M4), user precedence (M5), userbuffers preset expansion (M6),
// and data-parallel overlap applied to ddp/optimizer (D1-D3). Every resolved field records
// where its value came from. This type never holds launch environment: env is LaunchEnv's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/diagnostics.h"
#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

enum class ValueSource { kUser, kDefault, kRule };
const char* value_source_name(ValueSource s);  // "user" | "default" | "rule"

template <class T>
struct Resolved {
  std::optional<T> value;  // nullopt = null
  ValueSource source = ValueSource::kDefault;
  std::string rule;  // e.g. "M2" when source == kRule (or the rule that turned a request off)
};

// One setting of a userbuffers layer; the value keeps its type (method: a name; num_sm,
// cga_size, num_splits: positive integers; the flags: booleans), so the Hydra override and
// the plan JSON show the same value the runtime reads.
struct UserbuffersSetting {
  std::string key;
  std::variant<std::string, int64_t, bool> value;
  bool operator==(const UserbuffersSetting&) const = default;
};
struct UserbuffersLayer {
  std::string name;  // one of userbuffers_layer_names()
  std::vector<UserbuffersSetting> settings;
  bool operator==(const UserbuffersLayer&) const = default;
};
// A per-layer tp_comm_overlap_cfg: layers and keys in canonical order, null layers dropped.
using UserbuffersConfig = std::vector<UserbuffersLayer>;

struct ResolvedOverlap {
  Resolved<bool> tp_comm_overlap;
  Resolved<UserbuffersConfig> tp_comm_overlap_cfg;  // per-layer mapping or null
  std::string tp_comm_overlap_preset;               // preset name when one was used
  Resolved<std::string> tp_comm_bootstrap_backend;
  Resolved<bool> overlap_p2p_comm;
  Resolved<bool> batch_p2p_comm;
  Resolved<bool> overlap_grad_reduce;
  Resolved<bool> overlap_param_gather;
  Resolved<bool> overlap_param_gather_with_optimizer_step;
  Resolved<bool> align_param_gather;
  Resolved<int64_t> bucket_size;
  Resolved<bool> defer_embedding_wgrad_compute;
  Resolved<int64_t> wgrad_deferral_limit;
  Resolved<bool> overlap_moe_expert_parallel_comm;
  Resolved<bool> delay_wgrad_compute;
};

// What is applied to the DDP config and the optimizer config (rule D).
struct DdpConfig {
  bool use_distributed_optimizer = false;
  std::optional<bool> overlap_grad_reduce;
  std::optional<bool> overlap_param_gather;
  std::optional<bool> align_param_gather;
  std::optional<int64_t> bucket_size;
};

struct OptimizerConfig {
  std::optional<bool> overlap_param_gather_with_optimizer_step;
};

struct OverlapResolution {
  ResolvedOverlap overlap;
  DdpConfig ddp;
  OptimizerConfig optimizer;
  // The EFFECTIVE flex dispatcher backend (E4): model.moe_flex_dispatcher_backend only when
  // moe_token_dispatcher_type is flex, else "". Plugins read this, never the recipe field.
  std::string flex_dispatcher_backend;
};

// Never fails hard: errors are recorded in `diags` and the best-effort resolution returned.
OverlapResolution resolve_comm_overlap(const Recipe& recipe, const Topology& topo,
                                       Diagnostics& diags);

// The 19 userbuffers presets by name, and one expanded (null layers dropped); nullopt when
// the name is unknown.
const std::vector<std::string>& userbuffers_preset_names();
std::optional<UserbuffersConfig> expand_userbuffers_preset(const std::string& name);

// What a preset's name says it was tuned for, e.g. userbuffers_bf16_h100_h12288_tp4_mbs1_
// seqlen2048 -> {bf16, h100, 12288, tp 4, cp 1, mbs 1, seq 2048}. nullopt when the name does
// not follow that pattern (never the case for the 19 presets).
struct UserbuffersPresetTarget {
  std::string precision;  // "bf16" | "fp8"
  std::string gpu;        // "h100" | "b200"
  int64_t hidden_size = 0;
  int64_t tp = 0;
  int64_t cp = 1;  // "_cp2_" when the name has it
  int64_t micro_batch_size = 0;
  int64_t seq_length = 0;
  bool lora = false;  // tuned for LoRA fine-tuning (its wgrad layers are null)
};
std::optional<UserbuffersPresetTarget> userbuffers_preset_target(std::string_view name);

// The 14 CommOverlapConfig fields in the order overlap_runtime_args sends them (the Python
// program's OVERLAP_FIELDS holds the same list; tests/python_tables_test.cpp compares them).
const std::vector<std::string>& overlap_field_names();

// The resolved model-level fields forwarded to the runtime as KEY=VALUE arguments
// (runtime.pass_overrides), e.g. "comm_overlap.overlap_moe_expert_parallel_comm=true".
std::vector<std::string> overlap_runtime_args(const OverlapResolution& r);

// The ten userbuffers layer names in preset order (qkv_dgrad ... fc2_fprop).
const std::vector<std::string>& userbuffers_layer_names();

// Validates an inline per-layer tp_comm_overlap_cfg mapping (layer names, per-layer keys for
// the layer's `method`, value types) and returns it normalized: layers and keys in canonical
// order, null layers dropped. Problems are errors at the offending node; nullopt on error.
// `path` is the dotted path of the mapping, e.g. "comm_overlap.tp_comm_overlap_cfg".
std::optional<UserbuffersConfig> read_userbuffers_mapping(const YamlNode& node,
                                                          const std::string& path,
                                                          Diagnostics& diags);

// A per-layer mapping as one Hydra override value: {qkv_dgrad:{method:bulk,num_sm:4},...}.
std::string userbuffers_hydra_value(const UserbuffersConfig& cfg);
// The same mapping as Megatron-Bridge instantiates it: a TransformerLayerTPOverlapCfg with one
// Bulk/RingExchange/PipelineOverlapCfg per layer (by its method) and null for a layer left out
// (the dataclass has no defaults). A plain dict there fails the release's setup
// (dataclasses.asdict), as the conformance suite showed.
std::string userbuffers_megatron_bridge_value(const UserbuffersConfig& cfg);

// The resolved comm_overlap section as the value of ONE override for Megatron-Bridge's
// ConfigContainer, `++comm_overlap={_target_:megatron.bridge.training.comm_overlap.
// CommOverlapConfig,...}`.
// The runtime adapters send `++comm_overlap=null` before it, so that the section is built
// anew on every recipe: where the runtime's recipe has none (comm_overlap: None, where every
// `comm_overlap.x=` is refused) and where it has its own (which `++` alone would merge into).
// A preset goes by reference ({_target_:...<preset name>,_call_:false}), since the release has
// no lookup by name. Null fields are left out: CommOverlapConfig's default (None, resolved by
// its setup) applies. tp_comm_overlap, which CommOverlapConfig requires, is always given.
std::string megatron_bridge_comm_overlap_value(const OverlapResolution& r);

// A PEP 440 version, the ordering the runtime's own minimum-version checks use
// (packaging.version): "2.6.0a0+ecf3bae40a.nv25.01" is release {2,6,0}, pre-release a0, local
// "ecf3bae40a.nv25.01". Spellings are normalized as PEP 440 says (a leading `v`, `alpha`,
// `-1` as a post-release, implicit 0 numbers, any case).
struct PreRelease {
  enum Phase : int64_t { kAlpha = 0, kBeta = 1, kRc = 2 };
  Phase phase = kAlpha;
  int64_t number = 0;
};
struct Version {
  int64_t epoch = 0;
  std::vector<int64_t> release;
  std::optional<PreRelease> pre;
  std::optional<int64_t> post;
  std::optional<int64_t> dev;
  std::string local;           // after `+`, lower-case; "" when none
  bool is_prerelease() const;  // a pre-release or a dev release
};
// nullopt when the text is not a PEP 440 version ("latest", "", "2.9.0-custom").
std::optional<Version> parse_version(std::string_view text);
// <0, 0, >0 like strcmp, in PEP 440 order: dev < a < b < rc < release < post, missing trailing
// release components count as 0 ("2.6" == "2.6.0"). Local labels are ignored, so a local
// build compares equal to its public version, which is what a minimum-version check needs.
int compare_versions(const Version& a, const Version& b);

// Internals shared by the overlap_*.cpp files: the checks that only add diagnostics
// (overlap_checks.cpp), the preset-against-plan matcher (overlap_preset_match.cpp) and the
// data-parallel resolution (overlap_data_parallel.cpp).
namespace overlap_detail {
// M5/D3: a value the user set (non-null, an explicit false included) replaces the rule's.
template <class T>
void take_user(Resolved<T>& r, const Field<T>& user, const char* rule) {
  if (user.is_set()) r = Resolved<T>{user.value, ValueSource::kUser, rule};
}
void check_ep_overlap_prerequisites(const Recipe& r, const Topology& t, Diagnostics& diags);
// After the whole resolution: its checks read the values the job gets (a grad-reduce overlap
// that a rule turned on counts as much as one the user set).
void check_delay_wgrad_compute(const Recipe& r, const OverlapResolution& resolved,
                               Diagnostics& diags);
// M6: the preset tuned for the plan's GPU, precision, hidden, TP/CP, mbs and sequence length
// ("" when none is, or the plan lacks the GPU or the hidden size), and the check that warns
// (errors under --strict) for each of those a used preset disagrees with.
std::string preset_for_plan(const Recipe& r, const Topology& t);
void check_preset_matches_plan(const Recipe& r, const Topology& t, const std::string& preset,
                               Diagnostics& diags);
void resolve_data_parallel(const Recipe& r, const Topology& t, OverlapResolution& out,
                           Diagnostics& diags);
// E11-E15 (model_config_checks.cpp): model keys Megatron-Core or Megatron-Bridge refuse at
// start-up (linear bias, CUDA-graph implementation, Transformer Engine for Megatron-Bridge).
void check_model_config(const Recipe& r, const Topology& t, Diagnostics& diags);
// cuda_graph_impl local with `full_iteration` in its scope: a whole-iteration graph.
bool is_full_iteration_cuda_graph(const ModelSpec& model);
}  // namespace overlap_detail

}  // namespace bridge
