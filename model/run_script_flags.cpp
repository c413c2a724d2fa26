#include "model/run_script_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "model/recipe_base.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

using Settings = std::vector<RunScriptKeySetting>;

// run_script.py's bool_arg: true/1/t/yes/y and false/0/f/no/n, any case.
std::optional<bool> bool_arg(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* yes : {"true", "1", "t", "yes", "y"})
    if (lower == yes) return true;
  for (const char* no : {"false", "0", "f", "no", "n"})
    if (lower == no) return false;
  return std::nullopt;
}

// A comma-separated flag value as a recipe list: "attn,mlp" -> "[attn,mlp]".
std::string as_list(std::string_view text) { return fmt::format("[{}]", text); }

// One flag: its spellings and what run_script.py sets from its value.
struct RunScriptFlag {
  std::string_view short_name;  // "" when the flag has only a long form
  std::string_view long_name;
  Settings (*sets)(std::string_view value);
};

// The flags that set a recipe key (the ones the adapter emits for a user-set key, and those
// it never emits), as run_script.py applies them.
const std::vector<RunScriptFlag>& run_script_flags() {
  static const std::vector<RunScriptFlag> kFlags{
      {"-tp", "--tensor_model_parallel_size",
       [](std::string_view v) {
         return Settings{{"model.tensor_model_parallel_size", std::string(v)}};
       }},
      {"-pp", "--pipeline_model_parallel_size",
       [](std::string_view v) {
         return Settings{{"model.pipeline_model_parallel_size", std::string(v)}};
       }},
      {"-cp", "--context_parallel_size",
       [](std::string_view v) {
         return Settings{{"model.context_parallel_size", std::string(v)}};
       }},
      {"-ep", "--expert_model_parallel_size",
       [](std::string_view v) {
         return Settings{{"model.expert_model_parallel_size", std::string(v)}};
       }},
      {"-et", "--expert_tensor_parallel_size",
       [](std::string_view v) {
         return Settings{{"model.expert_tensor_parallel_size", std::string(v)}};
       }},
      {"-gb", "--global_batch_size",
       [](std::string_view v) {
         return Settings{{"train.global_batch_size", std::string(v)}};
       }},
      {"-mb", "--micro_batch_size",
       [](std::string_view v) {
         return Settings{{"train.micro_batch_size", std::string(v)}};
       }},
      {"-sl", "--seq_length",
       [](std::string_view v) {
         return Settings{{"model.seq_length", std::string(v)}};
       }},
      {"-ms", "--max_steps",
       [](std::string_view v) {
         return Settings{{"train.max_steps", std::string(v)}};
       }},
      {"", "--hidden_size",
       [](std::string_view v) {
         return Settings{{"model.hidden_size", std::string(v)}};
       }},
      {"", "--num_layers",
       [](std::string_view v) {
         return Settings{{"model.num_layers", std::string(v)}};
       }},
      {"", "--cuda_graph_impl",
       [](std::string_view v) {
         return Settings{{"model.cuda_graph_impl", std::string(v)}};
       }},
      {"", "--cuda_graph_scope",
       [](std::string_view v) {
         return Settings{{"model.cuda_graph_scope", as_list(v)}};
       }},
      {"", "--recompute_modules",
       [](std::string_view v) {
         return Settings{{"model.recompute_modules", as_list(v)}};
       }},
      // _set_recompute_overrides: a layer count means full recompute by block.
      {"-rl", "--recompute_num_layers",
       [](std::string_view v) {
         return Settings{{"model.recompute_granularity", "full"},
                         {"model.recompute_method", "block"},
                         {"model.recompute_num_layers", std::string(v)}};
       }},
      // _set_moe_a2a_overlap_overrides: true turns EP overlap and delayed wgrad on and the
      // shared-expert overlap off; false does nothing.
      {"", "--moe_a2a_overlap",
       [](std::string_view v) {
         if (bool_arg(v) != true) return Settings{};
         return Settings{{"comm_overlap.overlap_moe_expert_parallel_comm", "true"},
                         {"comm_overlap.delay_wgrad_compute", "true"},
                         {"model.moe_shared_expert_overlap", "false"}};
       }},
      // None: the alltoall dispatcher; deepep or hybridep: apply_flex_dispatcher_backend (the
      // flex dispatcher with that backend, no shared-expert overlap).
      {"", "--moe_flex_dispatcher_backend",
       [](std::string_view v) {
         if (v == "None") return Settings{{"model.moe_token_dispatcher_type", "alltoall"}};
         if (v != "deepep" && v != "hybridep") return Settings{};
         return Settings{{"model.moe_token_dispatcher_type", "flex"},
                         {"model.moe_flex_dispatcher_backend", std::string(v)},
                         {"model.moe_shared_expert_overlap", "false"}};
       }},
  };
  return kFlags;
}

const RunScriptFlag* find_flag(std::string_view name) {
  for (const auto& f : run_script_flags())
    if (name == f.long_name || (!f.short_name.empty() && name == f.short_name)) return &f;
  return nullptr;
}

}  // namespace

std::vector<RunScriptFlagUse> run_script_flag_uses(const std::vector<std::string>& args) {
  std::vector<RunScriptFlagUse> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') continue;
    size_t eq = a.find('=');
    const RunScriptFlag* f = find_flag(std::string_view(a).substr(0, eq));
    if (!f) continue;
    std::string value, written = a;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
      written += " " + value;
    } else {
      continue;  // no value: run_script.py's parser refuses it
    }
    out.push_back({written, f->sets(value)});
  }
  return out;
}

void read_run_script_flags(Recipe& r, Diagnostics& diags) {
  if (effective_adapter_name(r.runtime) != "megatron_bridge" || !r.runtime.args.is_set()) return;
  const SourceLoc& loc = r.runtime.args.loc;
  for (const RunScriptFlagUse& use : run_script_flag_uses(*r.runtime.args.value))
    for (const RunScriptKeySetting& s : use.sets)
      if (!fill_recipe_key(r, s.key, s.value, loc))
        diags.warning("runtime-arg-unread", "runtime.args", loc,
                      fmt::format("runtime.args `{}` sets {} to {}, which bridge-launch cannot "
                                  "read as that key, so no rule checks it",
                                  use.written, s.key, s.value),
                      fmt::format("set {} in the recipe instead", s.key));
}

}  // namespace bridge
