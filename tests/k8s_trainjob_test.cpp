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
  EXPECT_THAT(
      trainer["command"][2].get<std::string>(),
      HasSubstr("mkdir -p '/opt/work dir' 2>/dev/null || true\ncd '/opt/work dir' || { echo"));
  // Apart from those lines, the entrypoint is the JobSet's.
  std::string entry = trainer["command"][2].get<std::string>();
  const size_t from = entry.find("mkdir -p '/opt/work dir'");
  const size_t to = entry.find("exit 1; }\n", from) + std::string("exit 1; }\n").size();
  entry.erase(from, to - from);
  EXPECT_EQ(entry, c["command"][2].get<std::string>());

  const json& patches = (*t)["spec"]["runtimePatches"];
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0]["manager"], "bridge-launch/launcher");
  const json& rt = patches[0]["trainingRuntimeSpec"]["template"];
  EXPECT_EQ(rt["metadata"]["labels"]["bridge-launch/job"], "tj-demo-a1b2");
  EXPECT_EQ(rt["metadata"]["labels"]["team"], "perf") << "the recipe's labels reach the JobSet";
  EXPECT_EQ(rt["metadata"]["annotations"]["bridge-launch/recipe"], "tj-demo");
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
  EXPECT_THAT(tj.yaml, HasSubstr("# failures: the runtime's: its JobSet's failure policy and TTL, "
                                 "the pods' restartPolicy, enableServiceLinks (upstream's"));
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

// runtime.args with `n` arguments.
std::string many_args(int n) {
  std::string list;
  for (int i = 0; i < n; ++i) list += (i == 0 ? "" : ", ") + std::string("--a") + std::to_string(i);
  return "runtime.args=[" + list + "]";
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
       "plugins.preemption: a TrainJob has no field for the pod's "
       "/spec/terminationGracePeriodSeconds"},
      {{"executor.kubernetes.retries=2"}, "k8s-trainjob-retries", "failure policy"},
      {{"executor.kubernetes.ttl_after_finished=600"},
       "k8s-trainjob-ttl",
       "ttlSecondsAfterFinished"},
      {{"executor.kubernetes.exclude_failed_nodes=true"},
       "k8s-exclude-needs-job-api",
       "a TrainJob restarts"},
      {{"env.PET_MASTER_PORT=1"}, "k8s-reserved-env", "PET_MASTER_PORT is torchrun's"},
      {{"env.PET_RDZV_BACKEND=c10d"}, "k8s-reserved-env", "torchrun reads every PET_*"},
      {{many_args(130)}, "k8s-trainjob-too-large", "its args would have 13"},
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

// Every setting a TrainJob cannot carry is reported at once, each at its own line.
TEST(K8sTrainJob, EveryProblemIsReportedInOneRoundAtItsSetting) {
  auto p = testing::k8s_plan(std::string(kRecipe) +
                                 "    priority_class: training-high\n"
                                 "    ttl_after_finished: 600\n"
                                 "    pod_patch: {spec: {hostNetwork: true}}\n",
                             {"executor.kubernetes.api=trainjob"});
  ASSERT_TRUE(p->plan->complete) << testing::diag_lines(p->diags);
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  std::map<std::string, int> line_of;
  for (const auto& d : p->diags.items())
    if (d.severity == Severity::kError) line_of[d.code + " " + d.path] = d.loc.line;
  EXPECT_EQ(line_of["k8s-trainjob-cannot-carry executor.kubernetes.priority_class"], 19)
      << testing::diag_lines(p->diags);
  EXPECT_EQ(line_of["k8s-trainjob-ttl executor.kubernetes.ttl_after_finished"], 20);
  EXPECT_EQ(line_of["k8s-trainjob-cannot-carry executor.kubernetes.pod_patch"], 21);
}

TEST(K8sTrainJob, WhatARuntimeDoesWhenARankFails) {
  auto runtime = [](const std::string& node_job, const std::string& failure_policy = "") {
    return json::parse(R"({"spec":{"template":{"spec":{)" + failure_policy +
                       R"("replicatedJobs":[{"name":"node","template":)" + node_job + "}]}}}}");
  };
  const std::string never =
      R"({"spec":{"backoffLimit":0,"template":{"spec":{"restartPolicy":"Never"}}}})";
  EXPECT_EQ(runtime_restarts(runtime(never)), "");
  EXPECT_EQ(
      runtime_restarts(runtime(R"({"spec":{"template":{"spec":{}}}})")),
      "a failed container restarts in place (restartPolicy unset: the JobSet webhook's "
      "OnFailure) and its Job tries a failed pod again up to 6 times (backoffLimit unset: 6)");
  EXPECT_EQ(runtime_restarts(runtime(never, R"("failurePolicy":{"maxRestarts":3},)")),
            "its JobSet restarts up to 3 times (failurePolicy.maxRestarts)");
  EXPECT_EQ(runtime_restarts(json::parse(R"({"spec":{}})")), "it has no replicated job `node`");
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
  // Resumed by Kueue (Suspended False), its JobSet not made yet.
  JobStatus no_jobset =
      trainjob_status(trainjob(R"([{"type":"Suspended","status":"False","reason":"Resumed",
                    "message":"TrainJob is resumed"}])"),
                      nullptr);
  EXPECT_EQ(no_jobset.state, JobState::kPending);
  EXPECT_EQ(no_jobset.detail, "the Trainer controller has not made its JobSet yet");
  json running = json::parse(R"({"kind":"JobSet","metadata":{"name":"t"},
      "status":{"replicatedJobsStatus":[{"name":"node","ready":1,"active":1}]}})");
  EXPECT_EQ(trainjob_status(trainjob("[]"), &running).state, JobState::kRunning);
}

}  // namespace
}  // namespace bridge
