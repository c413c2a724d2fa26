// fault_tolerance: ft_launcher from nvidia-resiliency-ext as the per-node launcher, with
// in-job restarts, rank heartbeat timeouts and job-level retries.
//
// ft_launcher is torchrun-compatible; its flags (nvidia-resiliency-ext >= 0.3) are
// --max-restarts=N, --ft-initial-rank-heartbeat-timeout=SECONDS and
// --ft-rank-heartbeat-timeout=SECONDS.
#include <fmt/format.h>

#include "plugins/builtin_plugins.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

constexpr const char* kName = "fault_tolerance";

struct FtOptions {
  bool enable_ft_package = true;
  bool calc_ft_timeouts = true;
  int64_t restarts = 3;
  int64_t retries = 2;
  int64_t initial_timeout = 1800;
  int64_t rank_timeout = 300;
};

FtOptions read_options(PluginOptions& o) {
  FtOptions f;
  f.enable_ft_package = o.get_bool("enable_ft_package", true);
  f.calc_ft_timeouts = o.get_bool("calc_ft_timeouts", true);
  f.restarts = o.get_int("num_in_job_restarts", 3, 0);
  f.retries = o.get_int("num_job_retries_on_failure", 2, 0);
  f.initial_timeout = o.get_int("initial_rank_heartbeat_timeout", 1800, 1);
  f.rank_timeout = o.get_int("rank_heartbeat_timeout", 300, 1);
  o.finish();
  return f;
}

class FaultTolerancePlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext&, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o(kName, options, loc, diags);
    FtOptions f = read_options(o);
    if (!o.ok()) return;
    out.changes.launcher_wrapper = {
        "ft_launcher", fmt::format("--max-restarts={}", f.restarts),
        fmt::format("--ft-initial-rank-heartbeat-timeout={}", f.initial_timeout),
        fmt::format("--ft-rank-heartbeat-timeout={}", f.rank_timeout)};
    out.changes.launcher_reason =
        "ft_launcher restarts failed ranks in place and watches their heartbeats";
    out.changes.retries = f.retries;
    out.changes.retries_reason = "num_job_retries_on_failure: requeue the whole job this often";
    ArgWriter args(o, out.args);
    args.add_bool("ft.enable_ft_package", f.enable_ft_package,
                  "enable_ft_package: the runtime sends heartbeats to ft_launcher");
    args.add_bool("ft.calc_ft_timeouts", f.calc_ft_timeouts,
                  "calc_ft_timeouts: the runtime derives timeouts from observed step times");
  }
};

}  // namespace

std::unique_ptr<LaunchPlugin> make_fault_tolerance_plugin() {
  return std::make_unique<FaultTolerancePlugin>();
}

}  // namespace bridge
