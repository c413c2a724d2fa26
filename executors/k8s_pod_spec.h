// The pod settings a GPU cluster needs beyond the plan (executor.kubernetes.*): volumes,
// node selector, tolerations, affinity, extra resources, labels, annotations, priority class,
// Kueue queue, and a strategic merge patch of the pod template as the escape hatch.
//
// Contract:
// - read_pod_settings checks every key against its shape and Kubernetes' own rules (names,
//   label syntax, quantities, toleration operators and effects) and reports each problem as
//   a diagnostic at the key's file:line; nullopt when any is wrong. Nothing is dropped: a key
//   it cannot place is an error, never ignored.
// - Shapes, in the recipe (keys inside Kubernetes objects keep Kubernetes' spelling):
//     volumes: [{name, mount_path, read_only?, pvc: CLAIM | host_path: PATH | config_map: NAME}]
//     node_selector: {label: value}          tolerations: [{key, operator, value, effect,
//     affinity: {nodeAffinity|podAffinity|     tolerationSeconds}]
//                podAntiAffinity: ...}       resources: {requests: {name: qty}, limits: {...}}
//     labels / annotations: {key: value}     priority_class: NAME     queue: LOCALQUEUE
//     pod_patch: {metadata: ..., spec: ...}  (merged into the pod template)
// - What the plan fixes stays fixed: `nvidia.com/gpu` in resources, labels under the
//   `bridge-launch/` prefix, and a pod_patch that would change the training container's
//   image, command, args, env or GPU limit, or the restart policy, are errors naming the key
//   that sets it instead.
// - apply_pod_settings is pure: it adds the settings to a rendered pod template, and
//   object_labels gives the labels of the top object (JobSet/Job), Kueue's queue included.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "model/recipe.h"

namespace bridge {

struct K8sPodSettings {
  nlohmann::ordered_json volumes = nlohmann::ordered_json::array();  // pod spec.volumes entries
  nlohmann::ordered_json mounts = nlohmann::ordered_json::array();   // container volumeMounts
  nlohmann::ordered_json node_selector;                              // null when unset
  nlohmann::ordered_json tolerations;
  nlohmann::ordered_json affinity;
  nlohmann::ordered_json requests = nlohmann::ordered_json::object();
  nlohmann::ordered_json limits = nlohmann::ordered_json::object();
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  nlohmann::ordered_json annotations = nlohmann::ordered_json::object();
  std::string priority_class;
  std::string queue;
  nlohmann::ordered_json pod_patch;          // null when unset
  bool job_dir_on_volume = false;            // a volume is mounted at or above the job dir
  std::vector<std::string> writable_mounts;  // mount paths of the volumes not read_only
};

// Whether `dir` is at or below the mount path of a writable volume (it outlives the pods).
bool on_writable_volume(const K8sPodSettings& s, const std::string& dir);

std::optional<K8sPodSettings> read_pod_settings(const KubernetesExecutorSpec& kx,
                                                const std::string& job_dir, Diagnostics& diags);

// Adds the settings to `pod` ({metadata, spec} with the `trainer` container), then applies
// pod_patch. Errors (a patch that changes what the plan fixed) go to `diags`; false then.
bool apply_pod_settings(const K8sPodSettings& s, const KubernetesExecutorSpec& kx,
                        nlohmann::ordered_json& pod, Diagnostics& diags);

// The settings' labels plus kueue.x-k8s.io/queue-name when a queue is set.
nlohmann::ordered_json object_labels(const K8sPodSettings& s);

// A YAML node as JSON: unquoted true/false/null and numbers are typed, everything else (and
// every quoted scalar) is a string.
nlohmann::ordered_json yaml_to_json(const YamlNode& node);

}  // namespace bridge
