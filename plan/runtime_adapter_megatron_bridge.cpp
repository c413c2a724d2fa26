// The `megatron_bridge` adapter: Megatron-Bridge's scripts/performance/run_script.py flag
// set, then Hydra overrides for every other value (run_script.py applies unknown
// `key=value` arguments to its ConfigContainer; its flags win over Hydra values there).
//
// Facts about run_script.py's parser (scripts/performance/argument_parser.py): -m, -mr, -g
// and -ng are required; -g accepts h100, b200, b300, gb200, gb300, vr200, r100; -c accepts
// bf16, fp8_cs, fp8_mx, fp8_sc, nvfp4; `-vp None` means "no virtual pipeline" (an absent -vp
// keeps the model recipe's own value, which could differ from the validated plan).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "base/suggest.h"
#include "model/gpu_table.h"
#include "model/megatron_bridge_perf_recipes.h"
#include "plan/runtime_adapter.h"

namespace bridge {

const std::vector<AdapterFlag>& megatron_bridge_flags() {
  static const std::vector<AdapterFlag> kFlags{
      {"-m", "--model_family_name", "model.family"},
      {"-mr", "--model_recipe_name", "model.recipe"},
      {"-g", "--gpu", "cluster.gpu"},
      {"-c", "--compute_dtype", "model.compute_dtype"},
      {"-ng", "--num_gpus", "cluster.num_gpus"},
      {"-gn", "--gpus_per_node", "cluster.gpus_per_node"},
      {"-tp", "--tensor_model_parallel_size", "model.tensor_model_parallel_size"},
      {"-pp", "--pipeline_model_parallel_size", "model.pipeline_model_parallel_size"},
      {"-cp", "--context_parallel_size", "model.context_parallel_size"},
      {"-vp", "--virtual_pipeline_model_parallel_size",
       "model.virtual_pipeline_model_parallel_size"},
      {"-ep", "--expert_model_parallel_size", "model.expert_model_parallel_size"},
      {"-et", "--expert_tensor_parallel_size", "model.expert_tensor_parallel_size"},
      {"-gb", "--global_batch_size", "train.global_batch_size"},
      {"-mb", "--micro_batch_size", "train.micro_batch_size"},
      {"-sl", "--seq_length", "model.seq_length"},
      {"-ms", "--max_steps", "train.max_steps"},
      {"", "--task", "train.task"},
      {"", "--config_variant", "model.config_variant"},
      {"", "--cuda_graph_impl", "model.cuda_graph_impl"},
      {"", "--tokenizer_type", "train.tokenizer_type"},
      {"", "--vocab_size", "train.vocab_size"},
      {"", "--tokenizer_model", "train.tokenizer_model"},
  };
  return kFlags;
}

namespace {

const AdapterFlag& flag_for(std::string_view key) {
  for (const auto& f : megatron_bridge_flags())
    if (f.key == key) return f;
  static const AdapterFlag kNone{};
  return kNone;
}

void need(const Field<std::string>& f, const char* key, const char* flag, Diagnostics& diags) {
  if (f.is_set() && !f.value->empty() && f.value->front() == '-')
    diags.error("megatron-bridge-bad-value", key, f.loc,
                fmt::format("`{}` starts with `-`: run_script.py's parser would read it as an "
                            "option, not as the value of {}",
                            key, flag),
                "use the model family/recipe name as Megatron-Bridge spells it");
  if (f.is_set()) return;
  diags.error("megatron-bridge-needs-key", key, {},
              fmt::format("runtime adapter megatron_bridge: run_script.py requires {}, which "
                          "comes from `{}`, and it is not set",
                          flag, key),
              fmt::format("set `{}` in the recipe (not {} in runtime.args)", key, flag));
}

// run_script.py's -c from the recipe's compute dtype, else its precision.
std::optional<std::string> compute_dtype(const Recipe& r, Diagnostics& diags) {
  if (r.model.compute_dtype.is_set()) return r.model.compute_dtype.value;
  if (!r.model.precision.is_set()) return std::nullopt;
  if (*r.model.precision.value == "bf16") return std::string("bf16");
  diags.error("megatron-bridge-precision", "model.precision", r.model.precision.loc,
              fmt::format("runtime adapter megatron_bridge: run_script.py's -c has no `{}` "
                          "(it takes bf16, fp8_cs, fp8_mx, fp8_sc, nvfp4)",
                          *r.model.precision.value),
              "use precision bf16 (with model.compute_dtype for FP8), or the hydra adapter");
  return std::nullopt;
}

void check_gpu(const Topology& t, const Recipe& r, Diagnostics& diags) {
  const GpuType* g = find_gpu(t.gpu);
  if (t.gpu.empty() || (g && g->megatron_bridge_name)) return;
  std::vector<std::string> accepted;
  for (const auto& e : gpu_table())
    if (e.megatron_bridge_name) accepted.emplace_back(e.name);
  diags.error("megatron-bridge-gpu", "cluster.gpu", r.cluster.gpu.loc,
              fmt::format("runtime adapter megatron_bridge: run_script.py's -g does not accept "
                          "`{}` (it takes {})",
                          t.gpu, fmt::join(accepted, ", ")),
              "use one of those GPU types, or the hydra adapter with your own training script");
}

// run_script.py's -tp handling sets model.sequence_parallel = (tp > 1) after the Hydra
// overrides: another value in the recipe cannot reach the runtime.
void check_sequence_parallel(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const Field<bool>& sp = r.model.sequence_parallel;
  if (!user_set(sp) || *sp.value == (t.tp > 1)) return;
  diags.error("megatron-bridge-sequence-parallel", "model.sequence_parallel", sp.loc,
              fmt::format("model.sequence_parallel is {} with tensor_model_parallel_size {}, but "
                          "run_script.py sets sequence_parallel to (tp > 1) = {} after applying "
                          "the overrides, so the job would not run the validated plan",
                          *sp.value ? "true" : "false", t.tp, t.tp > 1 ? "true" : "false"),
              "remove model.sequence_parallel (run_script.py decides it from tp), or use the "
              "hydra adapter with your own training script");
}

std::string available_for(std::string_view model_recipe) {
  std::vector<std::string> have;
  for (const auto& p : megatron_bridge_perf_recipes())
    if (p.model_recipe == model_recipe)
      have.push_back(
          fmt::format("{}/{}/{} ({} GPUs)", p.task, p.gpu, p.dtype, fmt::join(p.gpu_counts, ", ")));
  return fmt::format("{}", fmt::join(have, "; "));
}

// run_script.py 0.6.x runs only the flat performance recipes the release ships; a model,
// task, GPU and dtype without one stops it at start ("No flat perf recipe found").
void check_perf_recipe(const Recipe& r, const Topology& t, Diagnostics& diags) {
  if (!r.model.recipe.is_set() || t.gpu.empty()) return;
  const std::string& mr = *r.model.recipe.value;
  const std::string task = r.train.task.get_or("pretrain");
  const std::string dtype = perf_recipe_dtype(r.model.compute_dtype.get_or("bf16"));
  if (find_perf_recipe(mr, task, t.gpu, dtype)) return;
  std::string have = available_for(mr);
  std::vector<std::string> models;
  for (const auto& p : megatron_bridge_perf_recipes()) models.emplace_back(p.model_recipe);
  std::sort(models.begin(), models.end());
  models.erase(std::unique(models.begin(), models.end()), models.end());
  diags.error("megatron-bridge-no-perf-recipe", "model.recipe", r.model.recipe.loc,
              fmt::format("runtime adapter megatron_bridge: Megatron-Bridge 0.6.2's run_script.py "
                          "has no performance recipe for {}/{}/{}/{} (it stops with \"No flat perf "
                          "recipe found\"); {}",
                          mr, task, t.gpu, dtype,
                          have.empty() ? "it has none for " + mr + did_you_mean(mr, models)
                                       : "it has " + have),
              have.empty()
                  ? std::string("use a model recipe of megatron.bridge.perf_recipes, or the "
                                "hydra adapter with a training script that builds this "
                                "model's library recipe")
                  : std::string("use one of those GPU/dtype combinations, or the hydra "
                                "adapter with your own training script"));
}

// run_script.py turns the precision-aware optimizer on for bf16 with Adam (its
// _run_training), and Megatron-Core supports that optimizer only with the distributed one.
void check_distributed_optimizer(const Recipe& r, Diagnostics& diags) {
  const Field<bool>& dist = r.ddp.use_distributed_optimizer;
  if (!dist.is_set() || *dist.value || r.model.compute_dtype.get_or("bf16") != "bf16") return;
  diags.error("megatron-bridge-needs-dist-opt", "ddp.use_distributed_optimizer", dist.loc,
              "ddp.use_distributed_optimizer is false with compute dtype bf16, but run_script.py "
              "turns on the precision-aware optimizer for bf16, which Megatron-Core refuses "
              "without the distributed optimizer (\"--use-precision-aware-optimizer only "
              "supported with distributed optimizer\")",
              "remove ddp.use_distributed_optimizer (Megatron-Bridge's recipes turn it on), or "
              "use the hydra adapter with a script that keeps the plain optimizer");
}

void check_peft_checkpoint(const Recipe& r, Diagnostics& diags) {
  if (r.train.task.get_or("pretrain") == "peft")
    require_peft_checkpoint(r, "train.task", r.train.task.loc, "train.task is peft", diags);
}

// The keys run_script.py takes only as flags, or whose flag does more than the Hydra override
// of the field: --config_variant picks the recipe, the tokenizer flags replace the whole
// tokenizer config, and --cuda_graph_impl also switches the RNG tracker CUDA graphs need
// (NVIDIA's guides set all of them as flags). Only keys the user set are sent.
void add_flag_only_keys(const Recipe& r, std::vector<std::string>& carried,
                        const std::function<void(std::string_view, std::string)>& flag) {
  for (auto [key, field] : {std::pair{"model.config_variant", &r.model.config_variant},
                            std::pair{"model.cuda_graph_impl", &r.model.cuda_graph_impl},
                            std::pair{"train.tokenizer_type", &r.train.tokenizer_type},
                            std::pair{"train.tokenizer_model", &r.train.tokenizer_model}})
    if (user_set(*field)) flag(key, *field->value), carried.emplace_back(key);
  if (user_set(r.train.vocab_size))
    flag("train.vocab_size", std::to_string(*r.train.vocab_size.value)),
        carried.emplace_back("train.vocab_size");
}

// run_script.py's `--moe_flex_dispatcher_backend None` means "the alltoall dispatcher, no flex
// backend". A dispatcher the user sets other than flex likewise leaves the recipe's flex
// backend nothing to do, so it is cleared as that flag clears it, and the job runs the
// config the guide's command builds rather than a dispatcher with a stale backend: alltoall
// is sent as that flag itself (NVIDIA's spelling), allgather as two overrides.
// The recipe base's flex backend ("" when it has none): the plan drops it under a dispatcher
// the user set (model/recipe_base.cpp), but the runtime's recipe still holds it.
std::string base_flex_backend(const Recipe& r) {
  const PerfRecipeBase* base = find_perf_recipe_base(r.base.function);
  if (!base) return "";
  for (const auto& v : base->values())
    if (v.key() == "model.moe_flex_dispatcher_backend" && v.value() != "null")
      return std::string(v.value());
  return "";
}

void clear_inactive_flex_backend(const Recipe& r, AdapterOutput& out,
                                 std::vector<std::string>& carried) {
  const ModelSpec& m = r.model;
  if (!user_set(m.moe_token_dispatcher_type) || *m.moe_token_dispatcher_type.value == "flex" ||
      user_set(m.moe_flex_dispatcher_backend))
    return;
  const std::string backend = base_flex_backend(r);
  if (backend.empty()) return;
  std::string why = fmt::format(
      "the dispatcher you set is {}: the recipe's flex backend ({}) is "
      "cleared",
      *m.moe_token_dispatcher_type.value, backend);
  if (*m.moe_token_dispatcher_type.value == "alltoall") {
    out.args.push_back(
        {"model.moe_flex_dispatcher_backend", "--moe_flex_dispatcher_backend", "None", why});
    carried.emplace_back("model.moe_token_dispatcher_type");
    return;
  }
  out.args.push_back({"model.moe_flex_dispatcher_backend", "", "null", why});
}

}  // namespace

void emit_megatron_bridge(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  const Recipe& r = in.recipe;
  check_sequence_parallel(r, in.topology, diags);
  check_perf_recipe(r, in.topology, diags);
  check_distributed_optimizer(r, diags);
  check_peft_checkpoint(r, diags);
  need(r.model.family, "model.family", "-m/--model_family_name", diags);
  need(r.model.recipe, "model.recipe", "-mr/--model_recipe_name", diags);
  need(r.cluster.gpu, "cluster.gpu", "-g/--gpu", diags);
  check_gpu(in.topology, r, diags);
  auto flag = [&](std::string_view key, std::string value) {
    out.args.push_back({std::string(key),
                        std::string(flag_for(key).short_name.empty() ? flag_for(key).long_name
                                                                     : flag_for(key).short_name),
                        std::move(value), ""});
  };
  if (r.model.family.is_set()) flag("model.family", *r.model.family.value);
  if (r.model.recipe.is_set()) flag("model.recipe", *r.model.recipe.value);
  std::vector<std::string> carried{"model.family", "model.recipe", "model.precision"};
  // run_script.py needs -g and -ng, and -gn decides the node layout; every other flag only for
  // a key the user set: the recipe base decides the rest in the runtime too.
  for (auto& [key, value] :
       user_plan_values(in, {"cluster.gpu", "cluster.num_gpus", "cluster.gpus_per_node"})) {
    if (key == "model.precision" || key == "model.compute_dtype") continue;
    carried.push_back(key);
    // -vp takes the word None for "no virtual pipeline".
    flag(key,
         key == "model.virtual_pipeline_model_parallel_size" && value == "null" ? "None" : value);
  }
  if (auto dtype = compute_dtype(r, diags)) {
    flag("model.compute_dtype", *dtype);
    carried.push_back("model.compute_dtype");
  }
  if (r.train.task.is_set()) flag("train.task", *r.train.task.value);
  add_flag_only_keys(r, carried, flag);
  clear_inactive_flex_backend(r, out, carried);
  for (auto& [key, value] : user_hydra_values(r, carried))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  add_user_overlap_args(in, out);
  add_checkpoint_args(in.recipe, out);
}

}  // namespace bridge
