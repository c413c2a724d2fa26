#include "executors/executor.h"

namespace bridge {

std::unique_ptr<Executor> make_local_executor();
std::unique_ptr<Executor> make_slurm_executor();
std::unique_ptr<Executor> make_kubernetes_executor();

const std::vector<ExecutorInfo>& executor_registry() {
  static const std::vector<ExecutorInfo> kExecutors{
      {"local", "every rank as a process on this machine (ng must equal gn)", make_local_executor},
      {"slurm", "one sbatch script per job; srun starts the ranks", make_slurm_executor},
      {"kubernetes", "manifests applied with kubectl: a JobSet (or Indexed Job + headless Service)",
       make_kubernetes_executor},
  };
  return kExecutors;
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  for (const auto& e : executor_registry())
    if (name == e.name) return e.make();
  return nullptr;
}

}  // namespace bridge
