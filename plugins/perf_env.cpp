// perf_env: the launch environment that the resolved overlap config and topology need.
// Rules: docs/plugins.md and the perf_env section of the plugins spec.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <vector>

#include "base/shell_quote.h"
#include "model/megatron_bridge_perf_recipes.h"
#include "plugins/builtin_plugins.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

constexpr const char* kName = "perf_env";

struct PerfEnvOptions {
  bool enable_layernorm_sm_margin = true;
  std::optional<int64_t> layernorm_sm_margin;
  std::optional<int64_t> nccl_pp_comm_chunksize;
  bool enable_manual_gc = true;
  int64_t manual_gc_interval = 100;
  bool enable_vboost = false;
  std::optional<int64_t> lock_gpu_freq;
  bool deterministic = false;
};

PerfEnvOptions read_options(PluginOptions& o) {
  PerfEnvOptions p;
  p.enable_layernorm_sm_margin = o.get_bool("enable_layernorm_sm_margin", true);
  p.layernorm_sm_margin = o.opt_int("layernorm_sm_margin", 0);
  p.nccl_pp_comm_chunksize = o.opt_int("nccl_pp_comm_chunksize", 2);
  p.enable_manual_gc = o.get_bool("enable_manual_gc", true);
  p.manual_gc_interval = o.get_int("manual_gc_interval", 100, 1);
  p.enable_vboost = o.get_bool("enable_vboost", false);
  p.lock_gpu_freq = o.opt_int("lock_gpu_freq", 1);
  p.deterministic = o.get_bool("deterministic", false);
  o.finish();
  return p;
}

bool heavy_flex_backend(const std::string& backend) {
  return backend == "deepep" || backend == "hybridep";
}

struct Decision {
  int64_t value;
  std::string reason;
};

Decision max_connections(const PluginContext& ctx) {
  const Topology& t = ctx.topology;
  std::string backend = effective_flex_backend(ctx.recipe);
  Decision d{8, "default 8 (no rule raises or lowers it)"};
  if (heavy_flex_backend(backend))
    d = {32, fmt::format("32: flex backend {} runs many concurrent communication streams; avoid "
                         "stream serialization",
                         backend)};
  bool tp_or_cp = t.tp > 1 || t.cp > 1;
  if (is_blackwell_or_newer(t)) {
    if (tp_or_cp && (t.dp > 1 || t.pp > 1))
      d = {32, fmt::format("32 on {} with tp/cp > 1 and dp/pp > 1: avoid stream serialization "
                           "between the parallel groups' communication",
                           t.gpu)};
  } else if (tp_or_cp && !a2a_overlap_resolved_on(ctx.overlap)) {
    d = {1, fmt::format("1 on {} (Hopper or older) with tp/cp > 1 and a2a overlap off: keep host "
                        "launch order so the communication kernel is scheduled before the "
                        "persistent GEMM it overlaps with",
                        t.gpu.empty() ? "an unnamed GPU" : t.gpu)};
  }
  return d;
}

void add_margins(const PluginContext& ctx, const PerfEnvOptions& p, PluginContribution& out) {
  if (!p.enable_layernorm_sm_margin) return;
  std::string backend = effective_flex_backend(ctx.recipe);
  int64_t margin = heavy_flex_backend(backend) ? 20 : 16;
  std::string why =
      heavy_flex_backend(backend)
          ? fmt::format("20: flex backend {} needs more SMs for communication", backend)
          : "16: SMs left free for the overlapping communication kernels";
  if (p.layernorm_sm_margin) {
    margin = *p.layernorm_sm_margin;
    why = "layernorm_sm_margin set in the plugin options";
  }
  add_env(out, "NVTE_FWD_LAYERNORM_SM_MARGIN", std::to_string(margin), why);
  add_env(out, "NVTE_BWD_LAYERNORM_SM_MARGIN", std::to_string(margin), why);
}

void add_chunksize(const PluginContext& ctx, PluginOptions& o, const PerfEnvOptions& p,
                   PluginContribution& out) {
  if (!p.nccl_pp_comm_chunksize) return;
  if (ctx.topology.pp <= 1) {
    o.diags().info("option-unused", o.path("nccl_pp_comm_chunksize"),
                   o.loc("nccl_pp_comm_chunksize"),
                   "nccl_pp_comm_chunksize has no effect with pp = 1 (no pipeline communication)");
    return;
  }
  add_env(out, "NCCL_P2P_NET_CHUNKSIZE", std::to_string(*p.nccl_pp_comm_chunksize),
          fmt::format("nccl_pp_comm_chunksize with pp = {}: chunk size of pipeline P2P transfers",
                      ctx.topology.pp));
}

void add_hybridep(const PluginContext& ctx, PluginOptions& o, PluginContribution& out) {
  if (effective_flex_backend(ctx.recipe) != "hybridep") return;
  const Topology& t = ctx.topology;
  int domain = nvlink_domain_size(t);
  if (domain == 0) {
    o.diags().warning("hybridep-unknown-nvlink", o.plugin_path(), o.plugin_loc(),
                      fmt::format("NVLink domain of gpu `{}` is unknown; HybridEP variables not "
                                  "set",
                                  t.gpu),
                      "set cluster.gpu, or set NVLINK_DOMAIN_SIZE etc. under env:");
    return;
  }
  if (domain == 72 && t.ep > 72) {
    const auto& f = ctx.recipe.model.expert_model_parallel_size;
    o.diags().error(
        "hybridep-ep-too-large", "model.expert_model_parallel_size",
        f.loc.has_position() || f.loc.from_override() ? f.loc : o.plugin_loc(),
        fmt::format("HybridEP on an NVLink-72 system ({}) needs ep <= 72, got {}", t.gpu, t.ep),
        "lower expert_model_parallel_size, or use the deepep backend");
    return;
  }
  std::string why = fmt::format("flex backend hybridep on an NVLink-{} system ({})", domain, t.gpu);
  int64_t ranks = domain == 8 ? std::min<int64_t>(t.ep, 8) : t.ep;
  add_env(out, "NVLINK_DOMAIN_SIZE", std::to_string(domain), why);
  add_env(out, "USE_MNNVL", domain == 72 ? "1" : "0", why);
  add_env(out, "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN", std::to_string(ranks),
          why + (domain == 8 ? ": min(ep, 8)" : ": ep"));
}

void add_determinism(const PluginContext& ctx, PluginOptions& o, PluginContribution& out) {
  std::string why = "deterministic: bit-exact reruns";
  add_env(out, "NCCL_ALGO", "Ring", why + " (fixed NCCL reduction order)");
  add_env(out, "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0", why + " (no non-deterministic TE kernels)");
  add_env(out, "CUBLAS_WORKSPACE_CONFIG", ":4096:8", why + " (deterministic cuBLAS workspace)");
  std::string msg =
      "deterministic runs need TP communication overlap off (the overlapped "
      "kernels do not reduce in a fixed order)";
  if (tp_overlap_resolved_on(ctx.overlap))
    o.diags().warning("deterministic-tp-overlap", o.path("deterministic"), o.loc("deterministic"),
                      msg + "; tp_comm_overlap is resolved ON",
                      "set comm_overlap.tp_comm_overlap: false for bit-exact runs");
  else
    o.diags().info("deterministic-tp-overlap", o.path("deterministic"), o.loc("deterministic"),
                   msg + "; tp_comm_overlap is resolved off, as required");
}

void add_setup_steps(const PluginContext& ctx, PluginOptions& o, const PerfEnvOptions& p,
                     PluginContribution& out) {
  // Only an executor that runs root setup steps on every node (Slurm) can apply them.
  bool slurm = ctx.executor_kind().per_node_root_setup;
  auto skip = [&](const char* key) {
    o.diags().dropped("setup-step-slurm-only", o.path(key), o.loc(key),
                      fmt::format("`{}` is applied only on Slurm (it needs a per-node sudo step); "
                                  "ignored on the {} executor",
                                  key, ctx.executor));
  };
  if (p.enable_vboost && !slurm) skip("enable_vboost");
  if (p.enable_vboost && slurm)
    add_setup(
        out,
        // One file per node (SLURMD_NODENAME is set in every Slurm task): with one
        // shared file, the nodes' outputs overwrote each other.
        fmt::format("sudo nvidia-smi boost-slider --vboost 1 > {}\"$SLURMD_NODENAME\".out "
                    "2> {}\"$SLURMD_NODENAME\".err",
                    shell_word(ctx.job_dir + "/vboost."), shell_word(ctx.job_dir + "/vboost.")),
        "enable_vboost: raise the GPU voltage boost slider once per node");
  if (p.lock_gpu_freq && !slurm) skip("lock_gpu_freq");
  if (p.lock_gpu_freq && slurm)
    add_setup(
        out, fmt::format("sudo nvidia-smi -lgc {}", *p.lock_gpu_freq),
        fmt::format("lock_gpu_freq: lock GPU clocks at {} MHz once per node", *p.lock_gpu_freq));
}

void add_manual_gc(PluginOptions& o, const PerfEnvOptions& p, PluginContribution& out) {
  if (!p.enable_manual_gc) return;
  ArgWriter args(o, out.args);
  args.add_bool("train.manual_gc", true, "enable_manual_gc: Python GC at fixed steps only");
  args.add_int("train.manual_gc_interval", p.manual_gc_interval,
               fmt::format("manual_gc_interval: collect every {} steps", p.manual_gc_interval));
}

// With the megatron_bridge adapter the job's performance recipe carries NVIDIA's values for
// the names it sets (its env_vars, applied at rank start where a variable is unset), tuned
// for that model, GPU and layout. perf_env's own choices for those names are generic
// defaults, and the named recipe is the base of the plan (model/recipe_base.h): so it leaves
// them to the recipe, whose values the launch env then carries (add_recipe_base_env), even
// where a rule of ours would choose otherwise (CUDA_DEVICE_MAX_CONNECTIONS=1 on Hopper). It
// keeps what the user asked for by option (layernorm_sm_margin, NCCL_P2P_NET_CHUNKSIZE, the
// deterministic settings).
void leave_tuning_to_the_performance_recipe(const PluginContext& ctx, const PerfEnvOptions& p,
                                            PluginContribution& out, Diagnostics& diags) {
  const PerfRecipeEnv* recipe = perf_recipe_env_of(ctx.recipe, ctx.topology);
  if (!recipe) return;
  static const std::set<std::string_view> kTuning{"CUDA_DEVICE_MAX_CONNECTIONS",
                                                  "NVTE_FWD_LAYERNORM_SM_MARGIN",
                                                  "NVTE_BWD_LAYERNORM_SM_MARGIN",
                                                  "NVLINK_DOMAIN_SIZE",
                                                  "USE_MNNVL",
                                                  "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
                                                  "NVTE_USE_FAST_MATH"};
  auto recipe_sets = [&](const std::string& name) {
    for (const auto& [n, v] : recipe->vars())
      if (n == name) return true;
    return false;
  };
  std::vector<std::string> left;
  std::erase_if(out.env, [&](const EnvVar& v) {
    bool asked_for =
        p.layernorm_sm_margin && v.name.find("LAYERNORM_SM_MARGIN") != std::string::npos;
    bool leave = kTuning.count(v.name) && recipe_sets(v.name) && !asked_for;
    if (leave) left.push_back(fmt::format("{} (perf_env's {})", v.name, v.value));
    return leave;
  });
  if (!left.empty())
    diags.info("perf-env-leaves-it-to-the-recipe", "plugins.perf_env", {},
               fmt::format("perf_env leaves {} to the recipe base {}: the launch env carries "
                           "NVIDIA's values for this model and GPU",
                           fmt::join(left, ", "), recipe->function),
               "`bridge-launch plan` shows the values each rank gets; set a variable in env: "
               "to choose it yourself");
}

class PerfEnvPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o(kName, options, loc, diags);
    PerfEnvOptions p = read_options(o);
    if (!o.ok()) return;
    Decision conn = max_connections(ctx);
    add_env(out, "CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(conn.value), conn.reason);
    add_margins(ctx, p, out);
    add_chunksize(ctx, o, p, out);
    add_hybridep(ctx, o, out);
    if (p.deterministic) add_determinism(ctx, o, out);
    if (ctx.recipe.model.compute_dtype.get_or("") == "nvfp4")
      add_env(out, "NVTE_USE_FAST_MATH", "1", "compute_dtype nvfp4: TE fast math for NVFP4");
    leave_tuning_to_the_performance_recipe(ctx, p, out, diags);
    add_manual_gc(o, p, out);
    add_setup_steps(ctx, o, p, out);
  }
};

}  // namespace

std::unique_ptr<LaunchPlugin> make_perf_env_plugin() { return std::make_unique<PerfEnvPlugin>(); }

}  // namespace bridge
