// The Kubernetes executor's pure half: Plan -> manifests (what --dry-run prints, what the
// golden tests compare, what `kubectl apply -f -` reads).
//
// Contract:
// - No side effects; the same plan and options give the same bytes. The only per-submission
//   input is `options.suffix`, which ends every object name (see k8s_names.h).
// - api `jobset` (default): [Secret], [ConfigMap], JobSet. api `job`: [Secret], [ConfigMap],
//   then per attempt (1 + retries) a headless Service and an Indexed Job; attempts after the
//   first are created suspended and started one by one when the previous attempt failed (the
//   executor's status query does that), so a retry is a new Job under a new name. api
//   `trainjob`: [Secret], [ConfigMap], a TrainJob carrying the JobSet's pod
//   (executors/k8s_trainjob.h); a pod field it cannot carry is an error naming the setting.
// - Every non-secret launch variable is a container env entry whose value reaches the
//   process byte-for-byte: `$` is escaped where Kubernetes' `$(VAR)` expansion would touch
//   it. Secrets are `secretKeyRef`s into the generated Secret `<name>-env` (or into
//   executor.kubernetes.secret_name). The generated Secret is in `docs` always, but in `yaml`
//   only with `options.reveal_secrets` (only the text piped into kubectl sets it): the shown
//   text names the Secret and prints the `kubectl create secret` line that makes it, so a
//   dry-run applied by hand cannot start pods with placeholder values.
// - With the plan confirmation (Plan::confirm), the ConfigMap `<name>-plan` holds its program
//   and request, mounted read-only at kK8sPlanMountPath; the shown `yaml` leaves it out (a
//   header line names it), the applied one has it. The verdict goes to `submission_dir`,
//   `<job dir>/<name>`, which the entrypoint creates and where the pod's watchdog writes too.
// - Placement: with runtime.binding numa and pods of whole nodes, every torchrun worker starts
//   through executors/numa_bind.h's program; Plan::nvlink becomes Kueue topology annotations
//   on the pod template (when the recipe asks) or pod affinity among the job's pods. With
//   exclude_failed_nodes (Job API, retries), each Job carries the annotation that tells
//   `status` to start the next attempt away from the failed node (k8s_status.h).
// - MASTER_ADDR is the DNS name of pod 0 computed by the same functions that name the
//   objects; NODE_RANK comes from the completion-index annotation; torchrun (or the
//   fault_tolerance plugin's ft_launcher) starts gpus_per_node ranks per pod after a bounded
//   wait for MASTER_ADDR to resolve.
// - Problems (no container image, a value Kubernetes cannot carry, a bad quantity) are
//   diagnostics; the result is then nullopt.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "plan/plan.h"

namespace bridge {

struct K8sRenderOptions {
  std::string suffix = "0000";  // the per-submission part of every name
  bool reveal_secrets = false;  // true only for the text handed to `kubectl apply`
  // The registry id (or the dry-run id): names runtime.code's snapshot directory.
  std::string job_id;
};

struct K8sManifests {
  std::string api;              // "jobset" | "job" | "trainjob" (k8s_names.h K8sApi)
  std::string name;             // the JobSet, or the first attempt's Job
  std::string scheduler_id;     // "<api>/<name>" (what the registry stores)
  std::string master_addr;      // of the first attempt
  std::string secret_object;    // the generated Secret's name, "" when none
  std::string plan_config_map;  // the plan confirmation's ConfigMap, "" when none
  std::string submission_dir;   // <job dir>/<name>: the submission's files in the pods
  int64_t attempts = 1;         // Job API: 1 + retries; JobSet: 1 (it restarts in place)
  std::vector<nlohmann::ordered_json> docs;  // in apply order (the Secret with <secret> values
                                             // unless revealed)
  std::string yaml;                          // header comments + `---`-separated documents
};

std::optional<K8sManifests> render_k8s_manifests(const Plan& plan, const K8sRenderOptions& options,
                                                 Diagnostics& diags);

// Label keys and values shared with the executor's queries.
inline constexpr const char* kK8sManagedByKey = "app.kubernetes.io/managed-by";
inline constexpr const char* kK8sManagedBy = "bridge-launch";
inline constexpr const char* kK8sJobLabel = "bridge-launch/job";
inline constexpr const char* kK8sAttemptLabel = "bridge-launch/attempt";
// The JobSet controller's label on the pods of each restart (0 first).
inline constexpr const char* kJobSetRestartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt";
inline constexpr const char* kK8sAttemptsAnnotation = "bridge-launch/attempts";
inline constexpr const char* kK8sRecipeAnnotation = "bridge-launch/recipe";
inline constexpr const char* kK8sContainer = "trainer";
inline constexpr const char* kK8sCodeVolume = "bridge-code";  // runtime.code's volume
// runtime.confirm's ConfigMap volume (the program and the planned values), read-only.
inline constexpr const char* kK8sPlanVolume = "bridge-plan";
inline constexpr const char* kK8sPlanMountPath = "/etc/bridge-launch/plan";
inline constexpr const char* kK8sCompletionIndex = "batch.kubernetes.io/job-completion-index";

// Kubernetes expands `$(VAR)` and turns `$$` into `$` in env values, command and args; this
// escapes exactly the `$` that would be touched, so the process sees `s` unchanged.
std::string k8s_escape_dollars(const std::string& s);

}  // namespace bridge
