#include "plan/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/numbers.h"
#include "base/suggest.h"
#include "model/executor_kind.h"
#include "model/expand.h"
#include "model/recipe_loader.h"
#include "plan/plan_confirm.h"
#include "plan/runtime_adapter.h"
#include "plan/runtime_env_defaults.h"
#include "plugins/plugin.h"

namespace bridge {

std::vector<std::string> runtime_argv(const Plan& plan) {
  std::vector<std::string> argv = plan.recipe->runtime.command.get_or({"bridge-probe"});
  argv.insert(argv.end(), plan.user_args.begin(), plan.user_args.end());
  for (const auto& a : plan.runtime_args) argv.push_back(a.text);
  return argv;
}

int64_t effective_retries(const Plan& plan) {
  const ExecutorKind* kind = find_executor_kind(plan.executor);
  if (!kind || !kind->retries) return 0;
  const Field<int64_t>* recipe_retries = kind->retries(plan.recipe->executor);
  if (recipe_retries->is_set()) return *recipe_retries->value;
  return plan.executor_changes.retries.value_or(0);
}

namespace {

std::string choose_executor(const PlanRequest& req, const Recipe& r, Diagnostics& diags) {
  if (!req.executor.empty()) {
    const auto& names = executor_names();
    if (std::find(names.begin(), names.end(), req.executor) == names.end()) {
      diags.error(
          "unknown-executor", "", {},
          fmt::format("unknown executor `{}`{}", req.executor, did_you_mean(req.executor, names)),
          fmt::format("choose one of: {}", fmt::join(executor_names(), ", ")));
      return {};
    }
    return req.executor;
  }
  return r.executor.default_executor.get_or("local");
}

// The base directory for job files of the chosen executor, `${VAR}` and `~` expanded.
std::string job_base_dir(const Recipe& r, const ExecutorKind& kind, const HostEnvironment& env,
                         Diagnostics& diags) {
  const Field<std::string>* f = &kind.job_dir(r.executor);
  // An executor without a default of its own keeps job files beside the registry, not in
  // it (<state root>/jobs holds the registry entries).
  std::string fallback =
      kind.default_job_dir.empty() ? state_root(env) + "/logs" : std::string(kind.default_job_dir);
  const std::string executor(kind.name);
  std::string raw = f->get_or(fallback);
  auto expanded = expand_path(raw, env, "executor." + executor + ".job_dir", f->loc, diags);
  if (expanded && expanded->empty())  // "" + "/" + name would put job files under /
    diags.error("empty-job-dir", "executor." + executor + ".job_dir", f->loc,
                fmt::format("executor.{}.job_dir is empty", executor),
                fmt::format("set a directory, or drop the key for the default {}", fallback));
  std::string dir = expanded.value_or(raw);
  // A job dir of the submitting host (local, Slurm) that is relative is taken from where
  // bridge-launch runs and recorded absolute, so `logs` works from anywhere later. One inside
  // the container (Kubernetes) stays as written.
  if (!kind.job_dir_in_container && !dir.empty() && dir.front() != '/')
    dir = (std::filesystem::path(env.current_directory()) / dir).lexically_normal().string();
  return dir;
}

// The recipe name as one path component: a name is free text, but `..`, `/`, `:` (it
// separates a container mount's source and target) or `,` (it separates pyxis mounts) must
// not turn the job directory into another one.
std::string job_dir_leaf(const std::string& name) {
  std::string leaf;
  for (char c : name) leaf += (c == '/' || c == ':' || c == ',' || c == '\\') ? '-' : c;
  if (leaf.empty() || leaf.front() == '.') leaf.insert(0, "_");
  return leaf;
}

// Settings of the executors the job does not run on: each section that has any is named,
// key by key (as written, in the order written), in one warning (an error under --strict), so
// nothing a user wrote is dropped without a word (e.g. executor.slurm.container_mounts on a
// Kubernetes run). Read from where the recipe's inputs were written, so a key a new executor
// section gains is covered without a list here.
void report_other_executor_settings(const Recipe& r, const std::string& executor,
                                    Diagnostics& diags) {
  struct Section {
    std::vector<std::pair<SourceLoc, std::string>> keys;  // where written, "executor.x.key"
  };
  std::map<std::string, Section> set;
  for (const auto& [input, loc] : r.input_locations) {
    // "executor.<section>.<key>[.deeper]": the section and its key.
    if (input.rfind("executor.", 0) != 0) continue;
    size_t dot = input.find('.', 9);
    if (dot == std::string::npos) continue;  // executor.default
    std::string section = input.substr(9, dot - 9);
    if (section == executor || !find_executor_kind(section)) continue;
    std::string key = input.substr(0, input.find('.', dot + 1));
    auto& keys = set[section].keys;
    if (std::none_of(keys.begin(), keys.end(), [&](const auto& k) { return k.second == key; }))
      keys.emplace_back(loc, key);
  }
  for (auto& [section, found] : set) {
    auto& keys = found.keys;
    std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
      return std::pair(a.first.line, a.first.column) < std::pair(b.first.line, b.first.column);
    });
    std::string list;
    for (const auto& [loc, key] : keys) list += (list.empty() ? "" : ", ") + key;
    diags.dropped("executor-setting-not-applied", "executor." + section, keys.front().first,
                  fmt::format("{} {} set, but the job runs on the {} executor: not applied", list,
                              keys.size() == 1 ? "is" : "are", executor),
                  fmt::format("drop {}, or run with --executor {}",
                              keys.size() == 1 ? "it" : "them", section));
  }
}

// runtime.progress_rank: last | first | N (checked against the ranks here, where they are
// known). Unset: Megatron prints its iteration lines on the last rank (print_rank_last);
// bridge-probe and other runtimes on rank 0.
int resolve_progress_rank(const Recipe& r, const Topology& t, const std::string& adapter,
                          Diagnostics& diags) {
  int last = static_cast<int>(std::max<int64_t>(1, t.num_gpus) - 1);
  const auto& f = r.runtime.progress_rank;
  if (!f.is_set()) return adapter == "megatron_bridge" ? last : 0;
  if (*f.value == "last") return last;
  if (*f.value == "first") return 0;
  auto rank = parse_decimal<int>(*f.value);
  if (rank && *rank >= 0 && *rank <= last) return *rank;
  if (rank)
    diags.error(
        "bad-value", "runtime.progress_rank", f.loc,
        fmt::format("`runtime.progress_rank` is {}, but the job has ranks 0..{}", *rank, last),
        "write a rank of this job, or `last`");
  return last;
}

// Says what the plan is based on: the recipe base and how many keys it decided, or why no
// base is known (then unset keys are left to the runtime, and nothing checks them here).
void report_recipe_base(const Recipe& r, Diagnostics& diags) {
  const RecipeBaseInfo& b = r.base;
  if (b.function.empty()) return;
  if (!b.unknown_because.empty()) {
    diags.warning("recipe-base-unknown", "model.recipe", r.model.recipe.loc,
                  fmt::format("the job runs {}'s {}, but its values are not known here ({}): "
                              "the keys the recipe leaves unset are left to the runtime and "
                              "the rules that read them are unverified",
                              b.release, b.function, b.unknown_because),
                  "set the keys the overlap rules read (layout, model shape, comm_overlap) in "
                  "the recipe, or run `--runtime-check` with the job's Python");
    return;
  }
  diags.info("recipe-base", "model.recipe", r.model.recipe.loc,
             fmt::format("based on {}'s {}: {} key{} the recipe leaves unset keep that recipe's "
                         "value (`plan` shows each value's source)",
                         b.release, b.function, b.filled.size(), b.filled.size() == 1 ? "" : "s"));
}

// checkpoint: (docs/long-jobs.md): a directory every rank of every attempt finds, saved often
// enough that an attempt has something to resume from. Where the executor's ranks see it (a
// container mount, a pod volume) the executor checks.
void check_checkpoint(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const CheckpointSpec& c = r.checkpoint;
  if (!c.is_set()) {
    for (const SourceLoc* loc : {&c.interval.loc, &c.keep.loc, &c.async_save.loc})
      if (loc->has_position() || loc->from_override()) {
        diags.error("checkpoint-dir-missing", "checkpoint.dir", *loc,
                    "the checkpoint section sets how to save but not where: checkpoint.dir is "
                    "not set",
                    "set checkpoint.dir to a directory on storage every node shares");
        return;
      }
    return;
  }
  const std::string& dir = *c.dir.value;
  if (dir.empty() || dir[0] != '/')
    diags.error("checkpoint-dir-relative", "checkpoint.dir", c.dir.loc,
                fmt::format("checkpoint.dir `{}` is not an absolute path: each rank would "
                            "resolve it against its own working directory",
                            dir),
                "write an absolute path on storage every node shares (e.g. under /lustre)");
  else if (t.nodes > 1 && on_node_local_storage(dir))
    diags.error("checkpoint-dir-node-local", "checkpoint.dir", c.dir.loc,
                fmt::format("checkpoint.dir `{}` is on node-local storage on most clusters: "
                            "each of the job's {} nodes would hold part of every checkpoint, "
                            "and an attempt on other nodes would find none to resume from",
                            dir, t.nodes),
                "set checkpoint.dir to a shared file system (e.g. under /lustre or your home "
                "directory)");
  if (!c.interval.is_set())
    diags.error("checkpoint-interval-missing", "checkpoint.interval", c.dir.loc,
                "checkpoint.dir is set without checkpoint.interval: the runtime would save only "
                "when training ends, and an attempt that fails before then resumes from nothing",
                "set checkpoint.interval to the iterations between saves (e.g. 500)");
}

// Plans `plan.recipe` (loaded) into `plan`. The plan is filled in place, not returned: it holds
// the 20 KB recipe, and each copy of either costs stack pages and a move (docs/performance.md).
void run_pipeline(Plan& plan, const PlanRequest& req, const HostEnvironment& host_env,
                  const std::vector<PluginInfo>& plugins, Diagnostics& diags) {
  if (!plan.recipe) return;
  const Recipe& r = *plan.recipe;
  plan.job = JobSpec{r.file, r.name, r.cluster, r.runtime, r.executor, {}, r.checkpoint};
  for (const auto& e : r.env) plan.job.env_locations.emplace(e.name, e.loc);
  plan.executor = choose_executor(req, r, diags);
  // --template replaces the sbatch script; other executors have nothing it could replace,
  // and ignoring an explicit flag would silently drop the user's request.
  const ExecutorKind* kind = find_executor_kind(plan.executor);
  if (req.template_from_cli && kind && !kind->renders_batch_script)
    diags.error("template-not-used", "", {},
                fmt::format("--template replaces the sbatch script, but the {} executor renders "
                            "none",
                            plan.executor),
                "drop --template, or use --executor slurm");
  if (!plan.executor.empty()) report_other_executor_settings(r, plan.executor, diags);
  if (kind && !kind->ranks_in_image && r.runtime.container_image.is_set())
    diags.dropped("executor-setting-not-applied", "runtime.container_image",
                  r.runtime.container_image.loc,
                  fmt::format("runtime.container_image is set, but the {} executor runs the "
                              "ranks in this machine's environment, not in a container: not "
                              "applied",
                              plan.executor),
                  "drop it, or run with an executor that starts containers (--executor slurm "
                  "or kubernetes)");
  plan.topology = compute_topology(r, diags);
  if (!plan.topology) return;
  plan.overlap = resolve_comm_overlap(r, *plan.topology, diags);
  check_checkpoint(r, *plan.topology, diags);
  if (!kind) return;  // no executor to plan for (reported by choose_executor)
  plan.job_dir = job_base_dir(r, *kind, host_env, diags) + "/" + job_dir_leaf(*r.name.value);

  PluginContext ctx{r, *plan.topology, *plan.overlap, plan.executor, plan.job_dir, host_env};
  LaunchContributions launch = run_plugins(plugins, ctx, req.cli_env, diags);
  plan.env = std::move(launch.env);
  if (kind->add_network_env) kind->add_network_env(r.executor, *plan.topology, plan.env, diags);
  add_recipe_base_env(r, *plan.topology, plan.env);
  report_recipe_base(r, diags);
  // Secrets that only the plan knows (-E for a secret name, ${VAR} of a secret entry, a
  // tracker's API key from the environment): no message may show them either.
  for (const auto& v : plan.env.vars)
    if (v.secret) diags.add_secret(v.value);
  AdaptedRuntime runtime = adapt_runtime({r, *plan.topology, *plan.overlap}, diags);
  plan.adapter = std::move(runtime.adapter);
  plan.progress_rank = resolve_progress_rank(r, *plan.topology, plan.adapter, diags);
  plan.watchdog = resolve_watchdog(r.runtime.watchdog, plan.adapter);
  plan.binding = resolve_binding(r, *plan.topology, *kind, diags);
  plan.nvlink = resolve_nvlink_placement(r, *plan.topology, *kind);
  plan.code = resolve_code_plan(r, *kind, plan.job_dir, plan.adapter, host_env, diags);
  plan.runtime_env = runtime_env_defaults(r, *plan.topology, plan.adapter, plan.env, diags);
  plan.user_args = std::move(runtime.args);
  plan.runtime_args = std::move(runtime.adapter_args);
  plan.expected_plan = std::move(runtime.expected_plan);
  for (auto& a : launch.runtime_args) plan.runtime_args.push_back(std::move(a));
  plan.setup_steps = std::move(launch.setup_steps);
  plan.executor_changes = std::move(launch.executor);
  decide_plan_confirmation(plan, diags);
  plan.complete = !diags.has_errors();
}

}  // namespace

Plan build_plan(const PlanRequest& request, const HostEnvironment& host_env,
                const std::vector<PluginInfo>& plugins, Diagnostics& diags) {
  std::vector<PluginEntry> seen;
  Plan plan;
  plan.recipe = load_recipe(request.recipe_path, request.overrides, diags, &seen);
  // A recipe that did not load still has its plugin names checked: every error in one pass.
  if (!plan.recipe) check_plugin_names(plugins, seen, diags);
  run_pipeline(plan, request, host_env, plugins, diags);
  return plan;
}

Plan build_plan_from_text(const std::string& text, const PlanRequest& request,
                          const HostEnvironment& host_env, const std::vector<PluginInfo>& plugins,
                          Diagnostics& diags) {
  std::vector<PluginEntry> seen;
  Plan plan;
  plan.recipe = load_recipe_text(text, request.recipe_path, request.overrides, diags, &seen);
  if (!plan.recipe) check_plugin_names(plugins, seen, diags);
  run_pipeline(plan, request, host_env, plugins, diags);
  return plan;
}

}  // namespace bridge
