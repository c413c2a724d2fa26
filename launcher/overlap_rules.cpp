// PLACEHOLDER (to be replaced by the overlap-engine implementation): M0 defaults only.
#include "launcher/overlap.h"

namespace bridge {

const char* value_source_name(ValueSource s) {
  switch (s) {
    case ValueSource::kUser:
      return "user";
    case ValueSource::kDefault:
      return "default";
    case ValueSource::kRule:
      return "rule";
  }
  return "default";
}

OverlapResolution resolve_comm_overlap(const Recipe&, const Topology&, Diagnostics&) {
  OverlapResolution r;
  r.overlap.tp_comm_overlap.value = false;
  r.overlap.tp_comm_bootstrap_backend.value = "nccl";
  r.overlap.defer_embedding_wgrad_compute.value = false;
  r.overlap.wgrad_deferral_limit.value = -1;
  r.overlap.overlap_moe_expert_parallel_comm.value = false;
  r.overlap.delay_wgrad_compute.value = false;
  return r;
}

const std::vector<std::string>& userbuffers_preset_names() {
  static const std::vector<std::string> kNames;
  return kNames;
}

std::optional<nlohmann::ordered_json> expand_userbuffers_preset(const std::string&) {
  return std::nullopt;
}

std::vector<std::string> overlap_runtime_args(const OverlapResolution&) { return {}; }

}  // namespace bridge
