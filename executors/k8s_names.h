// Kubernetes names for one submission: the objects, the pod hostnames and MASTER_ADDR all
// come from the functions here, so the rendezvous address is by construction the DNS name
// the objects produce.
//
// Contract:
// - k8s_base_name(recipe, suffix, reserved) is an RFC 1035 label (lowercase letters, digits
//   and '-', starting with a letter, not ending with '-') of at most 63 - `reserved`
//   characters: the sanitized recipe name, then `-<suffix>`. When the sanitized name is too
//   long it is truncated and `-<4 hex>` of the FNV-1a hash of the ORIGINAL recipe name is
//   appended (k8s_short_hash), so the same recipe name always gives the same prefix, and two long
//   names that share a prefix still differ.
// - `reserved` is what the object kind appends to the base: *_reserved() compute it from the
//   node count (and attempts), so every pod hostname stays within 63 characters.
// - JobSet (jobset.x-k8s.io/v1alpha2, one replicatedJob): child Job
//   `<jobset>-<rjob>-<jobIndex>`, pod hostname `<jobset>-<rjob>-<jobIndex>-<podIndex>`,
//   subdomain `<jobset>` (the JobSet default, which we do not override).
// - Indexed Job + headless Service: attempt 0 is `<base>`, attempt k is `<base>-r<k>`; the
//   Service has the Job's name; pod hostnames are `<job>-<index>`.
// - k8s_submission_suffix(job_id) is 4 lowercase hex digits derived from the registry job id
//   the CLI fixed for this submission: the same id always renders the same names (so a
//   render is deterministic), and each new submission, which gets a new id, new objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bridge {

// executor.kubernetes.api: one row per top object the executor can submit, read by the
// renderer (the header's words), the executor (what kubectl gets, patches and deletes) and the
// status parser (which scheduler ids are ours).
struct K8sApi {
  const char* name;       // "jobset" | "job" | "trainjob": the recipe's value and the id's prefix
  const char* kind;       // the top object's kind
  const char* resource;   // its kubectl resource name, group-qualified
  const char* described;  // the dry-run header's words
  const char* container;  // the training container's name in the pods
  // What `cancel` deletes by the job's label: the top objects and what they do not own yet.
  const char* cancel_kinds;
};
// Every row, in the order kubectl queries list them; the row of `name`, nullptr when none.
const std::vector<K8sApi>& k8s_apis();
const K8sApi* k8s_api(std::string_view name);

// The replicated job (JobSet) that holds the ranks; a TrainJob's runtime names it so too
// (Kubeflow Trainer's convention for the trainer step).
inline constexpr const char* kK8sReplicatedJob = "node";
inline constexpr int kK8sMasterPort = 29500;
inline constexpr size_t kK8sMaxLabel = 63;

// Lowercase, [a-z0-9-] only, runs of other characters become one '-', starts with a letter
// ("job-" is prepended otherwise), no leading/trailing '-'; "job" when nothing is left.
std::string sanitize_k8s_name(const std::string& recipe_name);

// 4 lowercase hex digits: FNV-1a 64 of `text` folded to 16 bits by XOR (stable across runs
// and machines).
std::string k8s_short_hash(const std::string& text);

std::string k8s_submission_suffix(const std::string& job_id);

size_t decimal_digits(int64_t n);  // of a non-negative number; 1 for 0

// Characters the JobSet kind appends to its name in the longest pod hostname.
size_t jobset_reserved(int64_t nodes);
// Characters the Job kind appends: the attempt suffix of the last retry and the pod index.
size_t job_reserved(int64_t nodes, int64_t retries);

std::string k8s_base_name(const std::string& recipe_name, const std::string& suffix,
                          size_t reserved);

std::string jobset_child_job_name(const std::string& jobset, const std::string& rjob,
                                  int64_t job_index);
std::string jobset_pod_hostname(const std::string& jobset, const std::string& rjob,
                                int64_t job_index, int64_t pod_index);
std::string jobset_subdomain(const std::string& jobset);
// `<jobset>-<rjob>-0-0.<subdomain>`: pod 0 of job 0.
std::string jobset_master_addr(const std::string& jobset, const std::string& rjob);

std::string job_attempt_name(const std::string& base, int64_t attempt);
std::string job_service_name(const std::string& job);
std::string job_pod_hostname(const std::string& job, int64_t index);
// `<job>-0.<service>`.
std::string job_master_addr(const std::string& job);

bool is_rfc1035_label(const std::string& s);
bool is_rfc1123_label(const std::string& s);
// A Kubernetes quantity as resources and volumes take it: DIGITS[.DIGITS][Ki|Mi|..|k|M|..|m].
bool is_k8s_quantity(std::string_view s);
// The value of such a quantity in base units (cores, bytes): 500m -> 0.5, 1Ki -> 1024;
// nullopt when is_k8s_quantity is false or the value is above 10^18.
std::optional<double> k8s_quantity_value(std::string_view s);
bool is_rfc1123_subdomain(const std::string& s);

}  // namespace bridge
