// What every layer needs to know of each executor, as data: one row per executor a recipe can
// name. executor_names() is read from these rows; executors/registry.cpp implements exactly
// these rows (a unit test keeps the two in step).
//
// Contract: the planner, the plugins and the commands ask a row's traits, never compare an
// executor's name (scripts/check-layers.sh refuses a comparison outside executors/); a new
// executor is a new row here, its recipe section (ExecutorSpec in model/recipe.h and its
// reader), and its implementation row in executors/registry.cpp (docs/contributing.md,
// "Adding an executor"). find_executor_kind returns nullptr for a name that is not a row (the
// caller has already reported it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

// The variables a rank of this executor finds set by its scheduler, naming the job, the node
// and the rank (for per-rank file names); empty where the scheduler sets none.
struct SchedulerRankIds {
  std::string_view job;
  std::string_view node;
  std::string_view rank;
  bool empty() const { return job.empty(); }
};

struct ExecutorKind {
  std::string_view name;
  // executor.<name>.job_dir when unset; "" = beside the registry (<state root>/logs).
  std::string_view default_job_dir;
  // The job dir is a path inside the container (kept as written), not one of the submitting
  // host (where a relative path is made absolute from the current directory).
  bool job_dir_in_container = false;
  // The ranks are children of bridge-launch on this machine (one node): submit waits for
  // them, Ctrl-C goes to them, and stdout carries their output (schedulers print the job id
  // there instead).
  bool runs_here = false;
  // Renders a batch script a template can replace (--template, executor.<name>.template).
  bool renders_batch_script = false;
  // Can signal the job some time before a preemption kill (preemption.preempt_time).
  bool preemption_signal = false;
  // Runs setup steps as root once on every node before the ranks (perf_env's vboost).
  bool per_node_root_setup = false;
  // Binds each rank to its GPU's NUMA node (runtime.binding: numa, model/placement.h).
  bool numa_binding = false;
  // The ranks run in runtime.container_image when it is set (pyxis, pods): a shipped source
  // tree (runtime.code) is mounted into the container instead of put on PYTHONPATH.
  bool ranks_in_image = false;
  SchedulerRankIds rank_ids = {};
  // The recipe's executor.<name>.job_dir.
  const Field<std::string>& (*job_dir)(const ExecutorSpec&) = nullptr;
  // The recipe's executor.<name>.retries; nullptr for an executor that never retries.
  const Field<int64_t>* (*retries)(const ExecutorSpec&) = nullptr;
  // The recipe's executor.<name>.segment (NVLink-domain blocks, model/placement.h); nullptr
  // for an executor that cannot place nodes by NVLink domain.
  const Field<int64_t>* (*segment)(const ExecutorSpec&) = nullptr;
  // Adds the launch env the executor's own network settings need (Kubernetes' `network`:
  // NCCL's RDMA interfaces); nullptr for an executor that has none.
  void (*add_network_env)(const ExecutorSpec&, const Topology&, LaunchEnv&, Diagnostics&) = nullptr;
};

// Every executor, in the order `--executor` documents them.
const std::vector<ExecutorKind>& executor_kinds();

// The rows' names, in that order: what `--executor` and `executor.default` accept.
const std::vector<std::string>& executor_names();

// The row of `name`, or nullptr.
const ExecutorKind* find_executor_kind(std::string_view name);

}  // namespace bridge
