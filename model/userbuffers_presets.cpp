// The 19 userbuffers presets as data, their expansion into per-layer settings, what each preset's
// name says it was tuned for, and validation of inline per-layer mappings (rule M6).
//
// The table keeps one compact cell per layer so a reviewer can compare it row by row with
// Megatron-Bridge's preset definitions; expansion turns a cell into the exact field set TE's
// userbuffers config expects. docs/overlap.md lists the names and the per-method fields.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "base/suggest.h"
#include "model/overlap.h"

namespace bridge {

namespace {

using Settings = std::vector<UserbuffersSetting>;

// One cell of the preset table: the layer's method and variant (docs/overlap.md lists the
// fields each method expands to).
enum class Cell : uint8_t { kNull, kBulk, kPipe, kPipe8, kRing, kRingM, kRingA, kRingC };

struct Layer {
  Cell cell;
  int num_sm;
  int cga_size;
};

constexpr Layer B(int n, int c) { return {Cell::kBulk, n, c}; }
constexpr Layer P(int n, int c) { return {Cell::kPipe, n, c}; }
constexpr Layer P8(int n, int c) { return {Cell::kPipe8, n, c}; }
constexpr Layer R{Cell::kRing, 1, 1};
constexpr Layer Rm{Cell::kRingM, 1, 1};
constexpr Layer Ra{Cell::kRingA, 1, 1};
constexpr Layer Rc{Cell::kRingC, 1, 2};
constexpr Layer N{Cell::kNull, 0, 0};

struct Preset {
  const char* name;
  std::array<Layer, 10> layers;  // in userbuffers_layer_names() order
};

// clang-format off
constexpr std::array<Preset, 19> kPresets{{
  {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
   {B(4, 2), B(24, 2), B(2, 2), B(4, 2), R, R, R, R, P(24, 2), P(16, 2)}},
  {"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
   {B(4, 2), B(24, 2), B(2, 2), B(4, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
   {B(16, 2), B(24, 2), B(2, 2), B(4, 2), R, R, R, R, P(32, 2), P(16, 2)}},
  {"userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
   {B(4, 2), B(24, 2), B(2, 2), B(4, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
   {B(2, 2), B(24, 2), B(2, 2), B(2, 2), R, R, R, R, P(24, 2), P(8, 2)}},
  {"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
   {B(2, 2), B(24, 2), B(2, 2), B(2, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
   {B(8, 2), B(24, 2), B(2, 2), B(2, 2), R, R, R, R, P(32, 2), P(8, 2)}},
  {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
   {B(8, 2), B(32, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
   {B(2, 2), N, P8(16, 2), N, Rm, Rm, Rm, Rm, Rc, Rc}},
  {"userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
   {B(2, 2), N, P8(16, 2), N, Ra, Ra, Ra, Ra, P8(32, 2), P8(16, 2)}},
  {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
   {B(8, 2), B(16, 2), B(4, 2), B(16, 2), R, R, R, R, P(16, 2), P(24, 2)}},
  {"userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
   {B(8, 2), B(16, 2), B(4, 2), B(16, 2), R, R, R, R, P8(16, 2), P8(24, 2)}},
  {"userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
   {B(4, 2), B(4, 2), B(2, 2), B(4, 2), R, R, R, R, P(24, 2), Rm}},
  {"userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
   {B(4, 2), B(4, 2), B(2, 2), B(4, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
   {B(4, 2), B(16, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
   {B(4, 2), B(16, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
   {B(8, 2), B(32, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, Rm}},
  {"userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
   {B(8, 2), B(32, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, P(24, 2)}},
  {"userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096",
   {B(8, 2), B(32, 2), B(2, 2), B(8, 2), R, R, R, R, Rm, Rm}},
}};
// clang-format on

Settings bulk(const Layer& l) {
  return {{"method", std::string("bulk")},
          {"num_sm", int64_t{l.num_sm}},
          {"cga_size", int64_t{l.cga_size}},
          {"set_sm_margin", false}};
}

Settings pipeline(const Layer& l, bool fp8_buf) {
  return {{"method", std::string("pipeline")},
          {"num_sm", int64_t{l.num_sm}},
          {"cga_size", int64_t{l.cga_size}},
          {"num_splits", int64_t{4}},
          {"set_sm_margin", true},
          {"fp8_buf", fp8_buf},
          {"atomic_gemm", false}};
}

Settings ring(const Layer& l, bool aggregate, bool sm_margin, bool fp8_buf) {
  return {{"method", std::string("ring_exchange")},
          {"aggregate", aggregate},
          {"num_sm", int64_t{l.num_sm}},
          {"cga_size", int64_t{l.cga_size}},
          {"set_sm_margin", sm_margin},
          {"fp8_buf", fp8_buf},
          {"atomic_gemm", false}};
}

Settings expand_layer(const Layer& l) {
  switch (l.cell) {
    case Cell::kBulk:
      return bulk(l);
    case Cell::kPipe:
      return pipeline(l, false);
    case Cell::kPipe8:
      return pipeline(l, true);
    case Cell::kRing:
      return ring(l, false, false, false);
    case Cell::kRingM:
      return ring(l, false, true, false);
    case Cell::kRingA:
      return ring(l, true, false, false);
    case Cell::kRingC:
      return ring(l, false, true, true);
    case Cell::kNull:
      break;
  }
  return {};
}

// ---- inline mappings ----

enum class KeyType { kMethod, kPositiveInt, kBool };

struct KeySpec {
  const char* name;
  KeyType type;
};

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> kMethods{"bulk", "pipeline", "ring_exchange"};
  return kMethods;
}

// The keys each method accepts, in canonical output order (the legend's field sets).
const std::vector<KeySpec>& keys_of(const std::string& method) {
  static const std::vector<KeySpec> kBulk{{"method", KeyType::kMethod},
                                          {"num_sm", KeyType::kPositiveInt},
                                          {"cga_size", KeyType::kPositiveInt},
                                          {"set_sm_margin", KeyType::kBool}};
  static const std::vector<KeySpec> kPipeline{
      {"method", KeyType::kMethod},        {"num_sm", KeyType::kPositiveInt},
      {"cga_size", KeyType::kPositiveInt}, {"num_splits", KeyType::kPositiveInt},
      {"set_sm_margin", KeyType::kBool},   {"fp8_buf", KeyType::kBool},
      {"atomic_gemm", KeyType::kBool}};
  static const std::vector<KeySpec> kRing{
      {"method", KeyType::kMethod},      {"aggregate", KeyType::kBool},
      {"num_sm", KeyType::kPositiveInt}, {"cga_size", KeyType::kPositiveInt},
      {"set_sm_margin", KeyType::kBool}, {"fp8_buf", KeyType::kBool},
      {"atomic_gemm", KeyType::kBool}};
  if (method == "bulk") return kBulk;
  if (method == "pipeline") return kPipeline;
  return kRing;
}

std::vector<std::string> key_names(const std::vector<KeySpec>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.emplace_back(k.name);
  return out;
}

std::optional<bool> scalar_bool(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted) return std::nullopt;
  if (n.scalar == "true" || n.scalar == "True" || n.scalar == "TRUE") return true;
  if (n.scalar == "false" || n.scalar == "False" || n.scalar == "FALSE") return false;
  return std::nullopt;
}

std::optional<int64_t> scalar_positive_int(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted || n.scalar.empty() || n.scalar.size() > 9) return std::nullopt;
  if (!std::all_of(n.scalar.begin(), n.scalar.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t v = std::stoll(n.scalar);
  return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
}

// Reads one layer's mapping; returns nullopt (and records errors) when it is invalid.
class LayerReader {
 public:
  LayerReader(const YamlNode& node, std::string path, Diagnostics& diags)
      : node_(node), path_(std::move(path)), diags_(diags) {}

  std::optional<Settings> read() {
    if (!node_.is_map()) {
      diags_.error("bad-userbuffers-value", path_, node_.loc,
                   fmt::format("`{}` must be a mapping of overlap settings, got {}", path_,
                               node_.kind_name()),
                   "write e.g. {method: bulk, num_sm: 4, cga_size: 2, set_sm_margin: false}, "
                   "or null to drop the layer");
      return std::nullopt;
    }
    std::optional<std::string> method = read_method();
    if (!method) return std::nullopt;
    const auto& keys = keys_of(*method);
    bool ok = check_keys(*method, keys);
    Settings out;
    for (const auto& k : keys) {
      const YamlNode* v = node_.find(k.name);
      if (!v || v->is_null()) continue;
      auto value = read_value(k, *v);
      if (!value) {
        ok = false;
        continue;
      }
      out.push_back({k.name, std::move(*value)});
    }
    if (!ok) return std::nullopt;
    return out;
  }

 private:
  std::optional<std::string> read_method() {
    const YamlNode* m = node_.find("method");
    if (!m || m->is_null()) {
      diags_.error("bad-userbuffers-value", path_ + ".method", node_.loc,
                   fmt::format("`{}` has no `method`", path_),
                   "add `method: bulk`, `method: pipeline` or `method: ring_exchange`");
      return std::nullopt;
    }
    const auto& methods = method_names();
    if (!m->is_scalar() || std::find(methods.begin(), methods.end(), m->scalar) == methods.end()) {
      diags_.error("bad-userbuffers-value", path_ + ".method", m->loc,
                   fmt::format("`{}.method` must be bulk, pipeline or ring_exchange, got `{}`{}",
                               path_, m->is_scalar() ? m->scalar : m->kind_name(),
                               m->is_scalar() ? did_you_mean(m->scalar, methods) : ""),
                   "choose one of bulk | pipeline | ring_exchange");
      return std::nullopt;
    }
    return m->scalar;
  }

  // Every key must belong to the layer's method; a key of another method gets a hint.
  bool check_keys(const std::string& method, const std::vector<KeySpec>& keys) {
    std::vector<std::string> names = key_names(keys);
    bool ok = true;
    for (const auto& e : node_.entries) {
      if (std::find(names.begin(), names.end(), e.key) != names.end()) continue;
      ok = false;
      std::string path = path_ + "." + e.key;
      diags_.error("unknown-userbuffers-key", path, e.key_loc,
                   fmt::format("`{}` is not a setting of a `{}` userbuffers layer{}", e.key, method,
                               did_you_mean(e.key, names)),
                   fmt::format("a {} layer takes: {}", method, fmt::join(names, ", ")));
    }
    return ok;
  }

  std::optional<std::variant<std::string, int64_t, bool>> read_value(const KeySpec& k,
                                                                     const YamlNode& v) {
    std::string path = path_ + "." + k.name;
    if (k.type == KeyType::kMethod) return v.scalar;
    if (k.type == KeyType::kBool) {
      if (auto b = scalar_bool(v)) return *b;
      diags_.error("bad-userbuffers-value", path, v.loc,
                   fmt::format("`{}` must be a boolean, got {}", path,
                               v.is_scalar() ? "`" + v.scalar + "`" : v.kind_name()),
                   "write true or false (unquoted)");
      return std::nullopt;
    }
    if (auto i = scalar_positive_int(v)) return *i;
    diags_.error("bad-userbuffers-value", path, v.loc,
                 fmt::format("`{}` must be a positive integer, got {}", path,
                             v.is_scalar() ? "`" + v.scalar + "`" : v.kind_name()),
                 fmt::format("write a whole number, e.g. `{}: 2`", k.name));
    return std::nullopt;
  }

  const YamlNode& node_;
  std::string path_;
  Diagnostics& diags_;
};

// "h12288" -> 12288 for prefix "h"; nullopt unless the rest is all digits.
std::optional<int64_t> tagged_number(std::string_view token, std::string_view prefix) {
  if (token.size() <= prefix.size() || token.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  token.remove_prefix(prefix.size());
  if (token.size() > 9 ||
      !std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t n = 0;
  for (char c : token) n = n * 10 + (c - '0');
  return n;
}

std::vector<std::string_view> split_underscores(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    size_t end = s.find('_', start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// One Hydra override value for a setting (names, integers and booleans only).
std::string hydra_scalar(const std::variant<std::string, int64_t, bool>& v) {
  if (const auto* text = std::get_if<std::string>(&v)) return *text;
  if (const auto* flag = std::get_if<bool>(&v)) return *flag ? "true" : "false";
  return std::to_string(std::get<int64_t>(v));
}

}  // namespace

const std::vector<std::string>& userbuffers_layer_names() {
  static const std::vector<std::string> kLayers{
      "qkv_dgrad",  "qkv_wgrad", "fc1_dgrad", "fc1_wgrad",  "qkv_fprop",
      "proj_dgrad", "fc1_fprop", "fc2_dgrad", "proj_fprop", "fc2_fprop"};
  return kLayers;
}

const std::vector<std::string>& userbuffers_preset_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& p : kPresets) names.emplace_back(p.name);
    return names;
  }();
  return kNames;
}

std::optional<UserbuffersConfig> expand_userbuffers_preset(const std::string& name) {
  auto it = std::find_if(kPresets.begin(), kPresets.end(),
                         [&](const Preset& p) { return name == p.name; });
  if (it == kPresets.end()) return std::nullopt;
  const auto& layers = userbuffers_layer_names();
  UserbuffersConfig out;
  for (size_t i = 0; i < it->layers.size(); ++i) {
    if (it->layers[i].cell == Cell::kNull) continue;  // M6: null layers are dropped
    out.push_back({layers[i], expand_layer(it->layers[i])});
  }
  return out;
}

// userbuffers_<precision>_<gpu>_h<hidden>_tp<tp>[_cp<cp>]_mbs<mbs>_seqlen<seq>[_lora]: the
// name is the only record of what a preset was tuned for, so it is read, not duplicated.
std::optional<UserbuffersPresetTarget> userbuffers_preset_target(std::string_view name) {
  std::vector<std::string_view> t = split_underscores(name);
  if (t.size() < 7 || t[0] != "userbuffers") return std::nullopt;
  UserbuffersPresetTarget out;
  out.precision = std::string(t[1]);
  out.gpu = std::string(t[2]);
  size_t i = 3;
  auto hidden = tagged_number(t[i++], "h");
  auto tp = tagged_number(t[i++], "tp");
  if (auto cp = tagged_number(t[i], "cp")) {
    out.cp = *cp;
    ++i;
  }
  if (i + 2 > t.size()) return std::nullopt;
  auto mbs = tagged_number(t[i++], "mbs");
  auto seq = tagged_number(t[i++], "seqlen");
  if (i < t.size() && t[i] == "lora") {
    out.lora = true;
    ++i;
  }
  if (!hidden || !tp || !mbs || !seq || i != t.size() || out.precision.empty() || out.gpu.empty())
    return std::nullopt;
  out.hidden_size = *hidden;
  out.tp = *tp;
  out.micro_batch_size = *mbs;
  out.seq_length = *seq;
  return out;
}

std::optional<UserbuffersConfig> read_userbuffers_mapping(const YamlNode& node,
                                                          const std::string& path,
                                                          Diagnostics& diags) {
  const auto& layers = userbuffers_layer_names();
  bool ok = true;
  for (const auto& e : node.entries) {
    if (std::find(layers.begin(), layers.end(), e.key) != layers.end()) continue;
    ok = false;
    diags.error("unknown-userbuffers-layer", path + "." + e.key, e.key_loc,
                fmt::format("unknown userbuffers layer `{}`{}", e.key, did_you_mean(e.key, layers)),
                fmt::format("layers are: {}", fmt::join(layers, ", ")));
  }
  UserbuffersConfig out;
  for (const auto& layer : layers) {  // canonical order, whatever the YAML order
    const YamlNode* v = node.find(layer);
    if (!v || v->is_null()) continue;
    std::optional<Settings> settings = LayerReader(*v, path + "." + layer, diags).read();
    if (!settings) {
      ok = false;
      continue;
    }
    out.push_back({layer, std::move(*settings)});
  }
  if (!ok) return std::nullopt;
  return out;
}

std::string userbuffers_hydra_value(const UserbuffersConfig& cfg) {
  std::vector<std::string> layers;
  for (const auto& layer : cfg) {
    std::vector<std::string> kv;
    for (const auto& setting : layer.settings)
      kv.push_back(fmt::format("{}:{}", setting.key, hydra_scalar(setting.value)));
    layers.push_back(fmt::format("{}:{{{}}}", layer.name, fmt::join(kv, ",")));
  }
  return fmt::format("{{{}}}", fmt::join(layers, ","));
}

namespace {

// The classes of megatron.bridge.training.comm_overlap that hold one layer's settings, by the
// layer's `method` (the preset definitions use the same three).
const char* megatron_bridge_layer_class(const UserbuffersLayer& layer) {
  for (const auto& s : layer.settings) {
    if (s.key != "method") continue;
    const std::string* method = std::get_if<std::string>(&s.value);
    if (method && *method == "bulk") return "BulkOverlapCfg";
    if (method && *method == "pipeline") return "PipelineOverlapCfg";
  }
  return "RingExchangeOverlapCfg";
}

}  // namespace

std::string userbuffers_megatron_bridge_value(const UserbuffersConfig& cfg) {
  constexpr const char* kModule = "megatron.bridge.training.comm_overlap";
  std::vector<std::string> layers;
  for (const auto& name : userbuffers_layer_names()) {
    auto layer = std::find_if(cfg.begin(), cfg.end(),
                              [&](const UserbuffersLayer& l) { return l.name == name; });
    if (layer == cfg.end()) {
      layers.push_back(name + ":null");
      continue;
    }
    std::vector<std::string> kv{
        fmt::format("_target_:{}.{}", kModule, megatron_bridge_layer_class(*layer))};
    bool has_fp8_buf = false;
    for (const auto& setting : layer->settings) {
      kv.push_back(fmt::format("{}:{}", setting.key, hydra_scalar(setting.value)));
      has_fp8_buf = has_fp8_buf || setting.key == "fp8_buf";
    }
    // PipelineOverlapCfg's own default for fp8_buf is the tuple (False,), true to Python: an
    // unset fp8_buf is sent as the false every other layer class defaults to.
    if (!has_fp8_buf &&
        std::string_view(megatron_bridge_layer_class(*layer)) == "PipelineOverlapCfg")
      kv.emplace_back("fp8_buf:false");
    layers.push_back(fmt::format("{}:{{{}}}", name, fmt::join(kv, ",")));
  }
  return fmt::format("{{_target_:{}.TransformerLayerTPOverlapCfg,{}}}", kModule,
                     fmt::join(layers, ","));
}

}  // namespace bridge
