#include "model/recipe_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/numbers.h"
#include "base/suggest.h"
#include "model/executor_kind.h"
#include "model/gpu_table.h"
#include "model/launch_env.h"
#include "model/recipe_base.h"
#include "model/retry_policy.h"
#include "model/run_script_flags.h"
#include "model/watchdog.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A form YAML readers disagree on: `010` is 8 to YAML 1.1 readers (PyYAML, OmegaConf) and 10
// to YAML 1.2 ones; `+1` is no integer to some. Refused with a hint rather than guessed.
bool ambiguous_integer(const std::string& s) {
  size_t digits = (!s.empty() && s[0] == '-') ? 1 : 0;
  return (!s.empty() && s[0] == '+') || (s.size() > digits + 1 && s[digits] == '0');
}

std::optional<int64_t> parse_int(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted || n.scalar.empty()) return std::nullopt;
  const std::string& s = n.scalar;
  if (ambiguous_integer(s)) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size() || !std::all_of(s.begin() + static_cast<long>(i), s.end(),
                                    [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<int64_t>(v);
}

// "[+-]?[0-9]+" without std::regex, whose recursion overflows the stack on long input.
bool looks_like_integer(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return i < s.size() && std::all_of(s.begin() + static_cast<long>(i), s.end(),
                                     [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<bool> parse_bool(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted) return std::nullopt;
  static const std::set<std::string> kTrue{"true", "True", "TRUE"};
  static const std::set<std::string> kFalse{"false", "False", "FALSE"};
  if (kTrue.count(n.scalar)) return true;
  if (kFalse.count(n.scalar)) return false;
  return std::nullopt;
}

std::string shown(const YamlNode& n) {
  // A quoted scalar is a string to YAML, whatever it looks like: say so, or `"80"` would
  // read as "got `80`" under "expects an integer".
  if (n.is_scalar() && n.quoted)
    return "the quoted string \"" + printable_text(n.scalar, 40) + "\"";
  if (n.is_scalar()) return "`" + printable_text(n.scalar, 40) + "`";
  return n.kind_name();
}

// Reads one mapping section; remembers which keys the schema knows so that finish() can
// reject the rest with a suggestion.
class MapReader {
 public:
  // `reference`, when set, collects every key the schema reads (recipe_key_reference()).
  MapReader(const YamlNode* node, std::string path, Diagnostics& diags,
            std::vector<RecipeKeyDoc>* reference = nullptr)
      : node_(node), path_(std::move(path)), diags_(diags), reference_(reference) {}

  // A reader for a nested section; it reports to the same diagnostics and reference.
  MapReader child(const YamlNode* node, std::string path) const {
    return MapReader(node, std::move(path), diags_, reference_);
  }

  // Marks `key` as known (recording it in the reference, when collecting); returns its value
  // unless it is absent or null.
  const YamlNode* lookup(std::string_view key, RecipeKeyKind kind, std::string type) {
    known_.emplace_back(key);
    if (reference_) {
      RecipeKeyDoc doc;
      doc.path = join(key);
      doc.type = std::move(type);
      doc.kind = kind;
      reference_->push_back(std::move(doc));
    }
    if (!node_ || !node_->is_map()) return nullptr;
    const YamlNode* v = node_->find(key);
    return (v && !v->is_null()) ? v : nullptr;
  }

  // The reference record of the key last looked up, to add details to; nullptr when not
  // collecting.
  RecipeKeyDoc* recorded() { return reference_ ? &reference_->back() : nullptr; }

  // Records, when collecting, the entries of a user-named mapping (env, plugins) as `path.*`.
  RecipeKeyDoc* record_entries(std::string type, RecipeKeyKind kind) {
    if (!reference_) return nullptr;
    RecipeKeyDoc doc;
    doc.path = path_ + ".*";
    doc.type = std::move(type);
    doc.kind = kind;
    reference_->push_back(std::move(doc));
    return &reference_->back();
  }
  bool collecting() const { return reference_ != nullptr; }

  void read(std::string_view key, Field<int64_t>& f, int64_t min = LLONG_MIN,
            int64_t max = LLONG_MAX) {
    const YamlNode* v = lookup(key, RecipeKeyKind::kInteger, "integer");
    if (RecipeKeyDoc* d = recorded()) {
      if (min != LLONG_MIN) d->min = min;
      if (max != LLONG_MAX) d->max = max;
    }
    if (!v) return;
    auto i = parse_int(*v);
    if (!i && v->is_scalar() && !v->quoted && looks_like_integer(v->scalar) &&
        ambiguous_integer(v->scalar)) {
      diags_.error("ambiguous-integer", join(key), v->loc,
                   fmt::format("`{}` is written {}, which YAML readers disagree on (a leading "
                               "zero is octal to YAML 1.1, a leading `+` is not an integer to all)",
                               join(key), shown(*v)),
                   "write the number plainly, without a leading `+` or `0`, e.g. `10`");
      return;
    }
    if (!i && v->is_scalar() && !v->quoted && looks_like_integer(v->scalar)) {
      diags_.error("out-of-range", join(key), v->loc,
                   fmt::format("`{}` is out of range: {}", join(key), shown(*v)));
      return;
    }
    if (!i) {
      type_error(key, *v, "an integer", fmt::format("write a whole number, e.g. `{}: 4`", key));
      return;
    }
    if (*i < min) {
      diags_.error("out-of-range", join(key), v->loc,
                   fmt::format("`{}` must be >= {}, got {}", join(key), min, *i));
      return;
    }
    if (*i > max) {
      diags_.error("out-of-range", join(key), v->loc,
                   fmt::format("`{}` must be <= {}, got {}", join(key), max, *i));
      return;
    }
    f.value = *i;
    f.loc = v->loc;
  }

  void read(std::string_view key, Field<bool>& f) {
    const YamlNode* v = lookup(key, RecipeKeyKind::kBoolean, "boolean");
    if (!v) return;
    auto b = parse_bool(*v);
    if (!b) {
      type_error(key, *v, "a boolean", "write true or false (unquoted)");
      return;
    }
    f.value = *b;
    f.loc = v->loc;
  }

  // `suggested` values are offered by completion and editors; others are accepted too.
  void read(std::string_view key, Field<std::string>& f,
            const std::vector<std::string>& suggested = {}) {
    const YamlNode* v = lookup(key, RecipeKeyKind::kString, "string");
    if (RecipeKeyDoc* d = recorded()) d->values = suggested;
    if (!v) return;
    if (!v->is_scalar()) {
      type_error(key, *v, "a string", "");
      return;
    }
    f.value = v->scalar;
    f.loc = v->loc;
  }

  void read_enum(std::string_view key, Field<std::string>& f,
                 const std::vector<std::string>& allowed) {
    auto type = [&allowed] {  // spelled only for the reference and for an error
      std::string t = "one of ";
      for (size_t i = 0; i < allowed.size(); ++i) t += (i ? " | " : "") + allowed[i];
      return t;
    };
    const YamlNode* v = lookup(key, RecipeKeyKind::kEnum, collecting() ? type() : std::string());
    if (RecipeKeyDoc* d = recorded()) d->values = allowed;
    if (!v) return;
    if (!v->is_scalar() || std::find(allowed.begin(), allowed.end(), v->scalar) == allowed.end()) {
      diags_.error("bad-value", join(key), v->loc,
                   fmt::format("`{}` must be {}, got {}{}", join(key), type(), shown(*v),
                               v->is_scalar() ? did_you_mean(v->scalar, allowed) : ""));
      return;
    }
    f.value = v->scalar;
    f.loc = v->loc;
  }

  void read(std::string_view key, Field<StringList>& f) {
    const YamlNode* v = lookup(key, RecipeKeyKind::kStringList, "list of strings");
    if (!v) return;
    if (!v->is_sequence()) {
      type_error(key, *v, "a list", fmt::format("write a list, e.g. `{}: [a, b]`", key));
      return;
    }
    StringList out;
    for (const auto& item : v->items) {
      if (!item.is_scalar()) {
        diags_.error(
            "wrong-type", join(key), item.loc,
            fmt::format("items of `{}` must be strings, got {}", join(key), item.kind_name()));
        return;
      }
      out.push_back(item.scalar);
    }
    f.value = std::move(out);
    f.loc = v->loc;
  }

  // A free-form value, passed through; `kind` says which shapes later layers accept.
  void read_node(std::string_view key, Field<YamlNode>& f, RecipeKeyKind kind, const char* type) {
    const YamlNode* v = lookup(key, kind, type);
    if (!v) return;
    f.value = *v;
    f.loc = v->loc;
  }

  // A nested section: returns it when present and a mapping.
  const YamlNode* section(std::string_view key, const char* description = "") {
    const YamlNode* v = lookup(key, RecipeKeyKind::kSection, "section");
    if (RecipeKeyDoc* d = recorded()) d->description = description;
    if (v && !v->is_map()) {
      type_error(key, *v, "a mapping (a section of keys)", "");
      return nullptr;
    }
    return v;
  }

  // Marks a key as handled by the caller (special errors, free-form maps).
  void handled(std::string_view key) { known_.emplace_back(key); }

  // Marks, in the reference, a key whose absence (or null) the caller reports.
  void required(std::string_view key) {
    if (!reference_) return;
    for (auto& d : *reference_)
      if (d.path == join(key)) {
        d.required = true;
        d.nullable = false;
      }
  }

  // Reports the keys nobody looked up: a section read through finish() is closed.
  void finish() {
    if (reference_) {
      auto it = std::find_if(reference_->begin(), reference_->end(),
                             [&](const RecipeKeyDoc& d) { return d.path == path_; });
      if (it == reference_->end()) {  // the root
        RecipeKeyDoc root;
        root.kind = RecipeKeyKind::kSection;
        root.type = "section";
        root.nullable = false;
        it = reference_->insert(reference_->begin(), std::move(root));
      }
      it->closed = true;
    }
    if (!node_) return;
    if (!node_->is_map()) return;
    for (const auto& e : node_->entries) {
      if (std::find(known_.begin(), known_.end(), e.key) != known_.end()) continue;
      std::string where = path_.empty() ? "the top level" : "`" + path_ + "`";
      // A megabyte-long key gets no suggestion (the edit distance would take seconds).
      std::string hint =
          e.key.size() > 256
              ? std::string()
              : closest_match(e.key, std::vector<std::string>(known_.begin(), known_.end()));
      std::string key = printable_text(e.key, 64);
      diags_.error("unknown-key", join(key), e.key_loc,
                   fmt::format("unknown key `{}` in {}{}", key, where,
                               hint.empty() ? "" : fmt::format(" (did you mean `{}`?)", hint)),
                   hint.empty() ? "remove it; see docs/recipe.md for the known keys" : "");
    }
  }

  std::string join(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const YamlNode* node() const { return node_; }
  Diagnostics& diags() { return diags_; }

 private:
  void type_error(std::string_view key, const YamlNode& v, const char* expected,
                  const std::string& help) {
    std::string fix = help;
    if (v.is_scalar() && v.quoted &&
        (looks_like_integer(v.scalar) || v.scalar == "true" || v.scalar == "false"))
      fix = fmt::format("remove the quotes: `{}: {}`", key, printable_text(v.scalar, 40));
    diags_.error("wrong-type", join(key), v.loc,
                 fmt::format("`{}` expects {}, got {}", join(key), expected, shown(v)), fix);
  }

  const YamlNode* node_;
  std::string path_;
  Diagnostics& diags_;
  std::vector<RecipeKeyDoc>* reference_;
  // Views of the keys' literals (or of the document's own keys), which outlive the reader: a
  // copy of each known key was a few hundred allocations per recipe.
  std::vector<std::string_view> known_;
};

// Retries render one object per attempt on Kubernetes (api: job): 1e6 of them exhausted
// memory. No real job retries a thousand times.
constexpr int64_t kMaxRetries = 1000;
constexpr int64_t kMaxSeconds = int64_t{366} * 24 * 3600;  // a year

void read_cluster(MapReader& top, ClusterSpec& c) {
  MapReader r = top.child(top.section("cluster", "GPU type and count"), "cluster");
  r.read("gpu", c.gpu, gpu_names());
  r.read_enum("gpu_arch", c.gpu_arch, {"ampere", "hopper", "blackwell", "rubin"});
  r.read("num_gpus", c.num_gpus, 1);
  r.read("gpus_per_node", c.gpus_per_node, 1);
  r.read("gpus_per_node_max", c.gpus_per_node_max, 1);
  r.finish();
}

void read_model(MapReader& top, ModelSpec& m) {
  MapReader r = top.child(
      top.section("model", "the model's parallel layout and Megatron-Core model fields"), "model");
  r.read("family", m.family);
  r.read("recipe", m.recipe);
  r.read("config_variant", m.config_variant);
  r.read("seq_length", m.seq_length, 1);
  r.read("tensor_model_parallel_size", m.tensor_model_parallel_size, 1);
  r.read("pipeline_model_parallel_size", m.pipeline_model_parallel_size, 1);
  r.read("virtual_pipeline_model_parallel_size", m.virtual_pipeline_model_parallel_size, 1);
  r.read("context_parallel_size", m.context_parallel_size, 1);
  r.read("expert_model_parallel_size", m.expert_model_parallel_size, 1);
  r.read("expert_tensor_parallel_size", m.expert_tensor_parallel_size, 1);
  r.read("sequence_parallel", m.sequence_parallel);
  r.read("num_layers", m.num_layers, 1);
  r.read("hidden_size", m.hidden_size, 1);
  r.read("num_attention_heads", m.num_attention_heads, 1);
  r.read("num_moe_experts", m.num_moe_experts, 0);
  r.read_enum("moe_token_dispatcher_type", m.moe_token_dispatcher_type,
              {"allgather", "alltoall", "flex"});
  r.read_enum("moe_flex_dispatcher_backend", m.moe_flex_dispatcher_backend, {"deepep", "hybridep"});
  r.read("moe_shared_expert_overlap", m.moe_shared_expert_overlap);
  r.read("moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size, 1);
  r.read("moe_permute_fusion", m.moe_permute_fusion);
  r.read("mtp_num_layers", m.mtp_num_layers, 0);
  r.read_enum("precision", m.precision, {"bf16", "fp16", "fp32"});
  r.read_enum("compute_dtype", m.compute_dtype, {"bf16", "fp8_cs", "fp8_mx", "fp8_sc", "nvfp4"});
  r.read_enum("recompute_granularity", m.recompute_granularity, {"selective", "full"});
  r.read_enum("recompute_method", m.recompute_method, {"uniform", "block"});
  r.read("recompute_num_layers", m.recompute_num_layers, 1);
  r.read("recompute_modules", m.recompute_modules);
  r.read("gradient_accumulation_fusion", m.gradient_accumulation_fusion);
  r.read("add_bias_linear", m.add_bias_linear);
  r.read("add_qkv_bias", m.add_qkv_bias);
  r.read_enum("cuda_graph_impl", m.cuda_graph_impl, {"none", "local", "transformer_engine"});
  r.read("cuda_graph_scope", m.cuda_graph_scope);
  r.read("overlap_moe_expert_parallel_comm", m.overlap_moe_expert_parallel_comm);
  r.finish();
}

// E3: bucket_size is a parameter count; a byte size or string is a classic mistake.
void read_bucket_size(MapReader& r, Field<int64_t>& f) {
  const YamlNode* node = r.node();
  const YamlNode* v = (node && node->is_map()) ? node->find("bucket_size") : nullptr;
  if (v && !v->is_null() && !parse_int(*v)) {
    r.handled("bucket_size");
    r.diags().error("bucket-size-units", r.join("bucket_size"), v->loc,
                    fmt::format("`{}` is a PARAMETER count (an integer), not a byte size; got {}",
                                r.join("bucket_size"), shown(*v)),
                    "write a number of parameters, e.g. bucket_size: 134217728 (128 Mi params)");
    return;
  }
  r.read("bucket_size", f, 1);
}

bool is_env_like_overlap_key(const std::string& k) {
  return k == "cuda_device_max_connections" || k == "layernorm_sm_margin" ||
         k.rfind("NVTE_", 0) == 0 || k.rfind("CUDA_", 0) == 0 || k.rfind("NCCL_", 0) == 0;
}

void read_comm_overlap(MapReader& top, CommOverlapSpec& c) {
  MapReader r = top.child(
      top.section("comm_overlap", "the overlap request; null or absent = let the rules decide"),
      "comm_overlap");
  r.read("tp_comm_overlap", c.tp_comm_overlap);
  r.read_node("tp_comm_overlap_cfg", c.tp_comm_overlap_cfg, RecipeKeyKind::kScalarOrMapping,
              "preset name or per-layer mapping");
  r.read("tp_comm_bootstrap_backend", c.tp_comm_bootstrap_backend);
  r.read("overlap_p2p_comm", c.overlap_p2p_comm);
  r.read("batch_p2p_comm", c.batch_p2p_comm);
  r.read("overlap_grad_reduce", c.overlap_grad_reduce);
  r.read("overlap_param_gather", c.overlap_param_gather);
  r.read("overlap_param_gather_with_optimizer_step", c.overlap_param_gather_with_optimizer_step);
  r.read("align_param_gather", c.align_param_gather);
  read_bucket_size(r, c.bucket_size);
  r.read("defer_embedding_wgrad_compute", c.defer_embedding_wgrad_compute);
  r.read("wgrad_deferral_limit", c.wgrad_deferral_limit);
  r.read("overlap_moe_expert_parallel_comm", c.overlap_moe_expert_parallel_comm);
  r.read("delay_wgrad_compute", c.delay_wgrad_compute);
  // E1: launch-time settings are not overlap fields.
  if (const YamlNode* n = r.node(); n && n->is_map()) {
    for (const auto& e : n->entries) {
      if (!is_env_like_overlap_key(e.key)) continue;
      r.handled(e.key);
      r.diags().error(
          "env-in-overlap-config", "comm_overlap." + e.key, e.key_loc,
          fmt::format("`comm_overlap.{}` is a launch-time environment setting, not an overlap "
                      "field; the overlap config never holds env",
                      e.key),
          "enable `plugins.perf_env` (it derives CUDA_DEVICE_MAX_CONNECTIONS and the "
          "NVTE_*_LAYERNORM_SM_MARGIN values from the plan) or set the variable under `env:`");
    }
  }
  r.finish();
}

void read_ddp(MapReader& top, DdpSpec& d) {
  MapReader r = top.child(top.section("ddp", "distributed data parallel settings"), "ddp");
  r.read("use_distributed_optimizer", d.use_distributed_optimizer);
  r.read("overlap_grad_reduce", d.overlap_grad_reduce);
  r.read("overlap_param_gather", d.overlap_param_gather);
  r.read("align_param_gather", d.align_param_gather);
  read_bucket_size(r, d.bucket_size);
  // E2: mixed-precision keys written under ddp.
  if (const YamlNode* n = r.node(); n && n->is_map()) {
    for (const char* k : {"grad_reduce_in_fp32", "fp8_param_gather"}) {
      const YamlEntry* e = nullptr;
      for (const auto& entry : n->entries)
        if (entry.key == k) e = &entry;
      if (!e) continue;
      r.handled(k);
      r.diags().error("misplaced-mixed-precision-key", std::string("ddp.") + k, e->key_loc,
                      fmt::format("`ddp.{}` is not a DDP field; set under mixed_precision", k),
                      fmt::format("move it to `mixed_precision.{}`", k));
    }
  }
  r.finish();
}

void read_small_sections(MapReader& top, Recipe& rec) {
  {
    MapReader r = top.child(top.section("optimizer", "optimizer overlap setting"), "optimizer");
    r.read("overlap_param_gather_with_optimizer_step",
           rec.optimizer.overlap_param_gather_with_optimizer_step);
    r.finish();
  }
  {
    MapReader r =
        top.child(top.section("mixed_precision", "mixed-precision settings"), "mixed_precision");
    r.read("grad_reduce_in_fp32", rec.mixed_precision.grad_reduce_in_fp32);
    r.read("fp8_param_gather", rec.mixed_precision.fp8_param_gather);
    r.finish();
  }
  {
    MapReader r = top.child(top.section("train", "batch sizes, steps and task"), "train");
    r.read("global_batch_size", rec.train.global_batch_size, 1);
    r.read("micro_batch_size", rec.train.micro_batch_size, 1);
    r.read("max_steps", rec.train.max_steps, 1);
    r.read_enum("task", rec.train.task, {"pretrain", "sft", "peft", "lora"});
    r.read_enum("tokenizer_type", rec.train.tokenizer_type,
                {"NullTokenizer", "HuggingFaceTokenizer", "SentencePieceTokenizer"});
    r.read("vocab_size", rec.train.vocab_size, 1);
    r.read("tokenizer_model", rec.train.tokenizer_model);
    r.finish();
  }
  {
    MapReader r =
        top.child(top.section("checkpoint", "where the job saves and resumes"), "checkpoint");
    r.read("dir", rec.checkpoint.dir);
    r.read("interval", rec.checkpoint.interval, 1);
    r.read("keep", rec.checkpoint.keep, 1);
    r.read("async", rec.checkpoint.async_save);
    r.finish();
  }
}

// The largest snapshot limit accepted: 64 GiB, in MiB (a limit, not a default; the
// default is kDefaultCodeMaxSizeMb in plan/code_plan.h).
constexpr int64_t kMaxCodeSizeMb = int64_t{64} * 1024;

void read_code(MapReader& runtime, CodeSpec& code) {
  const YamlNode* node = runtime.section("code", "a local source tree shipped into the job");
  MapReader r = runtime.child(node, "runtime.code");
  if (node) code.section = node->loc;
  r.read("path", code.path);
  r.required("path");
  r.read_enum("mode", code.mode, {"snapshot", "mount"});
  r.read("container_path", code.container_path);
  r.read("python_path", code.python_path);
  r.read("include", code.include);
  r.read("max_size_mb", code.max_size_mb, 1, kMaxCodeSizeMb);
  r.read("snapshot_dir", code.snapshot_dir);
  r.finish();
  if (node && !code.path.is_set())
    r.diags().error("missing-key", "runtime.code.path", node->loc,
                    "`runtime.code` has no `path`: which source tree should the job get?",
                    "write e.g. `code: {path: ~/Megatron-Bridge, mode: snapshot}`");
  if (code.path.is_set() && code.path.value->empty())
    r.diags().error("bad-value", "runtime.code.path", code.path.loc, "`runtime.code.path` is empty",
                    "name the directory of the source tree");
  if (code.container_path.is_set() &&
      (code.container_path.value->empty() || code.container_path.value->front() != '/'))
    r.diags().error("bad-value", "runtime.code.container_path", code.container_path.loc,
                    fmt::format("`runtime.code.container_path` must be an absolute path inside "
                                "the container, got `{}`",
                                printable_text(*code.container_path.value, 80)),
                    "write e.g. container_path: /opt/Megatron-Bridge");
}

void read_runtime(MapReader& top, RuntimeSpec& rt) {
  MapReader r = top.child(top.section("runtime", "what every rank runs"), "runtime");
  r.read_enum("launcher", rt.launcher, {"srun", "torchrun", "direct"});
  r.read_enum("adapter", rt.adapter, {"megatron_bridge", "hydra", "probe", "none"});
  r.read("command", rt.command);
  r.read("args", rt.args);
  r.read("pass_overrides", rt.pass_overrides);
  r.read("container_image", rt.container_image);
  r.read("workdir", rt.workdir);
  if (const YamlNode* v = r.lookup("transformer_engine", RecipeKeyKind::kVersionOrFalse,
                                   "version string or false")) {
    auto b = parse_bool(*v);
    if (b && !*b) {
      rt.transformer_engine.value = TeSpec{false, ""};
    } else if (v->is_scalar() && !b) {
      rt.transformer_engine.value = TeSpec{true, v->scalar};
    } else {
      r.diags().error("wrong-type", "runtime.transformer_engine", v->loc,
                      fmt::format("`runtime.transformer_engine` expects a version string or "
                                  "false, got {}",
                                  shown(*v)),
                      "write e.g. transformer_engine: \"2.9.0\", or false when TE is absent");
    }
    rt.transformer_engine.loc = v->loc;
  }
  r.read("torch", rt.torch);
  r.read("progress_rank", rt.progress_rank, {"last", "first"});
  r.read("confirm", rt.confirm);
  r.read_enum("binding", rt.binding, {"numa", "none", "custom"});
  if (rt.progress_rank.is_set() && *rt.progress_rank.value != "last" &&
      *rt.progress_rank.value != "first" && !parse_decimal<int>(*rt.progress_rank.value))
    r.diags().error("bad-value", "runtime.progress_rank", rt.progress_rank.loc,
                    fmt::format("`runtime.progress_rank` must be last, first or a rank number, "
                                "got `{}`",
                                printable_text(*rt.progress_rank.value, 80)),
                    "write e.g. progress_rank: last (Megatron prints iteration lines on the "
                    "last rank)");
  {
    MapReader c = top.child(r.section("check",
                                      "the plan through the config code of the "
                                      "Megatron-Bridge installed in a Python"),
                            "runtime.check");
    c.read("python", rt.check.python);
    c.read("timeout", rt.check.timeout, 1, 3600);
    c.finish();
  }
  {
    MapReader w =
        top.child(r.section("watchdog", "ends a job whose ranks stopped printing iteration lines"),
                  "runtime.watchdog");
    w.read("enabled", rt.watchdog.enabled);
    w.read("startup_timeout", rt.watchdog.startup_timeout, 1, kMaxWatchdogSeconds);
    w.read("progress_timeout", rt.watchdog.progress_timeout, 1, kMaxWatchdogSeconds);
    w.read("teardown_grace", rt.watchdog.teardown_grace, 1, kMaxWatchdogSeconds);
    w.finish();
  }
  if (rt.command.is_set() && rt.command.value->empty())
    r.diags().error("bad-value", "runtime.command", rt.command.loc,
                    "`runtime.command` is an empty list", "name the program to run");
  read_code(r, rt.code);
  r.finish();
}

void read_plugins(MapReader& top, std::vector<PluginEntry>& out) {
  const YamlNode* n = top.section("plugins", "launch plugins to run, in order: name -> options");
  if (RecipeKeyDoc* d = top.recorded()) {
    d->kind = RecipeKeyKind::kEntries;
    d->type = "mapping of plugin name to options";
  }
  // The plugin layer checks the names and reads the options.
  top.child(nullptr, "plugins")
      .record_entries("options mapping (null or {} for the defaults)", RecipeKeyKind::kMapping);
  if (!n) return;
  for (const auto& e : n->entries) {
    if (!e.value.is_null() && !e.value.is_map()) {
      std::string name = printable_text(e.key, 64);
      top.diags().error("wrong-type", "plugins." + name, e.value.loc,
                        fmt::format("options of plugin `{}` must be a mapping, got {}", name,
                                    e.value.kind_name()),
                        fmt::format("write `{}: {{}}` to enable it with defaults", e.key));
      continue;
    }
    out.push_back(PluginEntry{e.key, e.key_loc, e.value});
  }
}

// The long form of an env entry: {value, secret, expand}.
void read_env_long_form(MapReader& r, Field<std::string>& value, Field<bool>& secret,
                        Field<bool>& expand) {
  r.read("value", value);
  r.required("value");
  r.read("secret", secret);
  r.read("expand", expand);
  r.finish();
}

void read_env(MapReader& top, std::vector<EnvEntry>& out) {
  const YamlNode* n = top.section("env", "extra launch environment: NAME -> value");
  if (RecipeKeyDoc* d = top.recorded()) {
    d->kind = RecipeKeyKind::kEntries;
    d->type = "mapping of variable name to value";
    d->name_pattern = "^[A-Za-z_][A-Za-z0-9_]*$";  // is_identifier
  }
  if (top.collecting()) {
    MapReader entry = top.child(nullptr, "env");
    if (RecipeKeyDoc* d = entry.record_entries("string or {value, secret, expand}",
                                               RecipeKeyKind::kScalarOrSection))
      d->nullable = false;
    MapReader long_form = top.child(nullptr, "env.*");
    Field<std::string> value;
    Field<bool> secret, expand;
    read_env_long_form(long_form, value, secret, expand);
  }
  if (!n) return;
  for (const auto& e : n->entries) {
    std::string path = "env." + e.key;
    if (!is_identifier(e.key)) {
      std::string name = printable_text(e.key, 64);
      top.diags().error("bad-env-name", "env." + name, e.key_loc,
                        fmt::format("`{}` is not a valid environment variable name", name),
                        "use letters, digits and '_', not starting with a digit");
      continue;
    }
    if (const char* who = launcher_set_env_owner(e.key)) {
      top.diags().error("env-set-by-launcher", path, e.key_loc,
                        fmt::format("`{}` is set by {} on every rank; a value from the recipe "
                                    "would be replaced there, or break the job's start",
                                    e.key, who),
                        "remove it from env and -E; the launcher derives it from the plan");
      continue;
    }
    EnvEntry entry{e.key, "", false, false, e.value.loc};
    if (e.value.is_scalar()) {
      entry.value = e.value.scalar;
    } else if (e.value.is_map()) {
      MapReader r = top.child(&e.value, path);
      Field<std::string> value;
      Field<bool> secret, expand;
      read_env_long_form(r, value, secret, expand);
      if (!value.is_set()) {
        top.diags().error("missing-key", path + ".value", e.value.loc,
                          fmt::format("`{}` needs a `value`", path),
                          "write `{value: \"...\", secret: true}`");
        continue;
      }
      entry.value = *value.value;
      entry.secret = secret.get_or(false);
      entry.expand = expand.get_or(false);
    } else {
      top.diags().error("wrong-type", path, e.value.loc,
                        fmt::format("`{}` needs a string value, got {}", path, e.value.kind_name()),
                        "quote it; write \"\" for an empty value");
      continue;
    }
    out.push_back(std::move(entry));
  }
}

// executor.slurm.retry_on: a list of retry_classes() ids (or "any"); each item is checked,
// with a suggestion for a misspelt one.
void read_retry_on(MapReader& s, Field<StringList>& f) {
  s.read("retry_on", f);
  const std::vector<std::string> allowed = retry_on_values();
  if (RecipeKeyDoc* d = s.recorded()) d->values = allowed;
  if (!f.is_set()) return;
  for (const auto& item : *f.value)
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      s.diags().error("bad-value", "executor.slurm.retry_on", f.loc,
                      fmt::format("`executor.slurm.retry_on` lists `{}`, which is no failure "
                                  "class{}",
                                  printable_text(item, 64), did_you_mean(item, allowed)),
                      fmt::format("the classes are: {}", fmt::join(allowed, ", ")));
      f.value.reset();
      return;
    }
}

// Choosing failure classes is Slurm-only for now: the batch script decides there
// (docs/executors/kubernetes.md, "api: job"). Said by name, not as an unknown key.
void refuse_slurm_only_retry_keys(MapReader& k) {
  for (const char* key : {"retry_on"}) {
    k.handled(key);
    const YamlNode* v = k.node() && k.node()->is_map() ? k.node()->find(key) : nullptr;
    if (!v) continue;
    k.diags().error(
        "k8s-retry-policy-unsupported", k.join(key), v->loc,
        fmt::format("`{}` is Slurm-only for now: Kubernetes retries every failure", k.join(key)),
        "remove it, or run on Slurm (executor.slurm.retry_on); "
        "executor.kubernetes.retries still bounds the attempts");
  }
}

void read_executor(MapReader& top, ExecutorSpec& x) {
  MapReader r = top.child(
      top.section("executor", "where the job runs, and each executor's settings"), "executor");
  r.read_enum("default", x.default_executor, executor_names());
  {
    MapReader l = top.child(r.section("local", "settings of the local executor"), "executor.local");
    l.read("job_dir", x.local.job_dir);
    // Seconds; bounded so that the conversion to a deadline cannot overflow (a timeout of
    // 9223372037 s once stopped the job at once).
    l.read("grace_period", x.local.grace_period, 0, kMaxSeconds);
    l.read("timeout", x.local.timeout, 0, kMaxSeconds);
    l.finish();
  }
  {
    MapReader s = top.child(r.section("slurm", "settings of the Slurm executor"), "executor.slurm");
    auto& sl = x.slurm;
    s.read("account", sl.account);
    s.read("partition", sl.partition);
    s.read("time", sl.time);
    s.read("qos", sl.qos);
    s.read("mem", sl.mem);
    s.read("container_mounts", sl.container_mounts);
    s.read("container_workdir", sl.container_workdir);
    s.read("exclusive", sl.exclusive);
    s.read("job_dir", sl.job_dir);
    s.read("dependency", sl.dependency);
    s.read("sbatch_args", sl.sbatch_args);
    s.read("srun_args", sl.srun_args);
    s.read("segment", sl.segment, 0, 1 << 20);
    s.read("retries", sl.retries, 0, kMaxRetries);
    read_retry_on(s, sl.retry_on);
    s.read("exclude_failed_nodes", sl.exclude_failed_nodes);
    s.read("template", sl.template_path);
    s.finish();
  }
  {
    MapReader k = top.child(r.section("kubernetes", "settings of the Kubernetes executor"),
                            "executor.kubernetes");
    auto& ku = x.kubernetes;
    k.read("namespace", ku.namespace_);
    k.read("context", ku.context);
    k.read_enum("api", ku.api, {"jobset", "job", "trainjob"});
    k.read("training_runtime", ku.training_runtime);
    k.read("retries", ku.retries, 0, kMaxRetries);
    refuse_slurm_only_retry_keys(k);
    k.read("exclude_failed_nodes", ku.exclude_failed_nodes);
    k.read("secret_name", ku.secret_name);
    k.read("shm_size", ku.shm_size);
    k.read("service_account", ku.service_account);
    k.read("image_pull_secrets", ku.image_pull_secrets);
    k.read("job_dir", ku.job_dir);
    k.read_node("volumes", ku.volumes, RecipeKeyKind::kList, "list of volumes");
    k.read_node("node_selector", ku.node_selector, RecipeKeyKind::kMapping, "mapping");
    k.read_node("tolerations", ku.tolerations, RecipeKeyKind::kList, "list of tolerations");
    k.read_node("affinity", ku.affinity, RecipeKeyKind::kMapping, "mapping");
    k.read_node("resources", ku.resources, RecipeKeyKind::kMapping, "mapping");
    k.read_node("labels", ku.labels, RecipeKeyKind::kMapping, "mapping");
    k.read_node("annotations", ku.annotations, RecipeKeyKind::kMapping, "mapping");
    k.read("priority_class", ku.priority_class);
    k.read("queue", ku.queue);
    k.read_node("pod_patch", ku.pod_patch, RecipeKeyKind::kMapping, "mapping");
    k.read_node("node", ku.node, RecipeKeyKind::kMapping, "mapping");
    k.read_enum("qos", ku.qos, {"burstable", "guaranteed"});
    k.read_node("security", ku.security, RecipeKeyKind::kMapping, "mapping");
    k.read_node("network", ku.network, RecipeKeyKind::kScalarOrMapping, "none, rdma or mapping");
    k.read("time", ku.time);
    k.read("ttl_after_finished", ku.ttl_after_finished, 0, int64_t{365} * 86400);
    k.read("segment", ku.segment, 0, 1 << 20);
    k.read("topology_label", ku.topology_label);
    k.read_enum("topology", ku.topology, {"required", "preferred"});
    k.finish();
  }
  r.finish();
}

}  // namespace

const std::vector<std::string>& recipe_sections() {
  static const std::vector<std::string> kSections{
      "name",      "description",     "cluster", "model",      "comm_overlap", "ddp",
      "optimizer", "mixed_precision", "train",   "checkpoint", "runtime",      "plugins",
      "env",       "executor"};
  return kSections;
}

namespace {

// read_recipe, optionally collecting the schema's keys into `reference`.
// Reads the recipe into `out` (left empty after an error). An out-parameter, so that the 20 KB
// recipe is built where the caller keeps it: copies of it cost a dry-run stack pages and
// moves (docs/performance.md).
void read_recipe_into(const YamlNode& root, const std::string& file, Diagnostics& diags,
                      std::vector<RecipeKeyDoc>* reference, std::vector<PluginEntry>* plugins_seen,
                      std::optional<Recipe>& out) {
  size_t errors_before = diags.count(Severity::kError);
  out.reset();
  if (root.is_null()) {
    diags.error("empty-recipe", "", SourceLoc{file, 1, 1, {}}, "recipe is empty",
                "a recipe needs at least `name:`; see examples/recipes/");
    return;
  }
  if (!root.is_map()) {
    diags.error("not-a-mapping", "", root.loc,
                fmt::format("a recipe must be a mapping of sections, got {}", root.kind_name()),
                "start with `name: my-job` and sections like `model:`");
    return;
  }
  Recipe& rec = out.emplace();
  rec.file = file;
  MapReader top(&root, "", diags, reference);
  top.read("name", rec.name);
  top.required("name");  // checked below, after the whole recipe is read
  top.read("description", rec.description);
  read_cluster(top, rec.cluster);
  read_model(top, rec.model);
  read_comm_overlap(top, rec.comm_overlap);
  read_ddp(top, rec.ddp);
  read_small_sections(top, rec);
  read_runtime(top, rec.runtime);
  read_plugins(top, rec.plugins);
  if (plugins_seen) *plugins_seen = rec.plugins;
  read_env(top, rec.env);
  read_executor(top, rec.executor);
  top.finish();
  const YamlNode* name_node = root.find("name");
  bool name_written = name_node && !name_node->is_null();  // a wrong type is reported already
  if ((!name_written && !rec.name.is_set()) || (rec.name.is_set() && rec.name.value->empty()))
    diags.error("missing-key", "name", root.loc, "the recipe has no `name`",
                "add `name: my-job` at the top (used for job names)");
  // The name is part of the job id and of file names (registry entry, job directory); most
  // file systems refuse names over 255 bytes, so a long name would fail after submission.
  constexpr size_t kMaxName = 200;
  if (rec.name.is_set() && rec.name.value->size() > kMaxName)
    diags.error("name-too-long", "name", rec.name.loc,
                fmt::format("`name` is {} bytes long; at most {} fit in job ids and file names",
                            rec.name.value->size(), kMaxName),
                "use a shorter name; `description` can hold the rest");
  if (diags.count(Severity::kError) > errors_before) out.reset();
}

std::optional<Recipe> read_recipe_into(const YamlNode& root, const std::string& file,
                                       Diagnostics& diags, std::vector<RecipeKeyDoc>* reference) {
  std::optional<Recipe> out;
  read_recipe_into(root, file, diags, reference, nullptr, out);
  return out;
}

}  // namespace

std::optional<Recipe> read_recipe(const YamlNode& root, const std::string& file,
                                  Diagnostics& diags) {
  return read_recipe_into(root, file, diags, nullptr);
}

namespace {

// The argument as messages quote it: shortened, control characters and bad bytes escaped.
// An `env` value may be a secret, and one that cannot be read (or is cut short here) is
// not scrubbed by value (Diagnostics::add_secret): such an override is quoted without it.
// Nor is a value written with quotes or escapes (`"SE\x4bRIT"`, `'it''s'`): the scrubber
// knows it only as it decodes, so its spelling here could show a secret.
bool is_env_override(std::string_view arg) {
  return arg.rfind("env.", 0) == 0 || arg.rfind("env=", 0) == 0;
}

std::string hidden_override(std::string_view arg) {
  size_t eq_at = arg.find('=');
  return printable_text(arg.substr(0, std::min(eq_at, size_t{200})), 200) + "=<value not shown>";
}

std::string quoted_override(std::string_view arg) {
  size_t eq_at = arg.find('=');
  if (!is_env_override(arg) || eq_at == std::string_view::npos) return printable_text(arg, 200);
  bool spelled = arg.find_first_of("\\\"'", eq_at) != std::string_view::npos;
  if (first_invalid_utf8(arg) != std::string_view::npos || spelled ||
      printable_text(arg, std::string::npos).size() > 200)  // cut short as printed
    return hidden_override(arg);
  return printable_text(arg, 200);
}

}  // namespace

void apply_override(YamlNode& root, std::string_view arg, Diagnostics& diags) {
  SourceLoc where;
  where.override_arg = quoted_override(arg);
  if (first_invalid_utf8(arg) != std::string_view::npos) {
    diags.error("bad-override", "", where, "an override must be UTF-8 text");
    return;
  }
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    diags.error("bad-override", "", where, "an override must look like KEY=VALUE",
                "e.g. comm_overlap.delay_wgrad_compute=false");
    return;
  }
  std::string key(arg.substr(0, eq));
  std::string_view value_text = arg.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (key.back() == '.' || std::any_of(parts.begin(), parts.end(), [](const std::string& p) {
        return p.empty() || p.find_first_of(" \t\n") != std::string::npos;
      })) {
    diags.error("bad-override", "", where,
                fmt::format("malformed key `{}`", printable_text(key, 200)),
                "use a dotted path such as model.tensor_model_parallel_size");
    return;
  }
  // Every level would carry the whole argument as its location: bound the depth like the
  // YAML reader does (and so memory and the recursion of copies).
  if (parts.size() > 64) {
    diags.error("bad-override", "", where,
                fmt::format("`{}` is nested deeper than 64 levels", printable_text(key, 80)));
    return;
  }
  if (value_text.find_first_not_of(" \t") == std::string_view::npos) {
    diags.error("bad-override", key, where, fmt::format("empty value for `{}`", key),
                fmt::format("give a value, or write `{}=null` to unset it", key));
    return;
  }
  Diagnostics value_diags;
  YamlNode value = parse_yaml_value(value_text, where.override_arg, value_diags);
  if (value_diags.has_errors()) {
    if (is_env_override(arg)) where.override_arg = hidden_override(arg);
    for (const Diagnostic& d : value_diags.items())
      diags.error(d.code, d.path, where, d.message, d.help);
    return;
  }
  diags.add_as_warnings(value_diags);
  value.loc = where;
  if (root.is_null()) {
    root.kind = YamlNode::Kind::kMap;
  }
  YamlNode* cur = &root;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!cur->is_map()) {
      std::string prefix;
      for (size_t j = 0; j < i; ++j) prefix += (j ? "." : "") + parts[j];
      diags.error("bad-override", key, where,
                  fmt::format("`{}` is not a section, so `{}` cannot be set", prefix, key));
      return;
    }
    YamlNode* next = cur->find(parts[i]);
    bool last = i + 1 == parts.size();
    if (!next) {
      YamlNode fresh;
      fresh.kind = last ? YamlNode::Kind::kNull : YamlNode::Kind::kMap;
      fresh.loc = where;
      cur->entries.push_back(YamlEntry{parts[i], where, std::move(fresh)});
      next = &cur->entries.back().value;
    } else if (!last && next->is_null()) {
      next->kind = YamlNode::Kind::kMap;  // e.g. `plugins:` left empty in the file
    }
    if (last) {
      *next = value;
      for (auto& e : cur->entries)
        if (e.key == parts[i]) e.key_loc = where;
    }
    cur = next;
  }
}

namespace {

std::string flow_text(const YamlNode& n) {
  if (n.is_scalar()) return n.scalar;
  if (n.is_null()) return "null";
  std::string out = n.is_sequence() ? "[" : "{";
  if (n.is_sequence())
    for (size_t i = 0; i < n.items.size(); ++i) out += (i ? "," : "") + flow_text(n.items[i]);
  else
    for (size_t i = 0; i < n.entries.size(); ++i)
      out += (i ? "," : "") + n.entries[i].key + ":" + flow_text(n.entries[i].value);
  return out + (n.is_sequence() ? "]" : "}");
}

// `path` is one buffer for the whole walk, extended and cut back per level: a new prefix
// string per key was a tenth of a dry-run's allocations.
void flatten(const YamlNode& n, std::string& path, std::map<std::string, std::string>& out,
             std::map<std::string, SourceLoc>* locations) {
  if (!n.is_map()) {
    out.insert_or_assign(path, flow_text(n));
    if (locations) locations->insert_or_assign(path, n.loc);
    return;
  }
  const size_t length = path.size();
  for (const auto& e : n.entries) {
    if (length > 0) path += '.';
    path += e.key;
    flatten(e.value, path, out, locations);
    path.resize(length);
  }
}

std::map<std::string, std::string> flatten_inputs(const YamlNode& root,
                                                  std::map<std::string, SourceLoc>* locations) {
  std::map<std::string, std::string> out;
  std::string path;
  path.reserve(128);
  flatten(root, path, out, locations);
  out.erase("name");
  out.erase("description");
  return out;
}

}  // namespace

// The values of the env entries the document marks secret (`secret:` anything but false),
// from the file and the overrides, given to `diags` before the schema reads anything: no
// message about the recipe, whatever reports it and in whatever order, can quote one
// (docs/reliability.md). Also after a YAML error: the reader keeps the whole tree.
void note_secret_values(const YamlNode& root, Diagnostics& diags) {
  const YamlNode* env = root.is_map() ? root.find("env") : nullptr;
  if (!env || !env->is_map()) return;
  for (const auto& e : env->entries) {
    const YamlNode* secret = e.value.is_map() ? e.value.find("secret") : nullptr;
    const YamlNode* value = e.value.is_map() ? e.value.find("value") : nullptr;
    bool marked =
        secret &&
        (!secret->is_scalar() ||
         (secret->scalar != "false" && secret->scalar != "False" && secret->scalar != "FALSE"));
    if (!marked || !value || !value->is_scalar()) continue;
    diags.add_secret(value->scalar);
    // As written (escapes, quotes), for the source excerpts: not found by the value.
    if (value->loc.has_position() && value->end_line > 0)
      diags.add_secret_source({value->loc.file, value->loc.line, value->loc.column, value->end_line,
                               value->end_column});
  }
}

std::optional<Recipe> load_recipe_text(std::string_view text, const std::string& file,
                                       const std::vector<std::string>& overrides,
                                       Diagnostics& diags, std::vector<PluginEntry>* plugins_seen) {
  size_t errors_before = diags.count(Severity::kError);
  std::optional<Recipe> rec;  // every return is `rec` (NRVO, as in read_recipe_into)
  YamlNode root = parse_yaml_document(text, file, diags);
  note_secret_values(root, diags);
  if (diags.count(Severity::kError) > errors_before) return rec;
  if (root.is_null() && text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    diags.error("empty-recipe", "", SourceLoc{file, 1, 1, {}}, "recipe file is empty",
                "a recipe needs at least `name:`; see examples/recipes/");
    return rec;
  }
  if (root.is_null() || root.is_map())  // else read_recipe reports "not a mapping"
    for (const auto& o : overrides) apply_override(root, o, diags);
  note_secret_values(root, diags);
  if (diags.count(Severity::kError) > errors_before) return rec;
  read_recipe_into(root, file, diags, nullptr, plugins_seen, rec);
  if (rec) {
    rec->overrides = overrides;
    rec->inputs = flatten_inputs(root, &rec->input_locations);
    read_run_script_flags(*rec, diags);  // the user's, so before the base fills the rest
    apply_recipe_base(*rec, diags);      // after `inputs`: those are the user's keys only
  }
  return rec;
}

std::optional<Recipe> load_recipe(const std::string& path,
                                  const std::vector<std::string>& overrides, Diagnostics& diags,
                                  std::vector<PluginEntry>* plugins_seen) {
  // A FIFO would block (the diagnostics re-read the file to quote lines), /dev/zero would
  // grow without end, a directory reads as empty: only a regular file of sane size is a recipe.
  constexpr std::uintmax_t kMaxRecipeBytes = 16u << 20;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    diags.error("recipe-not-a-file", "", SourceLoc{path, 0, 0, {}},
                fmt::format("recipe `{}` is not a regular file", printable_text(path, 200)),
                "give the path of a YAML file");
    return std::nullopt;
  }
  if (!ec && fs::exists(st) && fs::file_size(path, ec) > kMaxRecipeBytes && !ec) {
    diags.error("recipe-too-large", "", SourceLoc{path, 0, 0, {}},
                fmt::format("recipe `{}` is larger than 16 MiB", printable_text(path, 200)),
                "a recipe is a small YAML file; check the path");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.error("file-not-found", "", SourceLoc{path, 0, 0, {}},
                fmt::format("cannot read recipe `{}`: {}", path, std::strerror(errno)),
                "check the path; examples live in examples/recipes/");
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_recipe_text(text.str(), path, overrides, diags, plugins_seen);
}

std::map<std::string, std::string> flatten_recipe_inputs(
    const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  Diagnostics ignored;
  YamlNode root = parse_yaml_document(text.str(), path, ignored);
  for (const auto& o : overrides) apply_override(root, o, ignored);
  if (ignored.has_errors()) return {};
  return flatten_inputs(root, nullptr);
}

std::vector<RecipeKeyDoc> recipe_schema_table() {
  std::vector<RecipeKeyDoc> table;
  Diagnostics ignored;
  YamlNode empty;
  empty.kind = YamlNode::Kind::kMap;
  // Every reader records its keys whether or not the recipe has them, so an empty recipe
  // walks the whole schema.
  read_recipe_into(empty, "<reference>", ignored, &table);
  return table;
}

std::vector<RecipeKeyDoc> recipe_key_reference() {
  std::vector<RecipeKeyDoc> ref = recipe_schema_table();
  ref.erase(std::remove_if(ref.begin(), ref.end(),
                           [](const RecipeKeyDoc& d) {
                             return d.kind == RecipeKeyKind::kSection ||
                                    d.kind == RecipeKeyKind::kEntries ||
                                    d.path.find('*') != std::string::npos;
                           }),
            ref.end());
  return ref;
}

}  // namespace bridge
