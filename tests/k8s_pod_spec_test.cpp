// The pod settings of executor.kubernetes (executors/k8s_pod_spec.h): where each key lands in
// the rendered JobSet/Job, the errors for values Kubernetes or the plan would not accept, and
// the report of settings that belong to another executor.
#include "executors/k8s_pod_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "executors/k8s_render.h"
#include "support/k8s_testing.h"

namespace bridge {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const char* const kEveryKey = R"(
    volumes:
      - {name: jobs, mount_path: /lustre, pvc: lustre-claim}
      - {name: data, mount_path: /data, host_path: /mnt/datasets, read_only: true}
      - {name: conf, mount_path: /etc/train, config_map: train-config}
    node_selector: {nvidia.com/gpu.product: H100-SXM}
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      - {key: maintenance, operator: Equal, value: "soon", effect: NoExecute, tolerationSeconds: 300}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
    resources:
      requests: {cpu: "32", memory: 512Gi}
      limits: {rdma/ib: 8}
    labels: {team: llm}
    annotations: {owner: "alice@example.com"}
    priority_class: high-priority
    queue: team-llm
    pod_patch:
      spec:
        hostIPC: true
        containers:
          - name: trainer
            securityContext: {capabilities: {add: [IPC_LOCK]}}
)";

std::unique_ptr<testing::K8sPlan> plan_with(const std::string& extra,
                                            std::vector<std::string> overrides = {}) {
  return testing::k8s_pod_plan(extra, std::move(overrides));
}

std::string codes(const Diagnostics& d) { return testing::diag_lines(d); }

std::optional<K8sManifests> render(testing::K8sPlan& p) {
  K8sRenderOptions o;
  o.suffix = "a1b2";
  return render_k8s_manifests(*p.plan, o, p.diags);
}

const json& pod_of(const json& jobset) {
  return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
}

TEST(K8sPodSpec, EveryKeyLandsWhereKubernetesReadsIt) {
  auto p = plan_with(kEveryKey);
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  auto m = render(*p);
  ASSERT_TRUE(m) << codes(p->diags);
  auto docs = testing::parse_yaml_docs(m->yaml);
  ASSERT_EQ(docs.size(), 1u);
  const json& js = docs[0];
  EXPECT_EQ(js["metadata"]["labels"]["team"], "llm");
  EXPECT_EQ(js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-llm");
  EXPECT_EQ(js["metadata"]["annotations"]["owner"], "alice@example.com");
  const json& pod = pod_of(js);
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "llm");
  EXPECT_EQ(pod["metadata"]["labels"]["bridge-launch/job"], "pods-a1b2");
  EXPECT_EQ(pod["metadata"]["annotations"]["owner"], "alice@example.com");
  const json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeSelector"], json::parse(R"({"nvidia.com/gpu.product":"H100-SXM"})"));
  EXPECT_EQ(spec["tolerations"][1]["tolerationSeconds"], 300);
  EXPECT_EQ(spec["tolerations"][1]["value"], "soon");
  EXPECT_EQ(spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
            "a");
  EXPECT_EQ(spec["priorityClassName"], "high-priority");
  EXPECT_EQ(spec["hostIPC"], true);
  ASSERT_EQ(spec["volumes"].size(), 4u);  // dshm + 3
  EXPECT_EQ(spec["volumes"][1], json::parse(R"({"name":"jobs",
      "persistentVolumeClaim":{"claimName":"lustre-claim"}})"));
  EXPECT_EQ(spec["volumes"][2]["hostPath"]["path"], "/mnt/datasets");
  EXPECT_EQ(spec["volumes"][3]["configMap"]["name"], "train-config");
  ASSERT_EQ(spec["containers"].size(), 1u);
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], 8);
  EXPECT_EQ(c["resources"]["limits"]["rdma/ib"], "8");
  EXPECT_EQ(c["resources"]["requests"]["memory"], "512Gi");
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"][0], "IPC_LOCK");
  EXPECT_EQ(c["image"], "nvcr.io/nvidia/nemo:25.11") << "the patch merged, not replaced";
  ASSERT_EQ(c["volumeMounts"].size(), 4u);
  EXPECT_EQ(c["volumeMounts"][2], json::parse(R"({"name":"data","mountPath":"/data",
      "readOnly":true})"));
  // The job dir /lustre/jobs/pods is on the `jobs` volume: no "not persistent" note.
  EXPECT_FALSE(p->diags.has_code("k8s-job-dir-not-persistent")) << codes(p->diags);
}

TEST(K8sPodSpec, AJobDirOnNoVolumeIsSaidToGoAwayWithThePods) {
  auto p = plan_with("");
  ASSERT_TRUE(render(*p));
  EXPECT_TRUE(p->diags.has_code("k8s-job-dir-not-persistent")) << codes(p->diags);
}

// Each bad value is an error at its key, with nothing rendered.
TEST(K8sPodSpec, BadValuesAreErrorsAtTheirKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    volumes: [{name: data, mount_path: /data}]\n", "exactly one source"},
      {"    volumes: [{name: Data, mount_path: /data, pvc: c}]\n", "RFC 1123 label"},
      {"    volumes: [{name: d, mount_path: data, pvc: c}]\n", "absolute path"},
      {"    volumes: [{name: d, mount_path: /dev/shm, pvc: c}]\n", "new absolute path"},
      {"    volumes: [{name: d, mount_path: /d, pvc: c, nfs: x}]\n", "unknown volume key"},
      {"    tolerations: [{key: k, operator: Exist}]\n", "is not Exists or Equal"},
      {"    tolerations: [{key: k, effect: NoSchedul}]\n", "is not NoSchedule"},
      {"    tolerations: [{key: k, tolerationSecond: 3}]\n", "did you mean"},
      {"    resources: {limits: {nvidia.com/gpu: 4}}\n", "set by the plan"},
      {"    resources: {requests: {memory: lots}}\n", "not a Kubernetes quantity"},
      {"    resources: {request: {cpu: 1}}\n", "did you mean"},
      {"    labels: {bridge-launch/job: mine}\n", "bridge-launch's own key"},
      {"    labels: {team: \"has space\"}\n", "not a valid label value"},
      {"    node_selector: [a, b]\n", "must be a mapping"},
      {"    affinity: {nodeAfinity: {}}\n", "did you mean `nodeAffinity`"},
      {"    priority_class: High_Priority\n", "PriorityClass name"},
      {"    queue: \"a b\"\n", "Kueue queue name"},
      {"    pod_patch: {sepc: {}}\n", "has metadata and spec, not `sepc`"},
  };
  for (const auto& [yaml, fragment] : cases) {
    auto p = plan_with(yaml);
    auto m = render(*p);
    EXPECT_FALSE(m) << yaml;
    EXPECT_THAT(codes(p->diags), HasSubstr(fragment)) << yaml;
    bool positioned = false;
    for (const auto& d : p->diags.items())
      if (d.severity == Severity::kError && d.loc.line > 0) positioned = true;
    EXPECT_TRUE(positioned) << "no file:line for " << yaml;
  }
}

// The escape hatch cannot undo the plan: image, command, args, env, GPUs, restart policy and
// bridge-launch's labels stay as planned.
TEST(K8sPodSpec, APodPatchThatChangesThePlanIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{spec: {containers: [{name: trainer, image: evil:1}]}}", "spec.containers[trainer].image"},
      {"{spec: {containers: [{name: trainer, env: [{name: X, value: y}]}]}}",
       "spec.containers[trainer].env"},
      {"{spec: {containers: [{name: trainer, resources: {limits: {nvidia.com/gpu: 1}}}]}}",
       "nvidia.com/gpu"},
      {"{spec: {restartPolicy: Always}}", "spec.restartPolicy"},
      {"{spec: {containers: [{name: other, image: x}]}}", ""},  // a sidecar is fine
      {"{metadata: {labels: {bridge-launch/job: x}}}", "metadata.labels.bridge-launch/job"},
  };
  for (const auto& [patch, field] : cases) {
    auto p = plan_with("    pod_patch: " + patch + "\n");
    auto m = render(*p);
    if (field.empty()) {
      ASSERT_TRUE(m) << codes(p->diags);
      auto docs = testing::parse_yaml_docs(m->yaml);
      EXPECT_EQ(pod_of(docs[0])["spec"]["containers"].size(), 2u);
      continue;
    }
    EXPECT_FALSE(m) << patch;
    EXPECT_TRUE(p->diags.has_code("k8s-patch-changes-plan")) << codes(p->diags);
    EXPECT_THAT(codes(p->diags), HasSubstr(field)) << patch;
  }
}

// Settings of another executor are named, not dropped: a warning on the chosen executor, an
// error under --strict.
TEST(K8sPodSpec, SettingsOfAnotherExecutorAreReportedByName) {
  const std::string text = R"(name: pods
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime: {command: [python, train.py], container_image: nvcr.io/nvidia/nemo:25.11}
executor:
  slurm:
    container_mounts: [/lustre/datasets:/data]
    partition: batch
  local: {timeout: 60}
)";
  auto p = testing::k8s_plan(text);
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  std::string all = codes(p->diags);
  // In the order written (container_mounts is on the line above partition).
  EXPECT_THAT(all, HasSubstr("executor.slurm.container_mounts, executor.slurm.partition are set, "
                             "but the job runs on the kubernetes executor: not applied"));
  EXPECT_THAT(all, HasSubstr("executor.local.timeout is set"));

  PlanRequest req;
  req.recipe_path = "recipe.yaml";
  req.executor = "kubernetes";
  req.strict = true;
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/test"}});
  Diagnostics strict(true);
  Plan plan = build_plan_from_text(text, req, env, plugin_registry(), strict);
  EXPECT_FALSE(plan.complete);
  EXPECT_TRUE(strict.has_code("executor-setting-not-applied"));
}

TEST(K8sPodSpec, YamlScalarsAreTypedAsKubernetesReadsThem) {
  Diagnostics d;
  YamlNode n = parse_yaml_document(
      "{a: true, b: \"true\", c: 300, d: \"300\", e: 08, f: null, g: [x, 1]}", "t", d);
  json j = json::parse(yaml_to_json(n).dump());
  EXPECT_EQ(j, json::parse(R"({"a":true,"b":"true","c":300,"d":"300","e":"08","f":null,
      "g":["x",1]})"));
}

}  // namespace
}  // namespace bridge
