// executor.kubernetes.api: trainjob: the pod a JobSet would run, carried field by field into a
// Kubeflow Trainer TrainJob (executors/k8s_trainjob.h), the errors that name what a TrainJob
// cannot carry, and the TrainJob's status. The real Trainer (its webhooks, its controller
// building the JobSet) judges these manifests in tests/integration/k8s_cluster_test.cpp.
#include "executors/k8s_trainjob.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "executors/k8s_render.h"
#include "executors/k8s_status.h"
#include "tests/support/k8s_testing.h"

namespace bridge {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

const char* const kRecipe = R"(name: tj-demo
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, train.py]
  args: [--note, "$(not expanded) $$"]
  pass_overrides: false
  container_image: nvcr.io/nvidia/nemo:25.11
  workdir: /opt/work dir
env:
  NCCL_DEBUG: WARN
  TOKEN: {value: TJ-SECRET-4e1f, secret: true}
executor:
  kubernetes:
    namespace: training
    queue: gpu-queue
    service_account: trainer
    labels: {team: perf}
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
)";

K8sManifests render(testing::K8sPlan& p, bool reveal = false) {
  K8sRenderOptions o;
  o.suffix = "a1b2";
  o.reveal_secrets = reveal;
  auto m = render_k8s_manifests(*p.plan, o, p.diags);
  EXPECT_TRUE(m.has_value()) << testing::diag_lines(p.diags);
  return m.value_or(K8sManifests{});
}

const json* doc_of(const std::vector<json>& docs, const std::string& kind) {
  for (const auto& d : docs)
    if (d["kind"] == kind) return &d;
  return nullptr;
}

// The TrainJob's trainer gets exactly the container the JobSet would run: the same image,
// entrypoint, rank command and env (secrets by reference), the GPUs as resources per node;
// the pod's labels, volumes, tolerations and mounts go through the one runtime patch.
TEST(K8sTrainJob, CarriesThePodTheJobSetWouldRun) {
  auto js_plan = testing::k8s_plan(kRecipe);
  auto tj_plan = testing::k8s_plan(kRecipe, {"executor.kubernetes.api=trainjob"});
  auto js_docs = testing::parse_yaml_docs(render(*js_plan, true).yaml);
  K8sManifests tj = render(*tj_plan, true);
  auto tj_docs = testing::parse_yaml_docs(tj.yaml);
  EXPECT_EQ(tj.scheduler_id, "trainjob/tj-demo-a1b2");
  EXPECT_EQ(tj.master_addr, "tj-demo-a1b2-node-0-0.tj-demo-a1b2");
  const json* js = doc_of(js_docs, "JobSet");
  const json* t = doc_of(tj_docs, "TrainJob");
  ASSERT_TRUE(js && t) << tj.yaml;
  ASSERT_TRUE(doc_of(tj_docs, "Secret"));
  EXPECT_EQ((*t)["apiVersion"], "trainer.kubeflow.org/v1alpha1");
  EXPECT_EQ((*t)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "gpu-queue");
  EXPECT_EQ((*t)["spec"]["runtimeRef"],
            json::parse(R"({"apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime",
                            "name":"torch-distributed"})"));
  const json& pod = (*js)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
  const json& c = pod["spec"]["containers"][0];
  const json& trainer = (*t)["spec"]["trainer"];
  EXPECT_EQ(trainer["image"], c["image"]);
  EXPECT_EQ(trainer["args"], c["args"]);
  EXPECT_EQ(trainer["env"], c["env"]);
  EXPECT_EQ(trainer["resourcesPerNode"], c["resources"]);
  EXPECT_EQ(trainer["numNodes"], 2);
  EXPECT_EQ(trainer["numProcPerNode"], 8);
  // The JobSet's container has a working directory; a TrainJob has no field for it, so its
  // entrypoint enters it first.
  EXPECT_EQ(c["workingDir"], "/opt/work dir");
  ASSERT_EQ(trainer["command"].size(), c["command"].size());
  EXPECT_THAT(trainer["command"][2].get<std::string>(), HasSubstr("cd '/opt/work dir' || { echo"));

  const json& patches = (*t)["spec"]["runtimePatches"];
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0]["manager"], "bridge-launch/launcher");
  const json& rt = patches[0]["trainingRuntimeSpec"]["template"];
  EXPECT_EQ(rt["metadata"]["labels"]["bridge-launch/job"], "tj-demo-a1b2");
  EXPECT_FALSE(rt["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name"))
      << "the queue is the TrainJob's; its JobSet must not be queued again";
  const json& rj = rt["spec"]["replicatedJobs"][0];
  EXPECT_EQ(rj["name"], "node");
  const json& p = rj["template"]["spec"]["template"];
  EXPECT_EQ(p["metadata"]["labels"], pod["metadata"]["labels"]);
  EXPECT_EQ(p["metadata"]["labels"]["team"], "perf");
  for (const char* key : {"serviceAccountName", "volumes", "tolerations", "securityContext"})
    EXPECT_EQ(p["spec"][key], pod["spec"][key]) << key;
  ASSERT_EQ(p["spec"]["containers"].size(), 1u);
  EXPECT_EQ(p["spec"]["containers"][0]["name"], "node");
  EXPECT_EQ(p["spec"]["containers"][0]["volumeMounts"], c["volumeMounts"]);
  EXPECT_EQ(p["spec"]["containers"][0]["securityContext"], c["securityContext"]);

  EXPECT_THAT(tj.yaml, HasSubstr("# runtime: ClusterTrainingRuntime torch-distributed; the "
                                 "Trainer controller makes a JobSet of the same name"));
  EXPECT_THAT(tj.yaml, HasSubstr("# left to the runtime: its JobSet's failure policy and TTL, "
                                 "the pods' restartPolicy, enableServiceLinks"));
  EXPECT_THAT(tj.yaml, HasSubstr("it has no TTL"));
  EXPECT_THAT(tj.yaml, HasSubstr("api: trainjob (Kubeflow Trainer TrainJob)"));
}

TEST(K8sTrainJob, TheRuntimeIsNamedByTheRecipe) {
  auto p = testing::k8s_plan(kRecipe, {"executor.kubernetes.api=trainjob",
                                       "executor.kubernetes.training_runtime=torch-gb200"});
  auto docs = testing::parse_yaml_docs(render(*p).yaml);
  ASSERT_TRUE(doc_of(docs, "TrainJob"));
  EXPECT_EQ((*doc_of(docs, "TrainJob"))["spec"]["runtimeRef"]["name"], "torch-gb200");

  auto bad = testing::k8s_plan(kRecipe, {"executor.kubernetes.api=trainjob",
                                         "executor.kubernetes.training_runtime=Not_A_Name"});
  EXPECT_FALSE(render_k8s_manifests(*bad->plan, {}, bad->diags));
  EXPECT_TRUE(bad->diags.has_code("k8s-invalid-name")) << testing::diag_lines(bad->diags);

  auto unused = testing::k8s_plan(kRecipe, {"executor.kubernetes.training_runtime=x"});
  EXPECT_TRUE(render_k8s_manifests(*unused->plan, {}, unused->diags));
  EXPECT_TRUE(unused->diags.has_code("k8s-training-runtime-unused"));
}

// What a TrainJob cannot carry is an error naming the setting, never a silent drop: the
// runtime's value would run instead of the planned one.
TEST(K8sTrainJob, WhatATrainJobCannotCarryIsAnErrorNamingTheSetting) {
  struct Case {
    std::vector<std::string> overrides;
    std::string code, says;
  };
  const std::vector<Case> cases{
      {{"executor.kubernetes.priority_class=training-high"},
       "k8s-trainjob-cannot-carry",
       "/spec/priorityClassName (set by executor.kubernetes.priority_class)"},
      {{"executor.kubernetes.pod_patch={spec: {dnsConfig: {options: [{name: ndots, value: "
        "'2'}]}}}"},
       "k8s-trainjob-cannot-carry",
       "/spec/dnsConfig (set by executor.kubernetes.pod_patch)"},
      {{"plugins.preemption.preempt_time=120"},
       "k8s-trainjob-cannot-carry",
       "/spec/terminationGracePeriodSeconds"},
      {{"executor.kubernetes.retries=2"}, "k8s-trainjob-retries", "failure policy"},
      {{"executor.kubernetes.ttl_after_finished=600"},
       "k8s-trainjob-ttl",
       "ttlSecondsAfterFinished"},
      {{"executor.kubernetes.exclude_failed_nodes=true"},
       "k8s-exclude-needs-job-api",
       "a TrainJob restarts"},
      {{"env.PET_MASTER_PORT=1"}, "k8s-reserved-env", "PET_MASTER_PORT is torchrun's"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.code + ": " + c.overrides[0]);
    std::vector<std::string> o = c.overrides;
    o.push_back("executor.kubernetes.api=trainjob");
    auto p = testing::k8s_plan(kRecipe, o);
    ASSERT_TRUE(p->plan->complete) << testing::diag_lines(p->diags);
    EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
    EXPECT_TRUE(p->diags.has_code(c.code)) << testing::diag_lines(p->diags);
    EXPECT_THAT(testing::diag_lines(p->diags), HasSubstr(c.says));
  }
}

TEST(K8sTrainJob, TheMappingListsEveryFieldItCannotCarry) {
  ordered_json pod = ordered_json::parse(R"({
    "metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["x"]},
    "spec": {"restartPolicy": "Never", "enableServiceLinks": false, "hostNetwork": true,
             "nodeSelector": {"n": "1"}, "affinity": {}, "schedulingGates": [{"name": "g"}],
             "imagePullSecrets": [{"name": "ngc"}],
             "containers": [{"name": "trainer", "image": "img", "command": ["sh"], "args": ["a"],
                             "env": [], "resources": {"limits": {"nvidia.com/gpu": 8}},
                             "ports": [{"containerPort": 1}], "volumeMounts": []}]}})");
  TrainJobMapping m = trainjob_spec(pod, "rt", 2, 8, {{"l", "v"}});
  std::vector<std::string> lost, decided;
  for (const auto& g : m.gaps) (g.runtime_decides ? decided : lost).push_back(g.pointer);
  EXPECT_EQ(decided, (std::vector<std::string>{"/spec/restartPolicy", "/spec/enableServiceLinks"}));
  EXPECT_EQ(lost, (std::vector<std::string>{"/spec/containers/0/ports", "/spec/hostNetwork",
                                            "/metadata/finalizers"}));
  const ordered_json& ps = m.spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
                                 ["replicatedJobs"][0]["template"]["spec"]["template"];
  EXPECT_EQ(ps["spec"]["nodeSelector"], ordered_json::parse(R"({"n": "1"})"));
  EXPECT_EQ(ps["spec"]["schedulingGates"][0]["name"], "g");
  EXPECT_EQ(ps["spec"]["imagePullSecrets"][0]["name"], "ngc");
  EXPECT_EQ(ps["metadata"]["annotations"]["b"], "2");
  EXPECT_EQ(m.spec["trainer"]["command"], ordered_json::parse(R"(["sh"])"));
  EXPECT_EQ(trainjob_gap_source("/spec/priorityClassName"), "executor.kubernetes.priority_class");
}

json trainjob(const std::string& conditions) {
  return json::parse(R"({"kind":"TrainJob","metadata":{"name":"t"},"status":{"conditions":)" +
                     conditions + "}}");
}

TEST(K8sTrainJob, StatusComesFromItsConditionsThenItsJobSet) {
  EXPECT_EQ(parse_k8s_scheduler_id("trainjob/t")->api, "trainjob");
  JobStatus done = trainjob_status(
      trainjob(R"([{"type":"Complete","status":"True","reason":"AllJobsCompleted"}])"), nullptr);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  JobStatus failed = trainjob_status(
      trainjob(R"([{"type":"Failed","status":"True","message":"jobset failed"}])"), nullptr);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_THAT(failed.detail, HasSubstr("jobset failed"));
  JobStatus queued = trainjob_status(
      trainjob(R"([{"type":"Suspended","status":"True","reason":"Suspended"}])"), nullptr);
  EXPECT_EQ(queued.state, JobState::kPending);
  JobStatus no_jobset = trainjob_status(
      trainjob(R"([{"type":"Created","status":"False","message":"runtime x not found"}])"),
      nullptr);
  EXPECT_EQ(no_jobset.state, JobState::kPending);
  EXPECT_THAT(no_jobset.detail, HasSubstr("runtime x not found"));
  json running = json::parse(R"({"kind":"JobSet","metadata":{"name":"t"},
      "status":{"replicatedJobsStatus":[{"name":"node","ready":1,"active":1}]}})");
  EXPECT_EQ(trainjob_status(trainjob("[]"), &running).state, JobState::kRunning);
}

}  // namespace
}  // namespace bridge
