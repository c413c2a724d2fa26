// The Kubernetes executor end to end through the real bridge-launch binary, with the fake
// kubectl of tests/data/fake-kubectl first on PATH (it records every call and its stdin):
// dry-run, submit, a failure in the middle of `kubectl apply`, status, logs, cancel, and the
// secret marker test.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "jobs/registry.h"
#include "tests/integration/process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/k8s_testing.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::ChildResult;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kWandbMarker = "WANDB-KEY-MARKER-3b7f";
constexpr const char* kEnvMarker = "ENV-SECRET-MARKER-c4d8";

const char* const kRecipe = R"(name: cli_k8s.Demo
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, train.py]
  args: ["--label", "it's \"quoted\""]
  container_image: nvcr.io/nvidia/nemo:25.11
plugins:
  wandb: {project: p}
env:
  HF_TOKEN: {value: ENV-SECRET-MARKER-c4d8, secret: true}
executor:
  kubernetes: {namespace: research}
)";

struct Call {
  std::vector<std::string> argv;
  std::string stdin_text;
};

class K8sCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string fake = std::string(BRIDGE_TEST_DATA) + "/fake-kubectl/kubectl";
    ASSERT_TRUE(fs::exists(fake)) << fake;
    fs::create_directories(bin());
    fs::copy_file(fake, bin() + "/kubectl", fs::copy_options::overwrite_existing);
    chmod((bin() + "/kubectl").c_str(), 0755);
    fs::create_directories(state());
    fs::create_directories(registry());
    recipe_ = dir_.write("recipe.yaml", kRecipe);
  }

  std::string bin() const { return dir_.path() + "/bin"; }
  std::string state() const { return dir_.path() + "/kubectl-state"; }
  std::string registry() const { return dir_.path() + "/registry"; }

  // The environment of every bridge-launch run: the fake kubectl first on PATH, scratch
  // registry and HOME, a wandb key (the secret marker). `extra` wins.
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    const char* path = std::getenv("PATH");
    extra.emplace("PATH", bin() + ":" + (path ? path : "/usr/bin:/bin"));
    extra.emplace("FAKE_KUBECTL_DIR", state());
    extra.emplace("BRIDGE_LAUNCH_STATE_DIR", registry());
    extra.emplace("HOME", dir_.path());
    extra.emplace("WANDB_API_KEY", kWandbMarker);
    return extra;
  }

  ChildResult run(std::vector<std::string> args, std::map<std::string, std::string> extra = {}) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv, env(std::move(extra)));
  }

  std::vector<Call> calls() const {
    std::vector<Call> out;
    std::ifstream in(state() + "/calls.jsonl");
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line);
      out.push_back({j["argv"].get<std::vector<std::string>>(), j["stdin"]});
    }
    return out;
  }

  std::string registry_text() const {
    std::string all;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(registry(), ec))
      if (e.is_regular_file()) all += test::read_file(e.path().string());
    return all;
  }

  static bool has_seq(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
    return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
  }

  static void expect_no_marker(const std::string& text, const std::string& what) {
    EXPECT_THAT(text, Not(HasSubstr(kWandbMarker))) << what;
    EXPECT_THAT(text, Not(HasSubstr(kEnvMarker))) << what;
  }

  // Submits the recipe; returns the job id printed on stdout.
  std::string submit_ok() {
    ChildResult r = run({"--executor", "kubernetes", recipe_});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out.substr(0, r.out.find('\n'));
    EXPECT_FALSE(id.empty()) << r.out;
    return id;
  }

  // The JobSet's name, from the recorded apply.
  std::string applied_jobset() const {
    for (const auto& c : calls())
      if (has_seq(c.argv, {"apply"}))
        for (const auto& d : testing::parse_yaml_docs(c.stdin_text))
          if (d["kind"] == "JobSet") return d["metadata"]["name"];
    return {};
  }

  test::TempDir dir_;
  std::string recipe_;
};

TEST_F(K8sCli, DryRunPrintsValidManifestsAndCallsNothing) {
  ChildResult r = run({"--executor", "kubernetes", "--dry-run", "-ng", "16", "-gn", "8", recipe_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kind: JobSet"));
  EXPECT_THAT(r.out, HasSubstr("\n---\n"));
  // No Secret object with placeholder values: its name and how to create it instead.
  EXPECT_THAT(r.out, Not(HasSubstr("kind: Secret")));
  EXPECT_THAT(r.out, Not(HasSubstr("<secret>")));
  EXPECT_THAT(r.out, HasSubstr("--from-literal=WANDB_API_KEY=\"$WANDB_API_KEY\""));
  expect_no_marker(r.out + r.err, "dry-run output");
  EXPECT_TRUE(calls().empty()) << "dry-run must not run kubectl";
  EXPECT_EQ(registry_text(), "") << "dry-run must not record a job";
  if (testing::k8s_validator().empty()) GTEST_SKIP() << testing::kNoValidator;
  auto v = test::run_command({"/usr/bin/python3", testing::k8s_validator(), "-"}, {}, r.out);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// --dry-run shows what a submission of the same inputs applies: two runs, the same bytes.
TEST_F(K8sCli, DryRunIsByteIdenticalAcrossRuns) {
  std::vector<std::string> args{"--executor", "kubernetes", "--dry-run", "-ng",
                                "16",         "-gn",        "8",         recipe_};
  ChildResult first = run(args);
  ChildResult second = run(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
}

TEST_F(K8sCli, SubmitAppliesManifestsOnStdinAndRecordsTheJob) {
  std::string id = submit_ok();
  auto cs = calls();
  // The apply, then the owner of the Secret and of the plan confirmation's ConfigMap: the
  // JobSet's uid, and a merge patch with it for each.
  ASSERT_EQ(cs.size(), 4u);
  EXPECT_EQ(cs[0].argv, (std::vector<std::string>{"--namespace", "research", "apply", "-f", "-"}));
  auto docs = testing::parse_yaml_docs(cs[0].stdin_text);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]["kind"], "Secret");
  EXPECT_EQ(docs[1]["kind"], "ConfigMap");
  EXPECT_EQ(docs[2]["kind"], "JobSet");
  std::string name = docs[2]["metadata"]["name"];
  EXPECT_THAT(name, ::testing::MatchesRegex("cli-k8s-demo-[0-9a-f]{4}"));
  // The registry knows the object, the namespace and the manifests (redacted). The entry
  // is read as `list` reads it (a submission's entry is its pending record plus the commit).
  std::optional<JobRecord> rec;
  for (const auto& e : fs::directory_iterator(registry() + "/jobs"))
    if (e.path().extension() == ".json") rec = read_job_entry(test::read_file(e.path()));
  ASSERT_TRUE(rec) << registry_text();
  EXPECT_EQ(rec->scheduler_id, "jobset/" + name);
  EXPECT_EQ(rec->namespace_, "research");
  EXPECT_THAT(rec->rendered, HasSubstr("kind: JobSet"));
  EXPECT_EQ(cs[1].argv,
            (std::vector<std::string>{"--namespace", "research", "get", "jobsets.jobset.x-k8s.io",
                                      "-l", "bridge-launch/job=" + name, "-o", "json"}));
  ASSERT_GE(cs[2].argv.size(), 7u);
  EXPECT_EQ(std::vector<std::string>(cs[2].argv.begin(), cs[2].argv.begin() + 6),
            (std::vector<std::string>{"--namespace", "research", "patch", "secret", name + "-env",
                                      "--type=merge"}));
  EXPECT_EQ(std::vector<std::string>(cs[3].argv.begin(), cs[3].argv.begin() + 6),
            (std::vector<std::string>{"--namespace", "research", "patch", "configmap",
                                      name + "-plan", "--type=merge"}));
  for (size_t call : {2, 3}) {
    auto patch = nlohmann::json::parse(cs[call].argv.back());
    EXPECT_EQ(patch["metadata"]["ownerReferences"],
              nlohmann::json::parse(R"([{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                        "kind": "JobSet", "name": ")" +
                                    name + R"(", "uid": "uid-)" + name + "\"}]"));
  }
}

TEST_F(K8sCli, SecretsOnlyInTheAppliedSecretObject) {
  ChildResult r = run({"--executor", "kubernetes", recipe_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_marker(r.out + r.err, "submit output");
  auto cs = calls();
  // apply, the owner's uid, the ownerReferences of the Secret and of the ConfigMap
  ASSERT_EQ(cs.size(), 4u);
  for (const auto& c : cs) {
    std::string args;
    for (const auto& a : c.argv) args += a + " ";
    expect_no_marker(args, "kubectl arguments");
  }
  auto docs = testing::parse_yaml_docs(cs[0].stdin_text);
  ASSERT_EQ(docs[0]["kind"], "Secret");
  EXPECT_EQ(docs[0]["stringData"]["WANDB_API_KEY"], kWandbMarker);
  EXPECT_EQ(docs[0]["stringData"]["HF_TOKEN"], kEnvMarker);
  for (size_t i = 1; i < docs.size(); ++i) expect_no_marker(docs[i].dump(), "non-Secret object");
}

TEST_F(K8sCli, RegistryHoldsNoSecretValue) {
  ChildResult r = run({"--executor", "kubernetes", recipe_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string reg = registry_text();
  ASSERT_THAT(reg, HasSubstr("kind: JobSet"));
  expect_no_marker(reg, "job registry");
}

TEST_F(K8sCli, FailureMidApplyCleansUpAndExits1WithKubectlsMessage) {
  ChildResult r = run({"--executor", "kubernetes", recipe_}, {{"FAKE_KUBECTL_FAIL_AT", "2"}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("exceeded quota: gpu-quota"));
  EXPECT_THAT(r.err, HasSubstr("deleted what it had created"));
  auto cs = calls();
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_TRUE(has_seq(cs[0].argv, {"apply", "-f", "-"}));
  EXPECT_TRUE(has_seq(cs[1].argv, {"delete", "--ignore-not-found"}));
  EXPECT_TRUE(has_seq(cs[1].argv, {"-f", "-"}));
  EXPECT_TRUE(has_seq(cs[1].argv, {"--namespace", "research"}));
  auto deleted = testing::parse_yaml_docs(cs[1].stdin_text);
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0]["kind"], "Secret");
  expect_no_marker(cs[1].stdin_text, "clean-up stdin");
  expect_no_marker(r.out + r.err, "output");
  EXPECT_EQ(r.out, "") << "no job id: nothing was submitted";
  EXPECT_EQ(registry_text(), "") << "no registry entry for a failed submission";
}

// The API server cannot be reached at all: kubectl's own message, exit 1, nothing recorded.
TEST_F(K8sCli, UnreachableApiServerIsAClearFailureWithNoRegistryEntry) {
  const std::string refused =
      "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host "
      "or port?";
  ChildResult r =
      run({"--executor", "kubernetes", recipe_}, {{"FAKE_KUBECTL_FAIL_APPLY", refused}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(refused));
  EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
  EXPECT_EQ(r.out, "") << "no job id: nothing was submitted";
  EXPECT_EQ(registry_text(), "") << "no registry entry for a failed submission";
  expect_no_marker(r.out + r.err, "output");
}

// A registry that cannot be written stops a Kubernetes launch before kubectl is called.
TEST_F(K8sCli, UnwritableRegistryCallsNoKubectl) {
  std::string not_a_dir = dir_.write("registry-file", "a file where the registry should be\n");
  ChildResult r = run({"--executor", "kubernetes", recipe_},
                      {{"BRIDGE_LAUNCH_STATE_DIR", not_a_dir + "/state"}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("is not writable"));
  EXPECT_THAT(r.err, HasSubstr("nothing was submitted"));
  EXPECT_TRUE(calls().empty()) << "kubectl was called: " << calls().size() << " time(s)";
}

// The API server goes away after the submission: `status` says why it cannot tell, and the
// entry keeps its last known state (it is not marked failed or lost).
TEST_F(K8sCli, StatusWithTheApiServerDownKeepsTheEntry) {
  std::string id = submit_ok();
  ChildResult st =
      run({"status", id, "--format", "json"}, {{"FAKE_KUBECTL_FAIL_GET",
                                                "Unable to connect to the server: dial tcp "
                                                "10.0.0.1:6443: connect: no route to host"}});
  EXPECT_THAT(st.err, HasSubstr("no route to host"));
  EXPECT_THAT(st.err, Not(HasSubstr("internal error")));
  json sj = json::parse(st.out, nullptr, false);
  ASSERT_TRUE(sj.is_array()) << st.out << st.err;
  EXPECT_NE(sj[0]["state"], "FAILED") << st.out;
  EXPECT_NE(sj[0]["state"], "SUCCEEDED") << st.out;
  ChildResult list = run({"list", "--format", "json"});
  json lj = json::parse(list.out, nullptr, false);
  ASSERT_TRUE(lj.is_array() && lj.size() == 1u) << list.out;
  EXPECT_EQ(lj[0]["state"], "PENDING") << "the unknown answer must not overwrite the entry";
}

// SIGINT during `--wait` on Kubernetes stops the waiting only: nothing is deleted.
TEST_F(K8sCli, InterruptedWaitDeletesNothing) {
  fs::path out = dir_.path() + "/wait.txt";
  pid_t pid = test::start_background(
      {BRIDGE_LAUNCH_BIN, "--executor", "kubernetes", "--wait", recipe_}, env(), out);
  ASSERT_TRUE(test::wait_for_text(out, "submitted job", 30)) << test::read_file(out);
  // The fake API server knows no JobSet yet: the wait loop polls on, state UNKNOWN.
  ASSERT_TRUE(test::wait_for_text(out, " UNKNOWN", 30)) << test::read_file(out);
  kill(pid, SIGINT);
  EXPECT_EQ(test::wait_exit(pid, 30), 130) << test::read_file(out);
  EXPECT_THAT(test::read_file(out), HasSubstr("keeps running"));
  for (const auto& c : calls())
    EXPECT_FALSE(has_seq(c.argv, {"delete"})) << "an interrupted wait deleted objects";
  EXPECT_THAT(registry_text(), Not(HasSubstr("CANCELLED")));
}

TEST_F(K8sCli, JobApiSubmitsServicesAndJobs) {
  ChildResult r = run({"--executor", "kubernetes", recipe_, "executor.kubernetes.api=job"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto docs = testing::parse_yaml_docs(calls().at(0).stdin_text);
  std::vector<std::string> kinds;
  for (const auto& d : docs) kinds.push_back(d["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"Secret", "ConfigMap", "Service", "Job"}));
}

TEST_F(K8sCli, StatusLogsAndCancelOfASubmittedJob) {
  std::string id = submit_ok();
  std::string name = applied_jobset();
  ASSERT_FALSE(name.empty());
  // status: one kubectl get, mapped from the JobSet's conditions.
  std::ofstream(state() + "/get.json")
      << json{{"apiVersion", "v1"},
              {"kind", "List"},
              {"items",
               {{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                 {"kind", "JobSet"},
                 {"metadata", {{"name", name}}},
                 {"status",
                  {{"replicatedJobsStatus", {{{"name", "node"}, {"ready", 1}, {"active", 1}}}}}}}}}}
             .dump();
  ChildResult st = run({"status", id, "--format", "json"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  json sj = json::parse(st.out, nullptr, false);
  ASSERT_TRUE(sj.is_array()) << st.out;
  EXPECT_EQ(sj[0]["state"], "RUNNING") << st.out;
  auto gets = calls();
  EXPECT_TRUE(
      has_seq(gets.back().argv, {"get", "jobsets.jobset.x-k8s.io", "-l",
                                 "app.kubernetes.io/managed-by=bridge-launch", "-o", "json"}));
  // logs --rank 9: node 1's pod.
  std::ofstream(state() + "/get-pods.json") << json{
      {"kind", "List"},
      {"items",
       {{{"kind", "Pod"},
         {"metadata",
          {{"name", name + "-node-0-0-x1"},
           {"annotations", {{"batch.kubernetes.io/job-completion-index", "0"}}}}},
         {"status", {{"phase", "Running"}}}},
        {{"kind", "Pod"},
         {"metadata",
          {{"name", name + "-node-0-1-x2"},
           {"annotations", {{"batch.kubernetes.io/job-completion-index", "1"}}}}},
         {"status", {{"phase", "Running"}}}}}}}.dump();
  ChildResult lg = run({"logs", id, "--rank", "9"});
  EXPECT_EQ(lg.exit_code, 0) << lg.err;
  EXPECT_EQ(lg.out, "log line of " + name + "-node-0-1-x2\n");
  // cancel: delete by label, and the registry says CANCELLED.
  ChildResult c = run({"cancel", id});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(
      has_seq(calls().back().argv, {"delete", "jobsets.jobset.x-k8s.io,secrets,configmaps", "-l",
                                    "bridge-launch/job=" + name, "--ignore-not-found"}));
  EXPECT_THAT(registry_text(), HasSubstr("CANCELLED"));
}

TEST_F(K8sCli, MissingContainerImageIsAUsageError) {
  std::string text = kRecipe;
  text.erase(text.find("  container_image"),
             std::string("  container_image: nvcr.io/nvidia/nemo:25.11\n").size());
  std::string path = dir_.write("noimage.yaml", text);
  ChildResult r = run({"--executor", "kubernetes", "--dry-run", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("k8s-container-image-required"));
  EXPECT_TRUE(calls().empty());
}

}  // namespace
}  // namespace bridge
