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

#include "launcher/gpu_table.h"
#include "launcher/plan/runtime_adapter.h"

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

}  // namespace

void emit_megatron_bridge(const AdapterInput& in, AdapterOutput& out, Diagnostics& diags) {
  const Recipe& r = in.recipe;
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
  for (auto& [key, value] : plan_values(in)) {
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
  for (auto& [key, value] : user_hydra_values(r, carried))
    out.args.push_back({key, "", value, key + " set in the recipe"});
  add_overlap_args(in, out);
}

}  // namespace bridge
