#include "executors/executor.h"

namespace bridge {

const std::vector<ExecutorInfo>& executor_registry() {
  static const std::vector<ExecutorInfo> kExecutors{};
  return kExecutors;
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  for (const auto& e : executor_registry())
    if (name == e.name) return e.make();
  return nullptr;
}

}  // namespace bridge
