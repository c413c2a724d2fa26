#include "probe/layout.h"

#include <algorithm>
#include <set>

#include "probe/options.h"

namespace bridge::probe {
namespace {

constexpr int kMaxSize = 1 << 20;

struct SizeRead {
  std::optional<int> value;  // nullopt: absent or null.
  std::string error;
};

SizeRead read_size(const std::vector<std::string>& overrides, const char* key) {
  const auto text = override_value(overrides, key);
  if (!text || *text == "null") return {};
  const auto value = parse_int64(*text);
  if (!value || *value < 1 || *value > kMaxSize) {
    return {std::nullopt, std::string(key) + "=" + *text + " is not a positive integer"};
  }
  return {static_cast<int>(*value), ""};
}

bool read_bool(const std::vector<std::string>& overrides, const char* key) {
  const auto text = override_value(overrides, key);
  return text && (*text == "true" || *text == "True" || *text == "1");
}

}  // namespace

LayoutResult read_layout(const std::vector<std::string>& overrides, int world_size) {
  Layout layout;
  layout.world = world_size;
  struct Field {
    const char* key;
    int* target;
  };
  const Field fields[] = {{"model.tensor_model_parallel_size", &layout.tp},
                          {"model.pipeline_model_parallel_size", &layout.pp},
                          {"model.context_parallel_size", &layout.cp},
                          {"model.expert_model_parallel_size", &layout.ep},
                          {"model.expert_tensor_parallel_size", &layout.etp}};
  bool etp_set = false;
  for (const Field& field : fields) {
    const SizeRead read = read_size(overrides, field.key);
    if (!read.error.empty()) return {std::nullopt, read.error};
    if (read.value) *field.target = *read.value;
    if (field.target == &layout.etp) etp_set = read.value.has_value();
  }
  // Megatron-Core: an unset expert tensor parallel size follows tp.
  if (!etp_set) layout.etp = layout.tp;
  const SizeRead vpp = read_size(overrides, "model.virtual_pipeline_model_parallel_size");
  if (!vpp.error.empty()) return {std::nullopt, vpp.error};
  layout.vpp = vpp.value;
  layout.sequence_parallel = read_bool(overrides, "model.sequence_parallel");

  const auto dense = static_cast<int64_t>(layout.tp) * layout.pp * layout.cp;
  if (world_size % dense != 0) {
    return {std::nullopt, "tp*pp*cp = " + std::to_string(dense) +
                              " does not divide the world size " + std::to_string(world_size)};
  }
  const auto expert = static_cast<int64_t>(layout.etp) * layout.ep * layout.pp;
  if (world_size % expert != 0) {
    return {std::nullopt, "etp*ep*pp = " + std::to_string(expert) +
                              " does not divide the world size " + std::to_string(world_size)};
  }
  layout.dp = static_cast<int>(world_size / dense);
  layout.edp = static_cast<int>(world_size / expert);
  return {layout, ""};
}

RankGroups groups_of(const Layout& l, int rank) {
  RankGroups g;
  // Dense order tp-cp-dp-pp: rank = tp_i + tp*(cp_i + cp*(dp_i + dp*pp_i)).
  const int tp_i = rank % l.tp;
  const int stage_size = l.tp * l.cp * l.dp;
  const int pp_i = rank / stage_size;
  const int in_stage = rank % stage_size;  // tp_i + tp*(cp_i + cp*dp_i)
  for (int k = 0; k < l.tp; ++k) g.tp.ranks.push_back(rank - tp_i + k);
  g.tp.index = tp_i;
  for (int k = 0; k < l.pp; ++k) g.pp.ranks.push_back(in_stage + k * stage_size);
  g.pp.index = pp_i;
  for (int k = 0; k < l.cp * l.dp; ++k) g.dp.ranks.push_back(tp_i + k * l.tp + pp_i * stage_size);
  g.dp.index = (in_stage - tp_i) / l.tp;
  // Expert order etp-ep-edp-pp: rank = etp_i + etp*(ep_i + ep*(edp_i + edp*pp_i)).
  const int etp_i = rank % l.etp;
  const int ep_i = (rank / l.etp) % l.ep;
  const int block = rank / (l.etp * l.ep);
  for (int k = 0; k < l.ep; ++k) g.ep.ranks.push_back(etp_i + l.etp * (k + l.ep * block));
  g.ep.index = ep_i;
  return g;
}

std::vector<int> peers_of(const Layout& layout, int rank) {
  const RankGroups g = groups_of(layout, rank);
  std::set<int> peers;
  for (const Group* ring : {&g.tp, &g.pp, &g.dp}) {
    peers.insert(ring->next());
    peers.insert(ring->prev());
  }
  peers.insert(g.ep.ranks.begin(), g.ep.ranks.end());
  peers.erase(rank);
  return {peers.begin(), peers.end()};
}

}  // namespace bridge::probe
