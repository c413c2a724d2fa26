#include "executors/k8s_trainjob.h"

#include <fmt/format.h>

#include <initializer_list>

#include "executors/k8s_names.h"

namespace bridge {

namespace {

using nlohmann::ordered_json;

// Moves `from[key]` to `to[as]` when present.
void take(ordered_json& from, const char* key, ordered_json& to, const char* as) {
  if (!from.is_object() || !from.contains(key)) return;
  to[as] = std::move(from[key]);
  from.erase(key);
}

void take_all(ordered_json& from, std::initializer_list<const char*> keys, ordered_json& to) {
  for (const char* key : keys) take(from, key, to, key);
}

// Whatever is left in `rest` (an object) is a gap at `pointer`/<key>.
void left_over(const ordered_json& rest, const std::string& pointer,
               std::vector<TrainJobGap>& gaps) {
  if (!rest.is_object()) return;
  for (const auto& [key, value] : rest.items()) gaps.push_back({pointer + "/" + key, false});
}

}  // namespace

TrainJobMapping trainjob_spec(const ordered_json& pod, const std::string& runtime, int64_t nodes,
                              int64_t procs_per_node, const ordered_json& jobset_metadata) {
  TrainJobMapping m;
  ordered_json rest = pod;
  ordered_json spec = rest.contains("spec") ? std::move(rest["spec"]) : ordered_json::object();
  ordered_json meta =
      rest.contains("metadata") ? std::move(rest["metadata"]) : ordered_json::object();
  rest.erase("spec");
  rest.erase("metadata");

  ordered_json container = ordered_json::object();
  if (spec.contains("containers") && spec["containers"].is_array() && !spec["containers"].empty()) {
    container = std::move(spec["containers"][0]);
    spec["containers"].erase(0);
    if (spec["containers"].empty()) spec.erase("containers");
  }
  container.erase("name");  // the runtime's container is `node`
  ordered_json trainer = ordered_json::object();
  take_all(container, {"image", "command", "args", "env"}, trainer);
  trainer["numNodes"] = nodes;
  trainer["numProcPerNode"] = procs_per_node;
  take(container, "resources", trainer, "resourcesPerNode");
  ordered_json container_patch{{"name", k8s_api("trainjob")->container}};
  take_all(container, {"volumeMounts", "securityContext"}, container_patch);
  left_over(container, "/spec/containers/0", m.gaps);

  ordered_json pod_spec = ordered_json::object();
  take_all(spec,
           {"serviceAccountName", "volumes", "imagePullSecrets", "securityContext", "nodeSelector",
            "affinity", "tolerations", "schedulingGates"},
           pod_spec);
  if (container_patch.size() > 1) pod_spec["containers"] = ordered_json::array({container_patch});
  // The runtime's template decides these (the header names them; its restarts are checked
  // against the runtime at submission, runtime_restarts).
  for (const char* key : {"restartPolicy", "enableServiceLinks"})
    if (spec.contains(key)) {
      m.gaps.push_back({std::string("/spec/") + key, true});
      spec.erase(key);
    }
  left_over(spec, "/spec", m.gaps);

  ordered_json pod_meta = ordered_json::object();
  take_all(meta, {"labels", "annotations"}, pod_meta);
  left_over(meta, "/metadata", m.gaps);
  left_over(rest, "", m.gaps);

  ordered_json pod_template{{"metadata", pod_meta}, {"spec", pod_spec}};
  ordered_json rjob{{"name", kK8sReplicatedJob},
                    {"template", {{"spec", {{"template", std::move(pod_template)}}}}}};
  ordered_json patch{
      {"manager", kTrainerPatchManager},
      {"trainingRuntimeSpec",
       {{"template",
         {{"metadata", jobset_metadata},
          {"spec", {{"replicatedJobs", ordered_json::array({std::move(rjob)})}}}}}}}};
  m.spec["runtimeRef"] = {
      {"apiGroup", "trainer.kubeflow.org"}, {"kind", "ClusterTrainingRuntime"}, {"name", runtime}};
  m.spec["trainer"] = std::move(trainer);
  m.spec["runtimePatches"] = ordered_json::array({std::move(patch)});
  return m;
}

std::string trainjob_gap_source(const std::string& pointer) {
  if (pointer == "/spec/priorityClassName") return "executor.kubernetes.priority_class";
  if (pointer == "/spec/terminationGracePeriodSeconds") return "plugins.preemption";
  return "executor.kubernetes.pod_patch";
}

std::vector<std::string> trainjob_limit_problems(const ordered_json& spec) {
  struct Limit {
    const char* pointer;  // in the TrainJob's spec
    size_t max_items;
    size_t max_item_length;  // 0: no limit
  };
  static constexpr Limit kLimits[] = {
      {"/trainer/command", 128, 65536},
      {"/trainer/args", 128, 65536},
      {"/trainer/env", 128, 0},
      {"/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/"
       "template/spec/volumes",
       128, 0},
      {"/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/"
       "template/spec/tolerations",
       128, 0},
      {"/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/"
       "template/spec/imagePullSecrets",
       64, 0},
      {"/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/"
       "template/spec/schedulingGates",
       16, 0},
      {"/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/"
       "template/spec/containers/0/volumeMounts",
       128, 0},
  };
  std::vector<std::string> problems;
  for (const Limit& l : kLimits) {
    const ordered_json::json_pointer at(l.pointer);
    if (!spec.contains(at) || !spec.at(at).is_array()) continue;
    const ordered_json& list = spec.at(at);
    std::string field = std::string(l.pointer).substr(std::string(l.pointer).rfind('/') + 1);
    if (list.size() > l.max_items)
      problems.push_back(fmt::format("its {} would have {} entries; a TrainJob takes at most {}",
                                     field, list.size(), l.max_items));
    if (l.max_item_length > 0)
      for (const auto& item : list)
        if (item.is_string() && item.get_ref<const std::string&>().size() > l.max_item_length) {
          problems.push_back(
              fmt::format("an entry of its {} has {} characters; a TrainJob takes "
                          "at most {}",
                          field, item.get_ref<const std::string&>().size(), l.max_item_length));
          break;
        }
  }
  return problems;
}

std::string runtime_restarts(const nlohmann::json& runtime) {
  using nlohmann::json;
  const json::json_pointer jobs("/spec/template/spec/replicatedJobs");
  const json* node = nullptr;
  if (runtime.contains(jobs) && runtime.at(jobs).is_array())
    for (const auto& rj : runtime.at(jobs))
      if (rj.is_object() && rj.value("name", "") == kK8sReplicatedJob) node = &rj;
  if (!node) return fmt::format("it has no replicated job `{}`", kK8sReplicatedJob);
  std::vector<std::string> restarts;
  const json::json_pointer policy("/template/spec/template/spec/restartPolicy");
  std::string restart_policy = node->contains(policy) && node->at(policy).is_string()
                                   ? node->at(policy).get<std::string>()
                                   : "";
  if (restart_policy != "Never")
    restarts.push_back(fmt::format(
        "a failed container restarts in place (restartPolicy {})",
        restart_policy.empty() ? "unset: the JobSet webhook's OnFailure" : restart_policy));
  const json::json_pointer backoff("/template/spec/backoffLimit");
  const bool backoff_set = node->contains(backoff) && node->at(backoff).is_number_integer();
  if (!backoff_set || node->at(backoff).get<int64_t>() > 0)
    restarts.push_back(fmt::format(
        "its Job tries a failed pod again up to {} times (backoffLimit{})",
        backoff_set ? node->at(backoff).get<int64_t>() : 6, backoff_set ? "" : " unset: 6"));
  const json::json_pointer max_restarts("/spec/template/spec/failurePolicy/maxRestarts");
  if (runtime.contains(max_restarts) && runtime.at(max_restarts).is_number_integer() &&
      runtime.at(max_restarts).get<int64_t>() > 0)
    restarts.push_back(fmt::format("its JobSet restarts up to {} times (failurePolicy.maxRestarts)",
                                   runtime.at(max_restarts).get<int64_t>()));
  std::string text;
  for (size_t i = 0; i < restarts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == restarts.size() ? " and " : ", ") + restarts[i];
  return text;
}

}  // namespace bridge
