// nsys and pytorch_profiler: profile a window of training steps on selected ranks.
#include <fmt/format.h>

#include "plugins/builtin_plugins.h"
#include "plugins/nsys_args.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

struct StepWindow {
  int64_t start = 0;
  int64_t end = 0;
  std::vector<int64_t> ranks{0};
  bool record_shapes = false;
};

StepWindow read_window(const PluginContext& ctx, PluginOptions& o) {
  StepWindow w;
  auto start = o.required_int("profile_step_start", 0);
  auto end = o.required_int("profile_step_end", 0);
  w.ranks = o.get_ints("profile_ranks", {0}, 0);
  w.record_shapes = o.get_bool("record_shapes", false);
  if (start && end && *end <= *start)
    o.error("profile_step_end", "bad-value",
            fmt::format("profile_step_end ({}) must be greater than profile_step_start ({})", *end,
                        *start));
  for (int64_t r : w.ranks)
    if (r >= ctx.topology.num_gpus)
      o.error("profile_ranks", "out-of-range",
              fmt::format("profile rank {} does not exist: the job has {} ranks", r,
                          ctx.topology.num_gpus));
  w.start = start.value_or(0);
  w.end = end.value_or(0);
  return w;
}

void add_window_args(ArgWriter& args, const StepWindow& w) {
  args.add_int("profiling.profile_step_start", w.start, "first profiled step");
  args.add_int("profiling.profile_step_end", w.end, "last profiled step");
  args.add_int_list("profiling.profile_ranks", w.ranks, "ranks that record a profile");
  args.add_bool("profiling.record_shapes", w.record_shapes,
                "record_shapes: record operator input shapes");
}

struct NsysOptions {
  StepWindow window;
  std::vector<std::string> trace;
  std::vector<std::string> extra;
  bool gpu_metrics = false;
  bool export_sqlite = false;
};

NsysOptions read_nsys(const PluginContext& ctx, PluginOptions& o) {
  NsysOptions n;
  n.window = read_window(ctx, o);
  n.trace = o.get_strings("nsys_trace", {"nvtx", "cuda"});
  n.extra = o.get_strings("nsys_extra_args", {});
  n.gpu_metrics = o.get_bool("nsys_gpu_metrics", false);
  n.export_sqlite = o.get_bool("export_sqlite", false);
  o.finish();
  if (n.trace.empty()) o.error("nsys_trace", "bad-value", "nsys_trace must name what to trace");
  return n;
}

std::string nsys_output(const PluginContext& ctx) {
  // Named by the scheduler's job, node and rank where it sets them (nsys expands %q{VAR}),
  // else by host and process id.
  const SchedulerRankIds& ids = ctx.executor_kind().rank_ids;
  if (!ids.empty())
    return fmt::format("{}/profile_%p_%q{{{}}}_node%q{{{}}}_rank%q{{{}}}", ctx.job_dir, ids.job,
                       ids.node, ids.rank);
  return ctx.job_dir + "/profile_%h_%p";
}

std::vector<std::string> nsys_argv(const PluginContext& ctx, const NsysOptions& n) {
  std::vector<std::string> defaults{"nsys",
                                    "profile",
                                    "-s",
                                    "none",
                                    "-t",
                                    join(n.trace, ","),
                                    "-o",
                                    nsys_output(ctx),
                                    "--force-overwrite",
                                    "true",
                                    "--capture-range=cudaProfilerApi",
                                    "--capture-range-end=stop"};
  std::vector<std::string> argv = merge_nsys_args(defaults, n.extra);
  return n.export_sqlite ? add_sqlite_export(argv) : argv;
}

void set_prefix(const PluginContext& ctx, PluginOptions& o, const NsysOptions& n,
                PluginContribution& out) {
  std::vector<std::string> argv = nsys_argv(ctx, n);
  out.changes.command_prefix_reason =
      n.gpu_metrics ? "every rank runs under nsys profile; GPU metrics sampled on one rank per node"
                    : "every rank runs under nsys profile (capture range: cudaProfilerApi)";
  if (!n.gpu_metrics) {
    out.changes.command_prefix = argv;
    return;
  }
  if (has_gpu_metrics_option(argv)) {
    o.diags().warning("gpu-metrics-explicit", o.path("nsys_gpu_metrics"), o.loc("nsys_gpu_metrics"),
                      "nsys_extra_args already choose --gpu-metrics-devices; they apply to every "
                      "rank and nsys_gpu_metrics adds nothing",
                      "remove one of the two; nsys_gpu_metrics alone samples one rank per node");
    out.changes.command_prefix = argv;
    out.changes.command_prefix_reason =
        "every rank runs under nsys profile with the GPU metrics of nsys_extra_args";
    return;
  }
  out.changes.command_prefix = gpu_metrics_wrapper(argv);
}

class NsysPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o("nsys", options, loc, diags);
    NsysOptions n = read_nsys(ctx, o);
    if (!o.ok()) return;
    ArgWriter args(o, out.args);
    args.add_bool("profiling.use_nsys_profiler", true, "nsys: the runtime opens the capture range");
    add_window_args(args, n.window);
    set_prefix(ctx, o, n, out);
  }
};

class PytorchProfilerPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o("pytorch_profiler", options, loc, diags);
    StepWindow w = read_window(ctx, o);
    bool memory = o.get_bool("record_memory_history", true);
    std::string snapshot = o.get_string("memory_snapshot_path", ctx.job_dir + "/snapshot.pickle");
    o.finish();
    if (!o.ok()) return;
    ArgWriter args(o, out.args);
    args.add_bool("profiling.use_pytorch_profiler", true, "pytorch_profiler: torch.profiler");
    add_window_args(args, w);
    args.add_bool("profiling.record_memory_history", memory,
                  "record_memory_history: CUDA allocator history for a memory snapshot");
    if (memory)
      args.add_string("profiling.memory_snapshot_path", snapshot,
                      "memory_snapshot_path: where the memory snapshot is written");
  }
};

}  // namespace

std::unique_ptr<LaunchPlugin> make_nsys_plugin() { return std::make_unique<NsysPlugin>(); }

std::unique_ptr<LaunchPlugin> make_pytorch_profiler_plugin() {
  return std::make_unique<PytorchProfilerPlugin>();
}

}  // namespace bridge
