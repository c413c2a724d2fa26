// What a cluster admin checks in a GPU pod before letting it run: its resource requests and
// QoS class, the /dev/shm size limit, the security context, the RDMA devices, and how long
// the job's objects live (executor.kubernetes.node, qos, shm_size, security, network, time,
// ttl_after_finished). docs/executors/kubernetes.md, "Pods an admin accepts", explains each
// rule; the dry-run header prints the result (`summary`).
//
// Contract:
// - read_pod_shape reads and checks those keys (each problem an error at its key; nullopt
//   then) and merges the user's executor.kubernetes.resources over the derived values.
// - Requests (cpu, memory, ephemeral-storage) are never left out, so a GPU pod is never
//   BestEffort: with `node` (one node's allocatable) each is 90 % of the node's share that
//   the pod's GPUs hold (the rest stays for the node's daemons), cpu in whole cores; without
//   it a floor per GPU (4 cores, 32Gi) and 64Gi of ephemeral storage.
// - qos burstable (the default): no cpu or memory limit (a cpu limit throttles data loaders,
//   a memory limit below the node's kills ranks); guaranteed: limits equal to the requests,
//   which needs `node` or explicit requests, and explicit limits that differ are an error.
// - /dev/shm: shm_size, else half the memory request (it counts against the pod's memory).
// - Security: seccomp RuntimeDefault, no privilege escalation, every capability dropped but
//   IPC_LOCK under network rdma and security.add_capabilities; runAsNonRoot as configured
//   (true when run_as_user is a non-root uid).
// - time (Slurm's format) becomes the Jobs' activeDeadlineSeconds (0 = none);
//   ttl_after_finished (default 7 days) the objects' ttlSecondsAfterFinished.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "executors/k8s_pod_spec.h"
#include "model/k8s_network.h"
#include "model/recipe.h"

namespace bridge {

struct K8sPodShape {
  std::string qos_class;                                               // Burstable | Guaranteed
  nlohmann::ordered_json requests = nlohmann::ordered_json::object();  // besides the GPUs
  nlohmann::ordered_json limits = nlohmann::ordered_json::object();    // besides the GPUs
  std::string shm_limit;
  nlohmann::ordered_json pod_security;        // the pod's securityContext
  nlohmann::ordered_json container_security;  // the trainer's securityContext
  std::optional<int64_t> active_deadline;     // seconds
  int64_t ttl_after_finished = 0;             // seconds
  std::vector<std::string> summary;           // lines for the dry-run header
};

inline constexpr int64_t kDefaultTtlAfterFinished = int64_t{7} * 86400;

std::optional<K8sPodShape> read_pod_shape(const KubernetesExecutorSpec& kx,
                                          const K8sPodSettings& settings, const K8sNetwork& network,
                                          int64_t gpus_per_node, int64_t node_gpus,
                                          Diagnostics& diags);

// Adds the shape to a rendered pod template ({metadata, spec} with the `trainer` container).
void apply_pod_shape(const K8sPodShape& shape, nlohmann::ordered_json& pod);

}  // namespace bridge
