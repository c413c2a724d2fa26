#include "executors/k8s_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/json_limits.h"
#include "executors/k8s_names.h"
#include "executors/k8s_render.h"

namespace bridge {

namespace {

using nlohmann::json;

std::string str_at(const json& j, const json::json_pointer& p) {
  if (!j.contains(p)) return {};
  const json& v = j.at(p);
  return v.is_string() ? v.get<std::string>() : std::string();
}

int64_t int_at(const json& j, const json::json_pointer& p) {
  if (!j.contains(p)) return 0;
  const json& v = j.at(p);
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

// kubectl's JSON is read defensively: a field of an unexpected type reads as absent (the
// `value()` accessor would throw), and counts are bounded (a huge or negative number is
// nonsense for a pod count and must not overflow a sum).
std::string field(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t count_field(const json& obj, const char* key) {
  constexpr int64_t kMaxCount = 1'000'000'000;
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return 0;
  if (it->is_number_unsigned()) return std::min<uint64_t>(it->get<uint64_t>(), kMaxCount);
  return std::clamp<int64_t>(it->get<int64_t>(), 0, kMaxCount);
}

std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string label(const json& obj, const std::string& key) {
  const json* labels = nullptr;
  if (obj.contains("metadata") && obj["metadata"].is_object() &&
      obj["metadata"].contains("labels") && obj["metadata"]["labels"].is_object())
    labels = &obj["metadata"]["labels"];
  if (!labels || !labels->contains(key) || !(*labels)[key].is_string()) return {};
  return (*labels)[key].get<std::string>();
}

std::string annotation(const json& obj, const std::string& key) {
  const json* a = nullptr;
  if (obj.contains("metadata") && obj["metadata"].is_object() &&
      obj["metadata"].contains("annotations") && obj["metadata"]["annotations"].is_object())
    a = &obj["metadata"]["annotations"];
  if (!a || !a->contains(key) || !(*a)[key].is_string()) return {};
  return (*a)[key].get<std::string>();
}

struct Condition {
  std::string reason;
  std::string message;
};

// The condition of `type` with status "True", if any.
std::optional<Condition> true_condition(const json& obj, const std::string& type) {
  const json::json_pointer p("/status/conditions");
  if (!obj.contains(p) || !obj.at(p).is_array()) return std::nullopt;
  for (const auto& c : obj.at(p)) {
    if (field(c, "type") != type || field(c, "status") != "True") continue;
    return Condition{field(c, "reason"), field(c, "message")};
  }
  return std::nullopt;
}

std::string describe(const std::string& word, const Condition& c) {
  std::string d = word;
  if (!c.reason.empty()) d += ": " + c.reason;
  if (!c.message.empty())
    d += (c.reason.empty() ? ": " : " (") + c.message + (c.reason.empty() ? "" : ")");
  return d;
}

std::string kind_of(const json& obj) { return field(obj, "kind"); }
std::string name_of(const json& obj) { return str_at(obj, json::json_pointer("/metadata/name")); }

}  // namespace

std::optional<K8sJobRef> parse_k8s_scheduler_id(const std::string& id) {
  size_t slash = id.find('/');
  if (slash == std::string::npos || slash + 1 >= id.size()) return std::nullopt;
  K8sJobRef ref{id.substr(0, slash), id.substr(slash + 1)};
  if (!k8s_api(ref.api)) return std::nullopt;
  return ref;
}

StatusOr<std::vector<json>> parse_kubectl_items(const std::string& text) {
  if (!json_depth_within(text)) return Status::failed("kubectl printed JSON nested too deeply");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::failed("kubectl did not print a JSON object");
  if (j.contains("items")) {
    if (!j["items"].is_array()) return Status::failed("kubectl's JSON has no item list");
    return j["items"].get<std::vector<json>>();
  }
  return std::vector<json>{j};
}

JobStatus jobset_status(const json& js) {
  JobStatus st;
  int64_t restarts = int_at(js, json::json_pointer("/status/restarts"));
  std::string restart_note = restarts > 0 ? fmt::format("restarts: {}", restarts) : "";
  if (auto c = true_condition(js, "Completed")) {
    st.state = JobState::kSucceeded;
    st.detail = describe("Completed", *c);
    st.exit_code = 0;
  } else if (auto f = true_condition(js, "Failed")) {
    st.state = JobState::kFailed;
    st.detail = describe("Failed", *f);
  } else if (auto s = true_condition(js, "Suspended")) {
    st.state = JobState::kPending;
    st.detail = describe("Suspended", *s);
  } else {
    std::string terminal = str_at(js, json::json_pointer("/status/terminalState"));
    int64_t ready = 0, active = 0;
    const json::json_pointer p("/status/replicatedJobsStatus");
    if (js.contains(p) && js.at(p).is_array())
      for (const auto& r : js.at(p)) {
        // Each term is at most 10^9, so even a list of millions cannot overflow.
        ready += count_field(r, "ready");
        active += count_field(r, "active");
      }
    if (terminal == "Completed") {
      st.state = JobState::kSucceeded;
      st.detail = "Completed";
    } else if (terminal == "Failed") {
      st.state = JobState::kFailed;
      st.detail = "Failed";
    } else if (ready > 0) {
      st.state = JobState::kRunning;
      st.detail = "all pods running";
    } else {
      st.state = JobState::kPending;
      st.detail = active > 0 ? "pods starting" : "waiting for pods";
    }
  }
  if (!restart_note.empty()) st.detail += " (" + restart_note + ")";
  return st;
}

JobStatus trainjob_status(const json& trainjob, const json* jobset) {
  JobStatus st;
  if (auto c = true_condition(trainjob, "Complete")) {
    st.state = JobState::kSucceeded;
    st.detail = describe("TrainJob Complete", *c);
    st.exit_code = 0;
  } else if (auto f = true_condition(trainjob, "Failed")) {
    st.state = JobState::kFailed;
    st.detail = describe("TrainJob Failed", *f);
  } else if (auto s = true_condition(trainjob, "Suspended")) {
    st.state = JobState::kPending;
    st.detail = describe("TrainJob Suspended", *s);
  } else if (jobset) {
    return jobset_status(*jobset);
  } else {
    // Trainer v2.2 has no condition for a TrainJob it cannot build: a runtime deleted after
    // the apply shows only as an event on the TrainJob.
    st.state = JobState::kPending;
    st.detail = "the Trainer controller has not made its JobSet yet";
  }
  return st;
}

JobStatus job_status(const json& job) {
  JobStatus st;
  std::optional<Condition> c;
  if ((c = true_condition(job, "Complete")) || (c = true_condition(job, "SuccessCriteriaMet"))) {
    st.state = JobState::kSucceeded;
    st.detail = describe("Complete", *c);
    st.exit_code = 0;
  } else if ((c = true_condition(job, "Failed")) || (c = true_condition(job, "FailureTarget"))) {
    st.state = JobState::kFailed;
    st.detail = describe("Failed", *c);
  } else if ((c = true_condition(job, "Suspended")) ||
             (job.contains(json::json_pointer("/spec/suspend")) &&
              job.at(json::json_pointer("/spec/suspend")).is_boolean() &&
              job.at(json::json_pointer("/spec/suspend")).get<bool>())) {
    st.state = JobState::kPending;
    st.detail = "suspended";
  } else {
    int64_t ready = int_at(job, json::json_pointer("/status/ready"));
    int64_t active = int_at(job, json::json_pointer("/status/active"));
    int64_t want = int_at(job, json::json_pointer("/spec/parallelism"));
    if (ready > 0) {
      st.state = JobState::kRunning;
      st.detail = want > 0 ? fmt::format("{}/{} pods ready", ready, want)
                           : fmt::format("{} pods ready", ready);
    } else {
      st.state = JobState::kPending;
      st.detail = active > 0 ? fmt::format("{} pods starting", active) : "waiting for pods";
    }
  }
  return st;
}

namespace {

// The Job API attempts of `base` among `items`, by attempt number (0 first).
std::map<int64_t, const json*> job_attempts(const std::string& base,
                                            const std::vector<json>& items) {
  std::map<int64_t, const json*> attempts;
  for (const auto& obj : items)
    if (kind_of(obj) == "Job" && label(obj, kK8sJobLabel) == base)
      attempts[parse_int(label(obj, kK8sAttemptLabel)).value_or(0)] = &obj;
  return attempts;
}

// An attempt created suspended that was never started.
bool never_started(const JobStatus& s) {
  return s.state == JobState::kPending && s.detail == "suspended";
}

}  // namespace

K8sAttemptStatus job_api_status(const std::string& base, const std::vector<json>& items) {
  const std::map<int64_t, const json*> attempts = job_attempts(base, items);
  K8sAttemptStatus out;
  if (attempts.empty()) return out;
  out.found = true;
  auto total = parse_int(annotation(*attempts.begin()->second, kK8sAttemptsAnnotation))
                   .value_or(static_cast<int64_t>(attempts.size()));
  // The newest attempt that was started (not suspended); attempt 0 when none was.
  auto current = attempts.begin();
  for (auto it = attempts.begin(); it != attempts.end(); ++it) {
    JobStatus s = job_status(*it->second);
    if (!never_started(s)) current = it;
  }
  out.status = job_status(*current->second);
  auto label_attempt = [&](int64_t a) {
    return total > 1 ? fmt::format("attempt {}/{}", a + 1, total) : std::string();
  };
  if (out.status.state == JobState::kFailed) {
    auto next = attempts.find(current->first + 1);
    if (next != attempts.end()) {
      out.start_next = name_of(*next->second);
      out.failed = name_of(*current->second);
      out.failed_attempt = current->first;
      out.status.state = JobState::kPending;
      out.status.detail = fmt::format("{} starting; {} {}", label_attempt(next->first),
                                      label_attempt(current->first), out.status.detail);
      return out;
    }
  }
  if (total > 1) out.status.detail = label_attempt(current->first) + ": " + out.status.detail;
  return out;
}

const json* find_object(const std::string& kind, const std::string& name,
                        const std::vector<json>& items) {
  for (const auto& obj : items)
    if (kind_of(obj) == kind && name_of(obj) == name) return &obj;
  return nullptr;
}

const json* find_jobset(const std::string& name, const std::vector<json>& items) {
  return find_object("JobSet", name, items);
}

namespace {

// The runtime container's (else the first container's) state.terminated.
// The training container of any API (`trainer`; a Trainer runtime's `node`), not a sidecar.
bool is_training_container(const std::string& name) {
  for (const K8sApi& api : k8s_apis())
    if (name == api.container) return true;
  return false;
}

void add_terminated_state(const json& pod, K8sPod& p) {
  const json::json_pointer where("/status/containerStatuses");
  if (!pod.contains(where) || !pod.at(where).is_array()) return;
  const json* chosen = nullptr;
  for (const auto& c : pod.at(where)) {
    if (!c.is_object()) continue;
    if (!chosen || is_training_container(field(c, "name"))) chosen = &c;
  }
  const json::json_pointer term("/state/terminated");
  if (!chosen || !chosen->contains(term) || !chosen->at(term).is_object()) return;
  const json& t = chosen->at(term);
  auto number = [&](const char* key) -> std::optional<int64_t> {
    auto it = t.find(key);
    if (it == t.end() || !it->is_number_integer()) return std::nullopt;
    return std::clamp<int64_t>(it->get<int64_t>(), -1'000'000, 1'000'000);
  };
  p.exit_code = number("exitCode");
  p.signal = number("signal");
  if (p.signal && *p.signal == 0) p.signal.reset();
  p.reason = field(t, "reason");
  p.finished_at = field(t, "finishedAt");
  p.message = field(t, "message").substr(0, 4096);
}

void add_waiting_reason(const json& pod, K8sPod& p) {
  if (p.phase != "Pending") return;
  const json::json_pointer conditions("/status/conditions");
  if (pod.contains(conditions) && pod.at(conditions).is_array())
    for (const auto& c : pod.at(conditions))
      if (c.is_object() && field(c, "type") == "PodScheduled" && field(c, "status") == "False") {
        std::string why = field(c, "message");
        p.waiting = why.empty() ? field(c, "reason") : why;
        return;
      }
  const json::json_pointer statuses("/status/containerStatuses");
  if (pod.contains(statuses) && pod.at(statuses).is_array())
    for (const auto& c : pod.at(statuses))
      if (c.is_object() && c.contains(json::json_pointer("/state/waiting"))) {
        const json& w = c.at(json::json_pointer("/state/waiting"));
        if (w.is_object()) p.waiting = field(w, "reason");
        if (!p.waiting.empty()) return;
      }
}

}  // namespace

std::string kueue_queue_of(const json& object) { return label(object, kKueueQueueLabel); }

std::string kueue_wait_detail(const std::string& kind, const std::string& name,
                              const std::string& queue, const std::vector<json>& workloads) {
  auto owned = [&](const json& wl) {
    const json::json_pointer p("/metadata/ownerReferences");
    if (!wl.contains(p) || !wl.at(p).is_array()) return false;
    for (const auto& o : wl.at(p)) {
      if (field(o, "kind") != kind) continue;
      std::string owner = field(o, "name");
      if (owner == name) return true;
      // Job API attempts after the first: <name>-r<N> (k8s_names.h).
      if (kind == "Job" && owner.rfind(name + "-r", 0) == 0 &&
          parse_int(owner.substr(name.size() + 2)))
        return true;
    }
    return false;
  };
  for (const auto& wl : workloads) {
    if (kind_of(wl) != "Workload" || !owned(wl)) continue;
    if (true_condition(wl, "Admitted") || true_condition(wl, "Finished")) continue;
    // QuotaReserved=False says why Kueue holds it (no quota, no such LocalQueue, ...).
    std::string reason, message;
    const json::json_pointer p("/status/conditions");
    if (wl.contains(p) && wl.at(p).is_array())
      for (const auto& c : wl.at(p))
        if (field(c, "type") == "QuotaReserved" && field(c, "status") == "False") {
          reason = field(c, "reason");
          message = field(c, "message");
        }
    std::string why = reason.empty() ? message : message.empty() ? reason : reason + ": " + message;
    return fmt::format("queued by Kueue in {} ({})", queue.empty() ? "its queue" : queue,
                       why.empty() ? "waiting for admission" : why);
  }
  return "";
}

std::vector<K8sPod> all_pods(const std::vector<json>& items) {
  std::vector<K8sPod> pods;
  for (const auto& obj : items) {
    if (kind_of(obj) != "Pod") continue;
    K8sPod p;
    p.name = name_of(obj);
    std::string idx = annotation(obj, kK8sCompletionIndex);
    if (idx.empty()) idx = label(obj, kK8sCompletionIndex);
    p.index = parse_int(idx).value_or(-1);
    std::string attempt = label(obj, kK8sAttemptLabel);
    if (attempt.empty()) attempt = label(obj, kJobSetRestartAttemptLabel);
    p.attempt = parse_int(attempt).value_or(0);
    p.phase = str_at(obj, json::json_pointer("/status/phase"));
    p.node_name = str_at(obj, json::json_pointer("/spec/nodeName"));
    p.pod_reason = str_at(obj, json::json_pointer("/status/reason"));
    add_terminated_state(obj, p);
    add_waiting_reason(obj, p);
    if (!p.name.empty() && p.index >= 0) pods.push_back(std::move(p));
  }
  std::stable_sort(pods.begin(), pods.end(),
                   [](const K8sPod& a, const K8sPod& b) { return a.index < b.index; });
  return pods;
}

std::vector<K8sPod> latest_attempt_pods(const std::vector<json>& items) {
  std::vector<K8sPod> pods = all_pods(items);
  int64_t newest = 0;
  for (const auto& p : pods) newest = std::max(newest, p.attempt);
  std::erase_if(pods, [&](const K8sPod& p) { return p.attempt != newest; });
  return pods;
}

std::string blamed_node(const std::vector<K8sPod>& pods) {
  const K8sPod* first = nullptr;
  for (const auto& p : pods) {
    bool failed = p.phase == "Failed" || (p.exit_code && *p.exit_code != 0) || p.signal;
    if (!failed || p.node_name.empty()) continue;
    // As `why` orders its units: by the container's end, one without an end (a pod lost with
    // its node) after those with one.
    auto order = [](const K8sPod& x) { return x.finished_at.empty() ? "~" : x.finished_at; };
    if (!first || order(p) < order(*first)) first = &p;
  }
  return first ? first->node_name : "";
}

std::vector<std::string> excluded_nodes_of(const json& job) {
  // Anyone who may edit the Job may edit the annotation: only node names are taken, at most
  // kMaxExcludedNodes of them.
  constexpr size_t kMaxExcludedNodes = 64;
  std::vector<std::string> nodes;
  std::string list = annotation(job, kK8sExcludedNodesAnnotation);
  for (size_t from = 0; from < list.size() && nodes.size() < kMaxExcludedNodes;) {
    size_t comma = std::min(list.find(',', from), list.size());
    std::string node = list.substr(from, comma - from);
    if (is_rfc1123_subdomain(node)) nodes.push_back(std::move(node));
    from = comma + 1;
  }
  return nodes;
}

std::vector<std::string> job_api_attempt_lines(const std::string& base,
                                               const std::vector<json>& items) {
  const std::map<int64_t, const json*> attempts = job_attempts(base, items);
  if (attempts.size() < 2) return {};
  const std::vector<K8sPod> pods = all_pods(items);
  std::vector<std::string> lines;
  for (const auto& [attempt, job] : attempts) {
    JobStatus s = job_status(*job);
    if (never_started(s)) continue;
    std::vector<K8sPod> mine;
    std::set<std::string> nodes;
    for (const auto& p : pods)
      if (p.attempt == attempt) {
        mine.push_back(p);
        if (!p.node_name.empty()) nodes.insert(p.node_name);
      }
    std::string line =
        fmt::format("{}: Job {} {}", attempt + 1, name_of(*job), job_state_name(s.state));
    if (!nodes.empty()) line += fmt::format(" on {}", fmt::join(nodes, ","));
    if (auto excluded = excluded_nodes_of(*job); !excluded.empty())
      line += fmt::format(", excluding {}", fmt::join(excluded, ","));
    if (s.state == JobState::kFailed)
      if (std::string blamed = blamed_node(mine); !blamed.empty())
        line += fmt::format("; failure blamed on {}", blamed);
    lines.push_back(std::move(line));
  }
  return lines;
}

bool excludes_failed_nodes(const json& job) {
  return annotation(job, kK8sExcludeFailedNodesAnnotation) == "true";
}

json next_attempt_patch(const json& next_job, const std::vector<std::string>& excluded) {
  json patch{{"spec", {{"suspend", false}}}};
  if (excluded.empty()) return patch;
  std::string list;
  for (const auto& n : excluded) list += (list.empty() ? "" : ",") + n;
  patch["metadata"]["annotations"][kK8sExcludedNodesAnnotation] = list;
  // Each term of the template's required node affinity (they are ORed) gets the exclusion
  // (a term's requirements are ANDed); without one, a term of its own. The API takes one
  // value per node field selector with NotIn: one requirement per node.
  json fences = json::array();
  for (const auto& node : excluded)
    fences.push_back({{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {node}}});
  const json::json_pointer where(
      "/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution");
  json required = next_job.contains(where) && next_job.at(where).is_object() ? next_job.at(where)
                                                                             : json::object();
  if (!required.contains("nodeSelectorTerms") || !required["nodeSelectorTerms"].is_array() ||
      required["nodeSelectorTerms"].empty())
    required["nodeSelectorTerms"] = json::array({json::object()});
  for (auto& term : required["nodeSelectorTerms"]) {
    if (!term.is_object()) continue;
    if (!term.contains("matchFields") || !term["matchFields"].is_array())
      term["matchFields"] = json::array();
    for (const auto& fence : fences) term["matchFields"].push_back(fence);
  }
  patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
       ["requiredDuringSchedulingIgnoredDuringExecution"] = required;
  return patch;
}

const json* find_job(const std::string& name, const std::vector<json>& items) {
  for (const auto& obj : items)
    if (kind_of(obj) == "Job" && name_of(obj) == name) return &obj;
  return nullptr;
}

}  // namespace bridge
