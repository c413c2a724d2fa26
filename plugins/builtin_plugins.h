// Factories of the built-in plugins, one per plugin; registry.cpp lists them in the table.
//
// Each factory returns a stateless plugin object; all per-run state lives in the
// PluginContext and the PluginContribution passed to contribute().
#pragma once

#include <memory>

#include "plugins/plugin.h"

namespace bridge {

std::unique_ptr<LaunchPlugin> make_perf_env_plugin();
std::unique_ptr<LaunchPlugin> make_preemption_plugin();
std::unique_ptr<LaunchPlugin> make_fault_tolerance_plugin();
std::unique_ptr<LaunchPlugin> make_nsys_plugin();
std::unique_ptr<LaunchPlugin> make_pytorch_profiler_plugin();
std::unique_ptr<LaunchPlugin> make_wandb_plugin();
std::unique_ptr<LaunchPlugin> make_comet_plugin();

}  // namespace bridge
