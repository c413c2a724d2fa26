// run_plugins: resolves plugin names, rejects incompatible pairs, runs the plugins in recipe
// order, merges their contributions (stamping the source, rejecting conflicts between
// plugins), then applies recipe env: and -E (env_merge.h).
#include <fmt/format.h>

#include <algorithm>

#include "base/suggest.h"
#include "plugins/env_merge.h"
#include "plugins/plugin.h"

namespace bridge {

namespace {

struct Incompatible {
  const char* a;
  const char* b;
  const char* why;
};

const std::vector<Incompatible>& incompatible_pairs() {
  static const std::vector<Incompatible> kPairs{
      {"nsys", "fault_tolerance",
       "ft_launcher restarts ranks under its own launcher, which the per-rank nsys prefix "
       "cannot follow"},
      {"nsys", "pytorch_profiler", "the runtime accepts only one profiler per run"},
  };
  return kPairs;
}

std::vector<std::string> names_of(const std::vector<PluginInfo>& registry) {
  std::vector<std::string> names;
  for (const auto& p : registry) names.emplace_back(p.name);
  return names;
}

bool listed_before(const Recipe& r, size_t index, const std::string& name) {
  for (size_t i = 0; i < index; ++i)
    if (r.plugins[i].name == name) return true;
  return false;
}

// True (after an error) when the plugin at `index` clashes with an earlier one.
bool clashes_with_earlier(const Recipe& r, size_t index, Diagnostics& diags) {
  const PluginEntry& e = r.plugins[index];
  for (const auto& pair : incompatible_pairs()) {
    std::string other = e.name == pair.a ? pair.b : e.name == pair.b ? pair.a : "";
    if (other.empty() || !listed_before(r, index, other)) continue;
    diags.error(
        "incompatible-plugins", "plugins." + e.name, e.loc,
        fmt::format("plugins `{}` and `{}` cannot be used together: {}", other, e.name, pair.why),
        fmt::format("remove `{}` or `{}` from plugins", other, e.name));
    return true;
  }
  return false;
}

void stamp(PluginContribution& c, const std::string& source) {
  for (auto& v : c.env) v.source = source;
  for (auto& a : c.args) a.source = source;
  for (auto& s : c.setup) s.source = source;
}

std::string arg_key(const std::string& text) { return text.substr(0, text.find('=')); }

void merge_env(const PluginEntry& e, std::vector<EnvVar>& vars, LaunchEnv& env,
               Diagnostics& diags) {
  for (auto& v : vars) {
    const EnvVar* old = env.find(v.name);
    if (!old) {
      env.vars.push_back(std::move(v));
      continue;
    }
    if (old->value == v.value && old->secret == v.secret) continue;
    bool show = !old->secret && !v.secret;
    diags.error("plugin-env-conflict", "plugins." + e.name, e.loc,
                fmt::format("`{}` is set by {}{} and by {}{}; a plugin may not overwrite another "
                            "plugin's value",
                            v.name, old->source, show ? " to `" + old->value + "`" : "", v.source,
                            show ? " to `" + v.value + "`" : ""),
                "remove one of the plugins, or change their options so they agree");
  }
}

void merge_args(const PluginEntry& e, std::vector<RuntimeArg>& args, std::vector<RuntimeArg>& out,
                Diagnostics& diags) {
  for (auto& a : args) {
    auto same_key = [&](const RuntimeArg& o) { return arg_key(o.text) == arg_key(a.text); };
    auto old = std::find_if(out.begin(), out.end(), same_key);
    if (old == out.end()) {
      out.push_back(std::move(a));
      continue;
    }
    if (old->text == a.text) continue;
    diags.error("plugin-arg-conflict", "plugins." + e.name, e.loc,
                fmt::format("runtime argument `{}` from {} conflicts with `{}` from {}", a.text,
                            a.source, old->text, old->source),
                "remove one of the plugins, or change their options so they agree");
  }
}

// One executor setting as merge_field sees it: the value, who set it, and why.
template <class T>
struct SettingRef {
  T& value;
  std::string& source;
  std::string& reason;
};

template <class T>
void merge_field(const PluginEntry& e, const char* what, SettingRef<T> into, SettingRef<T> from,
                 bool set, Diagnostics& diags) {
  if (!set) return;
  if (!into.source.empty()) {
    diags.error(
        "plugin-executor-conflict", "plugins." + e.name, e.loc,
        fmt::format("the executor's {} is set by {} and by plugin:{}", what, into.source, e.name));
    return;
  }
  into.value = std::move(from.value);
  into.source = "plugin:" + e.name;
  into.reason = std::move(from.reason);
}

void merge_changes(const PluginEntry& e, ExecutorChanges& c, ExecutorChanges& out,
                   Diagnostics& diags) {
  using Seconds = std::optional<int64_t>;
  using Argv = std::vector<std::string>;
  merge_field<Seconds>(e, "preemption signal",
                       {out.preempt_signal_seconds, out.preempt_source, out.preempt_reason},
                       {c.preempt_signal_seconds, c.preempt_source, c.preempt_reason},
                       c.preempt_signal_seconds.has_value(), diags);
  merge_field<Seconds>(e, "retries", {out.retries, out.retries_source, out.retries_reason},
                       {c.retries, c.retries_source, c.retries_reason}, c.retries.has_value(),
                       diags);
  merge_field<Argv>(e, "launcher", {out.launcher_wrapper, out.launcher_source, out.launcher_reason},
                    {c.launcher_wrapper, c.launcher_source, c.launcher_reason},
                    !c.launcher_wrapper.empty(), diags);
  merge_field<Argv>(e, "command prefix",
                    {out.command_prefix, out.command_prefix_source, out.command_prefix_reason},
                    {c.command_prefix, c.command_prefix_source, c.command_prefix_reason},
                    !c.command_prefix.empty(), diags);
}

void merge(const PluginEntry& e, PluginContribution& c, LaunchContributions& out,
           Diagnostics& diags) {
  stamp(c, "plugin:" + e.name);
  merge_env(e, c.env, out.env, diags);
  merge_args(e, c.args, out.runtime_args, diags);
  for (auto& s : c.setup) out.setup_steps.push_back(std::move(s));
  merge_changes(e, c.changes, out.executor, diags);
}

void run_one(const std::vector<PluginInfo>& registry, const PluginContext& ctx, size_t index,
             LaunchContributions& out, Diagnostics& diags) {
  const PluginEntry& e = ctx.recipe.plugins[index];
  const PluginInfo* info = find_plugin(registry, e.name);
  if (!info) {
    check_plugin_names(registry, {e}, diags);
    return;
  }
  if (clashes_with_earlier(ctx.recipe, index, diags)) return;
  PluginContribution c;
  info->make()->contribute(ctx, e.options, e.loc, c, diags);
  merge(e, c, out, diags);
}

}  // namespace

bool check_plugin_names(const std::vector<PluginInfo>& registry,
                        const std::vector<PluginEntry>& entries, Diagnostics& diags) {
  bool all_known = true;
  for (const auto& e : entries) {
    if (find_plugin(registry, e.name)) continue;
    all_known = false;
    diags.error(
        "unknown-plugin", "plugins." + e.name, e.loc,
        fmt::format("unknown plugin `{}`{}", e.name, did_you_mean(e.name, names_of(registry))),
        "`bridge-launch plugins` lists the available plugins");
  }
  return all_known;
}

LaunchContributions run_plugins(const std::vector<PluginInfo>& registry, const PluginContext& ctx,
                                const std::vector<std::string>& cli_env, Diagnostics& diags) {
  LaunchContributions out;
  for (size_t i = 0; i < ctx.recipe.plugins.size(); ++i) run_one(registry, ctx, i, out, diags);
  std::optional<EnvVar> from_plugins;
  if (const EnvVar* v = out.env.find("CUDA_DEVICE_MAX_CONNECTIONS")) from_plugins = *v;
  apply_recipe_env(ctx, out.env, diags);
  apply_cli_env(cli_env, out.env, diags);
  check_env_contradictions(ctx, out.env, from_plugins, diags);
  return out;
}

}  // namespace bridge
