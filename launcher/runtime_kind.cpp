#include "launcher/runtime_kind.h"

namespace bridge {

std::string effective_adapter_name(const RuntimeSpec& runtime) {
  if (runtime.adapter.is_set()) return *runtime.adapter.value;
  if (runtime.pass_overrides.is_set() && !*runtime.pass_overrides.value) return "none";
  const StringList command = runtime.command.get_or({"bridge-probe"});
  const std::string program = command.empty() ? std::string() : command.front();
  size_t slash = program.rfind('/');
  std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  return base == "bridge-probe" ? "probe" : "hydra";
}

bool runtime_is_megatron_bridge(const RuntimeSpec& runtime) {
  std::string adapter = effective_adapter_name(runtime);
  return adapter == "megatron_bridge" || adapter == "hydra";
}

}  // namespace bridge
