// End-to-end tests against a real Kubernetes control plane (scripts/k8s-test-cluster.sh up):
// upstream kube-apiserver with etcd, kube-controller-manager, kube-scheduler, the JobSet
// controller and kwok's fake GPU nodes. The real bridge-launch applies its manifests with the
// real kubectl (KUBECONFIG and PATH from `scripts/k8s-test-cluster.sh env`, which
// scripts/run-tests.sh sets), so the API server's strict field validation, the JobSet and Job
// controllers and the scheduler all see exactly what a user's cluster would.
//
// What this cannot prove: kwok has no container runtime, so images are never pulled and the
// runtime never runs; kwok "runs" a pod by writing its status (BRIDGE_KWOK_FAIL and friends
// in the pod env choose success or failure, docs/executors/k8s-test-cluster.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/job_watchdog.h"
#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/numa_report.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using test::run_command;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = BRIDGE_SOURCE_DIR;
const std::string kRecipe = kSource + "/examples/recipes/demo.yaml";
constexpr const char* kImage = "nvcr.io/nvidia/nemo:25.04";
constexpr const char* kSecret = "MARKER-k8s-it-41d9-secret";
// Bytes a shell, YAML or JSON layer could mangle: quotes, $(...), backslashes, a newline,
// a tab, non-ASCII text and a leading dash.
const std::string kHostile = "-a b \"c\" 'd' $(e) `f` \\g\n\th ✓ ${HOME} %s";

std::string g_skip_reason;

class K8sCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto nodes = run_command({"kubectl", "get", "nodes", "-o", "name"});
    if (nodes.exit_code != 0 || nodes.out.find("node/") == std::string::npos)
      g_skip_reason =
          "the Kubernetes test cluster is not up (scripts/k8s-test-cluster.sh up, then "
          "eval \"$(scripts/k8s-test-cluster.sh env)\"); kubectl said: " +
          nodes.err;
  }

  void SetUp() override {
    if (!g_skip_reason.empty()) GTEST_SKIP() << g_skip_reason;
  }

  std::map<std::string, std::string> env() const {
    return {{"BRIDGE_LAUNCH_STATE_DIR", tmp.path() + "/state"}, {"BRIDGE_IT_SECRET", kSecret}};
  }

  // `recipe` on Kubernetes, 2 pods x 8 GPUs, with `keys`, a secret, a hostile -E value, then
  // `extra`.
  static std::vector<std::string> launch(const std::string& recipe,
                                         const std::vector<std::string>& keys,
                                         const std::vector<std::string>& extra) {
    std::vector<std::string> a{
        BRIDGE_LAUNCH_BIN, "-e", "kubernetes", "-ng", "16", "-gn", "8", recipe};
    a.insert(a.end(), keys.begin(), keys.end());
    a.insert(a.end(), {"env.BRIDGE_IT_TOKEN={value: \"${BRIDGE_IT_SECRET}\", secret: true}", "-E",
                       "BRIDGE_IT_HOSTILE=" + kHostile});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The demo recipe (its batch scaled to the 16 ranks).
  std::vector<std::string> argv(const std::vector<std::string>& extra) const {
    return launch(kRecipe,
                  {"train.global_batch_size=16",  // 16 ranks: a multiple of dp (T7)
                   std::string("runtime.container_image=") + kImage},
                  extra);
  }

  // The registry id: the last line bridge-launch prints on stdout.
  static std::string job_id(const test::ChildResult& r) {
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  }

  // The Kubernetes object name (`jobset/<name>` in the submit message).
  static std::string object_name(const test::ChildResult& r) {
    for (const char* kind : {"jobset/", "job/", "trainjob/"}) {
      size_t at = r.err.find(std::string("(kubernetes id ") + kind);
      if (at == std::string::npos) continue;
      at += std::string("(kubernetes id ").size() + std::string(kind).size();
      return r.err.substr(at, r.err.find(')', at) - at);
    }
    return "";
  }

  static json kubectl_json(const std::vector<std::string>& args) {
    std::vector<std::string> a{"kubectl"};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"-o", "json"});
    auto r = run_command(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  void check_example_runs(const std::string& api);

  // The Qwen3 example (16 GPUs, EP 16; it confirms its plan, so it has a ConfigMap) with `api`.
  static std::vector<std::string> qwen3_on(const std::string& api,
                                           const std::vector<std::string>& extra) {
    return launch(kSource + "/examples/recipes/qwen3-30b-a3b-ep-overlap.yaml",
                  {"executor.kubernetes.api=" + api}, extra);
  }

  static json pods_of(const std::string& name) {
    return kubectl_json({"get", "pods", "-l", "bridge-launch/job=" + name});
  }

  test::TempDir tmp;
};

// The planned env, as `plan --format json` reports it: name -> (value, secret).
std::map<std::string, std::pair<std::string, bool>> planned_env(const json& plan) {
  std::map<std::string, std::pair<std::string, bool>> env;
  for (const auto& [name, v] : plan["env"].items())
    env[name] = {v["value"].is_string() ? v["value"].get<std::string>() : "",
                 v["secret"].get<bool>()};
  return env;
}

// What the container gets from an env `value:`: the kubelet expands `$(NAME)` references and
// turns `$$` into `$`. bridge-launch writes every `$` as `$$`, so the process sees the planned
// bytes; an unescaped `$(` left in the spec would be expanded (the test fails on it).
std::string as_the_container_sees_it(const std::string& spec_value) {
  std::string out;
  for (size_t i = 0; i < spec_value.size(); ++i) {
    if (spec_value[i] == '$' && i + 1 < spec_value.size() && spec_value[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (spec_value[i] == '$' && i + 1 < spec_value.size() && spec_value[i + 1] == '(') {
      ADD_FAILURE() << "an unescaped $( in the pod spec: " << spec_value;
      out += '$';
    } else {
      out += spec_value[i];
    }
  }
  return out;
}

// The container's env is the plan's (`plan --format json`) and, beyond it, only `extra`: the
// executor's rendezvous, attempt and check variables (executors/rank_env.h), the index the
// Job controller adds to every pod of an Indexed Job, and what a runtime adds. A secret
// arrives by reference only.
void expect_exactly_the_planned_env(
    const json& container, const std::map<std::string, std::pair<std::string, bool>>& planned,
    const std::set<std::string>& extra) {
  std::map<std::string, json> got;
  for (const auto& e : container["env"]) got[e["name"].get<std::string>()] = e;
  std::set<std::string> allowed{"BRIDGE_EXPECTED_ENV",
                                "BRIDGE_EXPECTED_PLAN",
                                "BRIDGE_OVERLAP_GRAD_REDUCE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "NODE_RANK",
                                "BRIDGE_RESTART_ATTEMPT",
                                "JOB_COMPLETION_INDEX"};
  allowed.insert(extra.begin(), extra.end());
  for (const auto& entry : got)
    EXPECT_TRUE(planned.count(entry.first) || allowed.count(entry.first))
        << entry.first << " is in the pod but not in the plan";
  for (const auto& [var, planned_value] : planned) {
    ASSERT_TRUE(got.count(var)) << var << " is planned but not in the pod";
    if (planned_value.second) {  // a secret: by reference only, never as a value
      EXPECT_FALSE(got[var].contains("value")) << var;
      EXPECT_TRUE(got[var]["valueFrom"].contains("secretKeyRef")) << var;
    } else {
      EXPECT_EQ(as_the_container_sees_it(got[var]["value"].get<std::string>()), planned_value.first)
          << var;
    }
  }
}

TEST_F(K8sCluster, AJobSetIsAcceptedAndEveryPodCarriesExactlyThePlannedEnv) {
  auto plan = run_command(
      [&] {
        auto a = argv({});
        a.insert(a.begin() + 1, {"plan", "--format", "json"});
        return a;
      }(),
      env());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto planned = planned_env(json::parse(plan.out));
  ASSERT_TRUE(planned.count("BRIDGE_IT_HOSTILE"));
  EXPECT_EQ(planned["BRIDGE_IT_HOSTILE"].first, kHostile);

  auto r = run_command(argv({"--wait"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
  std::string name = object_name(r);
  ASSERT_FALSE(name.empty()) << r.err;

  json pods = pods_of(name);
  ASSERT_EQ(pods["items"].size(), 2u) << pods.dump();
  std::set<std::string> hosts;
  for (const auto& pod : pods["items"]) {
    hosts.insert(pod["spec"]["nodeName"].get<std::string>());
    EXPECT_EQ(pod["status"]["phase"], "Succeeded");
    const json& c = pod["spec"]["containers"][0];
    EXPECT_EQ(c["image"], kImage);
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
    expect_exactly_the_planned_env(c, planned, {});
  }
  EXPECT_EQ(hosts.size(), 2u) << "the scheduler put both pods on one 8-GPU node";
  // The secret's value is in the Secret the pods reference (base64), and nowhere else.
  json secrets = kubectl_json({"get", "secrets", "-l", "bridge-launch/job=" + name});
  ASSERT_EQ(secrets["items"].size(), 1u);
  EXPECT_TRUE(secrets["items"][0]["data"].contains("BRIDGE_IT_TOKEN"));
  EXPECT_EQ(pods.dump().find(kSecret), std::string::npos);
  auto list = run_command({BRIDGE_LAUNCH_BIN, "list", "--format", "json"}, env());
  EXPECT_EQ(list.out.find(kSecret), std::string::npos);

  auto logs = run_command({BRIDGE_LAUNCH_BIN, "logs", job_id(r)}, env());
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
}

// runtime.code: the snapshot is copied to the host directory (runtime.code.snapshot_dir) and
// every pod gets it as a read-only hostPath volume at the container path. kwok runs no
// containers, so what is checked is the accepted pods' spec and the copy on this host.
TEST_F(K8sCluster, ASnapshotOfALocalTreeReachesThePodsAsAVolume) {
  std::string tree = tmp.path() + "/tree";
  std::filesystem::create_directories(tree + "/pkg");
  tmp.write("tree/pkg/marker.txt", "shipped\n");
  std::string snapshots = tmp.path() + "/snapshots";
  auto r = run_command(argv({"runtime.code={path: '" + tree +
                             "', include: ['**'], snapshot_dir: '" + snapshots + "'}"}),
                       env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = job_id(r);
  std::string copy = snapshots + "/demo-overlap-on/" + id;
  EXPECT_EQ(test::read_file(copy + "/pkg/marker.txt"), "shipped\n");
  json pods;
  for (int i = 0; i < 100; ++i) {  // the JobSet controller creates the pods
    pods = pods_of(object_name(r));
    if (pods["items"].size() == 2u) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(pods["items"].size(), 2u);
  for (const auto& pod : pods["items"]) {
    bool volume = false, mounted = false;
    for (const auto& v : pod["spec"]["volumes"])
      volume = volume || (v["name"] == "bridge-code" && v["hostPath"]["path"] == copy);
    for (const auto& m : pod["spec"]["containers"][0]["volumeMounts"])
      mounted = mounted || (m["name"] == "bridge-code" &&
                            m["mountPath"] == "/opt/bridge-launch/code" && m["readOnly"] == true);
    EXPECT_TRUE(volume) << pod["spec"]["volumes"].dump();
    EXPECT_TRUE(mounted) << pod["spec"]["containers"][0]["volumeMounts"].dump();
  }
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", id, "--format", "json"}, env());
  EXPECT_THAT(status.out, HasSubstr("\"hash\": \"sha256:"));
}

TEST_F(K8sCluster, TheJobApiFallbackIsAcceptedAndSucceeds) {
  auto r = run_command(argv({"executor.kubernetes.api=job", "--wait"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
  std::string name = object_name(r);
  json svc = kubectl_json({"get", "services", "-l", "bridge-launch/job=" + name});
  ASSERT_EQ(svc["items"].size(), 1u);
  EXPECT_EQ(svc["items"][0]["spec"]["clusterIP"], "None");
}

// Pod (node) 1 fails with exit code 17 (kwok's stage, chosen by the pod env): the JobSet
// fails once its restarts are used up, --wait exits 1 with the summary and `why` names the
// node, its host and the exit code from the real pod status.
TEST_F(K8sCluster, AFailingPodFailsTheJobAfterItsRetriesAndWhyNamesIt) {
  auto r = run_command(argv({"executor.kubernetes.retries=1", "-E", "BRIDGE_KWOK_FAIL=1", "-E",
                             "BRIDGE_KWOK_EXIT_CODE=17", "--wait"}),
                       env());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("FAILED"));
  EXPECT_THAT(r.err, HasSubstr("first failure: node 1 (ranks 8-15) on kwok-gpu-"));
  EXPECT_THAT(r.err, HasSubstr("exit code 17"));
  // The plan's one retry was used: the JobSet restarted once before it failed.
  json js = kubectl_json({"get", "jobsets", "-l", "bridge-launch/job=" + object_name(r)});
  ASSERT_EQ(js["items"].size(), 1u);
  EXPECT_EQ(js["items"][0]["status"]["restarts"], 1);
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", job_id(r), "--format", "json"}, env());
  EXPECT_EQ(why.exit_code, 1) << "the job failed\n" << why.err;
  json j = json::parse(why.out);
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["first_failure"]["node"], 1);
  EXPECT_EQ(j["first_failure"]["exit_code"], 17);
  EXPECT_THAT(j["first_failure"]["host"].get<std::string>(), HasSubstr("kwok-gpu-"));
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
  EXPECT_THAT(status.out, HasSubstr("FAILED"));
  EXPECT_THAT(status.out, HasSubstr("first failure: node 1 (ranks 8-15)"));
}

// Retries: the first attempt fails, the plan's retry (a JobSet restart; the next suspended Job
// of the Job API) runs a second attempt, which succeeds.
TEST_F(K8sCluster, ARetryAfterAFailedAttemptSucceeds) {
  for (const char* api : {"jobset", "job"}) {
    SCOPED_TRACE(api);
    auto r = run_command(
        argv({std::string("executor.kubernetes.api=") + api, "executor.kubernetes.retries=1", "-E",
              "BRIDGE_KWOK_FAIL=0", "-E", "BRIDGE_KWOK_FAIL_ATTEMPTS=1", "--wait"}),
        env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
  }
}

// Logs per rank: `--rank 9` reads the pod of node 1 (ranks 8-15).
TEST_F(K8sCluster, LogsOfOneRankComeFromItsNodesPod) {
  auto r = run_command(argv({"--wait"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto logs = run_command({BRIDGE_LAUNCH_BIN, "logs", job_id(r), "--rank", "9"}, env());
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_FALSE(logs.out.empty());
  auto bad = run_command({BRIDGE_LAUNCH_BIN, "logs", job_id(r), "--rank", "16"}, env());
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// SIGINT during --wait stops the waiting only: exit 130, the JobSet keeps running, `status`
// finds it; cancel then ends it.
TEST_F(K8sCluster, InterruptedWaitLeavesTheJobRunning) {
  std::filesystem::path out = tmp.path() + "/wait.txt";
  pid_t pid =
      test::start_background(argv({"-E", "BRIDGE_KWOK_RUN_TIME=120s", "--wait"}), env(), out);
  ASSERT_TRUE(test::wait_for_text(out, "RUNNING", 60)) << test::read_file(out.string());
  kill(pid, SIGINT);
  EXPECT_EQ(test::wait_exit(pid, 30), 130) << test::read_file(out.string());
  std::string said = test::read_file(out.string());
  EXPECT_THAT(said, HasSubstr("keeps running"));
  size_t at = said.find("submitted job ");
  ASSERT_NE(at, std::string::npos) << said;
  std::string id = said.substr(at + 14, said.find(' ', at + 14) - at - 14);
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", id}, env());
  EXPECT_THAT(status.out, HasSubstr("RUNNING"));
  auto cancel = run_command({BRIDGE_LAUNCH_BIN, "cancel", id}, env());
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
}

// Kueue runs in the test cluster unless it was started with K8S_TEST_KUEUE=0.
bool kueue_installed() {
  return run_command({"kubectl", "get", "crd", "workloads.kueue.x-k8s.io", "-o", "name"})
             .exit_code == 0;
}

// The cluster objects the Kubernetes example refers to (a claim on a shared file system, a
// PriorityClass, GPU nodes labelled with their product), as an administrator would have them.
void provide_cluster_objects() {
  const std::string objects = R"(apiVersion: v1
kind: PersistentVolume
metadata: {name: bridge-it-lustre}
spec:
  capacity: {storage: 1Ti}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  hostPath: {path: /tmp/bridge-it-lustre}
  claimRef: {namespace: default, name: lustre-scratch}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lustre-scratch, namespace: default}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: bridge-it-lustre
  resources: {requests: {storage: 1Ti}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-high}
value: 1000
)";
  auto r = run_command({"kubectl", "apply", "-f", "-"}, {}, objects);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (kueue_installed()) {
    // The example's queue, on the cluster queue the test cluster sets up (16 GPUs).
    auto q = run_command({"kubectl", "apply", "-f", "-"}, {}, R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: llm-perf, namespace: default}
spec: {clusterQueue: gpu-cluster-queue}
)");
    ASSERT_EQ(q.exit_code, 0) << q.err;
  }
  for (const char* node : {"kwok-gpu-0", "kwok-gpu-1"}) {
    auto l = run_command({"kubectl", "label", "node", node, "--overwrite",
                          "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"});
    ASSERT_EQ(l.exit_code, 0) << l.err;
  }
}

// The Kubernetes example uses every pod setting: the real API server accepts it under strict
// validation, the scheduler places both pods (node selector, affinity, tolerations, RDMA
// devices, the claim), and the pods carry each setting.
TEST_F(K8sCluster, TheExampleWithEveryPodSettingIsAcceptedAndRuns) {
  provide_cluster_objects();
  for (const char* api : {"jobset", "job"}) {
    SCOPED_TRACE(api);
    check_example_runs(api);
  }
}

void K8sCluster::check_example_runs(const std::string& api) {
  const std::string example = kSource + "/examples/recipes/qwen3-30b-a3b-k8s.yaml";
  auto shown = run_command({BRIDGE_LAUNCH_BIN, "--dry-run", "-ng", "16", "-gn", "8", example,
                            "executor.kubernetes.api=" + api},
                           env());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("# pod: QoS Guaranteed; requests cpu 115, memory 1800Gi, "
                                   "ephemeral-storage 500Gi"));
  EXPECT_THAT(shown.out, HasSubstr("# pod: /dev/shm limit 64Gi; runAsNonRoot false"));
  EXPECT_THAT(shown.out, HasSubstr("active deadline 4h"));
  auto r = run_command({BRIDGE_LAUNCH_BIN, "--strict", "-ng", "16", "-gn", "8",
                        kSource + "/examples/recipes/qwen3-30b-a3b-k8s.yaml",
                        "executor.kubernetes.api=" + api, "--wait"},
                       env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
  EXPECT_THAT(status.out, HasSubstr("SUCCEEDED"));
  std::string name = object_name(r);
  json top =
      kubectl_json({"get", api == "job" ? "jobs" : "jobsets", "-l", "bridge-launch/job=" + name});
  ASSERT_GE(top["items"].size(), 1u);
  EXPECT_EQ(top["items"][0]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "llm-perf");
  EXPECT_EQ(top["items"][0]["spec"]["ttlSecondsAfterFinished"], 172800);
  const json& job_spec = api == "job"
                             ? top["items"][0]["spec"]
                             : top["items"][0]["spec"]["replicatedJobs"][0]["template"]["spec"];
  EXPECT_EQ(job_spec["activeDeadlineSeconds"], 14400);
  if (kueue_installed()) {
    // Kueue admitted it: the Workload it made for the job says so.
    json wls = kubectl_json({"get", "workloads.kueue.x-k8s.io"});
    bool admitted = false;
    for (const auto& wl : wls["items"])
      for (const auto& o : wl["metadata"]["ownerReferences"])
        if (o["name"] == name)
          for (const auto& c : wl["status"]["conditions"])
            admitted = admitted || (c["type"] == "Admitted" && c["status"] == "True");
    EXPECT_TRUE(admitted) << wls.dump();
  }
  json pods = pods_of(name);
  ASSERT_EQ(pods["items"].size(), 2u);
  for (const auto& pod : pods["items"]) {
    EXPECT_EQ(pod["status"]["phase"], "Succeeded");
    EXPECT_EQ(pod["metadata"]["labels"]["team"], "llm-perf");
    EXPECT_EQ(pod["metadata"]["annotations"]["bridge-launch.example/owner"], "perf-team");
    const json& spec = pod["spec"];
    EXPECT_EQ(spec["priorityClassName"], "training-high");
    EXPECT_EQ(spec["priority"], 1000) << "the PriorityClass was resolved by admission";
    EXPECT_EQ(spec["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
    EXPECT_TRUE(spec.contains("affinity"));
    const json& c = spec["containers"][0];
    // What the dry-run header showed (checked above), as the API server stored it.
    EXPECT_EQ(c["resources"]["requests"],
              json::parse(R"({"cpu":"115","memory":"1800Gi","ephemeral-storage":"500Gi",
                              "nvidia.com/gpu":"8","rdma/ib":"8"})"));
    EXPECT_EQ(c["resources"]["limits"],
              json::parse(R"({"cpu":"115","memory":"1800Gi","nvidia.com/gpu":"8",
                              "rdma/ib":"8"})"));
    EXPECT_EQ(pod["status"]["qosClass"], "Guaranteed") << "as the API server classes it";
    EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
    EXPECT_EQ(c["securityContext"]["capabilities"],
              json::parse(R"({"drop":["ALL"],"add":["IPC_LOCK","SYS_PTRACE"]})"));
    EXPECT_EQ(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    EXPECT_EQ(spec["securityContext"]["runAsNonRoot"], false);
    EXPECT_EQ(spec["dnsConfig"]["options"][0]["value"], "2") << "the pod_patch";
    std::map<std::string, json> env_of;
    for (const auto& e : c["env"]) env_of[e["name"].get<std::string>()] = e;
    EXPECT_EQ(env_of["NCCL_IB_HCA"]["value"], "mlx5");
    // The recipe base's env_vars, with NVIDIA's values for qwen3_30b_a3b on 16 H100s.
    EXPECT_EQ(env_of["CUDA_DEVICE_MAX_CONNECTIONS"]["value"], "32");
    EXPECT_EQ(env_of["NVTE_FWD_LAYERNORM_SM_MARGIN"]["value"], "20");
    EXPECT_EQ(env_of["NVTE_BWD_LAYERNORM_SM_MARGIN"]["value"], "20");
    EXPECT_FALSE(env_of.count("BRIDGE_EXPECTED_ENV")) << "a bridge-probe variable in a "
                                                         "Megatron-Bridge pod";
    for (const auto& v : spec["volumes"])
      if (v["name"] == "dshm") {
        EXPECT_EQ(v["emptyDir"]["sizeLimit"], "64Gi");
      }
    std::set<std::string> claims;
    for (const auto& v : spec["volumes"])
      if (v.contains("persistentVolumeClaim"))
        claims.insert(v["persistentVolumeClaim"]["claimName"].get<std::string>());
    EXPECT_EQ(claims, std::set<std::string>{"lustre-scratch"});
  }
}

// Kueue for real: the test cluster's ClusterQueue holds 16 GPUs. The first 16-GPU job is
// admitted and runs; the second waits, and `status` says it is queued by Kueue and why, until
// the first ends; then Kueue admits it and it runs to the end.
TEST_F(K8sCluster, KueueAdmitsOneSixteenGpuJobAndHoldsTheNextWithItsReason) {
  if (!kueue_installed()) GTEST_SKIP() << "the test cluster runs without Kueue (K8S_TEST_KUEUE=0)";
  auto first = run_command(
      argv({"executor.kubernetes.queue=gpu-queue", "-E", "BRIDGE_KWOK_RUN_TIME=20s"}), env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto second = run_command(argv({"executor.kubernetes.queue=gpu-queue"}), env());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  std::string held;
  for (int i = 0; i < 60 && held.find("queued by Kueue") == std::string::npos; ++i) {
    held = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(second)}, env()).out;
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_THAT(held, HasSubstr("PENDING"));
  EXPECT_THAT(held, HasSubstr("queued by Kueue in gpu-queue (Pending: couldn't assign flavors"));
  EXPECT_THAT(held, HasSubstr("insufficient unused quota for nvidia.com/gpu"));
  EXPECT_TRUE(pods_of(object_name(second))["items"].empty()) << "a held job has no pods";
  auto first_status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(first)}, env()).out;
  EXPECT_THAT(first_status, ::testing::Not(HasSubstr("queued by Kueue")));

  std::string done;
  for (int i = 0; i < 120 && done.find("SUCCEEDED") == std::string::npos; ++i) {
    std::this_thread::sleep_for(1s);
    done = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(second)}, env()).out;
  }
  EXPECT_THAT(done, HasSubstr("SUCCEEDED")) << "Kueue admitted the second job after the first";
  EXPECT_THAT(run_command({BRIDGE_LAUNCH_BIN, "status", job_id(first)}, env()).out,
              HasSubstr("SUCCEEDED"));
}

// The NVLink-domain request of a GB200 job on a Kueue queue (topology-aware scheduling
// annotations on the pod set) passes Kueue's admission webhook, which validates them, and
// reaches the JobSet as rendered.
TEST_F(K8sCluster, KueueTakesTheNvlinkDomainRequestOfAGb200Job) {
  if (!kueue_installed()) GTEST_SKIP() << "the test cluster runs without Kueue (K8S_TEST_KUEUE=0)";
  std::vector<std::string> gb200 = argv({"cluster.gpu=gb200", "executor.kubernetes.queue=gpu-queue",
                                         "executor.kubernetes.topology=required"});
  gb200[4] = "8";  // -ng 8 -gn 4: two GB200 nodes
  gb200[6] = "4";
  auto r = run_command(gb200, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string name = object_name(r);
  json js = kubectl_json({"get", "jobsets", name});
  const json& a =
      js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(a.value("kueue.x-k8s.io/podset-required-topology", ""), "nvidia.com/gpu.clique")
      << js.dump();
  EXPECT_EQ(run_command({BRIDGE_LAUNCH_BIN, "cancel", job_id(r)}, env()).exit_code, 0);
}

// A recipe written for Slurm says, by name, what does not apply on Kubernetes (and --strict
// refuses it): nothing of the user's request is dropped in silence.
TEST_F(K8sCluster, SlurmSettingsOnAKubernetesRunAreNamed) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "-e", "kubernetes", "--dry-run",
                        kSource + "/examples/recipes/qwen3-30b-a3b-ep-overlap.yaml"},
                       env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("executor.slurm.account, executor.slurm.partition, "
                               "executor.slurm.time, executor.slurm.exclusive are set, but the "
                               "job runs on the kubernetes executor: not applied"));
  // Other tests' jobs of the same example may be there: nothing new may be.
  auto objects = [] {
    return run_command({"kubectl", "get", "jobsets,jobs,secrets,configmaps", "-o", "name"}).out;
  };
  const std::string before = objects();
  auto strict = run_command({BRIDGE_LAUNCH_BIN, "-e", "kubernetes", "--strict",
                             kSource + "/examples/recipes/qwen3-30b-a3b-ep-overlap.yaml"},
                            env());
  EXPECT_EQ(strict.exit_code, 2) << strict.err;
  EXPECT_EQ(objects(), before) << "nothing was applied";
}

// Cancel removes everything the job created: the JobSet, its Jobs and pods, the Secret.
TEST_F(K8sCluster, CancelLeavesNothingBehind) {
  for (const char* api : {"jobset", "job"}) {
    SCOPED_TRACE(api);
    auto r = run_command(argv({std::string("executor.kubernetes.api=") + api,
                               "executor.kubernetes.retries=1", "-E", "BRIDGE_KWOK_RUN_TIME=120s"}),
                         env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string name = object_name(r);
    auto status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
    EXPECT_THAT(status.out, ::testing::AnyOf(HasSubstr("PENDING"), HasSubstr("RUNNING")));
    auto cancel = run_command({BRIDGE_LAUNCH_BIN, "cancel", job_id(r)}, env());
    ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
    std::string left;
    for (int i = 0; i < 60; ++i) {
      auto all = run_command({"kubectl", "get", "jobsets,jobs,pods,secrets,services", "-l",
                              "bridge-launch/job=" + name, "-o", "name"});
      left = all.out;
      if (all.exit_code == 0 && left.empty()) break;
      std::this_thread::sleep_for(500ms);
    }
    EXPECT_EQ(left, "") << "still there after cancel";
    auto after = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
    EXPECT_THAT(after.out, HasSubstr("CANCELLED"));
  }
}

// Nothing left behind (docs/executors/kubernetes.md): the generated Secret, the plan
// confirmation's ConfigMap and the Job API's Services are owned by the JobSet / the Jobs, so
// once the TTL deletes those after the job finished, the garbage collector removes them too:
// nothing of the job stays in the API.
TEST_F(K8sCluster, AfterTheTtlNoGeneratedObjectRemains) {
  for (const char* api : {"jobset", "job"}) {
    SCOPED_TRACE(api);
    // Not --wait: an object the TTL deleted before a status poll saw it end is "not found".
    auto r = run_command(qwen3_on(api, {"executor.kubernetes.ttl_after_finished=5"}), env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("k8s-owner-not-set")));
    const std::string name = object_name(r);
    for (const std::string& dependent :
         {"secret/" + name + "-env", "configmap/" + name + "-plan"}) {
      json d = kubectl_json({"get", dependent});
      ASSERT_TRUE(d.contains("metadata")) << dependent << ": " << d.dump();
      ASSERT_EQ(d["metadata"]["ownerReferences"].size(), 1u) << d.dump();
      EXPECT_EQ(d["metadata"]["ownerReferences"][0]["name"], name);
    }
    std::string left;
    for (int i = 0; i < 120; ++i) {
      auto all = run_command({"kubectl", "get", "jobsets,jobs,pods,secrets,services,configmaps",
                              "-l", "bridge-launch/job=" + name, "-o", "name"});
      left = all.out;
      if (all.exit_code == 0 && left.empty()) break;
      std::this_thread::sleep_for(500ms);
    }
    EXPECT_EQ(left, "") << "still there a minute after the job ended";
  }
}

// ---------------------------------------------------------------------------------------
// api: trainjob (docs/executors/kubernetes.md, "api: trainjob"): Kubeflow Trainer's controller
// and webhooks in the test cluster, with its ClusterTrainingRuntime torch-distributed as
// upstream ships it (scripts/k8s-test-cluster.sh).

bool trainer_installed() {
  return run_command(
             {"kubectl", "get", "clustertrainingruntime", "torch-distributed", "-o", "name"})
             .exit_code == 0;
}

class K8sTrainJob : public K8sCluster {
 protected:
  void SetUp() override {
    K8sCluster::SetUp();
    if (IsSkipped()) return;
    if (!trainer_installed())
      GTEST_SKIP() << "the test cluster runs without Kubeflow Trainer (K8S_TEST_TRAINER=0)";
  }

  static std::vector<std::string> qwen3(const std::vector<std::string>& extra) {
    return qwen3_on("trainjob", extra);
  }

  // Everything of the job in the API, by its label ("" when nothing is left), polled for up
  // to `seconds`.
  static std::string left_after(const std::string& name, int seconds) {
    std::string left;
    for (int i = 0; i < seconds * 2; ++i) {
      auto all = run_command({"kubectl", "get", "trainjobs,jobsets,jobs,pods,secrets,configmaps",
                              "-l", "bridge-launch/job=" + name, "-o", "name"});
      left = all.out;
      if (all.exit_code == 0 && left.empty()) break;
      std::this_thread::sleep_for(500ms);
    }
    return left;
  }
};

// The acceptance of issue 50, item 5: the Qwen3 example as a TrainJob in a Kueue queue passes
// Trainer's webhooks, is admitted by Kueue, runs as the JobSet the Trainer controller makes,
// and every pod carries exactly the planned env (plus torchrun's PET_* variables, the
// runtime's); status, logs and why work on it.
TEST_F(K8sTrainJob, TheQwen3ExampleIsAdmittedAndEveryPodCarriesThePlannedEnv) {
  std::vector<std::string> queue;
  if (kueue_installed()) queue.push_back("executor.kubernetes.queue=gpu-queue");
  auto plan = run_command(
      [&] {
        auto a = qwen3(queue);
        a.insert(a.begin() + 1, {"plan", "--format", "json"});
        return a;
      }(),
      env());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto planned = planned_env(json::parse(plan.out));
  ASSERT_EQ(planned["BRIDGE_IT_HOSTILE"].first, kHostile);

  auto r = run_command(
      [&] {
        auto a = qwen3(queue);
        a.push_back("--wait");
        return a;
      }(),
      env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
  // Upstream's runtime restarts a failed container in place; the plan fails at once.
  EXPECT_THAT(r.err, HasSubstr("k8s-trainjob-runtime-restarts"));
  const std::string name = object_name(r);
  ASSERT_FALSE(name.empty()) << r.err;
  json tj = kubectl_json({"get", "trainjob", name});
  EXPECT_EQ(tj["spec"]["runtimeRef"]["name"], "torch-distributed");
  if (kueue_installed()) {
    EXPECT_EQ(tj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "gpu-queue");
    json wls = kubectl_json({"get", "workloads.kueue.x-k8s.io"});
    bool admitted = false;
    for (const auto& wl : wls["items"])
      for (const auto& o : wl["metadata"]["ownerReferences"])
        if (o["kind"] == "TrainJob" && o["name"] == name)
          for (const auto& c : wl["status"]["conditions"])
            admitted = admitted || (c["type"] == "Admitted" && c["status"] == "True");
    EXPECT_TRUE(admitted) << "no admitted Workload of TrainJob " << name;
  }
  json js = kubectl_json({"get", "jobset", name});
  ASSERT_EQ(js["metadata"]["ownerReferences"].size(), 1u) << js.dump();
  EXPECT_EQ(js["metadata"]["ownerReferences"][0]["kind"], "TrainJob");

  json pods = pods_of(name);
  ASSERT_EQ(pods["items"].size(), 2u) << pods.dump();
  std::set<std::string> ranks;
  for (const auto& pod : pods["items"]) {
    EXPECT_EQ(pod["status"]["phase"], "Succeeded");
    const json& c = pod["spec"]["containers"][0];
    EXPECT_EQ(c["name"], "node");
    // The runtime ran the planned command: the entrypoint and the rank command as rendered.
    EXPECT_EQ(c["command"], tj["spec"]["trainer"]["command"]);
    EXPECT_EQ(c["args"], tj["spec"]["trainer"]["args"]);
    EXPECT_EQ(c["image"], "nvcr.io/nvidia/nemo:25.11");
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
    const std::set<std::string> pet{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                                    "PET_MASTER_ADDR", "PET_MASTER_PORT"};
    expect_exactly_the_planned_env(c, planned, pet);
    std::map<std::string, json> got;
    for (const auto& e : c["env"]) got[e["name"].get<std::string>()] = e;
    // torchrun gets the plan's rendezvous as arguments; the runtime's agrees with it.
    EXPECT_EQ(got["PET_MASTER_ADDR"]["value"], got["MASTER_ADDR"]["value"]);
    EXPECT_EQ(got["PET_NNODES"]["value"], "2");
    EXPECT_EQ(got["PET_NPROC_PER_NODE"]["value"], "8");
    ranks.insert(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
  EXPECT_EQ(pods.dump().find(kSecret), std::string::npos);

  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
  EXPECT_THAT(status.out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(status.out, HasSubstr("TrainJob Complete"));
  auto logs = run_command({BRIDGE_LAUNCH_BIN, "logs", job_id(r), "--rank", "9"}, env());
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("kwok: this pod ran on a fake node"));
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", job_id(r), "--format", "json"}, env());
  EXPECT_EQ(why.exit_code, 0) << why.err;
  EXPECT_EQ(json::parse(why.out, nullptr, false)["state"], "SUCCEEDED") << why.out;
  run_command({"kubectl", "delete", "trainjob", name, "--wait=false"});  // it has no TTL
}

// A TrainJob on a runtime an admin made from upstream's without in-place restarts (restart
// policy Never, backoffLimit 0; upstream's OnFailure with the Job's default backoffLimit of 6
// retries a failed pod for minutes): a pod that fails fails the job, and --wait, status and
// why name its node, ranks and exit code.
TEST_F(K8sTrainJob, AFailedPodFailsTheTrainJobAndWhyNamesIt) {
  json rt = kubectl_json({"get", "clustertrainingruntime", "torch-distributed"});
  rt["metadata"] = {{"name", "bridge-it-torch-no-restart"}};
  rt.erase("status");
  json& job = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"];
  job["backoffLimit"] = 0;
  job["template"]["spec"]["restartPolicy"] = "Never";
  auto made = run_command({"kubectl", "apply", "-f", "-"}, {}, rt.dump());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto r =
      run_command(qwen3({"executor.kubernetes.training_runtime=bridge-it-torch-no-restart", "-E",
                         "BRIDGE_KWOK_FAIL=1", "-E", "BRIDGE_KWOK_EXIT_CODE=17", "--wait"}),
                  env());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("k8s-trainjob-runtime-restarts")));
  EXPECT_THAT(r.err, HasSubstr("FAILED (TrainJob Failed"));
  EXPECT_THAT(r.err, HasSubstr("first failure: node 1 (ranks 8-15) on kwok-gpu-"));
  EXPECT_THAT(r.err, HasSubstr("exit code 17"));
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", job_id(r), "--format", "json"}, env());
  EXPECT_EQ(why.exit_code, 1) << why.err;
  json j = json::parse(why.out, nullptr, false);
  EXPECT_EQ(j["first_failure"]["node"], 1) << why.out;
  EXPECT_EQ(j["first_failure"]["exit_code"], 17) << why.out;
  run_command({"kubectl", "delete", "trainjob", object_name(r), "--wait=false"});
  auto missing =
      run_command(qwen3({"executor.kubernetes.training_runtime=bridge-it-no-such-runtime"}), env());
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("k8s-trainjob-runtime-missing"));
  run_command({"kubectl", "delete", "clustertrainingruntime", "bridge-it-torch-no-restart"});
}

// Nothing left behind: `cancel` deletes the TrainJob, its Secret and ConfigMap; a deletion of
// the TrainJob alone (as its user or a cleanup job would do) removes them too, through the
// ownerReferences bridge-launch set after the apply.
TEST_F(K8sTrainJob, CancelOrADeletionOfTheTrainJobLeavesNothingBehind) {
  for (bool by_cancel : {true, false}) {
    SCOPED_TRACE(by_cancel ? "cancel" : "kubectl delete trainjob");
    auto r = run_command(qwen3({"-E", "BRIDGE_KWOK_RUN_TIME=120s"}), env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("k8s-owner-not-set")));
    const std::string name = object_name(r);
    json cm = kubectl_json({"get", "configmap", name + "-plan"});
    ASSERT_EQ(cm["metadata"]["ownerReferences"].size(), 1u) << cm.dump();
    EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "TrainJob");
    for (int i = 0; i < 60 && pods_of(name)["items"].empty(); ++i)
      std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(pods_of(name)["items"].empty()) << "the Trainer controller made no pods";
    auto status = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
    EXPECT_THAT(status.out, ::testing::AnyOf(HasSubstr("PENDING"), HasSubstr("RUNNING")));
    auto gone = by_cancel ? run_command({BRIDGE_LAUNCH_BIN, "cancel", job_id(r)}, env())
                          : run_command({"kubectl", "delete", "trainjob", name, "--wait=false"});
    ASSERT_EQ(gone.exit_code, 0) << gone.err;
    EXPECT_EQ(left_after(name, 60), "") << "still there a minute later";
    if (by_cancel) {
      auto after = run_command({BRIDGE_LAUNCH_BIN, "status", job_id(r)}, env());
      EXPECT_THAT(after.out, HasSubstr("CANCELLED"));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Long jobs on pods that really run (docs/long-jobs.md). The test control plane's pod runner
// (docs/executors/k8s-test-cluster.md) runs the pods labelled bridge-launch.test/run=host as
// processes on this machine: the entrypoint bridge-launch wrote, the real torchrun (from the
// conformance suite's environment, BRIDGE_TEST_TORCHRUN_DIR) and bridge-probe's ranks. A
// hostPath volume mounted at its own path is the shared file system of the checkpoints and
// the job dir, as on Slurm.
class K8sRunningPods : public K8sCluster {
 protected:
  void SetUp() override {
    K8sCluster::SetUp();
    if (IsSkipped()) return;
    const char* dir = std::getenv("BRIDGE_TEST_TORCHRUN_DIR");
    torchrun_dir_ = dir ? dir : "";
    if (torchrun_dir_.empty() || !std::filesystem::exists(torchrun_dir_ + "/torchrun"))
      GTEST_SKIP() << "no torchrun: set BRIDGE_TEST_TORCHRUN_DIR (scripts/run-tests.sh sets it "
                      "to the conformance environment's bin)";
    // Not under /tmp: the plan refuses a node-local checkpoint directory for 2 nodes.
    work_ = std::filesystem::current_path() /
            ("k8s-long-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(work_);
    std::filesystem::create_directories(work_);
  }
  void TearDown() override {
    if (!work_.empty()) std::filesystem::remove_all(work_);
  }

  // tests/data/recipes/long-job.yaml (the recipe of the local scenario too), on 2 pods x 2
  // GPUs: named `name`, its checkpoints and job dir on the shared volume, run by the pod
  // runner with the real torchrun, `retries` JobSet restarts, and `extra` overrides (the
  // fault of attempt 1, the watchdog's limits).
  std::vector<std::string> long_job(const std::string& name, int retries,
                                    const std::vector<std::string>& extra) const {
    const std::string work = work_.string();
    std::vector<std::string> a{"name=" + name, "checkpoint.dir=" + work + "/ckpt",
                               std::string("env.BRIDGE_PROBE=") + BRIDGE_PROBE_BIN,
                               "executor.kubernetes.retries=" + std::to_string(retries)};
    a.insert(a.end(), extra.begin(), extra.end());
    return host_pods(kSource + "/tests/data/recipes/long-job.yaml", a);
  }

  // `bridge-launch -e kubernetes RECIPE --wait` with pods the pod runner starts on this host
  // (torchrun from the conformance environment), the job dir on the shared volume.
  std::vector<std::string> host_pods(const std::string& recipe,
                                     const std::vector<std::string>& extra) const {
    const std::string work = work_.string();
    std::vector<std::string> a{
        BRIDGE_LAUNCH_BIN,
        "-e",
        "kubernetes",
        recipe,
        "--wait",
        "executor.kubernetes.job_dir=" + work + "/jobs",
        "executor.kubernetes.volumes=[{name: work, mount_path: " + work + ", host_path: " + work +
            "}]",
        "executor.kubernetes.labels={bridge-launch.test/run: host}",
        "executor.kubernetes.annotations={bridge-launch.test/image-path: " + torchrun_dir_ + "}"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // Submits and waits (at most `seconds`); the record's id and the launcher's output.
  std::pair<std::string, std::string> run_to_the_end(const std::vector<std::string>& argv,
                                                     int seconds) {
    std::filesystem::path out = tmp.path() + "/launch.txt";
    pid_t pid = test::start_background(argv, env(), out);
    int code = test::wait_exit(pid, seconds);
    std::string text = test::read_file(out.string());
    EXPECT_NE(code, -1) << "still waiting after " << seconds << " s:\n" << text;
    std::string id = submitted_id(text);
    return {id, text};
  }

  // Every log of the object's current pods (the latest attempt's).
  static std::string pod_logs(const std::string& object) {
    std::string all;
    const json pods = pods_of(object);  // not in the range-for: its temporary would be gone
    for (const auto& p : pods["items"]) {
      auto r = run_command({"kubectl", "logs", p["metadata"]["name"].get<std::string>()});
      all += r.out;
      if (r.exit_code != 0) all += "[kubectl logs: " + r.err + "]\n";
    }
    return all;
  }

  static std::string submitted_id(const std::string& text) {
    const std::string needle = "bridge-launch: submitted job ";
    size_t at = text.find(needle);
    if (at == std::string::npos) return "";
    at += needle.size();
    return text.substr(at, text.find(' ', at) - at);
  }

  // The directory of the one submission of recipe `name`: <job dir>/<name>/<object name>.
  std::string job_dir(const std::string& name) const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(work_ / "jobs" / name, ec))
      if (e.is_directory()) return e.path().string();
    return (work_ / "jobs" / name).string();
  }

  std::string torchrun_dir_;
  std::filesystem::path work_;
};

// The watchdog scenario: on attempt 1 rank 1 stops making progress at step 20 (the others
// wait for it). The watchdog of the pod holding rank 0 (bridge-probe's progress rank) ends
// its ranks within the progress timeout plus the kill grace, the pod fails, the JobSet's
// retry starts attempt 2, which resumes every rank from the newest checkpoint and succeeds.
TEST_F(K8sRunningPods, AHungAttemptIsEndedByThePodsWatchdogAndRetriedFromTheLastCheckpoint) {
  auto [id, out] = run_to_the_end(
      long_job("k8s-hang", 1, {"env.FIRST_ATTEMPT_FLAGS=--hang-rank 1 --hang-at-step 20"}), 240);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
  auto events = read_watchdog_events(job_dir("k8s-hang"));
  ASSERT_EQ(events.size(), 1u) << out;
  EXPECT_EQ(events[0].kind, "hang");
  EXPECT_EQ(events[0].attempt, 1);
  EXPECT_EQ(events[0].iteration, 19);
  EXPECT_EQ(events[0].node, 0);
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_LE(events[0].waited, 10 + 5);
  // Attempt 2's pods (the JobSet restarted once): every rank resumed from checkpoint 15.
  std::string name = object_name({0, "", out});
  json js = kubectl_json({"get", "jobsets", "-l", "bridge-launch/job=" + name});
  ASSERT_EQ(js["items"].size(), 1u);
  EXPECT_EQ(js["items"][0]["status"]["restarts"], 1);
  std::string logs = pod_logs(name);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_THAT(logs, HasSubstr("bridge-probe: rank " + std::to_string(rank) +
                                " resumes from checkpoint iteration 15"))
        << rank;
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", id}, env());
  EXPECT_THAT(status.out, HasSubstr("attempt 1: bridge-launch watchdog: hang"));
  EXPECT_THAT(status.out, HasSubstr("rank 1 (node 0) stopped first"));
}

// Without a retry the hang ends the job: `why` names `hang` and the rank that stopped first.
TEST_F(K8sRunningPods, WhyNamesTheHangAndTheRankThatStoppedFirst) {
  auto [id, out] =
      run_to_the_end(long_job("k8s-hang-once", 0,
                              {"env.FIRST_ATTEMPT_FLAGS=--hang-rank 1 --hang-at-step 8",
                               "runtime.watchdog.progress_timeout=5"}),
                     240);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr("FAILED"));
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", id, "--format", "json"}, env());
  json j = json::parse(why.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << why.out << why.err;
  ASSERT_TRUE(j["scheduler"].is_array() && !j["scheduler"].empty()) << why.out;
  EXPECT_EQ(j["scheduler"][0]["signature"], "hang") << why.out;
  EXPECT_THAT(j["scheduler"][0]["line"].get<std::string>(),
              HasSubstr("rank 1 (node 0) stopped first"));
  EXPECT_EQ(j["first_failure"]["exit_code"], kWatchdogHangExitCode);
  auto text = run_command({BRIDGE_LAUNCH_BIN, "why", id}, env());
  EXPECT_THAT(text.out, HasSubstr("bridge-launch watchdog: hang")) << text.out;
}

// The resume scenario: pod 0 of attempt 1 (the one whose entrypoint runs the watchdog and
// passes Kubernetes' SIGTERM on to torchrun) is deleted (its node preempted) once checkpoint 30
// of 60 landed; the JobSet's retry resumes every rank from it and the job succeeds.
TEST_F(K8sRunningPods, AnAttemptCutShortResumesFromTheCheckpointThatLanded) {
  std::filesystem::path out = tmp.path() + "/launch.txt";
  pid_t pid =
      test::start_background(long_job("k8s-resume", 1,
                                      {"train.max_steps=60", "checkpoint.interval=10",
                                       "runtime.args=[--compute-ms, '300', --timeout, '600']"}),
                             env(), out);
  const std::string tracker = (work_ / "ckpt" / "latest_checkpointed_iteration.txt").string();
  auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline &&
         std::atoi(test::read_file(tracker).c_str()) < 30)
    std::this_thread::sleep_for(100ms);
  int landed = std::atoi(test::read_file(tracker).c_str());
  ASSERT_GE(landed, 30) << test::read_file(out.string());
  ASSERT_LT(landed, 60) << "training ended before the pod could be deleted";
  std::string text = test::read_file(out.string());
  std::string name = object_name({0, "", text});
  auto del =
      run_command({"kubectl", "delete", "pod", "-l",
                   "bridge-launch/job=" + name + ",batch.kubernetes.io/job-completion-index=0",
                   "--wait=false"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  EXPECT_NE(test::wait_exit(pid, 240), -1);
  text = test::read_file(out.string());
  EXPECT_THAT(text, HasSubstr("SUCCEEDED"));
  std::string logs = pod_logs(name);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m,
                                std::regex(R"(rank 0 resumes from checkpoint iteration ([0-9]+))")))
      << logs;
  const int resumed_from = std::stoi(m[1]);
  EXPECT_GE(resumed_from, 30);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_THAT(logs,
                HasSubstr("bridge-probe: rank " + std::to_string(rank) +
                          " resumes from checkpoint iteration " + std::to_string(resumed_from)))
        << rank;
  EXPECT_EQ(test::read_file(tracker), "60\n");
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", submitted_id(text)}, env());
  EXPECT_THAT(status.out, HasSubstr("checkpoint iteration 60, saved ")) << status.out;
}

// The plan confirmation in pods (docs/runtime-check.md): a megatron_bridge job whose runtime
// is wrapped by a script that changes one value (-ms 8 becomes -ms 9; the fake runtime of
// tests/data/fake-megatron-runtime stands in for Megatron-Bridge). Every rank starts through
// the program of the job's ConfigMap, the job fails at start, and `why` and `status` name
// the field. The same job without the wrapper is confirmed by rank 0 (every rank compared a
// hostile env value byte for byte), and `status` still says so from pod 0's log once the job
// dir's verdict is gone (a job dir not visible from the submitting host).
TEST_F(K8sRunningPods, AJobWhoseRuntimeBuildsAnotherConfigFailsAtStartNamingTheField) {
  const std::string fake = kSource + "/tests/data/fake-megatron-runtime";
  auto confirm_job = [&](const std::string& name, const std::string& script) {
    std::string recipe = tmp.write(name + ".yaml", "name: " + name + R"(
cluster: {gpu: h100, num_gpus: 4, gpus_per_node: 2}
model: {family: llama, recipe: llama3_8b, tensor_model_parallel_size: 1, precision: bf16}
train: {global_batch_size: 4, micro_batch_size: 1, max_steps: 8}
env:
  PYTHONPATH: )" + fake + R"(
  HOSTILE_VALUE: "a'b\"c $(touch /tmp/owned) $$HOME `id` \\ ; %n"
runtime:
  adapter: megatron_bridge
  command: [python3, )" + fake + "/" + script + R"(]
  container_image: nvcr.io/nvidia/nemo:25.04
)");
    return run_to_the_end(host_pods(recipe, {}), 180);
  };

  auto [changed, changed_out] = confirm_job("k8s-confirm-changed", "change_one_value.py");
  ASSERT_FALSE(changed.empty()) << changed_out;
  EXPECT_THAT(changed_out, HasSubstr("FAILED"));
  std::string name = object_name({0, "", changed_out});
  std::string logs = pod_logs(name);
  EXPECT_THAT(logs, HasSubstr("bridge-launch: the runtime built a config that differs from the "
                              "plan: train.train_iters is 9, planned 8 (plan key "
                              "train.max_steps)"));
  EXPECT_THAT(logs, Not(HasSubstr("fake run_script: iteration"))) << "no rank trained";
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", changed}, env());
  EXPECT_EQ(why.exit_code, 1) << why.out << why.err;
  EXPECT_THAT(why.out, ContainsRegex("plan differs on rank [0-9]+: train.train_iters is 9, "
                                     "planned 8 \\(train.max_steps\\)"));
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", changed}, env());
  EXPECT_THAT(status.out,
              ContainsRegex("plan +plan differs on rank [0-9]+: train.train_iters is 9"));

  auto [clean, clean_out] = confirm_job("k8s-confirm-clean", "run_script.py");
  ASSERT_FALSE(clean.empty()) << clean_out;
  EXPECT_THAT(clean_out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(pod_logs(object_name({0, "", clean_out})),
              HasSubstr("fake run_script: iteration 3/8"));
  const std::regex confirmed(
      "plan +plan confirmed by rank 0 \\([0-9]+ values, "
      "[0-9]+ env variables on every rank");
  status = run_command({BRIDGE_LAUNCH_BIN, "status", clean}, env());
  EXPECT_TRUE(std::regex_search(status.out, confirmed)) << status.out;
  const std::string verdict = job_dir("k8s-confirm-clean") + "/plan_confirmation.json";
  ASSERT_TRUE(std::filesystem::exists(verdict)) << verdict;
  std::filesystem::remove(verdict);
  status = run_command({BRIDGE_LAUNCH_BIN, "status", clean}, env());
  EXPECT_TRUE(std::regex_search(status.out, confirmed)) << "from pod 0's log:\n" << status.out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/owned"));
}

// Retries away from a bad node (Job API, exclude_failed_nodes on by default): rank 3 fails on
// attempt 1, so the pod of node 1 fails first and its kwok node is blamed. Attempt 2's Job is
// started with that node excluded, all its pods run on the other node, it resumes from the
// checkpoint and succeeds; `status` lists both attempts with their nodes.
TEST_F(K8sRunningPods, AnAttemptThatFailedOnANodeIsRetriedOnAnotherAndStatusShowsBoth) {
  auto [id, out] =
      run_to_the_end(long_job("k8s-away", 1,
                              {"executor.kubernetes.api=job", "train.max_steps=12",
                               "env.FIRST_ATTEMPT_FLAGS=--fail-rank 3 --fail-at-step 7"}),
                     240);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
  const std::string name = object_name({0, "", out});
  json jobs = kubectl_json({"get", "jobs", "-l", "bridge-launch/job=" + name});
  std::string excluded;
  for (const auto& j : jobs["items"])
    if (j["metadata"]["name"] == name + "-r1")
      excluded = j["metadata"]["annotations"].value("bridge-launch/excluded-nodes", "");
  ASSERT_FALSE(excluded.empty()) << jobs.dump();
  json pods = kubectl_json({"get", "pods", "-l", "bridge-launch/job=" + name});
  std::string first_failed_on;
  int second = 0;
  for (const auto& p : pods["items"]) {
    std::string node = p["spec"].value("nodeName", "");
    if (p["metadata"]["labels"].value("bridge-launch/attempt", "") == "1") {
      ++second;
      EXPECT_NE(node, excluded) << "attempt 2 ran on the node attempt 1 failed on";
    } else if (p["metadata"]["annotations"].value("batch.kubernetes.io/job-completion-index", "") ==
               "1") {
      first_failed_on = node;
    }
  }
  EXPECT_EQ(second, 2);
  EXPECT_EQ(excluded, first_failed_on) << "the node of the pod whose rank failed";
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", id}, env());
  EXPECT_THAT(status.out, ContainsRegex("attempts +1: Job " + name +
                                        " FAILED on [^\n]*; failure "
                                        "blamed on " +
                                        excluded));
  EXPECT_THAT(status.out,
              ContainsRegex("2: Job " + name + "-r1 SUCCEEDED on [^\n]*, excluding " + excluded));
}

// Placement in pods (docs/executors/kubernetes.md, "Placement"): a 2-node GB200 job (one
// NVLink domain, 2 NUMA nodes of 2 GPUs per node). The two kwok nodes are in different
// NVLink domains (node label nvidia.com/gpu.clique), and either could hold both 4-GPU pods:
// the pods' required podAffinity puts them in one domain. Every rank reports the binding
// the GPU table's rule gives it (local rank / 2), as bridge-probe sees it in the process.
TEST_F(K8sRunningPods, AGb200JobStaysInOneNvlinkDomainAndEveryRankIsBoundToItsNumaNode) {
  struct Unlabel {
    ~Unlabel() { run_command({"kubectl", "label", "nodes", "--all", "nvidia.com/gpu.clique-"}); }
  } unlabel;
  for (const char* node : {"kwok-gpu-0", "kwok-gpu-1"}) {
    auto r = run_command({"kubectl", "label", "node", node, "--overwrite",
                          std::string("nvidia.com/gpu.clique=domain-") + node});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string recipe = tmp.write("nvl.yaml", std::string(R"(name: k8s-nvl
cluster: {gpu: gb200, num_gpus: 8, gpus_per_node: 4}
train: {global_batch_size: 8, micro_batch_size: 1, max_steps: 3}
runtime:
  adapter: probe
  command: [)") + BRIDGE_PROBE_BIN + R"(]
  args: [--compute-ms, '10', --timeout, '300']
  container_image: nvcr.io/nvidia/nemo:25.04
)");
  auto [id, out] =
      run_to_the_end(host_pods(recipe, {"executor.kubernetes.topology=required"}), 180);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
  const std::string name = object_name({0, "", out});
  const json pods = pods_of(name);
  ASSERT_EQ(pods["items"].size(), 2u) << pods.dump();
  std::set<std::string> nodes;
  for (const auto& p : pods["items"]) {
    const json& term =
        p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    EXPECT_EQ(term["topologyKey"], "nvidia.com/gpu.clique") << p["spec"].dump();
    nodes.insert(p["spec"].value("nodeName", ""));
  }
  EXPECT_EQ(nodes.size(), 1u) << "both pods in one NVLink domain";
  std::string logs = pod_logs(name);
  bool numactl = !run_command({"/bin/sh", "-c", "command -v numactl"}).out.empty();
  for (int rank = 0; rank < 8; ++rank) {
    int local = rank % 4;
    test::expect_binding_reported(logs, rank, local / 2,
                                  "(local rank " + std::to_string(local) + " / 2)", numactl);
  }
}

// A job whose training reached its last iteration and whose rank 0 does not exit: the pod's
// watchdog ends it after the teardown grace, the pod and the job succeed, with the note.
TEST_F(K8sRunningPods, ATeardownHangEndsSucceededWithTheWatchdogsNote) {
  auto [id, out] =
      run_to_the_end(long_job("k8s-teardown", 0,
                              {"train.max_steps=6", "env.FIRST_ATTEMPT_FLAGS=--hang-at-exit-rank 0",
                               "runtime.watchdog.teardown_grace=5"}),
                     180);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
  auto events = read_watchdog_events(job_dir("k8s-teardown"));
  ASSERT_EQ(events.size(), 1u) << out;
  EXPECT_EQ(events[0].kind, "teardown");
  EXPECT_EQ(events[0].iteration, 6);
  auto status = run_command({BRIDGE_LAUNCH_BIN, "status", id}, env());
  EXPECT_THAT(status.out, HasSubstr("training reached iteration 6/6"));
}

}  // namespace
}  // namespace bridge
