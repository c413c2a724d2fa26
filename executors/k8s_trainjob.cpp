#include "executors/k8s_trainjob.h"

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
                              int64_t procs_per_node, const ordered_json& jobset_labels) {
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
  // The runtime's template decides these; what we would set changes nothing the plan checks.
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
         {{"metadata", {{"labels", jobset_labels}}},
          {"spec", {{"replicatedJobs", ordered_json::array({std::move(rjob)})}}}}}}}};
  m.spec["runtimeRef"] = {
      {"apiGroup", "trainer.kubeflow.org"}, {"kind", "ClusterTrainingRuntime"}, {"name", runtime}};
  m.spec["trainer"] = std::move(trainer);
  m.spec["runtimePatches"] = ordered_json::array({std::move(patch)});
  return m;
}

std::string trainjob_gap_source(const std::string& pointer) {
  if (pointer == "/spec/priorityClassName") return "executor.kubernetes.priority_class";
  if (pointer == "/spec/terminationGracePeriodSeconds")
    return "the preemption signal's lead (plan row preempt_signal_seconds)";
  return "executor.kubernetes.pod_patch";
}

}  // namespace bridge
