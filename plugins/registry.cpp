// The explicit plugin table: name -> one-line description + factory.
#include "plugins/builtin_plugins.h"
#include "plugins/plugin.h"

namespace bridge {

const std::vector<PluginInfo>& plugin_registry() {
  static const std::vector<PluginInfo> kPlugins{
      {"perf_env", "launch env derived from the resolved overlap config and topology",
       &make_perf_env_plugin},
      {"preemption", "exit-signal handler args and the scheduler's preemption signal",
       &make_preemption_plugin},
      {"fault_tolerance", "ft_launcher (nvidia-resiliency-ext) with in-job restarts and retries",
       &make_fault_tolerance_plugin},
      {"nsys", "Nsight Systems profile of selected steps and ranks", &make_nsys_plugin},
      {"pytorch_profiler", "PyTorch profiler and memory snapshot of selected steps",
       &make_pytorch_profiler_plugin},
      {"wandb", "Weights & Biases logging (needs WANDB_API_KEY)", &make_wandb_plugin},
      {"comet", "Comet logging (needs COMET_API_KEY)", &make_comet_plugin},
  };
  return kPlugins;
}

const PluginInfo* find_plugin(const std::vector<PluginInfo>& registry, const std::string& name) {
  for (const auto& p : registry)
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace bridge
