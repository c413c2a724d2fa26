// preemption: the runtime's exit-signal handler plus the scheduler's early warning signal.
#include <fmt/format.h>

#include "plugins/builtin_plugins.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

constexpr const char* kName = "preemption";

class PreemptionPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o(kName, options, loc, diags);
    int64_t preempt_time = o.get_int("preempt_time", 60, 1);
    bool handler = o.get_bool("enable_exit_handler", true);
    bool for_loader = o.get_bool("enable_exit_handler_for_data_loader", false);
    o.finish();
    if (!o.ok()) return;
    if (handler) add_args(o, for_loader, out);
    if (!handler && for_loader)
      diags.warning("option-unused", o.path("enable_exit_handler_for_data_loader"),
                    o.loc("enable_exit_handler_for_data_loader"),
                    "enable_exit_handler_for_data_loader has no effect while "
                    "enable_exit_handler is false");
    set_signal(ctx, o, preempt_time, out);
  }

 private:
  static void add_args(PluginOptions& o, bool for_loader, PluginContribution& out) {
    ArgWriter args(o, out.args);
    args.add_bool("train.exit_signal_handler", true,
                  "enable_exit_handler: checkpoint and exit cleanly on SIGTERM");
    args.add_bool("train.exit_signal_handler_for_dataloader", for_loader,
                  "enable_exit_handler_for_data_loader: data loader workers handle it too");
  }

  static void set_signal(const PluginContext& ctx, PluginOptions& o, int64_t seconds,
                         PluginContribution& out) {
    if (!ctx.executor_kind().preemption_signal) {
      o.diags().info("no-preempt-signal", o.path("preempt_time"), o.loc("preempt_time"),
                     fmt::format("the {} executor has no preemption signal; preempt_time unused",
                                 ctx.executor));
      return;
    }
    out.changes.preempt_signal_seconds = seconds;
    out.changes.preempt_reason =
        "preempt_time: SIGTERM this long before the kill, so the runtime can checkpoint";
  }
};

}  // namespace

std::unique_ptr<LaunchPlugin> make_preemption_plugin() {
  return std::make_unique<PreemptionPlugin>();
}

}  // namespace bridge
