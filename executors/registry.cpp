#include "executors/executor.h"

namespace bridge {

std::unique_ptr<Executor> make_local_executor();

const std::vector<ExecutorInfo>& executor_registry() {
  static const std::vector<ExecutorInfo> kExecutors{
      {"local", "every rank as a process on this machine (ng must equal gn)", make_local_executor},
  };
  return kExecutors;
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  for (const auto& e : executor_registry())
    if (name == e.name) return e.make();
  return nullptr;
}

}  // namespace bridge
