// The resolved communication-overlap config (rules M, D and E of overlap-rules.md).
//
// resolve_comm_overlap reproduces what the training runtime decides at model init: defaults
// (M0), the TP-overlap gate (M1), pipeline overlap (M2), expert-parallel prerequisites (M3),
// delay_wgrad_compute checks (M4), user precedence (M5), userbuffers preset expansion (M6),
// and data-parallel overlap applied to ddp/optimizer (D1-D3). Every resolved field records
// where its value came from. This type never holds launch environment: env is LaunchEnv's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/recipe.h"
#include "launcher/topology.h"

namespace bridge {

enum class ValueSource { kUser, kDefault, kRule };
const char* value_source_name(ValueSource s);  // "user" | "default" | "rule"

template <class T>
struct Resolved {
  std::optional<T> value;  // nullopt = null
  ValueSource source = ValueSource::kDefault;
  std::string rule;  // e.g. "M2" when source == kRule (or the rule that turned a request off)
};

struct ResolvedOverlap {
  Resolved<bool> tp_comm_overlap;
  Resolved<nlohmann::ordered_json> tp_comm_overlap_cfg;  // per-layer mapping or null
  std::string tp_comm_overlap_preset;                    // preset name when one was used
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
std::optional<nlohmann::ordered_json> expand_userbuffers_preset(const std::string& name);

// The resolved model-level fields forwarded to the runtime as KEY=VALUE arguments
// (runtime.pass_overrides), e.g. "comm_overlap.overlap_moe_expert_parallel_comm=true".
std::vector<std::string> overlap_runtime_args(const OverlapResolution& r);

// The ten userbuffers layer names in preset order (qkv_dgrad ... fc2_fprop).
const std::vector<std::string>& userbuffers_layer_names();

// Validates an inline per-layer tp_comm_overlap_cfg mapping (layer names, per-layer keys for
// the layer's `method`, value types) and returns it normalized: layers and keys in canonical
// order, null layers dropped. Problems are errors at the offending node; nullopt on error.
// `path` is the dotted path of the mapping, e.g. "comm_overlap.tp_comm_overlap_cfg".
std::optional<nlohmann::ordered_json> read_userbuffers_mapping(const YamlNode& node,
                                                               const std::string& path,
                                                               Diagnostics& diags);

// A per-layer mapping as one Hydra override value: {qkv_dgrad:{method:bulk,num_sm:4},...}.
std::string userbuffers_hydra_value(const nlohmann::ordered_json& cfg);

// Dotted versions ("2.9.0", "2.12.0", "2.6.0a0+git" -> {2,6,0}): the numeric components, up to
// the first one that does not start with a digit. nullopt when the text has none.
std::optional<std::vector<int64_t>> parse_version(std::string_view text);
// <0, 0, >0 like strcmp; missing trailing components count as 0 ("2.6" == "2.6.0").
int compare_versions(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Internals shared by the overlap_*.cpp files: the checks that only add diagnostics
// (overlap_checks.cpp) and the data-parallel resolution (overlap_data_parallel.cpp).
namespace overlap_detail {
// M5/D3: a value the user set (non-null, an explicit false included) replaces the rule's.
template <class T>
void take_user(Resolved<T>& r, const Field<T>& user, const char* rule) {
  if (user.is_set()) r = Resolved<T>{user.value, ValueSource::kUser, rule};
}
void check_ep_overlap_prerequisites(const Recipe& r, const Topology& t, Diagnostics& diags);
void check_delay_wgrad_compute(const Recipe& r, Diagnostics& diags);
void resolve_data_parallel(const Recipe& r, const Topology& t, OverlapResolution& out,
                           Diagnostics& diags);
}  // namespace overlap_detail

}  // namespace bridge
