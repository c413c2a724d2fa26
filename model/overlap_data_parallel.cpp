// Data-parallel overlap (rules D1-D3): what reaches the DDP and optimizer configs.
//
// The runtime only touches ddp/optimizer when the distributed optimizer is on, and then it
// OVERWRITES their overlap fields with the resolved overlap values. Both halves surprise
// users: comm_overlap DP fields silently do nothing without the distributed optimizer, and
// ddp.* values silently lose to the rules with it. Both get a "dropped" warning here.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <type_traits>

#include "model/megatron_bridge_perf_recipes.h"
#include "model/overlap.h"
#include "model/overlap_prerequisites.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

constexpr int64_t kDefaultBucketSize = 134217728;  // 128 Mi parameters, not bytes

template <class T>
void set_rule(Resolved<T>& r, std::optional<T> value, const char* rule) {
  r = Resolved<T>{std::move(value), ValueSource::kRule, rule};
}

template <class T>
std::string shown(const std::optional<T>& v) {
  if (!v) return "null";
  if constexpr (std::is_same_v<T, bool>) return *v ? "true" : "false";
  return std::to_string(*v);
}

// D1 (dp > 1) / D2 (dp == 1), then D3: the user's comm_overlap values win.
void resolve_fields(const Recipe& r, const Topology& t, ResolvedOverlap& o) {
  bool dp = t.dp > 1;
  const char* rule = dp ? "D1" : "D2";
  set_rule(o.bucket_size, dp ? std::optional<int64_t>(kDefaultBucketSize) : std::nullopt, rule);
  set_rule(o.overlap_grad_reduce, std::optional<bool>(dp), rule);
  set_rule(o.overlap_param_gather, std::optional<bool>(dp), rule);
  // Aligning param all-gathers across virtual stages only matters with interleaving.
  set_rule(o.align_param_gather, std::optional<bool>(dp && t.pp > 1 && t.vp() > 1), rule);
  set_rule(o.overlap_param_gather_with_optimizer_step, std::optional<bool>(false), rule);
  const CommOverlapSpec& u = r.comm_overlap;
  using overlap_detail::take_user;
  take_user(o.bucket_size, u.bucket_size, "D3");
  take_user(o.overlap_grad_reduce, u.overlap_grad_reduce, "D3");
  take_user(o.overlap_param_gather, u.overlap_param_gather, "D3");
  take_user(o.align_param_gather, u.align_param_gather, "D3");
  take_user(o.overlap_param_gather_with_optimizer_step, u.overlap_param_gather_with_optimizer_step,
            "D3");
}

// A ddp./optimizer. value the user wrote that the runtime will overwrite.
template <class T>
void warn_if_overwritten(const Field<T>& mine, const Resolved<T>& resolved, const char* section,
                         const char* field, Diagnostics& diags) {
  if (!mine.is_set() || mine.value == resolved.value) return;
  diags.dropped(
      "ddp-field-overridden", fmt::format("{}.{}", section, field), mine.loc,
      fmt::format("`{}.{}: {}` is replaced by {} (rule {}): with the distributed optimizer the "
                  "overlap config decides this field",
                  section, field, shown(mine.value), shown(resolved.value), resolved.rule),
      fmt::format("set `comm_overlap.{}: {}` instead (user values there win), or remove `{}.{}`",
                  field, shown(mine.value), section, field));
}

void apply_distributed_optimizer(const Recipe& r, const Topology& t, OverlapResolution& out,
                                 Diagnostics& diags) {
  ResolvedOverlap& o = out.overlap;
  resolve_fields(r, t, o);
  out.ddp.overlap_grad_reduce = o.overlap_grad_reduce.value;
  out.ddp.overlap_param_gather = o.overlap_param_gather.value;
  out.ddp.align_param_gather = o.align_param_gather.value;
  out.ddp.bucket_size = o.bucket_size.value;
  out.optimizer.overlap_param_gather_with_optimizer_step =
      o.overlap_param_gather_with_optimizer_step.value;
  const DdpSpec& d = r.ddp;
  warn_if_overwritten(d.overlap_grad_reduce, o.overlap_grad_reduce, "ddp", "overlap_grad_reduce",
                      diags);
  warn_if_overwritten(d.overlap_param_gather, o.overlap_param_gather, "ddp", "overlap_param_gather",
                      diags);
  warn_if_overwritten(d.align_param_gather, o.align_param_gather, "ddp", "align_param_gather",
                      diags);
  warn_if_overwritten(d.bucket_size, o.bucket_size, "ddp", "bucket_size", diags);
  warn_if_overwritten(r.optimizer.overlap_param_gather_with_optimizer_step,
                      o.overlap_param_gather_with_optimizer_step, "optimizer",
                      "overlap_param_gather_with_optimizer_step", diags);
}

// Without the distributed optimizer a comm_overlap DP value reaches nothing: the resolved
// field stays null, sourced to rule "D", and the user hears about it.
template <class T>
void ignore_user_field(const Field<T>& user, Resolved<T>& resolved, const char* field,
                       Diagnostics& diags) {
  if (!user.is_set()) return;
  set_rule(resolved, std::optional<T>(), "D");
  diags.dropped("dp-overlap-ignored", fmt::format("comm_overlap.{}", field), user.loc,
                fmt::format("`comm_overlap.{}` has no effect without the distributed optimizer: "
                            "data-parallel overlap is applied only when "
                            "ddp.use_distributed_optimizer is true",
                            field),
                fmt::format("set `ddp.use_distributed_optimizer: true`, or remove "
                            "`comm_overlap.{}`",
                            field));
}

// D4: without the distributed optimizer Megatron-Bridge leaves the DDP config alone, so the
// job gets the user's ddp.* values and otherwise its recipe's: every 0.6.2 pretrain recipe
// sets overlap_grad_reduce and overlap_param_gather true and leaves the aligned and
// optimizer-step gathers off (the conformance suite compares these with the release). They
// are shown, not sent (overlap_runtime_args skips rule D4): the runtime already holds them.
void recipe_ddp_values(const Recipe& r, OverlapResolution& out) {
  ResolvedOverlap& o = out.overlap;
  auto pick = [](Resolved<bool>& resolved, const Field<bool>& user, bool recipe) {
    resolved = user.is_set() ? Resolved<bool>{user.value, ValueSource::kUser, "D4"}
                             : Resolved<bool>{recipe, ValueSource::kDefault, "D4"};
  };
  pick(o.overlap_grad_reduce, r.ddp.overlap_grad_reduce, true);
  pick(o.overlap_param_gather, r.ddp.overlap_param_gather, true);
  pick(o.align_param_gather, r.ddp.align_param_gather, false);
  pick(o.overlap_param_gather_with_optimizer_step,
       r.optimizer.overlap_param_gather_with_optimizer_step, false);
  if (r.ddp.bucket_size.is_set())
    o.bucket_size = Resolved<int64_t>{r.ddp.bucket_size.value, ValueSource::kUser, "D4"};
}

void pass_through(const Recipe& r, OverlapResolution& out, Diagnostics& diags) {
  out.ddp.overlap_grad_reduce = r.ddp.overlap_grad_reduce.value;
  out.ddp.overlap_param_gather = r.ddp.overlap_param_gather.value;
  out.ddp.align_param_gather = r.ddp.align_param_gather.value;
  out.ddp.bucket_size = r.ddp.bucket_size.value;
  out.optimizer.overlap_param_gather_with_optimizer_step =
      r.optimizer.overlap_param_gather_with_optimizer_step.value;
  const CommOverlapSpec& u = r.comm_overlap;
  ResolvedOverlap& o = out.overlap;
  ignore_user_field(u.overlap_grad_reduce, o.overlap_grad_reduce, "overlap_grad_reduce", diags);
  ignore_user_field(u.overlap_param_gather, o.overlap_param_gather, "overlap_param_gather", diags);
  ignore_user_field(u.overlap_param_gather_with_optimizer_step,
                    o.overlap_param_gather_with_optimizer_step,
                    "overlap_param_gather_with_optimizer_step", diags);
  ignore_user_field(u.align_param_gather, o.align_param_gather, "align_param_gather", diags);
  ignore_user_field(u.bucket_size, o.bucket_size, "bucket_size", diags);
  // The pretrain recipes' values (the conformance suite's); fine-tuning recipes may differ.
  if (runtime_is_megatron_bridge(r.runtime) && r.train.task.get_or("pretrain") == "pretrain")
    recipe_ddp_values(r, out);
}

// R1: run_script.py (adapter megatron_bridge) builds the job from a performance recipe of
// another GPU count when there is none for -ng, and then sets
// overlap_param_gather_with_optimizer_step on whenever dp > 1, pp > 1 and vpp > 1, except for
// MXFP8 and NVFP4 (its set_post_overrides, after the Hydra overrides): the plan shows that
// value, and refuses a `false` it would overwrite.
void apply_run_script_post_overrides(const Recipe& r, const Topology& t, OverlapResolution& out,
                                     Diagnostics& diags) {
  if (effective_adapter_name(r.runtime) != "megatron_bridge" || !r.model.recipe.is_set()) return;
  const std::string dtype = r.model.compute_dtype.get_or("bf16");
  const PerfRecipe* recipe = find_perf_recipe(
      *r.model.recipe.value, r.train.task.get_or("pretrain"), t.gpu, perf_recipe_dtype(dtype));
  if (!recipe) return;  // the adapter refuses the plan (megatron-bridge-no-perf-recipe)
  const auto& counts = recipe->gpu_counts;
  if (std::find(counts.begin(), counts.end(), t.num_gpus) != counts.end()) return;
  if (t.dp <= 1 || t.pp <= 1 || t.vp() <= 1 || dtype == "fp8_mx" || dtype == "nvfp4") return;
  // Only a value the user set: the recipe base's own is the base recipe's, which
  // set_post_overrides replaces in the runtime too.
  const Field<bool>& mine = user_set(r.comm_overlap.overlap_param_gather_with_optimizer_step)
                                ? r.comm_overlap.overlap_param_gather_with_optimizer_step
                                : r.optimizer.overlap_param_gather_with_optimizer_step;
  if (user_set(mine) && !*mine.value)
    diags.error(
        "megatron-bridge-post-override", "comm_overlap.overlap_param_gather_with_optimizer_step",
        mine.loc,
        fmt::format("overlap_param_gather_with_optimizer_step is false, but Megatron-Bridge "
                    "has no performance recipe for {} GPUs ({}), so run_script.py starts "
                    "from another GPU count's and turns it on after the overrides (dp {}, "
                    "pp {}, vpp {})",
                    t.num_gpus, fmt::join(counts, ", "), t.dp, t.pp, t.vp()),
        fmt::format("use a GPU count that has a recipe ({}), or remove the setting (the "
                    "job then runs with it on)",
                    fmt::join(counts, ", ")));
  out.overlap.overlap_param_gather_with_optimizer_step =
      Resolved<bool>{true, ValueSource::kRule, "R1"};
  out.optimizer.overlap_param_gather_with_optimizer_step = true;
}

}  // namespace

namespace overlap_detail {

void resolve_data_parallel(const Recipe& r, const Topology& t, OverlapResolution& out,
                           Diagnostics& diags) {
  // Unset: Megatron-Bridge's recipes turn the distributed optimizer on (0.6.2: every
  // pretrain recipe, GPT-175B and Qwen3 MoE among them; the conformance suite checks it),
  // Megatron-Core's DistributedDataParallelConfig leaves it off (the probe emulates that).
  // The D1 rows of the prerequisite table decide, as advice reads them: data-parallel overlap
  // is applied when every row holds.
  out.ddp.use_distributed_optimizer = distributed_optimizer_on(r, t);
  bool every_row_holds = true;
  for (const OverlapFeature* feature : {&kDpGradReduceFeature, &kDpParamGatherFeature})
    for (const OverlapPrerequisite* row : prerequisites_of(*feature))
      every_row_holds =
          every_row_holds && prerequisite_state(*row, r, t) == PrerequisiteState::kHolds;
  if (every_row_holds)
    apply_distributed_optimizer(r, t, out, diags);
  else
    pass_through(r, out, diags);
  apply_run_script_post_overrides(r, t, out, diags);
}

}  // namespace overlap_detail

}  // namespace bridge
