// Reading the cluster's answers: `kubectl get ... -o json` lists of JobSets, Jobs and Pods,
// mapped onto bridge-launch's JobState. Pure functions (JSON text in, values out), so the
// status logic is tested with canned kubectl output.
//
// Contract:
// - JobSet: condition Completed=True -> SUCCEEDED, Failed=True -> FAILED (after JobSet's own
//   restarts are used up), Suspended=True -> PENDING; otherwise RUNNING once a replicated job
//   reports ready pods, else PENDING. Details carry the condition's reason and message, and
//   the restart count.
// - Job: Complete=True (or SuccessCriteriaMet) -> SUCCEEDED, Failed=True or
//   FailureTarget=True -> FAILED, Suspended=True -> PENDING, ready pods -> RUNNING, else
//   PENDING.
// - TrainJob: its Complete, Failed or Suspended condition decides; otherwise its JobSet's
//   status (the Trainer controller makes it), PENDING while there is none.
// - Job API attempts: the latest attempt that is not suspended decides; when it failed and a
//   suspended attempt follows, the result names the Job to start (`start_next`) and the
//   state is PENDING.
// - Kueue: a PENDING job with a queue label whose Workload is not admitted says so, with
//   Kueue's reason (kueue_wait_detail).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "jobs/job_record.h"

namespace bridge {

struct K8sJobRef {
  std::string api;   // "jobset" | "job" | "trainjob" (k8s_names.h K8sApi)
  std::string name;  // the JobSet, or the first attempt's Job
};

// From a JobRecord's scheduler_id ("<api>/<name>": jobset/x, job/x, trainjob/x).
std::optional<K8sJobRef> parse_k8s_scheduler_id(const std::string& id);

// The items of a `kubectl get -o json` answer (a List, or a single object); a failed Status
// saying why when the text is not JSON of that shape.
StatusOr<std::vector<nlohmann::json>> parse_kubectl_items(const std::string& text);

JobStatus jobset_status(const nlohmann::json& jobset);
JobStatus job_status(const nlohmann::json& job);
// `jobset`: the TrainJob's JobSet (same name), nullptr when there is none yet.
JobStatus trainjob_status(const nlohmann::json& trainjob, const nlohmann::json* jobset);

struct K8sAttemptStatus {
  JobStatus status;
  std::string start_next;  // the suspended Job to start now ("" = none)
  std::string failed;      // with start_next: the attempt's Job that failed
  int64_t failed_attempt = 0;
  bool found = false;  // any attempt of the job was in the list
};

// `items` may hold any objects; those of other jobs are ignored.
K8sAttemptStatus job_api_status(const std::string& base, const std::vector<nlohmann::json>& items);

// The object of `kind` named `name` among `items`, or nullptr.
const nlohmann::json* find_object(const std::string& kind, const std::string& name,
                                  const std::vector<nlohmann::json>& items);
// The JobSet named `name` among `items`, or nullptr.
const nlohmann::json* find_jobset(const std::string& name,
                                  const std::vector<nlohmann::json>& items);

struct K8sPod {
  std::string name;
  int64_t index = -1;      // completion index = node index
  int64_t attempt = 0;     // JobSet restart attempt or Job API attempt
  std::string phase;       // Pending | Running | Succeeded | Failed | Unknown
  std::string node_name;   // spec.nodeName, "" before it is scheduled
  std::string pod_reason;  // status.reason of the pod itself: Evicted, NodeLost, ...
  // The runtime container's state.terminated, when it has ended:
  std::optional<int64_t> exit_code;
  std::optional<int64_t> signal;
  std::string reason;       // "Error", "OOMKilled", ...
  std::string finished_at;  // RFC 3339, sorts in time order
  // Its termination message (the watchdog's verdict, templates/k8s-watchdog.sh.tmpl), at
  // most 4096 bytes as the kubelet keeps it.
  std::string message;
  // Why a pod that has not started waits: the PodScheduled=False condition's message
  // ("0/2 nodes are available: ...") or the container's waiting reason (ImagePullBackOff);
  // "" when it does not wait.
  std::string waiting;
  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
};

// Kueue (executor.kubernetes.queue): a queued job's JobSet or Job is suspended until Kueue
// admits its Workload, an object Kueue creates and owns through ownerReferences.
inline constexpr const char* kKueueQueueLabel = "kueue.x-k8s.io/queue-name";

// The queue a JobSet/Job carries, "" when none.
std::string kueue_queue_of(const nlohmann::json& object);

// "queued by Kueue in QUEUE (REASON: MESSAGE)" from the not-admitted Workload that a `kind`
// object named `name` (for the Job API: its attempts, `name` and `name-rN`) owns; "" when
// no such Workload is waiting (admitted, or none: Kueue not installed, not created yet).
std::string kueue_wait_detail(const std::string& kind, const std::string& name,
                              const std::string& queue,
                              const std::vector<nlohmann::json>& workloads);

// The pods among `items`, sorted by node index: all of them, or the newest attempt's.
std::vector<K8sPod> all_pods(const std::vector<nlohmann::json>& items);
std::vector<K8sPod> latest_attempt_pods(const std::vector<nlohmann::json>& items);

// Retries away from a bad node (executor.kubernetes.exclude_failed_nodes, Job API): the node
// `why` blames for a failed attempt, the node of the pod whose container failed first ("" when
// no failed pod was scheduled); the nodes a Job's annotation says it excludes; and the merge
// patch that starts the next (suspended, never started) attempt with those nodes excluded:
// `metadata.name NotIn [...]` added to every term of its required node affinity (Kubernetes
// lets a suspended Job's scheduling directives change before it first starts).
inline constexpr const char* kK8sExcludedNodesAnnotation = "bridge-launch/excluded-nodes";
inline constexpr const char* kK8sExcludeFailedNodesAnnotation =
    "bridge-launch/exclude-failed-nodes";
std::string blamed_node(const std::vector<K8sPod>& pods);
std::vector<std::string> excluded_nodes_of(const nlohmann::json& job);
// Whether the Job was rendered to start away from the nodes earlier attempts failed on.
bool excludes_failed_nodes(const nlohmann::json& job);
nlohmann::json next_attempt_patch(const nlohmann::json& next_job,
                                  const std::vector<std::string>& excluded);
// One line per started attempt of a Job API job with more than one attempt, from its Jobs
// and pods among `items` (`status JOB`'s attempts): "2: Job x-r1 SUCCEEDED on kwok-1,
// excluding kwok-0"; the failure's blamed node on a failed one. {} for one attempt.
std::vector<std::string> job_api_attempt_lines(const std::string& base,
                                               const std::vector<nlohmann::json>& items);
// The Job named `name` among `items`, or nullptr.
const nlohmann::json* find_job(const std::string& name, const std::vector<nlohmann::json>& items);

}  // namespace bridge
