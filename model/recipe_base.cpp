#include "model/recipe_base.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <type_traits>
#include <variant>

#include "base/suggest.h"
#include "model/megatron_bridge_perf_recipes.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

using FieldRef = std::variant<Field<int64_t>*, Field<bool>*, Field<std::string>*,
                              Field<StringList>*, Field<YamlNode>*>;

struct BaseKey {
  std::string_view key;
  FieldRef (*field)(Recipe&);
};

// One row per recipe key a base can fill: the one list of them (the generator's BASE_KEYS in
// tests/conformance/harness.py names the same keys; a unit test checks that every key of the
// generated table is here).
const std::vector<BaseKey>& base_keys() {
  static const std::vector<BaseKey> kKeys{
      {"model.tensor_model_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.tensor_model_parallel_size; }},
      {"model.pipeline_model_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.pipeline_model_parallel_size; }},
      {"model.virtual_pipeline_model_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.virtual_pipeline_model_parallel_size; }},
      {"model.context_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.context_parallel_size; }},
      {"model.expert_model_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.expert_model_parallel_size; }},
      {"model.expert_tensor_parallel_size",
       [](Recipe& r) -> FieldRef { return &r.model.expert_tensor_parallel_size; }},
      {"model.sequence_parallel", [](Recipe& r) -> FieldRef { return &r.model.sequence_parallel; }},
      {"model.seq_length", [](Recipe& r) -> FieldRef { return &r.model.seq_length; }},
      {"model.num_layers", [](Recipe& r) -> FieldRef { return &r.model.num_layers; }},
      {"model.hidden_size", [](Recipe& r) -> FieldRef { return &r.model.hidden_size; }},
      {"model.num_attention_heads",
       [](Recipe& r) -> FieldRef { return &r.model.num_attention_heads; }},
      {"model.num_moe_experts", [](Recipe& r) -> FieldRef { return &r.model.num_moe_experts; }},
      {"model.moe_token_dispatcher_type",
       [](Recipe& r) -> FieldRef { return &r.model.moe_token_dispatcher_type; }},
      {"model.moe_flex_dispatcher_backend",
       [](Recipe& r) -> FieldRef { return &r.model.moe_flex_dispatcher_backend; }},
      {"model.moe_shared_expert_overlap",
       [](Recipe& r) -> FieldRef { return &r.model.moe_shared_expert_overlap; }},
      {"model.moe_shared_expert_intermediate_size",
       [](Recipe& r) -> FieldRef { return &r.model.moe_shared_expert_intermediate_size; }},
      {"model.moe_permute_fusion",
       [](Recipe& r) -> FieldRef { return &r.model.moe_permute_fusion; }},
      {"model.mtp_num_layers", [](Recipe& r) -> FieldRef { return &r.model.mtp_num_layers; }},
      {"model.recompute_granularity",
       [](Recipe& r) -> FieldRef { return &r.model.recompute_granularity; }},
      {"model.recompute_method", [](Recipe& r) -> FieldRef { return &r.model.recompute_method; }},
      {"model.recompute_num_layers",
       [](Recipe& r) -> FieldRef { return &r.model.recompute_num_layers; }},
      {"model.recompute_modules", [](Recipe& r) -> FieldRef { return &r.model.recompute_modules; }},
      {"model.gradient_accumulation_fusion",
       [](Recipe& r) -> FieldRef { return &r.model.gradient_accumulation_fusion; }},
      {"model.add_bias_linear", [](Recipe& r) -> FieldRef { return &r.model.add_bias_linear; }},
      {"model.add_qkv_bias", [](Recipe& r) -> FieldRef { return &r.model.add_qkv_bias; }},
      {"model.cuda_graph_impl", [](Recipe& r) -> FieldRef { return &r.model.cuda_graph_impl; }},
      {"model.cuda_graph_scope", [](Recipe& r) -> FieldRef { return &r.model.cuda_graph_scope; }},
      {"model.precision", [](Recipe& r) -> FieldRef { return &r.model.precision; }},
      {"train.global_batch_size", [](Recipe& r) -> FieldRef { return &r.train.global_batch_size; }},
      {"train.micro_batch_size", [](Recipe& r) -> FieldRef { return &r.train.micro_batch_size; }},
      {"train.max_steps", [](Recipe& r) -> FieldRef { return &r.train.max_steps; }},
      {"comm_overlap.tp_comm_overlap",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.tp_comm_overlap; }},
      {"comm_overlap.tp_comm_overlap_cfg",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.tp_comm_overlap_cfg; }},
      {"comm_overlap.tp_comm_bootstrap_backend",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.tp_comm_bootstrap_backend; }},
      {"comm_overlap.overlap_p2p_comm",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.overlap_p2p_comm; }},
      {"comm_overlap.batch_p2p_comm",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.batch_p2p_comm; }},
      {"comm_overlap.overlap_grad_reduce",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.overlap_grad_reduce; }},
      {"comm_overlap.overlap_param_gather",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.overlap_param_gather; }},
      {"comm_overlap.overlap_param_gather_with_optimizer_step",
       [](Recipe& r) -> FieldRef {
         return &r.comm_overlap.overlap_param_gather_with_optimizer_step;
       }},
      {"comm_overlap.align_param_gather",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.align_param_gather; }},
      {"comm_overlap.bucket_size",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.bucket_size; }},
      {"comm_overlap.defer_embedding_wgrad_compute",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.defer_embedding_wgrad_compute; }},
      {"comm_overlap.wgrad_deferral_limit",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.wgrad_deferral_limit; }},
      {"comm_overlap.overlap_moe_expert_parallel_comm",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.overlap_moe_expert_parallel_comm; }},
      {"comm_overlap.delay_wgrad_compute",
       [](Recipe& r) -> FieldRef { return &r.comm_overlap.delay_wgrad_compute; }},
      {"ddp.use_distributed_optimizer",
       [](Recipe& r) -> FieldRef { return &r.ddp.use_distributed_optimizer; }},
      {"ddp.overlap_grad_reduce", [](Recipe& r) -> FieldRef { return &r.ddp.overlap_grad_reduce; }},
      {"ddp.overlap_param_gather",
       [](Recipe& r) -> FieldRef { return &r.ddp.overlap_param_gather; }},
      {"ddp.align_param_gather", [](Recipe& r) -> FieldRef { return &r.ddp.align_param_gather; }},
      {"ddp.bucket_size", [](Recipe& r) -> FieldRef { return &r.ddp.bucket_size; }},
      {"optimizer.overlap_param_gather_with_optimizer_step",
       [](Recipe& r) -> FieldRef { return &r.optimizer.overlap_param_gather_with_optimizer_step; }},
      {"mixed_precision.grad_reduce_in_fp32",
       [](Recipe& r) -> FieldRef { return &r.mixed_precision.grad_reduce_in_fp32; }},
      {"mixed_precision.fp8_param_gather",
       [](Recipe& r) -> FieldRef { return &r.mixed_precision.fp8_param_gather; }},
  };
  return kKeys;
}

const BaseKey* find_base_key(std::string_view key) {
  for (const auto& k : base_keys())
    if (k.key == key) return &k;
  return nullptr;
}

// The base's text as the field's type; false when it does not fit (the value is left out).
bool parse_into(Field<int64_t>& f, std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  f.value = v;
  return true;
}
bool parse_into(Field<bool>& f, std::string_view text) {
  if (text != "true" && text != "false") return false;
  f.value = text == "true";
  return true;
}
bool parse_into(Field<std::string>& f, std::string_view text) {
  f.value = std::string(text);
  return true;
}
bool parse_into(Field<StringList>& f, std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return false;
  StringList items;
  std::string_view rest = text.substr(1, text.size() - 2);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    items.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  f.value = std::move(items);
  return true;
}
bool parse_into(Field<YamlNode>& f, std::string_view text) {
  if (text.rfind("userbuffers_", 0) != 0) return false;  // only a preset has a name
  YamlNode n;
  n.kind = YamlNode::Kind::kScalar;
  n.scalar = std::string(text);
  f.value = std::move(n);
  return true;
}

// Fills one unset field; returns false when the text does not fit it.
bool fill(Recipe& r, const BaseKey& key, std::string_view text, const SourceLoc& loc) {
  return std::visit(
      [&](auto* field) {
        if (field->is_set()) return true;
        if (!parse_into(*field, text)) return false;
        field->loc = loc;
        if constexpr (std::is_same_v<std::remove_pointer_t<decltype(field)>, Field<YamlNode>>)
          field->value->loc = loc;
        return true;
      },
      key.field(r));
}

std::optional<int64_t> base_int(const PerfRecipeBase& base, std::string_view key) {
  for (const auto& v : base.values())
    if (v.key() == key) {
      Field<int64_t> f;
      if (parse_into(f, v.value())) return f.value;
    }
  return std::nullopt;
}

// set_post_overrides: a GPU count without a recipe of its own runs `base` (another count's
// recipe) with the global batch scaled by the data-parallel sizes, unless the user set it.
void scale_global_batch(Recipe& r, const PerfRecipeBase& base, int64_t base_gpus,
                        int64_t num_gpus) {
  auto& gbs = r.train.global_batch_size;
  if (base_gpus == num_gpus || !gbs.is_set() || !gbs.loc.from_base()) return;
  auto size = [](const Field<int64_t>& f) { return f.get_or(1) > 0 ? f.get_or(1) : 1; };
  int64_t model_parallel = size(r.model.tensor_model_parallel_size) *
                           size(r.model.pipeline_model_parallel_size) *
                           size(r.model.context_parallel_size);
  int64_t base_parallel = base_int(base, "model.tensor_model_parallel_size").value_or(1) *
                          base_int(base, "model.pipeline_model_parallel_size").value_or(1) *
                          base_int(base, "model.context_parallel_size").value_or(1);
  if (base_parallel <= 0) return;
  int64_t dp = num_gpus / model_parallel, base_dp = base_gpus / base_parallel;
  if (dp != base_dp && base_dp > 0) *gbs.value = *gbs.value * dp / base_dp;
}

const PerfRecipe* named_perf_recipe(const Recipe& r) {
  if (effective_adapter_name(r.runtime) != "megatron_bridge" || !r.model.recipe.is_set() ||
      !r.cluster.gpu.is_set())
    return nullptr;
  return find_perf_recipe(*r.model.recipe.value, r.train.task.get_or("pretrain"),
                          *r.cluster.gpu.value,
                          perf_recipe_dtype(r.model.compute_dtype.get_or("bf16")));
}

// The table's facts about a recipe that are not recipe keys (RecipeBaseInfo holds them).
struct BaseFact {
  std::string_view key;
  void (*record)(RecipeBaseInfo&, std::string_view value);
};

const std::vector<BaseFact>& base_facts() {
  static const std::vector<BaseFact> kFacts{
      {"comm_overlap",
       [](RecipeBaseInfo& b, std::string_view v) { b.comm_overlap_null = v == "null"; }},
      {"pipeline_split",
       [](RecipeBaseInfo& b, std::string_view v) { b.uneven_pipeline_split = std::string(v); }},
      {"precision_aware_optimizer",
       [](RecipeBaseInfo& b, std::string_view v) { b.precision_aware_optimizer = v == "true"; }},
      {"moe_dense_layers",
       [](RecipeBaseInfo& b, std::string_view v) { b.moe_dense_layers = v == "true"; }},
  };
  return kFacts;
}

bool record_fact(RecipeBaseInfo& info, std::string_view key, std::string_view value) {
  for (const BaseFact& f : base_facts())
    if (f.key == key) {
      f.record(info, value);
      return true;
    }
  return false;
}

}  // namespace

bool fill_recipe_key(Recipe& r, std::string_view key, std::string_view text, const SourceLoc& loc) {
  const BaseKey* k = find_base_key(key);
  return k && fill(r, *k, text, loc);
}

bool is_recipe_base_fact(std::string_view key) {
  RecipeBaseInfo unused;
  return record_fact(unused, key, "");
}

std::vector<std::string_view> recipe_base_keys() {
  std::vector<std::string_view> out;
  for (const auto& k : base_keys()) out.push_back(k.key);
  return out;
}

namespace {

// Why a row's values are unknown, or "" when they are known.
std::string unknown_because(const PerfRecipeBase* base) {
  if (!base || base->needs_hub_config == "-")
    return "the recipe does not build from the release's package";
  if (!base->needs_hub_config.empty())
    return fmt::format("it reads the Hugging Face config of {}, which the table was made without",
                       base->needs_hub_config);
  return "";
}

// Every unset field of `r` from the row; `skip_sequence_parallel` where run_script.py's -tp
// decides it.
void fill_from(Recipe& r, const PerfRecipeBase& base, bool skip_sequence_parallel,
               Diagnostics& diags) {
  const SourceLoc loc{{}, 0, 0, {}, r.base.function};
  for (const auto& v : base.values()) {
    if (record_fact(r.base, v.key(), v.value())) continue;
    if (v.value() == "null" || (skip_sequence_parallel && v.key() == "model.sequence_parallel"))
      continue;
    const BaseKey* key = find_base_key(v.key());
    if (!key || !fill(r, *key, v.value(), loc)) {
      diags.warning("recipe-base-value-unread", std::string(v.key()), loc,
                    fmt::format("the recipe base {} has {} = {}, which bridge-launch cannot read "
                                "as that key; the key is left to the runtime",
                                r.base.function, v.key(), v.value()),
                    "set the key in the recipe to plan with a value of your own");
      continue;
    }
    if (std::visit([](auto* f) { return f->loc.from_base(); }, key->field(r)))
      r.base.filled.emplace_back(v.key(), v.value());
  }
}

// A dispatcher the user sets other than flex leaves the recipe's flex backend nothing to do,
// and the megatron_bridge adapter clears it as run_script.py's `--moe_flex_dispatcher_backend
// None` does (plan/runtime_adapter_megatron_bridge.cpp): the plan holds no backend either.
void drop_inactive_flex_backend(Recipe& r) {
  ModelSpec& m = r.model;
  if (!user_set(m.moe_token_dispatcher_type) || *m.moe_token_dispatcher_type.value == "flex" ||
      !m.moe_flex_dispatcher_backend.is_set() || !m.moe_flex_dispatcher_backend.loc.from_base())
    return;
  m.moe_flex_dispatcher_backend = {};
  auto& filled = r.base.filled;
  filled.erase(std::remove_if(
                   filled.begin(), filled.end(),
                   [](const auto& kv) { return kv.first == "model.moe_flex_dispatcher_backend"; }),
               filled.end());
}

// A few library recipes set sequence_parallel at tensor parallelism 1, which the release's
// config finalisation turns off (there is nothing to split): the plan holds the value the job
// runs with, so the confirmation at start finds what it planned.
void finalise_base_sequence_parallel(Recipe& r) {
  Field<bool>& sp = r.model.sequence_parallel;
  if (!sp.is_set() || !sp.loc.from_base() || !*sp.value ||
      r.model.tensor_model_parallel_size.get_or(1) > 1)
    return;
  sp.value = false;
  for (auto& [key, value] : r.base.filled)
    if (key == "model.sequence_parallel") value = "false";
}

// The megatron_bridge adapter: the flat performance recipe run_script.py builds.
void apply_performance_recipe(Recipe& r, Diagnostics& diags) {
  const PerfRecipe* perf = named_perf_recipe(r);
  if (!perf) return;  // no base; the adapter reports a recipe the release lacks
  const int64_t num_gpus = r.cluster.num_gpus.get_or(1);
  const int64_t base_gpus = perf_recipe_count_for(*perf, num_gpus);
  r.base.function = perf_recipe_function(*perf, base_gpus);
  r.base.release = "Megatron-Bridge 0.6.2";
  const PerfRecipeBase* base = find_perf_recipe_base(r.base.function);
  r.base.unknown_because = unknown_because(base);
  if (!r.base.unknown_because.empty()) return;
  // run_script.py's -tp sets sequence_parallel from tp: the recipe's own value does not reach
  // the runtime once the user sets tp.
  fill_from(r, *base, user_set(r.model.tensor_model_parallel_size), diags);
  drop_inactive_flex_backend(r);
  scale_global_batch(r, *base, base_gpus, num_gpus);
}

// The hydra adapter: the library recipe of megatron.bridge.recipes a recipe-driven training
// script builds for the model recipe, task, GPU, dtype and GPU count (the same choice as the
// conformance harness: that count, then the GPU's other counts in rising order, then any
// GPU's, then the recipe's generic function).
// The `--recipe NAME` a recipe-driven script (run_recipe.py) is given in runtime.command or
// runtime.args: the recipe the job builds, whatever model.recipe says. "" when none.
std::string script_recipe_name(const Recipe& r) {
  std::string name;
  for (const Field<StringList>* words : {&r.runtime.command, &r.runtime.args}) {
    const StringList list = words->get_or({});
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i] == "--recipe" && i + 1 < list.size()) name = list[i + 1];
      if (list[i].rfind("--recipe=", 0) == 0) name = list[i].substr(9);
    }
  }
  return name;
}

const PerfRecipeBase* library_recipe_named(std::string_view function) {
  for (const PerfRecipeBase& b : megatron_bridge_library_recipe_base())
    if (b.function == function) return &b;
  return nullptr;
}

// A `--recipe NAME` the release does not have: the job stops at start ("has no attribute").
void report_unknown_script_recipe(const Recipe& r, const std::string& name, Diagnostics& diags) {
  std::vector<std::string> names;
  for (const PerfRecipeBase& b : megatron_bridge_library_recipe_base())
    names.emplace_back(b.function);
  diags.warning("hydra-recipe-unknown", "runtime.command", r.runtime.command.loc,
                fmt::format("the script is given `--recipe {}`, which is not a library recipe of "
                            "Megatron-Bridge 0.6.2{}; bridge-launch knows no base for it, and that "
                            "release's run_recipe.py would stop at start",
                            name, did_you_mean(name, names)),
                "name one of megatron.bridge.recipes' functions, or check with --runtime-check");
}

void apply_library_recipe(Recipe& r, Diagnostics& diags) {
  const std::string named = script_recipe_name(r);
  const PerfRecipeBase* base = nullptr;
  if (!named.empty()) {
    base = library_recipe_named(named);
    if (!base) report_unknown_script_recipe(r, named, diags);
  } else if (r.model.recipe.is_set()) {
    base = find_library_recipe(
        *r.model.recipe.value, r.train.task.get_or("pretrain"), r.cluster.gpu.get_or("h100"),
        perf_recipe_dtype(r.model.compute_dtype.get_or("bf16")), r.cluster.num_gpus.get_or(1));
  }
  if (!base) return;  // a script of the user's own: nothing is known
  r.base.function = std::string(base->function);
  r.base.release = "Megatron-Bridge 0.6.2 (library recipe)";
  r.base.unknown_because = unknown_because(base);
  if (!r.base.unknown_because.empty()) return;
  fill_from(r, *base, false, diags);
  finalise_base_sequence_parallel(r);
}

}  // namespace

void apply_recipe_base(Recipe& r, Diagnostics& diags) {
  const std::string adapter = effective_adapter_name(r.runtime);
  if (adapter == "megatron_bridge") apply_performance_recipe(r, diags);
  if (adapter == "hydra") apply_library_recipe(r, diags);
}

}  // namespace bridge
