#include "plan/runtime_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "base/suggest.h"
#include "model/run_script_flags.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

struct PlanValue {
  std::string key;
  std::string value;
  SourceLoc loc;  // where the recipe or an override set it; empty for a default
};

std::vector<PlanValue> plan_value_list(const AdapterInput& in) {
  const Recipe& r = in.recipe;
  const Topology& t = in.topology;
  const ModelSpec& m = r.model;
  std::vector<PlanValue> v;
  auto num = [](int64_t n) { return std::to_string(n); };
  if (!t.gpu.empty()) v.push_back({"cluster.gpu", t.gpu, r.cluster.gpu.loc});
  v.push_back({"cluster.num_gpus", num(t.num_gpus), r.cluster.num_gpus.loc});
  v.push_back({"cluster.gpus_per_node", num(t.gpus_per_node), r.cluster.gpus_per_node.loc});
  v.push_back({"model.tensor_model_parallel_size", num(t.tp), m.tensor_model_parallel_size.loc});
  v.push_back(
      {"model.pipeline_model_parallel_size", num(t.pp), m.pipeline_model_parallel_size.loc});
  v.push_back({"model.virtual_pipeline_model_parallel_size", t.vpp ? num(*t.vpp) : "null",
               m.virtual_pipeline_model_parallel_size.loc});
  v.push_back({"model.context_parallel_size", num(t.cp), m.context_parallel_size.loc});
  v.push_back({"model.expert_model_parallel_size", num(t.ep), m.expert_model_parallel_size.loc});
  v.push_back({"model.expert_tensor_parallel_size", num(t.etp), m.expert_tensor_parallel_size.loc});
  if (m.precision.is_set()) v.push_back({"model.precision", *m.precision.value, m.precision.loc});
  if (m.compute_dtype.is_set())
    v.push_back({"model.compute_dtype", *m.compute_dtype.value, m.compute_dtype.loc});
  if (m.seq_length.is_set())
    v.push_back({"model.seq_length", num(*m.seq_length.value), m.seq_length.loc});
  const TrainSpec& tr = r.train;
  for (auto [key, field] : {std::pair{"train.global_batch_size", &tr.global_batch_size},
                            std::pair{"train.micro_batch_size", &tr.micro_batch_size},
                            std::pair{"train.max_steps", &tr.max_steps}})
    if (field->is_set()) v.push_back({key, num(*field->value), field->loc});
  return v;
}

// Hydra's value syntax for a recipe value as flattened by the loader.
std::string hydra_value(std::string text) {
  if (text == "True" || text == "TRUE") return "true";
  if (text == "False" || text == "FALSE") return "false";
  if (text.size() > 1 && text[0] == '+' && std::isdigit(static_cast<unsigned char>(text[1])))
    return text.substr(1);
  return text;
}

std::string plan_value_origin(const std::vector<PlanValue>& values, const std::string& key) {
  for (const auto& v : values) {
    if (v.key != key) continue;
    std::string where = v.loc.describe();
    return where.empty() ? key + " (default)" : key + " from " + where;
  }
  if (key.rfind("cluster.", 0) == 0) return key + " (default)";
  return key;
}

bool is_true_false(const std::string& s) { return s == "true" || s == "false"; }

// Two spellings of one value: exact text, or the same boolean in any case.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::string la = a, lb = b;
  for (auto* s : {&la, &lb})
    std::transform(s->begin(), s->end(), s->begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (la == "none") la = "null";
  if (lb == "none") lb = "null";
  return la == lb && (is_true_false(la) || la == "null");
}

// ---- placeholders ------------------------------------------------------------------------

std::optional<std::string> placeholder_value(const std::string& name, const AdapterInput& in,
                                             std::string& why_unset) {
  const Topology& t = in.topology;
  const Recipe& r = in.recipe;
  auto num = [](int64_t n) { return std::optional<std::string>(std::to_string(n)); };
  auto field = [&](const Field<int64_t>& f, const char* key) -> std::optional<std::string> {
    if (f.is_set()) return std::to_string(*f.value);
    why_unset = fmt::format("{} is not set", key);
    return std::nullopt;
  };
  if (name == "tp") return num(t.tp);
  if (name == "pp") return num(t.pp);
  if (name == "vpp") return t.vpp ? *num(*t.vpp) : std::string("null");
  if (name == "cp") return num(t.cp);
  if (name == "ep") return num(t.ep);
  if (name == "etp") return num(t.etp);
  if (name == "dp") return num(t.dp);
  if (name == "ng") return num(t.num_gpus);
  if (name == "gn") return num(t.gpus_per_node);
  if (name == "nodes") return num(t.nodes);
  if (name == "gpu") {
    if (!t.gpu.empty()) return t.gpu;
    why_unset = "cluster.gpu is not set";
    return std::nullopt;
  }
  if (name == "gb") return field(r.train.global_batch_size, "train.global_batch_size");
  if (name == "mb") return field(r.train.micro_batch_size, "train.micro_batch_size");
  if (name == "steps") return field(r.train.max_steps, "train.max_steps");
  if (name == "seq_length") return field(r.model.seq_length, "model.seq_length");
  if (name == "name") return r.name.get_or("");
  return std::nullopt;
}

const std::vector<std::string>& placeholder_names() {
  static const std::vector<std::string> kNames{"tp", "pp",    "vpp",        "cp",    "ep",  "etp",
                                               "dp", "ng",    "gn",         "nodes", "gpu", "gb",
                                               "mb", "steps", "seq_length", "name"};
  return kNames;
}

// `{plan.NAME}` -> its value; other braces are left alone.
std::string expand_placeholders(const std::string& arg, const AdapterInput& in,
                                const SourceLoc& loc, Diagnostics& diags) {
  static constexpr std::string_view kOpen = "{plan.";
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t start = arg.find(kOpen, pos);
    size_t end = start == std::string::npos ? start : arg.find('}', start);
    if (end == std::string::npos) break;
    out.append(arg, pos, start - pos);
    std::string name = arg.substr(start + kOpen.size(), end - start - kOpen.size());
    std::string why_unset;
    std::optional<std::string> value = placeholder_value(name, in, why_unset);
    if (value) {
      out += *value;
    } else if (!why_unset.empty()) {
      diags.error("placeholder-unset", "runtime.args", loc,
                  fmt::format("placeholder `{{plan.{}}}` has no value: {}", name, why_unset),
                  "set it in the recipe, or drop the placeholder");
    } else {
      diags.error("unknown-placeholder", "runtime.args", loc,
                  fmt::format("unknown placeholder `{{plan.{}}}`{}", name,
                              did_you_mean(name, placeholder_names())),
                  fmt::format("known: {{plan.{}}}", fmt::join(placeholder_names(), "}, {plan.")));
    }
    pos = end + 1;
  }
  out.append(arg, pos);
  return out;
}

// ---- contradictions between runtime.args and what the adapter emits ---------------------

struct ArgSetting {
  std::string key;
  std::string value;
  std::string written;     // as the user wrote it, for messages
  bool deletes = false;    // Hydra's ~key
  bool comparable = true;  // false: another spelling of the value (e.g. mixed_precision)
};

// ConfigContainer names that set a plan value under another key (Megatron-Bridge:
// train.train_iters is the step count, dataset.sequence_length the sequence length; the
// mixed_precision recipe and the dtype flags decide the precision). Overriding one would
// silently replace the validated value.
struct KeyAlias {
  std::string_view alias;
  std::string_view key;
  bool comparable;
};
constexpr KeyAlias kAliases[] = {
    {"train.train_iters", "train.max_steps", true},
    {"dataset.sequence_length", "model.seq_length", true},
    {"dataset.seq_length", "model.seq_length", true},
    {"mixed_precision", "model.precision", false},
    {"model.fp16", "model.precision", false},
    {"model.bf16", "model.precision", false},
    {"model.params_dtype", "model.precision", false},
};

ArgSetting hydra_setting(const std::string& arg, size_t eq) {
  std::string key = eq == std::string::npos ? arg : arg.substr(0, eq);
  ArgSetting s{"", eq == std::string::npos ? "" : arg.substr(eq + 1), arg};
  if (!key.empty() && key[0] == '~') {
    s.deletes = true;
    key.erase(0, 1);
  }
  key.erase(0, key.find_first_not_of('+'));  // Hydra's +key= / ++key= forms
  s.key = key;
  for (const auto& a : kAliases)
    if (key == a.alias) {
      s.key = std::string(a.key);
      s.comparable = a.comparable;
    }
  return s;
}

// A run_script.py flag at args[i] that sets recipe keys (model/run_script_flags.h): one
// setting per key, each written as the flag was; returns the words it took (0: not one).
size_t run_script_flag_settings(const std::vector<std::string>& args, size_t i,
                                std::vector<ArgSetting>& out) {
  std::vector<std::string> words{args[i]};
  if (i + 1 < args.size()) words.push_back(args[i + 1]);
  std::vector<RunScriptFlagUse> uses = run_script_flag_uses(words);
  if (uses.empty() || uses[0].written.rfind(args[i], 0) != 0) return 0;
  for (const RunScriptKeySetting& k : uses[0].sets)
    out.push_back({k.key, k.value, uses[0].written});
  return uses[0].written.size() == args[i].size() ? 1 : 2;
}

std::vector<ArgSetting> settings_in_args(const std::vector<std::string>& args,
                                         const RuntimeAdapter& adapter) {
  const std::vector<AdapterFlag>& flags = adapter.flags;
  std::vector<ArgSetting> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    size_t eq = a.find('=');
    if (adapter.name == "megatron_bridge" && !a.empty() && a[0] == '-') {
      if (size_t took = run_script_flag_settings(args, i, out)) {
        i += took - 1;
        continue;
      }
    }
    if (!a.empty() && a[0] == '-') {
      std::string name = a.substr(0, eq);
      auto f = std::find_if(flags.begin(), flags.end(), [&](const AdapterFlag& fl) {
        return name == fl.long_name || (!fl.short_name.empty() && name == fl.short_name);
      });
      if (f == flags.end()) continue;
      if (eq != std::string::npos)
        out.push_back({std::string(f->key), a.substr(eq + 1), a});
      else if (i + 1 < args.size())
        out.push_back({std::string(f->key), args[i + 1], a + " " + args[i + 1]}), ++i;
    } else if ((eq != std::string::npos && eq > 0) || (!a.empty() && a[0] == '~')) {
      out.push_back(hydra_setting(a, eq));
    }
  }
  return out;
}

void check_contradictions(const std::vector<std::string>& args, const RuntimeAdapter& adapter,
                          const std::vector<AdapterArg>& emitted, const SourceLoc& loc,
                          Diagnostics& diags) {
  for (const ArgSetting& s : settings_in_args(args, adapter)) {
    auto e = std::find_if(emitted.begin(), emitted.end(),
                          [&](const AdapterArg& a) { return a.key == s.key; });
    // megatron_bridge carries the precision as -c (the compute dtype).
    if (e == emitted.end() && s.key == "model.precision")
      e = std::find_if(emitted.begin(), emitted.end(),
                       [](const AdapterArg& a) { return a.key == "model.compute_dtype"; });
    if (e == emitted.end()) continue;
    std::string emitted_text =
        e->flag.empty() ? (e->runtime_key.empty() ? e->key : e->runtime_key) + "=" + e->value
                        : e->flag + " " + e->value;
    if (s.deletes || !s.comparable) {
      diags.error(
          "runtime-arg-contradicts-plan", "runtime.args", loc,
          fmt::format("runtime.args `{}` {} {}, which the plan fixes to {} ({}); the {} "
                      "adapter passes `{}`",
                      s.written, s.deletes ? "deletes" : "changes", s.key, e->value, e->reason,
                      adapter.name, emitted_text),
          fmt::format("set {} in the recipe and drop `{}` from runtime.args", s.key, s.written));
      continue;
    }
    if (same_value(s.value, e->value)) {
      diags.warning("runtime-arg-repeats-plan", "runtime.args", loc,
                    fmt::format("runtime.args `{}` repeats what the {} adapter already passes "
                                "(`{}`)",
                                s.written, adapter.name, emitted_text),
                    fmt::format("drop it from runtime.args; set {} in the recipe instead", s.key));
      continue;
    }
    diags.error(
        "runtime-arg-contradicts-plan", "runtime.args", loc,
        fmt::format("runtime.args `{}` sets {} to {}, but the plan has {} ({}); the "
                    "{} adapter passes `{}`",
                    s.written, s.key, s.value, e->value, e->reason, adapter.name, emitted_text),
        fmt::format("set {} in the recipe (or with an override) and drop it from "
                    "runtime.args, so the value that is validated is the one that runs",
                    s.key));
  }
}

// The comm_overlap.<field> arguments replaced by one override of the whole section, where
// the first of them stood (CommOverlapForm::kWholeSection). They stay separate up to
// here so that a contradiction in runtime.args is still found field by field.
void fold_comm_overlap_section(const AdapterInput& in, AdapterOutput& out) {
  auto is_field = [](const AdapterArg& a) { return a.key.rfind("comm_overlap.", 0) == 0; };
  auto first = std::find_if(out.args.begin(), out.args.end(), is_field);
  if (first == out.args.end()) return;
  size_t at = static_cast<size_t>(first - out.args.begin());
  out.args.erase(std::remove_if(out.args.begin(), out.args.end(), is_field), out.args.end());
  // First cleared, then set: `++` alone would merge into a section the runtime's recipe
  // already has (GPT-175B keeps its own userbuffers preset that way), and Hydra cannot delete
  // a section that is None (`~comm_overlap` fails there). Cleared and set, the section holds
  // the plan's values and CommOverlapConfig's defaults, on every recipe.
  const auto pos = out.args.begin() + static_cast<std::ptrdiff_t>(at);
  out.args.insert(pos,
                  {AdapterArg{"comm_overlap", "", "null",
                              "clears the runtime recipe's comm_overlap section, so that "
                              "only the plan's values apply",
                              "++comm_overlap"},
                   AdapterArg{"comm_overlap", "", megatron_bridge_comm_overlap_value(in.overlap),
                              "the resolved overlap fields as Megatron-Bridge's "
                              "CommOverlapConfig (docs/overlap.md)",
                              "++comm_overlap"}});
}

// CommOverlapForm::kUserFields. Megatron-Bridge's override machinery refuses
// `comm_overlap.<field>=` where the recipe's section is None, and a userbuffers layout is a
// dataclass there (a plain mapping fails its setup): so where the base recipe has no section,
// the user's fields become one new CommOverlapConfig (tp_comm_overlap, which it requires, false
// unless set), and a layout is always given as the dataclass.
void send_user_comm_overlap_fields(const AdapterInput& in, AdapterOutput& out) {
  auto is_field = [](const AdapterArg& a) { return a.key.rfind("comm_overlap.", 0) == 0; };
  const ResolvedOverlap& o = in.overlap.overlap;
  for (auto& a : out.args)
    if (a.key == "comm_overlap.tp_comm_overlap_cfg" && o.tp_comm_overlap_cfg.value) {
      a.value = userbuffers_megatron_bridge_value(*o.tp_comm_overlap_cfg.value);
      a.runtime_key = "++comm_overlap.tp_comm_overlap_cfg";
    }
  if (!in.recipe.base.comm_overlap_null) return;
  auto first = std::find_if(out.args.begin(), out.args.end(), is_field);
  if (first == out.args.end()) return;
  std::vector<std::string> fields{
      "_target_:megatron.bridge.training.comm_overlap.CommOverlapConfig"};
  bool has_tp = false;
  for (const auto& a : out.args)
    if (is_field(a)) {
      std::string name = a.key.substr(std::string_view("comm_overlap.").size());
      has_tp = has_tp || name == "tp_comm_overlap";
      fields.push_back(name + ":" + a.value);
    }
  if (!has_tp) fields.insert(fields.begin() + 1, "tp_comm_overlap:false");
  size_t at = static_cast<size_t>(first - out.args.begin());
  out.args.erase(std::remove_if(out.args.begin(), out.args.end(), is_field), out.args.end());
  out.args.insert(out.args.begin() + static_cast<std::ptrdiff_t>(at),
                  AdapterArg{"comm_overlap", "", fmt::format("{{{}}}", fmt::join(fields, ",")),
                             fmt::format("the comm_overlap fields set in the recipe; the recipe "
                                         "base {} has no comm_overlap section",
                                         in.recipe.base.function),
                             "++comm_overlap"});
}

std::vector<RuntimeArg> as_words(const std::vector<AdapterArg>& args, const std::string& source) {
  std::vector<RuntimeArg> out;
  for (const auto& a : args) {
    if (a.flag.empty()) {
      out.push_back(
          {(a.runtime_key.empty() ? a.key : a.runtime_key) + "=" + a.value, source, a.reason});
    } else {
      out.push_back({a.flag, source, a.reason});
      out.push_back({a.value, source, a.reason});
    }
  }
  return out;
}

}  // namespace

// ---- shared helpers ------------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> plan_values(const AdapterInput& in) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& v : plan_value_list(in)) out.emplace_back(v.key, v.value);
  return out;
}

std::vector<std::pair<std::string, std::string>> user_plan_values(
    const AdapterInput& in, const std::vector<std::string>& always) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& v : plan_value_list(in))
    if (v.loc.has_position() || v.loc.from_override() ||
        std::find(always.begin(), always.end(), v.key) != always.end())
      out.emplace_back(v.key, v.value);
  return out;
}

std::vector<std::pair<std::string, std::string>> user_hydra_values(
    const Recipe& recipe, const std::vector<std::string>& skip) {
  static const std::vector<std::string> kSections{"model.", "train.", "ddp.", "optimizer.",
                                                  "mixed_precision."};
  static const std::vector<std::string> kLauncherOnly{
      "model.family",         "model.recipe",     "train.task",           "model.config_variant",
      "train.tokenizer_type", "train.vocab_size", "train.tokenizer_model"};
  // The overlap resolution decides these (D1-D3); add_overlap_args sends its values, which
  // may differ from what the user wrote (the plan warns when a rule overrides a user value).
  static const std::vector<std::string> kResolved{
      "ddp.use_distributed_optimizer",
      "ddp.overlap_grad_reduce",
      "ddp.overlap_param_gather",
      "ddp.align_param_gather",
      "ddp.bucket_size",
      "optimizer.overlap_param_gather_with_optimizer_step"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& input : recipe.inputs) {
    const std::string& key = input.first;  // not a structured binding: lambdas capture it
    const std::string& text = input.second;
    bool in_section = std::any_of(kSections.begin(), kSections.end(),
                                  [&](const std::string& s) { return key.rfind(s, 0) == 0; });
    if (!in_section || text == "null") continue;
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    if (std::find(kLauncherOnly.begin(), kLauncherOnly.end(), key) != kLauncherOnly.end()) continue;
    if (std::find(kResolved.begin(), kResolved.end(), key) != kResolved.end()) continue;
    out.emplace_back(key, hydra_value(text));
  }
  return out;
}

void add_checkpoint_args(const Recipe& r, AdapterOutput& out) {
  const CheckpointSpec& c = r.checkpoint;
  if (!c.is_set()) return;
  const std::string& dir = *c.dir.value;
  out.args.push_back({"checkpoint.save", "", dir, "checkpoint.dir: where the job saves"});
  out.args.push_back({"checkpoint.load", "", dir,
                      "checkpoint.dir: every attempt resumes from the newest checkpoint there"});
  if (c.interval.is_set())
    out.args.push_back(
        {"checkpoint.save_interval", "", std::to_string(*c.interval.value), "checkpoint.interval"});
  if (c.keep.is_set())
    out.args.push_back(
        {"checkpoint.most_recent_k", "", std::to_string(*c.keep.value), "checkpoint.keep"});
  if (c.async_save.is_set())
    out.args.push_back(
        {"checkpoint.async_save", "", *c.async_save.value ? "true" : "false", "checkpoint.async"});
}

void add_overlap_args(const AdapterInput& in, AdapterOutput& out) {
  for (const auto& text : overlap_runtime_args(in.overlap)) {
    size_t eq = text.find('=');
    out.args.push_back({text.substr(0, eq), "", text.substr(eq + 1),
                        "the resolved overlap field (docs/overlap.md)"});
  }
  // What the resolution applies to the ddp and optimizer configs, so that the runtime cannot
  // keep a user value that a rule replaced.
  const DdpConfig& d = in.overlap.ddp;
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  const char* why = "applied by the overlap resolution (docs/overlap.md, D1-D3)";
  out.args.push_back({"ddp.use_distributed_optimizer", "", flag(d.use_distributed_optimizer), why});
  // Megatron-Bridge turns both back on when either is on (ConfigContainer.validate syncs
  // them), and its recipes set the optimizer's: the plan's value goes to both.
  if (runtime_is_megatron_bridge(in.recipe.runtime))
    out.args.push_back({"optimizer.use_distributed_optimizer", "",
                        flag(d.use_distributed_optimizer),
                        "the same as ddp.use_distributed_optimizer (Megatron-Bridge keeps the two "
                        "in sync, turning both on when either is)"});
  for (auto [key, value] :
       {std::pair{"ddp.overlap_grad_reduce", d.overlap_grad_reduce},
        std::pair{"ddp.overlap_param_gather", d.overlap_param_gather},
        std::pair{"ddp.align_param_gather", d.align_param_gather},
        std::pair{"optimizer.overlap_param_gather_with_optimizer_step",
                  in.overlap.optimizer.overlap_param_gather_with_optimizer_step}})
    if (value) out.args.push_back({key, "", flag(*value), why});
  if (d.bucket_size)
    out.args.push_back({"ddp.bucket_size", "", std::to_string(*d.bucket_size), why});
}

namespace {

// The user's own text of a field: what a careful engineer types for it.
std::string typed(const Field<bool>& f) { return *f.value ? "true" : "false"; }
std::string typed(const Field<int64_t>& f) { return std::to_string(*f.value); }
std::string typed(const Field<std::string>& f) { return *f.value; }

}  // namespace

// The fields the user set go as written, not as resolved: the runtime applies its own rules to
// them, as it would to the same override typed by hand (the plan shows what they resolve to).
// A userbuffers layout goes resolved: a preset name or mapping becomes its layers there.
void add_user_overlap_args(const AdapterInput& in, AdapterOutput& out) {
  const Recipe& r = in.recipe;
  const CommOverlapSpec& c = r.comm_overlap;
  const char* why = "set in the recipe (docs/overlap.md shows what it resolves to)";
  auto add = [&](std::string key, const auto& field) {
    if (user_set(field)) out.args.push_back({std::move(key), "", typed(field), why});
  };
  add("comm_overlap.tp_comm_overlap", c.tp_comm_overlap);
  if (user_set(c.tp_comm_overlap_cfg) && in.overlap.overlap.tp_comm_overlap_cfg.value)
    out.args.push_back({"comm_overlap.tp_comm_overlap_cfg", "",
                        userbuffers_hydra_value(*in.overlap.overlap.tp_comm_overlap_cfg.value),
                        why});
  add("comm_overlap.tp_comm_bootstrap_backend", c.tp_comm_bootstrap_backend);
  add("comm_overlap.overlap_p2p_comm", c.overlap_p2p_comm);
  add("comm_overlap.batch_p2p_comm", c.batch_p2p_comm);
  add("comm_overlap.defer_embedding_wgrad_compute", c.defer_embedding_wgrad_compute);
  add("comm_overlap.wgrad_deferral_limit", c.wgrad_deferral_limit);
  add("comm_overlap.overlap_moe_expert_parallel_comm", c.overlap_moe_expert_parallel_comm);
  add("comm_overlap.delay_wgrad_compute", c.delay_wgrad_compute);
  add("comm_overlap.overlap_grad_reduce", c.overlap_grad_reduce);
  add("comm_overlap.overlap_param_gather", c.overlap_param_gather);
  add("comm_overlap.overlap_param_gather_with_optimizer_step",
      c.overlap_param_gather_with_optimizer_step);
  add("comm_overlap.align_param_gather", c.align_param_gather);
  add("comm_overlap.bucket_size", c.bucket_size);
  add("ddp.use_distributed_optimizer", r.ddp.use_distributed_optimizer);
  if (user_set(r.ddp.use_distributed_optimizer))
    out.args.push_back({"optimizer.use_distributed_optimizer", "",
                        typed(r.ddp.use_distributed_optimizer),
                        "the same as ddp.use_distributed_optimizer (Megatron-Bridge keeps the two "
                        "in sync, turning both on when either is)"});
  add("ddp.overlap_grad_reduce", r.ddp.overlap_grad_reduce);
  add("ddp.overlap_param_gather", r.ddp.overlap_param_gather);
  add("ddp.align_param_gather", r.ddp.align_param_gather);
  add("ddp.bucket_size", r.ddp.bucket_size);
  add("optimizer.overlap_param_gather_with_optimizer_step",
      r.optimizer.overlap_param_gather_with_optimizer_step);
}

void require_peft_checkpoint(const Recipe& r, const std::string& key, const SourceLoc& loc,
                             const std::string& what, Diagnostics& diags) {
  for (const auto& a : r.runtime.args.get_or({})) {
    std::string_view name = std::string_view(a).substr(0, a.find('='));
    name.remove_prefix(std::min(name.find_first_not_of('+'), name.size()));
    if (name == "checkpoint.pretrained_checkpoint" && a.find('=') != std::string::npos) return;
  }
  diags.error("megatron-bridge-peft-needs-checkpoint", key, loc,
              fmt::format("{}, but nothing gives the checkpoint to fine-tune: Megatron-Bridge "
                          "refuses the config (\"PEFT requires a pretrained checkpoint path\")",
                          what),
              "add `checkpoint.pretrained_checkpoint=/path/to/checkpoint` to runtime.args");
}

// The keys only run_script.py's flags carry: another adapter has no way to send them, and
// leaving them out silently would run another job than the one the user wrote.
void refuse_run_script_only_keys(const Recipe& r, const std::string& adapter, Diagnostics& diags) {
  if (adapter == "megatron_bridge") return;
  auto refuse = [&](const char* key, const SourceLoc& loc, const char* flag) {
    diags.error("run-script-only-key", key, loc,
                fmt::format("{} is run_script.py's {} flag, which only the megatron_bridge "
                            "adapter sends; the {} adapter cannot carry it",
                            key, flag, adapter),
                adapter == "hydra" || adapter == "probe"
                    ? fmt::format("remove it, or set the field itself with a Hydra override in "
                                  "runtime.args (e.g. `tokenizer.tokenizer_type=...`)")
                    : std::string("remove it, or use runtime.adapter megatron_bridge"));
  };
  if (user_set(r.model.config_variant))
    refuse("model.config_variant", r.model.config_variant.loc, "--config_variant");
  if (user_set(r.train.tokenizer_type))
    refuse("train.tokenizer_type", r.train.tokenizer_type.loc, "--tokenizer_type");
  if (user_set(r.train.vocab_size))
    refuse("train.vocab_size", r.train.vocab_size.loc, "--vocab_size");
  if (user_set(r.train.tokenizer_model))
    refuse("train.tokenizer_model", r.train.tokenizer_model.loc, "--tokenizer_model");
}

// ---- the table -------------------------------------------------------------------------------

const std::vector<RuntimeAdapter>& runtime_adapters() {
  static const std::vector<RuntimeAdapter> kAdapters{
      {"megatron_bridge",
       "Megatron-Bridge scripts/performance/run_script.py: its flags, then Hydra overrides",
       megatron_bridge_flags(), emit_megatron_bridge, CommOverlapForm::kUserFields},
      {"hydra",
       "section.key=value overrides for Megatron-Bridge's ConfigContainer",
       {},
       emit_hydra,
       CommOverlapForm::kUserFieldsOnBase},
      {"probe",
       "bridge-probe: Hydra overrides it checks against BRIDGE_EXPECTED_PLAN on every rank",
       {{"", "--steps", "train.max_steps"}, {"", "--global-batch", "train.global_batch_size"}},
       emit_probe},
      {"none", "nothing is forwarded; validate and plan warn about every section", {}, emit_none},
  };
  return kAdapters;
}

const RuntimeAdapter* find_runtime_adapter(std::string_view name) {
  for (const auto& a : runtime_adapters())
    if (a.name == name) return &a;
  return nullptr;
}

AdaptedRuntime adapt_runtime(const AdapterInput& in, Diagnostics& diags) {
  const RuntimeSpec& rt = in.recipe.runtime;
  AdaptedRuntime result;
  result.adapter = effective_adapter_name(rt);
  const RuntimeAdapter* adapter = find_runtime_adapter(result.adapter);
  if (rt.adapter.is_set() && *rt.adapter.value != "none" && rt.pass_overrides.is_set() &&
      !*rt.pass_overrides.value)
    diags.error("adapter-vs-pass-overrides", "runtime.pass_overrides", rt.pass_overrides.loc,
                fmt::format("runtime.pass_overrides is false, but runtime.adapter {} forwards the "
                            "plan",
                            *rt.adapter.value),
                "drop pass_overrides (it is the old spelling of `adapter: none`)");
  for (const auto& a : rt.args.get_or({}))
    result.args.push_back(expand_placeholders(a, in, rt.args.loc, diags));
  AdapterOutput out;
  adapter->emit(in, out, diags);
  refuse_run_script_only_keys(in.recipe, result.adapter, diags);
  const std::vector<PlanValue> values = plan_value_list(in);  // once, not once per argument
  for (auto& a : out.args)
    if (a.reason.empty()) a.reason = plan_value_origin(values, a.key);
  check_contradictions(result.args, *adapter, out.args, rt.args.loc, diags);
  CommOverlapForm form = adapter->comm_overlap_form;
  if (form == CommOverlapForm::kUserFieldsOnBase)
    form = in.recipe.base.function.empty() ? CommOverlapForm::kWholeSection
                                           : CommOverlapForm::kUserFields;
  if (form == CommOverlapForm::kWholeSection)
    fold_comm_overlap_section(in, out);
  else if (form == CommOverlapForm::kUserFields)
    send_user_comm_overlap_fields(in, out);
  // A NUL byte cannot be part of a program argument (execve ends the string there).
  for (const auto& a : out.args)
    if (a.value.find('\0') != std::string::npos)
      diags.error("runtime-arg-nul", a.key, {},
                  fmt::format("the value of {} holds a NUL byte, which no program argument can "
                              "carry",
                              a.key));
  for (const auto& a : result.args)
    if (a.find('\0') != std::string::npos)
      diags.error("runtime-arg-nul", "runtime.args", rt.args.loc,
                  "a runtime.args entry holds a NUL byte, which no program argument can carry");
  result.adapter_args = as_words(out.args, "adapter:" + result.adapter);
  result.expected_plan = std::move(out.expected_plan);
  return result;
}

}  // namespace bridge
