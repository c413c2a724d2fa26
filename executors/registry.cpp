#include "executors/executor.h"

namespace bridge {

std::unique_ptr<Executor> make_local_executor(const ExecutorServices& services);
std::unique_ptr<Executor> make_slurm_executor(const ExecutorServices& services);
std::unique_ptr<Executor> make_kubernetes_executor(const ExecutorServices& services);

const std::vector<ExecutorInfo>& executor_registry() {
  static const std::vector<ExecutorInfo> kExecutors{
      {"local", "every rank as a process on this machine (ng must equal gn)", make_local_executor},
      {"slurm", "one sbatch script per job; srun starts the ranks", make_slurm_executor},
      {"kubernetes", "manifests applied with kubectl: a JobSet (or Indexed Job + headless Service)",
       make_kubernetes_executor},
  };
  return kExecutors;
}

const ExecutorInfo* find_executor(const std::vector<ExecutorInfo>& table, const std::string& name) {
  for (const auto& e : table)
    if (name == e.name) return &e;
  return nullptr;
}

std::unique_ptr<Executor> make_executor(const std::vector<ExecutorInfo>& table,
                                        const std::string& name, const ExecutorServices& services) {
  const ExecutorInfo* info = find_executor(table, name);
  return info ? info->make(services) : nullptr;
}

SubmissionIdentity dry_run_identity(const Plan& plan) {
  std::string name = plan.job.name.value ? *plan.job.name.value : "job";
  return SubmissionIdentity{name + "-dry-run"};
}

}  // namespace bridge
