// The Kubernetes executor's side of kubectl, through a recording CommandRunner: submit
// (apply with the manifests on stdin, clean-up after a failed apply), status of JobSets and
// Jobs from canned `kubectl get -o json` answers (one query for many jobs), Job API retries,
// logs and cancel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/executor.h"
#include "executors/k8s_names.h"
#include "executors/k8s_render.h"
#include "executors/k8s_status.h"
#include "tests/support/fake_services.h"
#include "tests/support/k8s_testing.h"

namespace bridge {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using testing::failed_result;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ok_result;
using testing::ScriptedRunner;
using testing::TestServices;

constexpr const char* kMarker = "EXEC-SECRET-MARKER-91d2";

const char* const kRecipe = R"(name: exec-demo
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, train.py]
  container_image: nvcr.io/nvidia/nemo:25.11
env:
  TOKEN: {value: EXEC-SECRET-MARKER-91d2, secret: true}
executor:
  kubernetes: {namespace: team-a, context: prod}
)";

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

bool contains_seq(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

struct Submitted {
  SubmitResult result;
  Diagnostics diags;
  int accepted_calls = 0;
  std::string rendered;
};

Submitted submit(ScriptedRunner& fake, std::vector<std::string> overrides = {}) {
  auto p = testing::k8s_plan(kRecipe, std::move(overrides));
  EXPECT_TRUE(p->plan->complete);
  TestServices use(fake);
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  EXPECT_NE(ex, nullptr);
  Submitted s;
  auto job = ex->render(*p->plan, SubmissionIdentity{"exec-demo-20261130-120000-ab12"}, s.diags);
  if (!job) {
    ADD_FAILURE() << "render failed";
    return s;
  }
  s.rendered = job->dry_run_text();
  std::ostringstream out;
  s.result =
      job->submit(SubmitOptions{}, out, s.diags, [&](const SubmitResult&) { ++s.accepted_calls; });
  return s;
}

// A cluster that takes every apply: kubectl's "<resource>/<name> created" for each document
// of stdin; then, for the ownership query, the applied JobSets and Jobs with a uid each (as
// the API server lists them); every patch succeeds.
struct AcceptingCluster {
  std::shared_ptr<std::vector<json>> applied = std::make_shared<std::vector<json>>();
  CommandResult operator()(const CommandSpec& spec) const {
    if (contains_seq(spec.argv, {"get"})) {
      json items = json::array();
      for (const auto& d : *applied)
        if (d["kind"] == "JobSet" || d["kind"] == "Job" || d["kind"] == "TrainJob")
          items.push_back({{"apiVersion", d["apiVersion"]},
                           {"kind", d["kind"]},
                           {"metadata",
                            {{"name", d["metadata"]["name"]},
                             {"uid", "uid-" + d["metadata"]["name"].get<std::string>()}}}});
      return ok_result(json{{"kind", "List"}, {"items", items}}.dump());
    }
    if (contains_seq(spec.argv, {"patch"})) return ok_result("patched\n");
    std::string out;
    for (const auto& d : testing::parse_yaml_docs(spec.stdin_text)) {
      std::string kind = d["kind"];
      std::string res = kind == "JobSet"      ? "jobset.jobset.x-k8s.io"
                        : kind == "TrainJob"  ? "trainjob.trainer.kubeflow.org"
                        : kind == "Job"       ? "job.batch"
                        : kind == "ConfigMap" ? "configmap"
                                              : (kind == "Service" ? "service" : "secret");
      out += res + "/" + d["metadata"]["name"].get<std::string>() + " created\n";
      applied->push_back(d);
    }
    return ok_result(out);
  }
};

TEST(K8sExecutor, IsRegistered) {
  ScriptedRunner fake;
  TestServices use(fake);
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  ASSERT_NE(ex, nullptr);
  bool listed = false;
  for (const auto& e : executor_registry()) listed = listed || std::string(e.name) == "kubernetes";
  EXPECT_TRUE(listed);
}

TEST(K8sExecutor, SubmitAppliesTheRenderedManifestsOnStdin) {
  ScriptedRunner fake;
  fake.respond = AcceptingCluster{};
  Submitted s = submit(fake);
  // apply, the JobSet's uid, the owner of the Secret and of the plan confirmation's ConfigMap
  ASSERT_EQ(fake.calls.size(), 4u);
  const CommandSpec& apply = fake.calls[0];
  EXPECT_EQ(apply.argv, (std::vector<std::string>{"kubectl", "--context", "prod", "--namespace",
                                                  "team-a", "apply", "-f", "-"}));
  EXPECT_EQ(s.result.exit_code, 0);
  EXPECT_TRUE(s.result.accepted);
  EXPECT_EQ(s.accepted_calls, 1);
  // The names derive from the job id the CLI fixed (and so match the rendered text); the
  // secret is only here, in the Secret.
  std::string suffix = k8s_submission_suffix("exec-demo-20261130-120000-ab12");
  ASSERT_EQ(suffix.size(), 4u);
  EXPECT_THAT(s.rendered, HasSubstr("exec-demo-" + suffix));
  EXPECT_EQ(s.result.scheduler_id, "jobset/exec-demo-" + suffix);
  auto docs = testing::parse_yaml_docs(apply.stdin_text);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]["kind"], "Secret");
  EXPECT_EQ(docs[0]["stringData"]["TOKEN"], kMarker);
  // The plan confirmation's program and request (applied, not shown: a header line names it).
  EXPECT_EQ(docs[1]["kind"], "ConfigMap");
  EXPECT_EQ(docs[1]["metadata"]["name"], "exec-demo-" + suffix + "-plan");
  EXPECT_TRUE(docs[1]["data"].contains("bridge_plan_confirm.py"));
  EXPECT_TRUE(docs[1]["data"].contains("plan_confirm.json"));
  EXPECT_THAT(docs[1].dump(), Not(HasSubstr(kMarker)));
  EXPECT_THAT(s.rendered, Not(HasSubstr("kind: ConfigMap")));
  EXPECT_THAT(s.rendered, HasSubstr("(ConfigMap exec-demo-" + suffix + "-plan, not shown"));
  EXPECT_EQ(docs[2]["metadata"]["name"], "exec-demo-" + suffix);
  EXPECT_THAT(docs[2].dump(), Not(HasSubstr(kMarker)));
  EXPECT_THAT(s.rendered, Not(HasSubstr(kMarker)));
  // Apart from the Secret (applied, never shown), what was applied is what was shown.
  std::string shown = s.rendered;
  EXPECT_THAT(shown, HasSubstr("kubectl create secret generic exec-demo-" + suffix + "-env"));
  EXPECT_EQ(shown.find("kind: Secret"), std::string::npos);
  std::string applied_workload = apply.stdin_text.substr(apply.stdin_text.find("kind: JobSet"));
  EXPECT_EQ(applied_workload, shown.substr(shown.find("kind: JobSet")));
  for (const auto& c : fake.calls) EXPECT_THAT(joined(c.argv), Not(HasSubstr(kMarker)));
  // The Secret is owned by the JobSet (its uid from the API), so the TTL removes it too.
  const std::string jobset = "exec-demo-" + suffix;
  EXPECT_TRUE(contains_seq(
      fake.calls[1].argv, {"get", "jobsets.jobset.x-k8s.io", "-l", "bridge-launch/job=" + jobset}));
  EXPECT_TRUE(contains_seq(fake.calls[2].argv, {"patch", "secret", jobset + "-env"}));
  EXPECT_TRUE(contains_seq(fake.calls[3].argv, {"patch", "configmap", jobset + "-plan"}));
  for (size_t call : {2, 3}) {
    json owners = json::parse(fake.calls[call].argv.back())["metadata"]["ownerReferences"];
    ASSERT_EQ(owners.size(), 1u);
    EXPECT_EQ(owners[0]["kind"], "JobSet");
    EXPECT_EQ(owners[0]["name"], jobset);
    EXPECT_EQ(owners[0]["uid"], "uid-" + jobset);
  }
  // The registry's job dir is the submission's directory, where the verdict goes.
  EXPECT_EQ(s.result.job_dir, "/workspace/bridge-launch/jobs/exec-demo/" + jobset);
  EXPECT_FALSE(s.diags.has_code("k8s-owner-not-set"));
}

// Job API: each attempt's Service is owned by that attempt's Job; the Secret by every Job,
// so it stays while any attempt may still start.
TEST(K8sExecutor, TheJobApisServicesAndSecretAreOwnedByTheirJobs) {
  ScriptedRunner fake;
  fake.respond = AcceptingCluster{};
  Submitted s = submit(fake, {"executor.kubernetes.api=job", "executor.kubernetes.retries=1"});
  ASSERT_TRUE(s.result.accepted);
  std::map<std::string, json> owners_of;  // "secret x" / "service y" -> its ownerReferences
  for (const auto& c : fake.calls) {
    auto at = std::find(c.argv.begin(), c.argv.end(), "patch");
    if (at == c.argv.end() || c.argv.end() - at < 3) continue;
    owners_of[*(at + 1) + " " + *(at + 2)] =
        json::parse(c.argv.back())["metadata"]["ownerReferences"];
  }
  const std::string job = "exec-demo-" + k8s_submission_suffix("exec-demo-20261130-120000-ab12");
  ASSERT_EQ(owners_of.size(), 4u) << "the Secret, the ConfigMap and two Services";
  EXPECT_EQ(owners_of["secret " + job + "-env"].size(), 2u);
  EXPECT_EQ(owners_of["configmap " + job + "-plan"].size(), 2u);
  ASSERT_EQ(owners_of["service " + job].size(), 1u);
  EXPECT_EQ(owners_of["service " + job][0]["name"], job);
  ASSERT_EQ(owners_of["service " + job + "-r1"].size(), 1u);
  EXPECT_EQ(owners_of["service " + job + "-r1"][0]["kind"], "Job");
  EXPECT_EQ(owners_of["service " + job + "-r1"][0]["uid"], "uid-" + job + "-r1");
}

// A TrainJob owns the Secret and the ConfigMap: deleting it removes them (it has no TTL).
TEST(K8sExecutor, ATrainJobOwnsItsSecretAndConfigMap) {
  ScriptedRunner fake;
  fake.respond = AcceptingCluster{};
  Submitted s = submit(fake, {"executor.kubernetes.api=trainjob"});
  ASSERT_TRUE(s.result.accepted) << testing::diag_lines(s.diags);
  EXPECT_EQ(s.result.scheduler_id.rfind("trainjob/", 0), 0u) << s.result.scheduler_id;
  std::map<std::string, json> owners_of;
  for (const auto& c : fake.calls) {
    if (contains_seq(c.argv, {"get"}) &&
        !contains_seq(c.argv, {"get", "clustertrainingruntimes.trainer.kubeflow.org"})) {
      EXPECT_TRUE(contains_seq(c.argv, {"get", "trainjobs.trainer.kubeflow.org"}));
    }
    auto at = std::find(c.argv.begin(), c.argv.end(), "patch");
    if (at == c.argv.end() || c.argv.end() - at < 3) continue;
    owners_of[*(at + 1)] = json::parse(c.argv.back())["metadata"]["ownerReferences"];
  }
  ASSERT_EQ(owners_of.size(), 2u) << "the Secret and the ConfigMap";
  for (const auto& [kind, owners] : owners_of) {
    ASSERT_EQ(owners.size(), 1u) << kind;
    EXPECT_EQ(owners[0]["kind"], "TrainJob") << kind;
    EXPECT_EQ(owners[0]["apiVersion"], "trainer.kubeflow.org/v1alpha1") << kind;
  }
}

// The runtime a TrainJob names is read before anything is applied: a missing one is an error
// and nothing is applied; one that restarts failed ranks is a warning that says how.
TEST(K8sExecutor, ATrainJobsRuntimeIsCheckedBeforeTheApply) {
  ScriptedRunner missing;
  missing.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "clustertrainingruntimes.trainer.kubeflow.org"}))
      return failed_result(
          "Error from server (NotFound): clustertrainingruntimes.trainer.kubeflow.org "
          "\"torch-distributed\" not found");
    return ok_result();
  };
  Submitted s = submit(missing, {"executor.kubernetes.api=trainjob"});
  EXPECT_FALSE(s.result.accepted);
  EXPECT_EQ(s.result.exit_code, 2);
  EXPECT_TRUE(s.diags.has_code("k8s-trainjob-runtime-missing")) << testing::diag_lines(s.diags);
  for (const auto& c : missing.calls) EXPECT_FALSE(contains_seq(c.argv, {"apply"}));

  ScriptedRunner restarting;
  AcceptingCluster cluster;
  restarting.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "clustertrainingruntimes.trainer.kubeflow.org"}))
      return ok_result(R"({"kind":"ClusterTrainingRuntime","spec":{"template":{"spec":{
          "replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{}}}}}]}}}})");
    return cluster(spec);
  };
  Submitted r = submit(restarting, {"executor.kubernetes.api=trainjob"});
  EXPECT_TRUE(r.result.accepted) << testing::diag_lines(r.diags);
  ASSERT_TRUE(r.diags.has_code("k8s-trainjob-runtime-restarts")) << testing::diag_lines(r.diags);
  EXPECT_THAT(testing::diag_lines(r.diags),
              HasSubstr("a failed container restarts in place (restartPolicy unset: the JobSet "
                        "webhook's OnFailure) and its Job tries a failed pod again up to 6 times"));
}

// An owner that cannot be set leaves a job that runs: a warning naming what the TTL will
// leave behind, not a failed submission.
TEST(K8sExecutor, AnOwnerThatCannotBeSetIsAWarning) {
  ScriptedRunner fake;
  AcceptingCluster cluster;
  fake.respond = [cluster](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"patch"}))
      return failed_result("Error from server (Forbidden): secrets is forbidden");
    return cluster(spec);
  };
  Submitted s = submit(fake);
  EXPECT_TRUE(s.result.accepted);
  EXPECT_EQ(s.result.exit_code, 0);
  ASSERT_TRUE(s.diags.has_code("k8s-owner-not-set"));
  std::vector<std::string> warned;
  for (const auto& d : s.diags.items())
    if (d.code == "k8s-owner-not-set") {
      warned.push_back(d.message);
      EXPECT_THAT(d.message, HasSubstr("secrets is forbidden"));
      EXPECT_EQ(d.severity, Severity::kWarning);
    }
  ASSERT_EQ(warned.size(), 2u);
  EXPECT_THAT(warned[0], HasSubstr("Secret exec-demo-"));
  EXPECT_THAT(warned[1], HasSubstr("ConfigMap exec-demo-"));
}

TEST(K8sExecutor, FailedApplyDeletesWhatWasCreatedAndIsNotAccepted) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"apply"})) {
      CommandResult r = failed_result(
          "Error from server (NotFound): error when creating \"STDIN\": the server could not "
          "find the requested resource (post jobsets.jobset.x-k8s.io)");
      std::string name = testing::parse_yaml_docs(spec.stdin_text)[0]["metadata"]["name"];
      r.out = "secret/" + name + " created\n";
      return r;
    }
    return ok_result("deleted\n");
  };
  Submitted s = submit(fake);
  EXPECT_EQ(s.result.exit_code, 1);
  EXPECT_FALSE(s.result.accepted);
  EXPECT_EQ(s.accepted_calls, 0);
  ASSERT_EQ(fake.calls.size(), 2u);
  const CommandSpec& del = fake.calls[1];
  EXPECT_TRUE(contains_seq(del.argv, {"delete", "--ignore-not-found", "--wait=false", "-f", "-"}))
      << joined(del.argv);
  EXPECT_TRUE(contains_seq(del.argv, {"--namespace", "team-a"}));
  auto deleted = testing::parse_yaml_docs(del.stdin_text);
  ASSERT_EQ(deleted.size(), 1u) << "only what apply created is deleted";
  EXPECT_EQ(deleted[0]["kind"], "Secret");
  EXPECT_THAT(del.stdin_text, Not(HasSubstr(kMarker)));
  ASSERT_TRUE(s.diags.has_code("kubectl-apply-failed"));
  std::string msg = s.diags.items().back().message;
  EXPECT_THAT(msg, HasSubstr("the server could not find the requested resource"));
  EXPECT_THAT(msg, HasSubstr("deleted what it had created (secret/"));
}

TEST(K8sExecutor, ApplyFailureBeforeAnythingWasCreatedNeedsNoCleanUp) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) {
    return failed_result("error: You must be logged in to the server (Unauthorized)");
  };
  Submitted s = submit(fake);
  EXPECT_EQ(s.result.exit_code, 1);
  EXPECT_EQ(fake.calls.size(), 1u);
  EXPECT_THAT(s.diags.items().back().message, HasSubstr("Unauthorized"));
  EXPECT_THAT(s.diags.items().back().message, HasSubstr("nothing had been created"));
}

TEST(K8sExecutor, KubectlMissingIsReported) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) {
    CommandResult r;
    r.started = false;
    r.err = "kubectl: command not found";
    return r;
  };
  Submitted s = submit(fake);
  EXPECT_EQ(s.result.exit_code, 1);
  EXPECT_THAT(s.diags.items().back().message, HasSubstr("could not be started"));
}

TEST(K8sExecutor, PreexistingObjectIsACollisionNotASubmission) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (!contains_seq(spec.argv, {"apply"})) return ok_result();
    auto docs = testing::parse_yaml_docs(spec.stdin_text);
    return ok_result("secret/" + docs[0]["metadata"]["name"].get<std::string>() +
                     " created\njobset.jobset.x-k8s.io/" +
                     docs.back()["metadata"]["name"].get<std::string>() + " unchanged\n");
  };
  Submitted s = submit(fake);
  EXPECT_EQ(s.result.exit_code, 1);
  EXPECT_FALSE(s.result.accepted);
  ASSERT_EQ(fake.calls.size(), 2u);
  auto deleted = testing::parse_yaml_docs(fake.calls[1].stdin_text);
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0]["kind"], "Secret") << "the pre-existing JobSet is not ours to delete";
  EXPECT_THAT(s.diags.items().back().message, HasSubstr("already existed"));
}

TEST(K8sExecutor, SecretValuesAreScrubbedFromKubectlMessages) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) {
    return failed_result(std::string("error: invalid value \"") + kMarker + "\"");
  };
  Submitted s = submit(fake);
  for (const auto& d : s.diags.items()) EXPECT_THAT(d.message, Not(HasSubstr(kMarker)));
  EXPECT_THAT(s.diags.items().back().message, HasSubstr("<secret>"));
}

// kubectl prints values JSON-escaped (Go escapes ", \\, newline, &, <, >, U+2028) or, for a
// Secret's data, base64-encoded: those spellings are scrubbed too.
TEST(K8sExecutor, EscapedSpellingsOfSecretsAreScrubbedToo) {
  struct Case {
    std::string override_value;  // YAML double-quoted
    std::string printed;         // how kubectl would print the value
  };
  std::vector<Case> cases{
      {R"(q\"uote-S3CR3T)", R"(q\"uote-S3CR3T)"},
      {R"(back\\slash-S3CR3T)", R"(back\\slash-S3CR3T)"},
      {R"(new\nline-S3CR3T)", R"(new\nline-S3CR3T)"},
      {"amp&lt<gt>-S3CR3T", R"(amp\u0026lt\u003cgt\u003e-S3CR3T)"},
      {"ls\u2028sep-S3CR3T", R"(ls\u2028sep-S3CR3T)"},
      {"b64-S3CR3T", "YjY0LVMzQ1IzVA=="},
  };
  for (const auto& c : cases) {
    ScriptedRunner fake;
    fake.respond = [&](const CommandSpec&) {
      return failed_result("error: Secret \"x\" is invalid: data.TOKEN: \"" + c.printed + "\"");
    };
    Submitted s = submit(fake, {"env.TOKEN={value: \"" + c.override_value + "\", secret: true}"});
    ASSERT_FALSE(s.diags.items().empty()) << c.printed;
    const std::string& msg = s.diags.items().back().message;
    EXPECT_THAT(msg, Not(HasSubstr("S3CR3T"))) << msg;
    EXPECT_THAT(msg, Not(HasSubstr(c.printed))) << msg;
    EXPECT_THAT(msg, HasSubstr("<secret>")) << msg;
  }
}

// ---------------------------------------------------------------------------------------
// Status.

JobRecord record(const std::string& scheduler_id, const std::string& ns = "team-a",
                 const std::string& ctx = "prod") {
  JobRecord r;
  r.id = "exec-demo-20260101-000000-abcd";
  r.name = "exec-demo";
  r.executor = "kubernetes";
  r.scheduler_id = scheduler_id;
  r.namespace_ = ns;
  r.context = ctx;
  r.nodes = 2;
  r.ranks = 16;
  return r;
}

json jobset(const std::string& name, const std::string& conditions,
            const std::string& extra_status = "") {
  return json::parse(R"({"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",
    "metadata":{"name":")" +
                     name + R"(","labels":{"app.kubernetes.io/managed-by":"bridge-launch",
    "bridge-launch/job":")" +
                     name + R"("}},
    "status":{"conditions":)" +
                     conditions + extra_status + "}}");
}

json job(const std::string& name, const std::string& base, int attempt, bool suspended,
         const std::string& status) {
  json j = json::parse(R"({"apiVersion":"batch/v1","kind":"Job","metadata":{"labels":{},
    "annotations":{"bridge-launch/attempts":"3"}},"spec":{"parallelism":2},"status":)" +
                       status + "}");
  j["metadata"]["name"] = name;
  j["metadata"]["labels"]["bridge-launch/job"] = base;
  j["metadata"]["labels"]["bridge-launch/attempt"] = std::to_string(attempt);
  j["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "bridge-launch";
  if (suspended) j["spec"]["suspend"] = true;
  return j;
}

std::string list_of(const std::vector<json>& items) {
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump();
}

const char* const kCompleted =
    R"([{"type":"StartupPolicyCompleted","status":"True"},{"type":"Completed","status":"True",
        "reason":"AllJobsCompleted","message":"jobset completed successfully"}])";
const char* const kFailed =
    R"([{"type":"Failed","status":"True","reason":"FailedJobs",
        "message":"jobset failed due to reaching max number of restarts"}])";

TEST(K8sExecutor, StatusOfManyJobsIsOneQueryAndMapsConditions) {
  ScriptedRunner fake;
  std::vector<json> items{
      jobset("js-ok", kCompleted),
      jobset("js-failed", kFailed),
      jobset("js-running", "[]",
             R"(,"restarts":1,"replicatedJobsStatus":[{"name":"node","ready":1,"active":1}])"),
      jobset("js-pending", "[]",
             R"(,"replicatedJobsStatus":[{"name":"node","ready":0,"active":1}])"),
      jobset("js-suspended", R"([{"type":"Suspended","status":"True","reason":"SuspendedJobs"}])"),
      job("j-run", "j-run", 0, false, R"({"active":2,"ready":2})"),
      job("j-done", "j-done", 0, false,
          R"({"conditions":[{"type":"Complete","status":"True"}],"succeeded":2})"),
      job("j-failed", "j-failed", 0, false,
          R"({"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded",
              "message":"Job has reached the specified backoff limit"}]})")};
  fake.respond = [&](const CommandSpec&) { return ok_result(list_of(items)); };
  TestServices use(fake);
  std::vector<JobRecord> recs;
  for (std::string id :
       {"jobset/js-ok", "jobset/js-failed", "jobset/js-running", "jobset/js-pending",
        "jobset/js-suspended", "job/j-run", "job/j-done", "job/j-failed", "jobset/js-gone"})
    recs.push_back(record(id));
  recs.push_back(record("bogus"));
  Diagnostics diags;
  auto st = make_executor(executor_registry(), "kubernetes", use.services())->status(recs, diags);
  ASSERT_EQ(fake.calls.size(), 1u) << "one kubectl get for all jobs";
  EXPECT_EQ(fake.calls[0].argv,
            (std::vector<std::string>{"kubectl", "--context", "prod", "--namespace", "team-a",
                                      "get", "jobsets.jobset.x-k8s.io,jobs.batch", "-l",
                                      "app.kubernetes.io/managed-by=bridge-launch", "-o", "json"}));
  ASSERT_EQ(st.size(), recs.size());
  auto state = [&](size_t i) { return std::string(job_state_name(st[i].state)); };
  EXPECT_EQ(state(0), "SUCCEEDED");
  EXPECT_THAT(st[0].detail, HasSubstr("AllJobsCompleted"));
  EXPECT_EQ(state(1), "FAILED");
  EXPECT_THAT(st[1].detail, HasSubstr("reaching max number of restarts"));
  EXPECT_EQ(state(2), "RUNNING");
  EXPECT_THAT(st[2].detail, HasSubstr("restarts: 1"));
  EXPECT_EQ(state(3), "PENDING");
  EXPECT_EQ(state(4), "PENDING");
  EXPECT_THAT(st[4].detail, HasSubstr("Suspended"));
  EXPECT_EQ(state(5), "RUNNING");
  EXPECT_EQ(state(6), "SUCCEEDED");
  EXPECT_EQ(state(7), "FAILED");
  EXPECT_THAT(st[7].detail, HasSubstr("BackoffLimitExceeded"));
  EXPECT_EQ(state(8), "UNKNOWN");
  EXPECT_THAT(st[8].detail, HasSubstr("not found"));
  EXPECT_EQ(state(9), "UNKNOWN");
  EXPECT_FALSE(diags.has_errors());
}

// A JobSet in a Kueue queue that Kueue holds says so with Kueue's reason; the Workload query
// is made only when such a job is pending, and a cluster without Kueue keeps the plain detail.
TEST(K8sExecutor, AJobHeldByKueueSaysWhyFromItsWorkload) {
  json held =
      jobset("js-held", R"([{"type":"Suspended","status":"True","reason":"SuspendedJobs"}])");
  held["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpu-queue";
  json admitted_wl = json::parse(R"({"kind":"Workload","metadata":{"name":"jobset-js-ok-1",
      "ownerReferences":[{"kind":"JobSet","name":"js-ok"}]},
      "status":{"conditions":[{"type":"Admitted","status":"True"}]}})");
  json held_wl = json::parse(R"({"kind":"Workload","metadata":{"name":"jobset-js-held-2",
      "ownerReferences":[{"kind":"JobSet","name":"js-held"}]},
      "status":{"conditions":[{"type":"QuotaReserved","status":"False","reason":"Pending",
        "message":"couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 16 more needed"}]}})");
  bool kueue_installed = true;
  ScriptedRunner fake;
  fake.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "workloads.kueue.x-k8s.io"}))
      return kueue_installed ? ok_result(list_of({admitted_wl, held_wl}))
                             : failed_result(
                                   "error: the server doesn't have a resource type "
                                   "\"workloads\"");
    return ok_result(list_of({held, jobset("js-ok", kCompleted)}));
  };
  TestServices use(fake);
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  Diagnostics diags;
  auto st = ex->status({record("jobset/js-held"), record("jobset/js-ok")}, diags);
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(std::string(job_state_name(st[0].state)), "PENDING");
  EXPECT_EQ(st[0].detail,
            "queued by Kueue in gpu-queue (Pending: couldn't assign flavors to pod set node: "
            "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 16 more "
            "needed)");
  EXPECT_EQ(std::string(job_state_name(st[1].state)), "SUCCEEDED");

  fake.calls.clear();
  st = ex->status({record("jobset/js-ok")}, diags);
  EXPECT_EQ(fake.calls.size(), 1u) << "no pending queued job: no Workload query";

  kueue_installed = false;
  fake.calls.clear();
  st = ex->status({record("jobset/js-held")}, diags);
  EXPECT_EQ(fake.calls.size(), 2u);
  EXPECT_THAT(st[0].detail, HasSubstr("Suspended"));
  EXPECT_FALSE(diags.has_errors());
}

TEST(K8sStatus, KueueWaitDetailMatchesTheOwnerAndTheJobApiAttempts) {
  json wl = json::parse(R"({"kind":"Workload","metadata":{"name":"job-a-r1-x",
      "ownerReferences":[{"kind":"Job","name":"a-r1"}]},
      "status":{"conditions":[{"type":"QuotaReserved","status":"False","reason":"Inadmissible",
        "message":"LocalQueue team doesn't exist"}]}})");
  EXPECT_EQ(kueue_wait_detail("Job", "a", "team", {wl}),
            "queued by Kueue in team (Inadmissible: LocalQueue team doesn't exist)");
  EXPECT_EQ(kueue_wait_detail("Job", "ab", "team", {wl}), "");
  EXPECT_EQ(kueue_wait_detail("JobSet", "a-r1", "team", {wl}), "");
  json fresh = json::parse(R"({"kind":"Workload","metadata":{"name":"w",
      "ownerReferences":[{"kind":"JobSet","name":"s"}]}})");
  EXPECT_EQ(kueue_wait_detail("JobSet", "s", "q", {fresh}),
            "queued by Kueue in q (waiting for admission)");
}

TEST(K8sExecutor, StatusQueriesOncePerNamespaceAndOnlyTheKindsNeeded) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) { return ok_result(list_of({})); };
  TestServices use(fake);
  Diagnostics diags;
  make_executor(executor_registry(), "kubernetes", use.services())
      ->status({record("job/a", "ns1", ""), record("job/b", "ns1", ""), record("job/c", "ns2", "")},
               diags);
  ASSERT_EQ(fake.calls.size(), 2u);
  const std::string managed = "app.kubernetes.io/managed-by=bridge-launch";
  EXPECT_EQ(fake.calls[0].argv,
            (std::vector<std::string>{"kubectl", "--namespace", "ns1", "get", "jobs.batch", "-l",
                                      managed, "-o", "json"}));
}

TEST(K8sExecutor, StatusReportsKubectlFailure) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) {
    return failed_result("The connection to the server 10.0.0.1:6443 was refused");
  };
  TestServices use(fake);
  Diagnostics diags;
  auto st = make_executor(executor_registry(), "kubernetes", use.services())
                ->status({record("jobset/x")}, diags);
  EXPECT_EQ(st[0].state, JobState::kUnknown);
  EXPECT_THAT(st[0].detail, HasSubstr("was refused"));
  EXPECT_TRUE(diags.has_code("kubectl-failed"));
}

TEST(K8sExecutor, JobApiFailedAttemptStartsTheNextOne) {
  ScriptedRunner fake;
  std::vector<json> items{
      job("demo-ab12", "demo-ab12", 0, false,
          R"({"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]})"),
      job("demo-ab12-r1", "demo-ab12", 1, true, "{}"),
      job("demo-ab12-r2", "demo-ab12", 2, true, "{}")};
  fake.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"patch"})) return ok_result("job.batch/demo-ab12-r1 patched\n");
    return ok_result(list_of(items));
  };
  TestServices use(fake);
  Diagnostics diags;
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  auto st = ex->status({record("job/demo-ab12")}, diags);
  EXPECT_EQ(st[0].state, JobState::kPending);
  EXPECT_THAT(st[0].detail, HasSubstr("attempt 2/3 starting"));
  auto patches = fake.with("patch");
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_TRUE(contains_seq(patches[0].argv, {"patch", "jobs.batch", "demo-ab12-r1", "--type=merge",
                                             "-p", R"({"spec":{"suspend":false}})"}));
  // Status follows the latest attempt: r1 now runs, then fails for good at r2.
  items[1].erase("status");
  items[1]["spec"].erase("suspend");
  items[1]["status"] = json::parse(R"({"active":2,"ready":2})");
  st = ex->status({record("job/demo-ab12")}, diags);
  EXPECT_EQ(st[0].state, JobState::kRunning);
  EXPECT_THAT(st[0].detail, HasSubstr("attempt 2/3"));
  items[1]["status"] = json::parse(R"({"conditions":[{"type":"Failed","status":"True"}]})");
  items[2]["spec"].erase("suspend");
  items[2]["status"] = json::parse(R"({"conditions":[{"type":"Failed","status":"True"}]})");
  st = ex->status({record("job/demo-ab12")}, diags);
  EXPECT_EQ(st[0].state, JobState::kFailed);
  EXPECT_THAT(st[0].detail, HasSubstr("attempt 3/3"));
  EXPECT_EQ(fake.with("patch").size(), 1u);
}

// Found by fuzz_scheduler_output: kubectl JSON with fields of unexpected types or absurd
// counts reads as absent or bounded, never as an exception or undefined behaviour.
TEST(K8sStatus, FieldsOfAnotherTypeAndHugeCountsAreSafe) {
  auto items = parse_kubectl_items(R"({"items": [
    {"kind": 1, "metadata": {"name": "x"}},
    {"kind": "JobSet", "metadata": {"name": "y"}, "status": {
      "conditions": [{"type": 1, "status": true, "reason": [], "message": {}}],
      "replicatedJobsStatus": [{"ready": "1", "active": 1e300},
                               {"ready": 9223372036854775807, "active": 9223372036854775807},
                               {"ready": 9223372036854775807, "active": -5}]}}]})");
  ASSERT_TRUE(items.ok()) << items.why();
  for (const auto& item : *items) {
    EXPECT_NO_THROW((void)jobset_status(item));
    EXPECT_NO_THROW((void)job_status(item));
  }
  EXPECT_EQ(jobset_status((*items)[1]).state, JobState::kRunning);
}

TEST(K8sStatus, PureMappings) {
  EXPECT_EQ(jobset_status(jobset("a", "[]")).state, JobState::kPending);
  EXPECT_EQ(jobset_status(jobset("a", "[]", R"(,"terminalState":"Completed")")).state,
            JobState::kSucceeded);
  EXPECT_EQ(job_status(job("j", "j", 0, false,
                           R"({"conditions":[{"type":"FailureTarget","status":"True"}]})"))
                .state,
            JobState::kFailed);
  EXPECT_EQ(job_status(job("j", "j", 0, false,
                           R"({"conditions":[{"type":"Complete","status":"False"}],"active":2})"))
                .state,
            JobState::kPending);
  EXPECT_EQ(parse_k8s_scheduler_id("jobset/x")->name, "x");
  EXPECT_FALSE(parse_k8s_scheduler_id("pod/x").has_value());
  auto not_json = parse_kubectl_items("not json");
  EXPECT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.why(), "kubectl did not print a JSON object");
}

// ---------------------------------------------------------------------------------------
// Logs and cancel.

json pod(const std::string& name, int index, int attempt, const std::string& phase,
         bool jobset = true) {
  json p{{"kind", "Pod"},
         {"metadata",
          {{"name", name},
           {"labels", json::object()},
           {"annotations", {{"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
         {"status", {{"phase", phase}}}};
  p["metadata"]["labels"][jobset ? "jobset.sigs.k8s.io/restart-attempt" : "bridge-launch/attempt"] =
      std::to_string(attempt);
  return p;
}

TEST(K8sExecutor, LogsOfOneRankReadTheNodesPod) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({pod("x-node-0-0-aaaaa", 0, 1, "Running"),
                                pod("x-node-0-1-bbbbb", 1, 1, "Running"),
                                pod("x-node-0-1-old00", 1, 0, "Failed")}));
    return ok_result("hello from " + spec.argv[6] + "\n");
  };
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  int rc = make_executor(executor_registry(), "kubernetes", use.services())
               ->logs(record("jobset/x"), testing::rank_query(11, false), out, notes, diags);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.str(), "hello from x-node-0-1-bbbbb\n");
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_TRUE(contains_seq(fake.calls[0].argv, {"get", "pods", "-l", "bridge-launch/job=x"}));
  EXPECT_TRUE(contains_seq(fake.calls[1].argv, {"logs", "x-node-0-1-bbbbb", "-c", "trainer"}));
}

// `why` on Kubernetes: a unit per pod (node), its node name and exit code from the pod
// object, ordered by the container's finish time; the lines come from `kubectl logs --tail`.
TEST(K8sExecutor, FailureEvidenceOrdersPodsByFinishTimeAndReadsTheirLogs) {
  auto terminated = [](json p, const std::string& node, int code, const std::string& reason,
                       const std::string& finished) {
    p["spec"] = {{"nodeName", node}};
    p["status"]["containerStatuses"] = json::array(
        {{{"name", "trainer"},
          {"state",
           {{"terminated", {{"exitCode", code}, {"reason", reason}, {"finishedAt", finished}}}}}}});
    return p;
  };
  ScriptedRunner fake;
  fake.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({terminated(pod("x-node-0-0-aaaaa", 0, 0, "Failed"), "gpu-a", 1,
                                           "Error", "2026-11-30T10:00:05Z"),
                                terminated(pod("x-node-0-1-bbbbb", 1, 0, "Failed"), "gpu-b", 137,
                                           "OOMKilled", "2026-11-30T10:00:02Z")}));
    if (contains_seq(spec.argv, {"logs", "x-node-0-1-bbbbb"}))
      return ok_result("iteration 1/10\n[rank9]: torch.OutOfMemoryError: CUDA out of memory.\n");
    return ok_result("[rank0]: NCCL WARN NET/Socket : Connection closed by remote peer\n");
  };
  TestServices use(fake);
  Diagnostics diags;
  FailureEvidence e = make_executor(executor_registry(), "kubernetes", use.services())
                          ->failure_evidence(record("jobset/x"), diags);
  EXPECT_FALSE(diags.has_errors());
  ASSERT_EQ(e.units.size(), 2u);
  EXPECT_EQ(e.units[1].label, "node 1 (ranks 8-15)");
  EXPECT_EQ(e.units[1].host, "gpu-b");
  EXPECT_EQ(e.units[1].exit_code, 137);
  EXPECT_EQ(e.units[1].failure_order, 0);
  EXPECT_EQ(e.units[0].failure_order, 1);
  ASSERT_EQ(e.scheduler_lines.size(), 1u);
  EXPECT_THAT(e.scheduler_lines[0], ::testing::HasSubstr("OOMKilled"));
  EXPECT_TRUE(contains_seq(fake.calls[1].argv,
                           {"logs", "x-node-0-0-aaaaa", "-c", "trainer", "--tail=400"}));
  Triage t = triage(e);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->label, "node 1 (ranks 8-15)");
  ASSERT_TRUE(t.first->finding);
  EXPECT_EQ(t.first->finding->signature, "cuda-oom");
  ASSERT_EQ(t.job_level.size(), 1u);
  EXPECT_EQ(t.job_level[0].signature, "host-oom");
  ASSERT_EQ(t.consequences.size(), 1u);
  EXPECT_EQ(t.consequences[0].units_text, "node 0");
}

// `logs` of every rank through the fake; the exit status is checked, the output returned.
std::string all_rank_logs(ScriptedRunner& fake) {
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(
      make_executor(executor_registry(), "kubernetes", use.services())
          ->logs(record("jobset/x"), testing::rank_query(std::nullopt, false), out, notes, diags),
      0);
  return out.str();
}

TEST(K8sExecutor, LogsOfAllRanksArePrefixedPerNode) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({pod("b", 1, 0, "Running"), pod("a", 0, 0, "Running")}));
    return ok_result("line of " + spec.argv[6] + "\n");
  };
  EXPECT_EQ(all_rank_logs(fake), "[node 0] line of a\n[node 1] line of b\n");
}

// A pod's output reaches the terminal escaped (issue 47, item 13), as a rank log does.
TEST(K8sExecutor, LogsAreEscapedForTheTerminal) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({pod("a", 0, 0, "Running")}));
    return ok_result("\x1b]0;owned\x07step\t1\n");
  };
  EXPECT_EQ(all_rank_logs(fake), "\\x1b]0;owned\\x07step\t1\n");
}

TEST(K8sExecutor, LogsOfOneNodeWithTailAndGrepNameThePodsHost) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"})) {
      json a = pod("a", 0, 0, "Running"), b = pod("b", 1, 0, "Running");
      b["spec"]["nodeName"] = "gpu-node-7";
      return ok_result(list_of({a, b}));
    }
    return ok_result("step 1\nNCCL WARN timeout\nstep 2\n");
  };
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  LogQuery q;
  q.node = 1;
  q.tail = 50;
  q.grep = *LineFilter::compile("NCCL").filter;
  EXPECT_EQ(make_executor(executor_registry(), "kubernetes", use.services())
                ->logs(record("jobset/x"), q, out, notes, diags),
            0);
  EXPECT_EQ(out.str(), "NCCL WARN timeout\n");  // one pod: no prefix
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_TRUE(contains_seq(fake.calls[1].argv, {"logs", "b", "-c", "trainer", "--tail=50"}));

  std::ostringstream all;
  LogQuery every;
  every.grep = q.grep;
  EXPECT_EQ(make_executor(executor_registry(), "kubernetes", use.services())
                ->logs(record("jobset/x"), every, all, notes, diags),
            0);
  EXPECT_EQ(all.str(), "[node 0] NCCL WARN timeout\n[node 1 gpu-node-7] NCCL WARN timeout\n");
}

TEST(K8sExecutor, FollowingAPendingJobSaysWhyItWaits) {
  ScriptedRunner fake;
  int polls = 0;
  fake.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"})) {
      json p = pod("p0", 0, 0, polls < 3 ? "Pending" : "Succeeded");
      if (polls < 3)
        p["status"]["conditions"] =
            json::array({{{"type", "PodScheduled"},
                          {"status", "False"},
                          {"message", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}});
      return ok_result(list_of({p}));
    }
    if (contains_seq(spec.argv, {"get"})) {
      ++polls;
      return ok_result(list_of({jobset("x", polls < 3 ? "[]" : kCompleted)}));
    }
    return polls < 3 ? failed_result("container not started") : ok_result("");
  };
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  EXPECT_EQ(make_executor(executor_registry(), "kubernetes", use.services())
                ->logs(record("jobset/x"), testing::rank_query(0, true), out, notes, diags),
            0);
  // Said once, though three polls saw it pending.
  EXPECT_EQ(notes.str(),
            "bridge-launch: job exec-demo-20260101-000000-abcd is PENDING (pod p0: 0/2 nodes are "
            "available: 2 Insufficient nvidia.com/gpu.); its logs follow once it starts\n");
}

TEST(K8sExecutor, LogsRankOutOfRangeAndNoPods) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) { return ok_result(list_of({})); };
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  EXPECT_EQ(ex->logs(record("jobset/x"), testing::rank_query(16, false), out, notes, diags), 2);
  EXPECT_EQ(ex->logs(record("jobset/x"), testing::rank_query(0, false), out, notes, diags), 1);
  EXPECT_TRUE(diags.has_code("k8s-no-pods"));
}

TEST(K8sExecutor, FollowPrintsEachLineOnceUntilTheJobEnds) {
  ScriptedRunner fake;
  int polls = 0;
  fake.respond = [&](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({pod("p0", 0, 0, polls < 2 ? "Running" : "Succeeded")}));
    if (contains_seq(spec.argv, {"get"})) {
      ++polls;
      return ok_result(list_of({jobset("x", polls < 2 ? "[]" : kCompleted)}));
    }
    // kubectl logs --timestamps [--since-time=T]: whole seconds, so repeats happen.
    std::string since;
    for (const auto& a : spec.argv)
      if (a.rfind("--since-time=", 0) == 0) since = a.substr(13);
    if (since.empty())
      return ok_result("2026-01-01T00:00:01.5Z first\n2026-01-01T00:00:02.25Z second\n");
    EXPECT_EQ(since, "2026-01-01T00:00:02.25Z");
    return ok_result("2026-01-01T00:00:02.25Z second\n2026-01-01T00:00:02.250000001Z third\n");
  };
  TestServices use(fake);
  Diagnostics diags;
  std::ostringstream out, notes;
  int rc = make_executor(executor_registry(), "kubernetes", use.services())
               ->logs(record("jobset/x"), testing::rank_query(0, true), out, notes, diags);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.str(), "first\nsecond\nthird\n");
}

TEST(K8sExecutor, CancelDeletesTheJobsObjectsByLabel) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) { return ok_result("jobset deleted\n"); };
  TestServices use(fake);
  Diagnostics diags;
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  EXPECT_EQ(ex->cancel(record("jobset/x-ab12"), diags), 0);
  EXPECT_EQ(ex->cancel(record("job/y-ab12", "", ""), diags), 0);
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(
      fake.calls[0].argv,
      (std::vector<std::string>{"kubectl", "--context", "prod", "--namespace", "team-a", "delete",
                                "jobsets.jobset.x-k8s.io,secrets,configmaps", "-l",
                                "bridge-launch/job=x-ab12", "--ignore-not-found", "--wait=false"}));
  EXPECT_EQ(
      fake.calls[1].argv,
      (std::vector<std::string>{"kubectl", "delete", "jobs.batch,services,secrets,configmaps", "-l",
                                "bridge-launch/job=y-ab12", "--ignore-not-found", "--wait=false"}));
}

// A TrainJob: status reads it with the JobSet the Trainer controller made for it, logs read
// the runtime's container `node`, cancel deletes the TrainJob (its JobSet goes with it).
TEST(K8sExecutor, ATrainJobIsQueriedWithItsJobSetLoggedFromNodeAndCancelledWhole) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec& spec) {
    if (contains_seq(spec.argv, {"get", "pods"}))
      return ok_result(list_of({pod("t-node-0-0-aaaaa", 0, 0, "Running")}));
    if (contains_seq(spec.argv, {"get"}))
      return ok_result(
          list_of({json::parse(R"({"kind":"TrainJob","metadata":{"name":"t"},"status":{}})"),
                   jobset("t", "[]",
                          R"(,"replicatedJobsStatus":[{"name":"node","ready":2,"active":2}])")}));
    if (contains_seq(spec.argv, {"logs"})) return ok_result("hello\n");
    return ok_result("trainjob deleted\n");
  };
  TestServices use(fake);
  Diagnostics diags;
  auto ex = make_executor(executor_registry(), "kubernetes", use.services());
  auto st = ex->status({record("trainjob/t", "", "")}, diags);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].state, JobState::kRunning) << st[0].detail;
  EXPECT_TRUE(contains_seq(fake.calls[0].argv,
                           {"get", "jobsets.jobset.x-k8s.io,trainjobs.trainer.kubeflow.org"}));
  std::ostringstream out, notes;
  EXPECT_EQ(
      ex->logs(record("trainjob/t", "", ""), testing::rank_query(0, false), out, notes, diags), 0);
  EXPECT_TRUE(contains_seq(fake.calls.back().argv, {"logs", "t-node-0-0-aaaaa", "-c", "node"}));
  EXPECT_EQ(ex->cancel(record("trainjob/t", "", ""), diags), 0);
  EXPECT_EQ(fake.calls.back().argv,
            (std::vector<std::string>{
                "kubectl", "delete", "trainjobs.trainer.kubeflow.org,secrets,configmaps", "-l",
                "bridge-launch/job=t", "--ignore-not-found", "--wait=false"}));
  EXPECT_FALSE(diags.has_errors());
}

TEST(K8sExecutor, CancelFailureShowsKubectlsMessage) {
  ScriptedRunner fake;
  fake.respond = [](const CommandSpec&) {
    return failed_result("Error from server (Forbidden): jobsets is forbidden");
  };
  TestServices use(fake);
  Diagnostics diags;
  EXPECT_EQ(make_executor(executor_registry(), "kubernetes", use.services())
                ->cancel(record("jobset/x"), diags),
            1);
  ASSERT_TRUE(diags.has_code("kubectl-delete-failed"));
  EXPECT_THAT(diags.items().back().message, HasSubstr("jobsets is forbidden"));
}

}  // namespace
}  // namespace bridge
