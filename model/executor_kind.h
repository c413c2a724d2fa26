// What the layers below the executors need to know of each executor, as data: one row per
// executor a recipe can name (executor_names() in model/recipe.h; a unit test keeps the two
// in step, and executors/registry.cpp implements exactly these rows).
//
// Contract: the planner, the plugins and the commands ask a row's traits, never compare an
// executor's name; a new executor is a new row here and in executors/registry.cpp, and every
// rule that depends on the executor reads what it needs from its row. find_executor_kind
// returns nullptr for a name that is not a row (the caller has already reported it).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/recipe.h"

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
  // The job runs on this machine only: one node.
  bool single_node = false;
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
};

// Every executor, in executor_names() order.
const std::vector<ExecutorKind>& executor_kinds();

// The row of `name`, or nullptr.
const ExecutorKind* find_executor_kind(std::string_view name);

}  // namespace bridge
