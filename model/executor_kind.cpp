#include "model/executor_kind.h"

#include "model/k8s_network.h"

namespace bridge {

const std::vector<ExecutorKind>& executor_kinds() {
  static const std::vector<ExecutorKind> kKinds{
      {.name = "local",
       .default_job_dir = "",
       .runs_here = true,
       .job_dir = [](const ExecutorSpec& x) -> const Field<std::string>& {
         return x.local.job_dir;
       }},
      {.name = "slurm",
       .default_job_dir = "~/bridge-launch/jobs",
       .renders_batch_script = true,
       .preemption_signal = true,  // sbatch --signal=TERM@<seconds>
       .per_node_root_setup = true,
       .numa_binding = true,    // numactl around every srun rank and torchrun worker
       .ranks_in_image = true,  // pyxis: srun --container-image
       .rank_ids = {"SLURM_JOB_ID", "SLURM_NODEID", "SLURM_PROCID"},
       .job_dir = [](const ExecutorSpec& x) -> const Field<std::string>& {
         return x.slurm.job_dir;
       },
       .retries = [](const ExecutorSpec& x) -> const Field<int64_t>* { return &x.slurm.retries; },
       .segment = [](const ExecutorSpec& x) -> const Field<int64_t>* { return &x.slurm.segment; }},
      {.name = "kubernetes",
       .default_job_dir = "/workspace/bridge-launch/jobs",
       .job_dir_in_container = true,
       .preemption_signal = true,  // terminationGracePeriodSeconds
       .numa_binding = true,       // numactl around every torchrun worker (the entrypoint)
       .ranks_in_image = true,     // every pod runs the image
       .job_dir = [](const ExecutorSpec& x) -> const Field<std::string>& {
         return x.kubernetes.job_dir;
       },
       .retries = [](const ExecutorSpec& x) -> const Field<int64_t>* {
         return &x.kubernetes.retries;
       },
       .segment = [](const ExecutorSpec& x) -> const Field<int64_t>* {
         return &x.kubernetes.segment;
       },
       .add_network_env =
           [](const ExecutorSpec& x, const Topology& t, LaunchEnv& env, Diagnostics& diags) {
             if (auto network = read_k8s_network(x.kubernetes.network, t.gpus_per_node, diags))
               add_k8s_network_env(*network, env, diags);
           }},
  };
  return kKinds;
}

const std::vector<std::string>& executor_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& kind : executor_kinds()) names.emplace_back(kind.name);
    return names;
  }();
  return kNames;
}

const ExecutorKind* find_executor_kind(std::string_view name) {
  for (const auto& kind : executor_kinds())
    if (kind.name == name) return &kind;
  return nullptr;
}

}  // namespace bridge
