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

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace bridge {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using test::run_command;
using ::testing::HasSubstr;

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

  // The demo recipe on Kubernetes, 2 pods x 8 GPUs, with a hostile -E value and a secret.
  std::vector<std::string> argv(const std::vector<std::string>& extra) const {
    std::vector<std::string> a{BRIDGE_LAUNCH_BIN,
                               "-e",
                               "kubernetes",
                               "-ng",
                               "16",
                               "-gn",
                               "8",
                               kRecipe,
                               std::string("runtime.container_image=") + kImage,
                               "env.BRIDGE_IT_TOKEN={value: \"${BRIDGE_IT_SECRET}\", secret: true}",
                               "-E",
                               "BRIDGE_IT_HOSTILE=" + kHostile};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The registry id: the last line bridge-launch prints on stdout.
  static std::string job_id(const test::CommandResult& r) {
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  }

  // The Kubernetes object name (`jobset/<name>` in the submit message).
  static std::string object_name(const test::CommandResult& r) {
    for (const char* kind : {"jobset/", "job/"}) {
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
    std::map<std::string, json> got;
    for (const auto& e : c["env"]) got[e["name"].get<std::string>()] = e;
    for (const auto& [var, planned_value] : planned) {
      ASSERT_TRUE(got.count(var)) << var << " is planned but not in the pod";
      if (planned_value.second) {  // a secret: by reference only, never as a value
        EXPECT_FALSE(got[var].contains("value")) << var;
        EXPECT_TRUE(got[var]["valueFrom"].contains("secretKeyRef")) << var;
      } else {
        EXPECT_EQ(as_the_container_sees_it(got[var]["value"].get<std::string>()),
                  planned_value.first)
            << var;
      }
    }
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
TEST_F(K8sCluster, AFailingPodFailsTheJobAndWhyNamesIt) {
  auto r = run_command(
      argv({"-E", "BRIDGE_KWOK_FAIL=1", "-E", "BRIDGE_KWOK_EXIT_CODE=17", "--wait"}), env());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("FAILED"));
  EXPECT_THAT(r.err, HasSubstr("first failure: node 1 on kwok-gpu-"));
  auto why = run_command({BRIDGE_LAUNCH_BIN, "why", job_id(r), "--format", "json"}, env());
  ASSERT_EQ(why.exit_code, 0) << why.err;
  json j = json::parse(why.out);
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["first_failure"]["node"], 1);
  EXPECT_EQ(j["first_failure"]["exit_code"], 17);
  EXPECT_THAT(j["first_failure"]["host"].get<std::string>(), HasSubstr("kwok-gpu-"));
}

// Retries: the first attempt fails, the JobSet restarts it, the second attempt succeeds.
TEST_F(K8sCluster, ARetryAfterAFailedAttemptSucceeds) {
  auto r = run_command(argv({"executor.kubernetes.retries=1", "-E", "BRIDGE_KWOK_FAIL=0", "-E",
                             "BRIDGE_KWOK_FAIL_ATTEMPTS=1", "--wait"}),
                       env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SUCCEEDED"));
}

// Cancel removes everything the job created: the JobSet, its Jobs and pods, the Secret.
TEST_F(K8sCluster, CancelLeavesNothingBehind) {
  auto r = run_command(argv({"-E", "BRIDGE_KWOK_RUN_TIME=120s"}), env());
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

}  // namespace
}  // namespace bridge
