#include "model/executor_kind.h"

namespace bridge {

const std::vector<ExecutorKind>& executor_kinds() {
  static const std::vector<ExecutorKind> kKinds{
      {.name = "local",
       .default_job_dir = "",
       .single_node = true,
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
       .retries = [](const ExecutorSpec& x) -> const Field<int64_t>* { return &x.slurm.retries; }},
      {.name = "kubernetes",
       .default_job_dir = "/workspace/bridge-launch/jobs",
       .job_dir_in_container = true,
       .preemption_signal = true,  // terminationGracePeriodSeconds
       .ranks_in_image = true,     // every pod runs the image
       .job_dir = [](const ExecutorSpec& x) -> const Field<std::string>& {
         return x.kubernetes.job_dir;
       },
       .retries = [](const ExecutorSpec& x) -> const Field<int64_t>* {
         return &x.kubernetes.retries;
       }},
  };
  return kKinds;
}

const ExecutorKind* find_executor_kind(std::string_view name) {
  for (const auto& kind : executor_kinds())
    if (kind.name == name) return &kind;
  return nullptr;
}

}  // namespace bridge
