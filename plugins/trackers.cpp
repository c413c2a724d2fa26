// wandb and comet: experiment trackers activated by an API key in the submitting environment.
//
// The key is read through ctx.host_env and passed on as a SECRET env var; without a key the
// plugin warns and contributes nothing. Neither key values nor their lengths reach messages.
#include <fmt/format.h>

#include "plugins/builtin_plugins.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

// The key's value, or nullopt after the "no effect" warning.
std::optional<std::string> api_key(const PluginContext& ctx, PluginOptions& o,
                                   const std::string& var) {
  auto key = ctx.host_env.get(var);
  if (key && !key->empty()) return key;
  o.diags().dropped("tracker-no-api-key", o.plugin_path(), o.plugin_loc(),
                    fmt::format("plugin `{}` is listed but {} is not set in the submitting "
                                "environment; it has no effect",
                                o.plugin(), var),
                    fmt::format("export {} before running bridge-launch", var));
  return std::nullopt;
}

void add_key(PluginContribution& out, const std::string& var, std::string value,
             const std::string& plugin) {
  add_env(out, var, std::move(value),
          fmt::format("{} API key from the submitting environment (secret)", plugin), true);
}

class WandbPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o("wandb", options, loc, diags);
    auto project = o.required_string("project");
    auto name = o.opt_string("name");
    auto entity = o.opt_string("entity");
    std::string save_dir = o.get_string("save_dir", ctx.job_dir + "/wandb");
    o.finish();
    if (!o.ok()) return;
    auto key = api_key(ctx, o, "WANDB_API_KEY");
    if (!key) return;
    add_key(out, "WANDB_API_KEY", std::move(*key), "wandb");
    ArgWriter args(o, out.args);
    args.add_string("logger.wandb_project", *project, "wandb project");
    if (entity) args.add_string("logger.wandb_entity", *entity, "wandb entity (team or user)");
    if (name) args.add_string("logger.wandb_exp_name", *name, "wandb run name");
    args.add_string("logger.wandb_save_dir", save_dir, "local wandb files");
  }
};

class CometPlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext& ctx, const YamlNode& options, const SourceLoc& loc,
                  PluginContribution& out, Diagnostics& diags) const override {
    PluginOptions o("comet", options, loc, diags);
    auto project = o.required_string("project");
    auto name = o.opt_string("name");
    auto workspace = o.opt_string("workspace");
    o.finish();
    if (!o.ok()) return;
    auto key = api_key(ctx, o, "COMET_API_KEY");
    if (!key) return;
    add_key(out, "COMET_API_KEY", std::move(*key), "comet");
    ArgWriter args(o, out.args);
    args.add_string("logger.comet_project", *project, "comet project");
    if (workspace) args.add_string("logger.comet_workspace", *workspace, "comet workspace");
    if (name) args.add_string("logger.comet_experiment_name", *name, "comet experiment name");
  }
};

}  // namespace

std::unique_ptr<LaunchPlugin> make_wandb_plugin() { return std::make_unique<WandbPlugin>(); }
std::unique_ptr<LaunchPlugin> make_comet_plugin() { return std::make_unique<CometPlugin>(); }

}  // namespace bridge
