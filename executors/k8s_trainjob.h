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
//     whose JobSet metadata is `jobset_metadata` (labels, so that the JobSet is found by the
//     job's label, and annotations; the Trainer controller puts both on the JobSet).
// - Every other field of the pod is a `TrainJobGap`: its JSON pointer in the pod and whether
//   the runtime decides it (restart policy, service links: named in the dry-run header, the
//   restarts checked against the runtime at submission) or the planned value would be lost
//   (an error for the caller).
// - `trainjob_limit_problems`: what the TrainJob CRD's list limits (Trainer v2.2) would refuse.
// - `runtime_restarts`: what a ClusterTrainingRuntime (as `kubectl get -o json` shows it) does
//   when a rank fails, where that is more than the plan's "fail at once": "" when its pods do
//   not restart (restartPolicy Never, backoffLimit 0, no JobSet restarts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bridge {

inline constexpr const char* kTrainerApiVersion = "trainer.kubeflow.org/v1alpha1";
// A runtime patch's manager must be a domain-prefixed path (the Trainer webhook checks).
inline constexpr const char* kTrainerPatchManager = "bridge-launch/launcher";
inline constexpr const char* kTrainerDefaultRuntime = "torch-distributed";
// torchrun reads every PET_* variable as an option's default; the Trainer's torch plugin sets
// five of them on every pod (and its webhook refuses those in spec.trainer.env).
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
                              const nlohmann::ordered_json& jobset_metadata);

// The recipe key that sets a pod field the TrainJob cannot carry, for the error message.
std::string trainjob_gap_source(const std::string& pointer);

std::vector<std::string> trainjob_limit_problems(const nlohmann::ordered_json& spec);

std::string runtime_restarts(const nlohmann::json& runtime);

}  // namespace bridge
