// Test support for the plugin unit tests (header-only; not part of bridge_core's sources).
//
// PluginHarness builds a Recipe from YAML text (a `name:` line is prepended), lets the test
// set the topology and the RESOLVED overlap fields by hand (so plugin tests do not depend on
// the overlap engine), runs the plugins, and offers small lookups on the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/gpu_table.h"
#include "model/recipe_loader.h"
#include "plugins/plugin.h"
#include "tests/support/map_environment.h"

namespace bridge::testing {

inline Topology make_topology(const std::string& gpu, int64_t ng, int64_t tp = 1, int64_t pp = 1,
                              int64_t cp = 1, int64_t ep = 1) {
  Topology t;
  t.gpu = gpu;
  if (const GpuType* known = find_gpu(gpu)) {  // as compute_topology does
    t.arch = known->arch;
    t.nvlink_domain = known->nvlink_domain;
  }
  t.num_gpus = ng;
  t.gpus_per_node = ng < 8 ? ng : 8;
  t.nodes = ng / t.gpus_per_node;
  t.tp = tp;
  t.pp = pp;
  t.cp = cp;
  t.ep = ep;
  t.dp = ng / (tp * pp * cp);
  return t;
}

class PluginHarness {
 public:
  explicit PluginHarness(const std::string& yaml_body, bool strict = false) : diags(strict) {
    recipe = load_recipe_text("name: t\n" + yaml_body, "recipe.yaml", {}, load_diags);
  }

  std::optional<Recipe> recipe;
  Diagnostics load_diags;
  Topology topo = make_topology("h100", 8);
  OverlapResolution overlap;
  MapEnvironment host;
  std::string executor = "local";
  std::string job_dir = "/jobs/t";
  std::vector<std::string> cli_env;
  Diagnostics diags;
  LaunchContributions out;

  void set_tp_overlap(bool on) { overlap.overlap.tp_comm_overlap.value = on; }
  void set_a2a_overlap(bool on) { overlap.overlap.overlap_moe_expert_parallel_comm.value = on; }

  LaunchContributions& run(const std::vector<PluginInfo>& registry = plugin_registry()) {
    PluginContext ctx{*recipe, topo, overlap, executor, job_dir, host};
    out = run_plugins(registry, ctx, cli_env, diags);
    return out;
  }

  // The variable's value, or "<unset>".
  std::string env(const std::string& name) const {
    const EnvVar* v = out.env.find(name);
    return v ? v->value : "<unset>";
  }
  const EnvVar* var(const std::string& name) const { return out.env.find(name); }

  std::vector<std::string> args() const {
    std::vector<std::string> texts;
    for (const auto& a : out.runtime_args) texts.push_back(a.text);
    return texts;
  }

  const Diagnostic* diag(const std::string& code) const {
    for (const auto& d : diags.items())
      if (d.code == code) return &d;
    return nullptr;
  }
};

}  // namespace bridge::testing
