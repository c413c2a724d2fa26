// executor.kubernetes.api: trainjob: the pod the executor renders for a JobSet, carried by the
// fields Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1, Trainer v2.2) has for it.
// The Trainer controller builds the JobSet from the named ClusterTrainingRuntime and these
// fields; the JobSet has the TrainJob's name and its trainer replicated job is `node`, so pod
// names and MASTER_ADDR are those of a JobSet of that name.
//
// Contract:
// - Pure. `trainjob_spec` maps the rendered pod template onto a TrainJob spec:
//   - the container's image, command, args, env and resources into spec.trainer, with
//     numNodes and numProcPerNode the plan's;
//   - the pod's labels and annotations, and what the runtime patch's PodSpec has (service
//     account, volumes, image pull secrets, security contexts, node selector, affinity,
//     tolerations, scheduling gates, the container's volume mounts), into one
//     spec.runtimePatches entry of manager `bridge-launch/launcher` for replicated job `node`,
//     whose JobSet metadata gets `jobset_labels` (so the JobSet is found by the job's label).
// - Every other field of the pod is a `TrainJobGap`: its JSON pointer in the pod and whether
//   the runtime decides it harmlessly (restart policy, service links: named in the dry-run
//   header) or the planned value would be lost (an error for the caller).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bridge {

inline constexpr const char* kTrainerApiVersion = "trainer.kubeflow.org/v1alpha1";
// A runtime patch's manager must be a domain-prefixed path (the Trainer webhook checks).
inline constexpr const char* kTrainerPatchManager = "bridge-launch/launcher";
inline constexpr const char* kTrainerDefaultRuntime = "torch-distributed";
// torchrun's own variables, which the Trainer's torch plugin sets and its webhook refuses in
// spec.trainer.env.
inline constexpr const char* kTrainerReservedEnvPrefix = "PET_";

struct TrainJobGap {
  std::string pointer;  // e.g. /spec/priorityClassName
  bool runtime_decides = false;
};

struct TrainJobMapping {
  nlohmann::ordered_json spec;
  std::vector<TrainJobGap> gaps;
};

TrainJobMapping trainjob_spec(const nlohmann::ordered_json& pod, const std::string& runtime,
                              int64_t nodes, int64_t procs_per_node,
                              const nlohmann::ordered_json& jobset_labels);

// The recipe key that sets a pod field the TrainJob cannot carry, for the error message.
std::string trainjob_gap_source(const std::string& pointer);

}  // namespace bridge
