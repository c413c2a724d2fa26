// Kubernetes manifests: golden files for both APIs, a matrix of generated manifests through
// the development machines' offline validator (k8s-validate), MASTER_ADDR against the DNS
// name the manifests produce, exact env values, secrets, and the render-time errors.
#include "executors/k8s_render.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "executors/numa_bind.h"
#include "executors/rank_env.h"
#include "jobs/failure_triage.h"
#include "jobs/job_watchdog.h"
#include "tests/support/build_paths.h"
#include "tests/support/k8s_testing.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecretMarker = "GOLDEN-SECRET-VALUE-7c1e";

const char* const kGoldenRecipe = R"(name: Golden_Demo.v1
description: golden manifests
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, /opt/Megatron-Bridge/scripts/performance/run_script.py]
  args: [-m, qwen, --note, "it's a \"test\" $(not expanded) $$"]
  pass_overrides: false
  container_image: nvcr.io/nvidia/nemo:25.11
  workdir: /opt/Megatron-Bridge
plugins:
  preemption: {preempt_time: 120}
env:
  NCCL_DEBUG: WARN
  MULTI: "line1\nline2: x # y ü"
  SCRATCH: {value: "/scratch/${USER:-me}", expand: true}
  HF_TOKEN: {value: GOLDEN-SECRET-VALUE-7c1e, secret: true}
executor:
  kubernetes:
    namespace: training
    shm_size: 64Gi
    service_account: trainer
    image_pull_secrets: [ngc]
)";

std::string golden_path(const std::string& name) {
  return std::string(BRIDGE_SOURCE_DIR) + "/tests/golden/k8s/" + name;
}

// Kubernetes' own $(VAR) expansion of env values and args (k8s.io/.../third_party/forked/
// golang/expansion), to prove that what the process sees is the planned value.
std::string kubelet_expand(const std::string& in, const std::map<std::string, std::string>& env) {
  std::string out;
  size_t checkpoint = 0;
  for (size_t cur = 0; cur < in.size(); ++cur) {
    if (in[cur] != '$' || cur + 1 >= in.size()) continue;
    out += in.substr(checkpoint, cur - checkpoint);
    char next = in[cur + 1];
    size_t advance = 1;
    if (next == '$') {
      out += '$';
    } else if (next == '(') {
      size_t close = in.find(')', cur + 2);
      if (close == std::string::npos) {
        out += "$(";
      } else {
        std::string name = in.substr(cur + 2, close - cur - 2);
        auto it = env.find(name);
        out += it != env.end() ? it->second : "$(" + name + ")";
        advance = close - cur;
      }
    } else {
      out += std::string("$") + next;
    }
    cur += advance;
    checkpoint = cur + 1;
  }
  return out + in.substr(checkpoint);
}

std::unique_ptr<testing::K8sPlan> golden_plan(std::vector<std::string> overrides = {}) {
  auto p = testing::k8s_plan(kGoldenRecipe, std::move(overrides));
  EXPECT_TRUE(p->plan->complete) << (p->diags.items().empty() ? "" : p->diags.items()[0].message);
  return p;
}

K8sManifests render_ok(testing::K8sPlan& p, const std::string& suffix = "a1b2",
                       bool reveal = false) {
  K8sRenderOptions o;
  o.suffix = suffix;
  o.reveal_secrets = reveal;
  auto m = render_k8s_manifests(*p.plan, o, p.diags);
  EXPECT_TRUE(m.has_value());
  for (const auto& d : p.diags.items())
    EXPECT_NE(d.severity, Severity::kError) << d.code << ": " << d.message;
  return m.value_or(K8sManifests{});
}

// Runs the validator on files; "" when every document is valid, else its report.
std::string validate(const std::vector<std::string>& files) {
  std::vector<std::string> argv{"/usr/bin/python3", testing::k8s_validator()};
  argv.insert(argv.end(), files.begin(), files.end());
  auto r = test::run_command(argv);
  return r.exit_code == 0 ? std::string()
                          : fmt::format("exit {}:\n{}{}", r.exit_code, r.out, r.err);
}

const json& container_of(const json& pod_template) { return pod_template["spec"]["containers"][0]; }

std::map<std::string, json> env_map(const json& container) {
  std::map<std::string, json> m;
  for (const auto& e : container["env"]) m[e["name"].get<std::string>()] = e;
  return m;
}

// What the test derives from the manifests alone (parsed back from the YAML text): the DNS
// name of pod 0 and the MASTER_ADDR each pod is given, per Job (JobSet: one).
struct Rendezvous {
  std::string dns_of_pod0;
  std::string master_addr;
  std::string longest_hostname;
};

std::vector<Rendezvous> derive_rendezvous(const std::vector<json>& docs) {
  std::vector<Rendezvous> out;
  std::map<std::string, json> services;
  for (const auto& d : docs)
    if (d["kind"] == "Service") services[d["metadata"]["name"].get<std::string>()] = d;
  for (const auto& d : docs) {
    if (d["kind"] == "JobSet") {
      std::string name = d["metadata"]["name"];
      EXPECT_EQ(d["spec"]["network"]["enableDNSHostnames"], true);
      EXPECT_EQ(d["spec"]["network"]["publishNotReadyAddresses"], true);
      std::string subdomain = d["spec"]["network"].value("subdomain", name);
      for (const auto& rj : d["spec"]["replicatedJobs"]) {
        std::string rjob = rj["name"];
        int64_t replicas = rj.value("replicas", 1);
        int64_t pods = rj["template"]["spec"]["completions"];
        auto env = env_map(container_of(rj["template"]["spec"]["template"]));
        out.push_back({fmt::format("{}-{}-0-0.{}", name, rjob, subdomain),
                       env["MASTER_ADDR"]["value"].get<std::string>(),
                       fmt::format("{}-{}-{}-{}", name, rjob, replicas - 1, pods - 1)});
      }
    } else if (d["kind"] == "Job") {
      std::string name = d["metadata"]["name"];
      const json& pod = d["spec"]["template"];
      std::string subdomain = pod["spec"]["subdomain"];
      EXPECT_TRUE(services.count(subdomain)) << "no Service " << subdomain;
      if (services.count(subdomain)) {
        const json& svc = services[subdomain];
        EXPECT_EQ(svc["spec"]["clusterIP"], "None");
        EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
        for (const auto& [k, v] : svc["spec"]["selector"].items())
          EXPECT_EQ(pod["metadata"]["labels"][k], v) << "selector " << k << " misses the pods";
      }
      int64_t pods = d["spec"]["completions"];
      auto env = env_map(container_of(pod));
      out.push_back({fmt::format("{}-0.{}", name, subdomain),
                     env["MASTER_ADDR"]["value"].get<std::string>(),
                     fmt::format("{}-{}", name, pods - 1)});
    }
  }
  return out;
}

void check_golden(const std::string& file, const std::string& text) {
  if (std::getenv("BRIDGE_UPDATE_GOLDEN")) {
    std::ofstream(golden_path(file), std::ios::binary) << text;
    GTEST_SKIP() << "updated " << golden_path(file);
  }
  std::string want = test::read_file(golden_path(file));
  ASSERT_FALSE(want.empty()) << "missing golden " << golden_path(file)
                             << " (run with BRIDGE_UPDATE_GOLDEN=1 to create it)";
  EXPECT_EQ(text, want) << "rendered manifests differ from " << golden_path(file)
                        << "; if intended, rerun with BRIDGE_UPDATE_GOLDEN=1";
}

// ---------------------------------------------------------------------------------------
// Goldens.

TEST(K8sRender, GoldenJobSet) {
  auto p = golden_plan();
  K8sManifests m = render_ok(*p);
  EXPECT_EQ(m.scheduler_id, "jobset/golden-demo-v1-a1b2");
  check_golden("jobset.yaml", m.yaml);
}

TEST(K8sRender, GoldenJobWithHeadlessService) {
  auto p = golden_plan({"executor.kubernetes.api=job", "executor.kubernetes.retries=1"});
  K8sManifests m = render_ok(*p);
  EXPECT_EQ(m.scheduler_id, "job/golden-demo-v1-a1b2");
  EXPECT_EQ(m.attempts, 2);
  check_golden("job.yaml", m.yaml);
}

TEST(K8sRender, GoldensPassTheValidator) {
  if (testing::k8s_validator().empty()) GTEST_SKIP() << testing::kNoValidator;
  std::string report = validate({golden_path("jobset.yaml"), golden_path("job.yaml")});
  EXPECT_EQ(report, "");
}

// ---------------------------------------------------------------------------------------
// Structure.

TEST(K8sRender, JobSetStructure) {
  auto p = golden_plan();
  // The applied text: what reaches the API server, the Secret included.
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0]["kind"], "Secret");
  const json& js = docs[1];
  EXPECT_EQ(js["apiVersion"], "jobset.x-k8s.io/v1alpha2");
  EXPECT_EQ(js["metadata"]["namespace"], "training");
  EXPECT_EQ(js["spec"]["failurePolicy"]["maxRestarts"], 0);
  const json& rj = js["spec"]["replicatedJobs"][0];
  EXPECT_EQ(rj["replicas"], 1);
  const json& job = rj["template"]["spec"];
  EXPECT_EQ(job["completionMode"], "Indexed");
  EXPECT_EQ(job["completions"], 2);
  EXPECT_EQ(job["parallelism"], 2);
  EXPECT_EQ(job["backoffLimit"], 0);
  const json& pod = job["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 120);
  EXPECT_EQ(pod["serviceAccountName"], "trainer");
  EXPECT_EQ(pod["imagePullSecrets"], json::parse(R"([{"name":"ngc"}])"));
  EXPECT_EQ(pod["volumes"][0]["emptyDir"],
            json::parse(R"({"medium":"Memory","sizeLimit":"64Gi"})"));
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "nvcr.io/nvidia/nemo:25.11");
  EXPECT_EQ(c["workingDir"], "/opt/Megatron-Bridge");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], 8);
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/dev/shm");
  auto env = env_map(c);
  EXPECT_EQ(env["MASTER_PORT"]["value"], "29500");
  EXPECT_EQ(env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  // run_script.py is not bridge-probe: no probe-only variables in its pods.
  EXPECT_FALSE(env.count("BRIDGE_EXPECTED_ENV"));
}

TEST(K8sRender, CommandIsTorchrunBehindADnsWaitWithArgsAsAList) {
  auto p = golden_plan();
  // The applied text: what reaches the API server, the Secret included.
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  const json& c =
      container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  ASSERT_EQ(c["command"].size(), 4u);
  EXPECT_EQ(c["command"][0], "/bin/sh");
  EXPECT_EQ(c["command"][1], "-c");
  std::string script = kubelet_expand(c["command"][2], {});
  EXPECT_THAT(script, HasSubstr("until resolves \"$MASTER_ADDR\"; do"));
  EXPECT_THAT(script, HasSubstr("-ge 300 ]"));
  EXPECT_THAT(script, HasSubstr("exec torchrun --nnodes=2 --nproc-per-node=8 "
                                "--node-rank=\"$NODE_RANK\" --master-addr=\"$MASTER_ADDR\" "
                                "--master-port=\"$MASTER_PORT\" --no-python \"$@\"\n"));
  EXPECT_THAT(script, HasSubstr("export SCRATCH=\"/scratch/${USER:-me}\"\n"));
  EXPECT_LT(script.find("until resolves"), script.find("exec torchrun"));
  // The user's command reaches torchrun as "$@": the args list, exactly, after kubelet's
  // own $(VAR) expansion.
  std::vector<std::string> args;
  for (const auto& a : c["args"]) args.push_back(kubelet_expand(a, {{"not expanded", "BAD"}}));
  EXPECT_EQ(args, rank_command(*p->plan));
  // The script itself is valid POSIX shell.
  auto r = test::run_command({"/bin/sh", "-n", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The environment the container starts with: the pod spec's values as the kubelet expands
// them, a secret's from its Secret, NODE_RANK from the completion index.
std::map<std::string, std::string> pod_environment(const json& container) {
  std::map<std::string, std::string> env;
  for (const auto& e : container["env"]) {
    std::string name = e["name"];
    if (e.contains("value")) env[name] = kubelet_expand(e["value"], env);
    if (e.contains("valueFrom") && e["valueFrom"].contains("secretKeyRef"))
      env[name] = "the secret's value";
  }
  env["MASTER_ADDR"] = "localhost";  // resolves at once
  env["NODE_RANK"] = "0";            // not the pod of the progress rank: no watchdog (tested below)
  return env;
}

// The entrypoint run locally, torchrun replaced by echo.
test::ChildResult run_entrypoint(const json& container,
                                 const std::map<std::string, std::string>& env) {
  std::string local = kubelet_expand(container["command"][2], {});
  local.replace(local.find("exec torchrun"), 13, "exec echo torchrun");
  local.replace(local.find("mkdir -p"), 8, "true");
  return test::run_command({"/bin/sh", "-c", local, "bridge-launch", "python", "x y"}, env);
}

TEST(K8sRender, DnsWaitLoopIsBoundedAndWorks) {
  auto p = golden_plan();
  // The applied text: what reaches the API server, the Secret included.
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  const json& c =
      container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  auto r = run_entrypoint(c, pod_environment(c));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // h100 nodes have two NUMA nodes: every worker starts through the binding program.
  ASSERT_EQ(p->plan->binding.mode, BindingMode::kNuma);
  EXPECT_EQ(r.out,
            "torchrun --nnodes=2 --nproc-per-node=8 --node-rank=0 --master-addr=localhost "
            "--master-port=29500 --no-python bash -c " +
                numa_bind_program(p->plan->binding) + " bridge-worker python x y\n");
}

// runtime.binding: numa in an image without bash (the binding program is bash): the pod says
// so once and its ranks run unbound; runtime.binding: none starts the workers directly.
TEST(K8sRender, APodWithoutBashRunsItsRanksUnboundAndSaysSo) {
  auto p = golden_plan();
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  const json& c =
      container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  test::TempDir bin;
  for (const char* tool : {"getent", "echo"})
    std::filesystem::create_symlink(std::string("/usr/bin/") + tool, bin.path() + "/" + tool);
  std::map<std::string, std::string> env = pod_environment(c);
  env["PATH"] = bin.path();
  auto r = run_entrypoint(c, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--no-python python x y\n"));
  EXPECT_THAT(r.err, HasSubstr("bridge-launch: pod of node 0: no bash in the image: its ranks run "
                               "unbound"));
  EXPECT_THAT(m.yaml, HasSubstr("# binding: every rank on its GPU's NUMA node: NUMA node = local "
                                "rank / 4"));

  auto unbound = golden_plan({"runtime.binding=none"});
  K8sManifests none = render_ok(*unbound, "a1b2", true);
  EXPECT_THAT(none.yaml, Not(HasSubstr("bridge-worker")));
  EXPECT_THAT(none.yaml, Not(HasSubstr("# binding:")));
}

// Every planned variable is checked in the pod before torchrun starts the ranks: the pod's
// own environment passes (a multi-line UTF-8 value, an expanded one, a secret by presence),
// and a value changed on the way (an image's ENV, an admission webhook) or a missing secret
// stops the pod with exit 3 and the line `why` classifies as env-differs, before any rank.
TEST(K8sRender, ThePodChecksThePlannedEnvBeforeTorchrunStarts) {
  auto p = golden_plan();
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  const json& c =
      container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  std::string script = kubelet_expand(c["command"][2], {});
  EXPECT_THAT(script, Not(HasSubstr(kSecretMarker)));
  EXPECT_LT(script.find("env_bad"), script.find("exec torchrun"));

  std::map<std::string, std::string> changed = pod_environment(c);
  ASSERT_TRUE(changed.count("MULTI"));
  changed["MULTI"] = "line1\nline2: x # y u";  // one byte short of the plan's
  auto r = run_entrypoint(c, changed);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("torchrun")));
  EXPECT_THAT(r.err, HasSubstr("bridge-launch: the rank's environment differs from the planned "
                               "launch env: env MULTI is line1"));
  const ErrorSignature* sig = classify_line(r.err.substr(0, r.err.find('\n')));
  ASSERT_NE(sig, nullptr);
  EXPECT_STREQ(sig->id, "env-differs");

  std::map<std::string, std::string> no_secret = pod_environment(c);
  no_secret.erase("HF_TOKEN");
  r = run_entrypoint(c, no_secret);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("env HF_TOKEN is unset, planned set"));
}

// runtime.watchdog in pods: only the pod holding the plan's progress rank runs it (a pod sees
// only its own ranks' lines); bridge-probe prints on rank 0, Megatron on the last rank, and a
// runtime of adapter none gets no watchdog.
std::string pod_script(const std::string& recipe) {
  auto p = testing::k8s_plan(recipe, {});
  K8sManifests m = render_ok(*p);
  auto docs = testing::parse_yaml_docs(m.yaml);
  for (const auto& d : docs)
    if (d["kind"] == "JobSet")
      return kubelet_expand(
          container_of(
              d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"])["command"][2],
          {});
  ADD_FAILURE() << "no JobSet in\n" << m.yaml;
  return "";
}

const char* const kWatchdogProbe = R"(name: wd
cluster: {gpu: h100, num_gpus: 4, gpus_per_node: 2}
train: {global_batch_size: 4, micro_batch_size: 1, max_steps: 10}
runtime:
  adapter: probe
  command: [bridge-probe]
  container_image: nvcr.io/nvidia/nemo:25.04
  watchdog: {progress_timeout: 2, teardown_grace: 2}
executor:
  kubernetes: {job_dir: JOBDIR}
)";

TEST(K8sRender, TheHangWatchdogRunsInThePodOfTheProgressRank) {
  std::string probe = pod_script(kWatchdogProbe);
  EXPECT_THAT(probe, HasSubstr("if [ \"$NODE_RANK\" != 0 ]; then\n  exec torchrun"));
  EXPECT_THAT(probe, HasSubstr("bridge_limit=2"));
  auto r = test::run_command({"/bin/sh", "-n", "-c", probe});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  std::string last = kWatchdogProbe;  // Megatron prints on the last rank: node 1's pod
  last.replace(last.find("  watchdog:"), 0, "  progress_rank: last\n");
  EXPECT_THAT(pod_script(last), HasSubstr("if [ \"$NODE_RANK\" != 1 ]; then"));

  std::string unwatched = pod_script(kGoldenRecipe);  // adapter none: no watchdog
  EXPECT_THAT(unwatched, Not(HasSubstr("watchdog")));
  EXPECT_THAT(unwatched, HasSubstr("exec torchrun"));
}

// The pod's watchdog run for real (the POSIX script under /bin/sh, torchrun replaced by a
// program that prints iteration lines and then stops making progress, its ranks saying on
// SIGTERM whom they waited for): it ends the ranks, exits 124, and records the verdict
// naming the rank of its node that was not waiting for another.
struct PodRun {
  test::ChildResult child;
  std::string job_dir_file;
  std::string termination_message;
};

// `term_after` > 0: Kubernetes' SIGTERM (a deletion, a preemption) reaches the entrypoint,
// the container's PID 1, that many seconds after it started.
PodRun run_watched_pod(const std::string& fake_torchrun, int term_after = 0) {
  test::TempDir dir;
  std::string recipe = kWatchdogProbe;
  recipe.replace(recipe.find("JOBDIR"), 6, dir.path() + "/jobs");
  std::string script = pod_script(recipe);
  script.replace(script.find("/dev/termination-log"), 20, dir.path() + "/termination-log");
  std::string bin = dir.path() + "/bin";
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/torchrun") << "#!/bin/sh\n" << fake_torchrun;
  std::filesystem::permissions(bin + "/torchrun", std::filesystem::perms::owner_all);
  std::map<std::string, std::string> env{{"PATH", bin + ":/usr/bin:/bin"},
                                         {"MASTER_ADDR", "localhost"},
                                         {"MASTER_PORT", "29500"},
                                         {"NODE_RANK", "0"},
                                         {"BRIDGE_RESTART_ATTEMPT", "1"}};
  PodRun run;
  if (term_after == 0) {
    run.child = test::run_command({"/bin/sh", "-c", script, "bridge-launch", "bridge-probe"}, env);
  } else {
    const std::string outer = fmt::format(
        "\"$0\" -c \"$1\" bridge-launch bridge-probe & p=$!; sleep {}; kill -TERM \"$p\"; "
        "wait \"$p\"",
        term_after);
    run.child = test::run_command({"/bin/sh", "-c", outer, "/bin/sh", script}, env);
  }
  // The submission's directory: <job dir>/<recipe name>/<object name>.
  for (const auto& sub : std::filesystem::directory_iterator(dir.path() + "/jobs/wd"))
    run.job_dir_file += test::read_file((sub.path() / "watchdog").string());
  run.termination_message = test::read_file(dir.path() + "/termination-log");
  return run;
}

TEST(K8sRender, ThePodWatchdogEndsAHungNodeAndNamesTheRankThatStoppedFirst) {
  PodRun run = run_watched_pod(R"SH(
trap 'echo "bridge-probe: error: rank 0: terminated while waiting for rank 1 (step 3)"; exit 143' TERM
echo " [t] iteration        1/      10 | consumed samples: 4 |"
echo " [t] iteration        2/      10 | consumed samples: 8 |"
while :; do sleep 0.2; done
)SH");
  EXPECT_EQ(run.child.exit_code, kWatchdogHangExitCode) << run.child.err;
  EXPECT_THAT(run.child.out, HasSubstr("iteration        2/      10"));  // the log goes on
  EXPECT_THAT(run.child.out, HasSubstr("terminated while waiting for rank 1"));
  std::vector<WatchdogEvent> events = parse_watchdog_events(run.job_dir_file);
  ASSERT_EQ(events.size(), 1u) << run.child.err;
  EXPECT_EQ(events[0].kind, "hang");
  EXPECT_EQ(events[0].stage, "progress");
  EXPECT_EQ(events[0].iteration, 2);
  EXPECT_EQ(events[0].total, 10);
  EXPECT_EQ(events[0].attempt, 2);  // the restart label 1 is the second attempt
  EXPECT_EQ(events[0].node, 0);
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_GE(events[0].waited, 2);
  EXPECT_EQ(run.termination_message, run.job_dir_file);
  EXPECT_THAT(watchdog_event_text(events[0]), HasSubstr("rank 1 (node 0) stopped first"));
}

TEST(K8sRender, ThePodWatchdogEndsATeardownHangAndThePodSucceeds) {
  PodRun run = run_watched_pod(R"SH(
echo " [t] iteration       10/      10 | consumed samples: 40 |"
while :; do sleep 0.2; done
)SH");
  EXPECT_EQ(run.child.exit_code, 0) << run.child.err;
  std::vector<WatchdogEvent> events = parse_watchdog_events(run.termination_message);
  ASSERT_EQ(events.size(), 1u) << run.child.err;
  EXPECT_EQ(events[0].kind, "teardown");
  EXPECT_EQ(events[0].iteration, 10);
  EXPECT_EQ(events[0].rank, -1);
  EXPECT_THAT(run.child.err, HasSubstr("the pod succeeded"));
}

// The entrypoint is the container's PID 1: Kubernetes' SIGTERM goes to it alone. It passes
// it on to the launcher (which passes it on to the ranks), and the pod ends with the
// launcher's status, without a verdict.
TEST(K8sRender, ThePodWatchdogPassesKubernetesSigtermOnToTheLauncher) {
  PodRun run = run_watched_pod(R"SH(
trap 'echo "launcher: got SIGTERM"; exit 143' TERM
echo " [t] iteration        1/      10 | consumed samples: 4 |"
while :; do sleep 0.2; done
)SH",
                               1);
  EXPECT_EQ(run.child.exit_code, 143) << run.child.err;
  EXPECT_THAT(run.child.out, HasSubstr("launcher: got SIGTERM"));
  EXPECT_EQ(run.job_dir_file, "");
  EXPECT_EQ(run.termination_message, "");
}

TEST(K8sRender, APodWhoseRanksEndOnTheirOwnExitsWithTheirStatus) {
  PodRun run = run_watched_pod(R"SH(
echo " [t] iteration        1/       1 | consumed samples: 4 |"
exit 7
)SH");
  EXPECT_EQ(run.child.exit_code, 7) << run.child.err;
  EXPECT_THAT(run.child.out, HasSubstr("iteration        1/       1"));
  EXPECT_EQ(run.job_dir_file, "");
}

// The header says what the job leaves behind (nothing: the generated objects are owned by
// the top object) and describes the pod after the pod_patch.
TEST(K8sRender, TheHeaderNamesWhatIsOwnedAndWhatThePodPatchChanged) {
  auto p = golden_plan({"executor.kubernetes.pod_patch={spec: {hostNetwork: true}}"});
  std::string yaml = render_ok(*p).yaml;
  EXPECT_THAT(yaml, HasSubstr("# cleanup: the Secret gets ownerReferences to the JobSet once "
                              "applied: the TTL or a deletion of the job removes it too\n"));
  EXPECT_THAT(yaml, HasSubstr("# pod_patch: add /spec/hostNetwork = true\n"));
  EXPECT_LT(yaml.find("# pod: QoS"), yaml.find("# pod_patch:"));
  auto job = golden_plan({"executor.kubernetes.api=job"});
  EXPECT_THAT(render_ok(*job).yaml,
              HasSubstr("# cleanup: the Secret and the Services get ownerReferences to the Jobs"));
}

TEST(K8sRender, EnvValuesReachThePodExactly) {
  auto p = golden_plan();
  // The applied text: what reaches the API server, the Secret included.
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  const json& c =
      container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  std::map<std::string, std::string> seen;  // kubelet resolves $(X) from earlier entries
  for (const auto& e : c["env"]) {
    std::string name = e["name"];
    if (!e.contains("value")) continue;
    std::string value = kubelet_expand(e["value"], seen);
    seen[name] = value;
    if (const EnvVar* v = p->plan->env.find(name)) {
      EXPECT_EQ(value, v->value) << name;
    }
  }
  EXPECT_EQ(seen["MULTI"], "line1\nline2: x # y ü");
  EXPECT_EQ(seen.count("SCRATCH"), 0u) << "expand: true values are exported by the shell";
  EXPECT_EQ(seen.count("HF_TOKEN"), 0u) << "secrets come from the Secret";
}

TEST(K8sRender, SecretsOnlyInTheSecretAndOnlyWhenRevealed) {
  auto p = golden_plan();
  K8sManifests shown = render_ok(*p);
  EXPECT_THAT(shown.yaml, Not(HasSubstr(kSecretMarker)));
  K8sManifests real = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(real.yaml);
  ASSERT_EQ(docs[0]["kind"], "Secret");
  EXPECT_EQ(docs[0]["metadata"]["name"], "golden-demo-v1-a1b2-env");
  EXPECT_EQ(docs[0]["stringData"]["HF_TOKEN"], kSecretMarker);
  EXPECT_THAT(docs[1].dump(), Not(HasSubstr(kSecretMarker)));
  auto env =
      env_map(container_of(docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]));
  EXPECT_EQ(env["HF_TOKEN"]["valueFrom"]["secretKeyRef"],
            json::parse(R"({"name":"golden-demo-v1-a1b2-env","key":"HF_TOKEN"})"));
  // The shown text has no Secret object a user could apply by accident with placeholder
  // values: it names the Secret and how to create it.
  auto shown_docs = testing::parse_yaml_docs(shown.yaml);
  for (const auto& d : shown_docs) EXPECT_NE(d["kind"], "Secret");
  EXPECT_THAT(shown.yaml, Not(HasSubstr("<secret>")));
  EXPECT_THAT(shown.yaml,
              HasSubstr("kubectl create secret generic golden-demo-v1-a1b2-env -n training "
                        "--from-literal=HF_TOKEN=\"$HF_TOKEN\""));
  EXPECT_EQ(shown.secret_object, "golden-demo-v1-a1b2-env");
}

TEST(K8sRender, UserNamedSecretIsReferencedAndNotCreated) {
  auto p = golden_plan({"executor.kubernetes.secret_name=team-keys"});
  K8sManifests m = render_ok(*p, "a1b2", true);
  EXPECT_THAT(m.yaml, Not(HasSubstr(kSecretMarker)));
  auto docs = testing::parse_yaml_docs(m.yaml);
  ASSERT_EQ(docs.size(), 1u);
  auto env =
      env_map(container_of(docs[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]));
  EXPECT_EQ(env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"], "team-keys");
  EXPECT_EQ(m.secret_object, "");
}

TEST(K8sRender, JobApiAttemptsAreSuspendedJobsWithTheirOwnServices) {
  auto p = golden_plan({"executor.kubernetes.api=job", "executor.kubernetes.retries=2"});
  // The applied text: what reaches the API server, the Secret included.
  K8sManifests m = render_ok(*p, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  std::vector<std::string> kinds;
  for (const auto& d : docs)
    kinds.push_back(d["kind"].get<std::string>() + "/" + d["metadata"]["name"].get<std::string>());
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "Secret/golden-demo-v1-a1b2-env", "Service/golden-demo-v1-a1b2",
                       "Job/golden-demo-v1-a1b2", "Service/golden-demo-v1-a1b2-r1",
                       "Job/golden-demo-v1-a1b2-r1", "Service/golden-demo-v1-a1b2-r2",
                       "Job/golden-demo-v1-a1b2-r2"}));
  EXPECT_FALSE(docs[2]["spec"].contains("suspend"));
  EXPECT_EQ(docs[4]["spec"]["suspend"], true);
  EXPECT_EQ(docs[6]["spec"]["suspend"], true);
  EXPECT_EQ(docs[4]["metadata"]["labels"]["bridge-launch/attempt"], "1");
  EXPECT_EQ(docs[4]["metadata"]["labels"]["bridge-launch/job"], "golden-demo-v1-a1b2");
  EXPECT_EQ(docs[4]["metadata"]["annotations"]["bridge-launch/attempts"], "3");
  EXPECT_EQ(docs[2]["spec"]["completionMode"], "Indexed");
  EXPECT_EQ(docs[2]["spec"]["backoffLimit"], 0);
}

TEST(K8sRender, MasterAddrIsTheDnsNameTheManifestsProduce) {
  for (std::string api : {"jobset", "job"}) {
    auto p = golden_plan({"executor.kubernetes.api=" + api, "executor.kubernetes.retries=2"});
    K8sManifests m = render_ok(*p);
    auto found = derive_rendezvous(testing::parse_yaml_docs(m.yaml));
    ASSERT_EQ(found.size(), api == "job" ? 3u : 1u);
    for (const auto& r : found) EXPECT_EQ(r.master_addr, r.dns_of_pod0) << api;
    EXPECT_EQ(m.master_addr, found[0].master_addr);
  }
}

TEST(K8sRender, SameSuffixSameBytesAndTheHeaderNamesIt) {
  auto p = golden_plan();
  std::string first = render_ok(*p, "9f0e").yaml;
  EXPECT_EQ(render_ok(*p, "9f0e").yaml, first);
  EXPECT_THAT(first, HasSubstr("(name suffix 9f0e: from the job id"));
  EXPECT_NE(render_ok(*p, "0a1b").yaml, first);
}

TEST(K8sRender, FaultToleranceUsesFtLauncherAndItsRetries) {
  std::string text = kGoldenRecipe;
  text.replace(text.find("plugins:\n"), 9,
               "plugins:\n  fault_tolerance: {num_in_job_restarts: 4}\n");
  auto q = testing::k8s_plan(text);
  ASSERT_TRUE(q->plan->complete);
  K8sManifests m = render_ok(*q, "a1b2", true);
  auto docs = testing::parse_yaml_docs(m.yaml);
  EXPECT_EQ(docs[1]["spec"]["failurePolicy"]["maxRestarts"], 2);  // num_job_retries_on_failure
  std::string script = container_of(
      docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"])["command"][2];
  EXPECT_THAT(script, HasSubstr("exec ft_launcher --max-restarts=4 "));
  EXPECT_THAT(script, HasSubstr(" --nnodes=2 --nproc-per-node=8 "));

  auto r = testing::k8s_plan(text, {"executor.kubernetes.retries=5"});
  K8sManifests m2 = render_ok(*r, "a1b2", true);
  EXPECT_EQ(testing::parse_yaml_docs(m2.yaml)[1]["spec"]["failurePolicy"]["maxRestarts"], 5);
  EXPECT_TRUE(r->diags.has_code("k8s-retries-override"));
}

// ---------------------------------------------------------------------------------------
// Errors and warnings.

TEST(K8sRender, ContainerImageIsRequired) {
  std::string text = kGoldenRecipe;
  text.erase(text.find("  container_image:"),
             std::string("  container_image: nvcr.io/nvidia/nemo:25.11\n").size());
  auto p = testing::k8s_plan(text);
  ASSERT_TRUE(p->plan->complete);
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  ASSERT_TRUE(p->diags.has_code("k8s-container-image-required"));
  for (const auto& d : p->diags.items())
    if (d.code == "k8s-container-image-required") {
      EXPECT_EQ(d.path, "runtime.container_image");
      EXPECT_EQ(d.loc.file, "recipe.yaml");
    }
}

TEST(K8sRender, EmptyContainerImagePointsAtTheValue) {
  auto p = golden_plan({"runtime.container_image=\"\""});
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  ASSERT_TRUE(p->diags.has_code("k8s-container-image-required"));
}

TEST(K8sRender, RendezvousVariablesAreReserved) {
  auto p = testing::k8s_plan(kGoldenRecipe);
  p->plan->env.vars.push_back({"MASTER_ADDR", "10.0.0.1", "-E", "", false, false});
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  EXPECT_TRUE(p->diags.has_code("k8s-reserved-env"));
}

TEST(K8sRender, InvalidValuesAreErrors) {
  auto p = golden_plan({"executor.kubernetes.shm_size=lots", "executor.kubernetes.namespace=Bad_NS",
                        "executor.kubernetes.secret_name=Not Valid"});
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  EXPECT_TRUE(p->diags.has_code("k8s-invalid-quantity"));
  EXPECT_TRUE(p->diags.has_code("k8s-invalid-name"));
  auto q = testing::k8s_plan(kGoldenRecipe);
  q->plan->env.vars.push_back({"BINARY", "\xff\xfe", "-E", "", false, false});
  EXPECT_FALSE(render_k8s_manifests(*q->plan, {}, q->diags).has_value());
  EXPECT_TRUE(q->diags.has_code("k8s-env-not-utf8"));
}

// A name that is not valid is quoted escaped (issue 47, item 13): a `service_account` holding
// a newline printed it raw, splitting the error line, and an escape sequence drove the
// terminal.
TEST(K8sRender, InvalidNamesAreQuotedEscaped) {
  auto p = golden_plan({R"(executor.kubernetes.service_account="a\nb\u001b[31m")",
                        R"(executor.kubernetes.namespace="ns\nx")",
                        R"(executor.kubernetes.image_pull_secrets=["s\ny"])"});
  EXPECT_FALSE(render_k8s_manifests(*p->plan, {}, p->diags).has_value());
  size_t names = 0;
  std::string messages;
  for (const auto& d : p->diags.items()) {
    if (d.code != "k8s-invalid-name") continue;
    ++names;
    messages += d.message + "\n";
    EXPECT_EQ(d.message.find('\n'), std::string::npos) << d.message;
    EXPECT_EQ(d.message.find('\x1b'), std::string::npos) << d.message;
  }
  EXPECT_EQ(names, 3u) << messages;
  EXPECT_THAT(messages, HasSubstr("`a\\x0ab\\x1b[31m` is not a valid Kubernetes"));
}

TEST(K8sRender, SlurmLauncherWarnsAndUsesTorchrun) {
  auto p = golden_plan({"runtime.launcher=srun"});
  K8sManifests m = render_ok(*p);
  EXPECT_TRUE(p->diags.has_code("k8s-launcher-torchrun"));
  EXPECT_THAT(m.yaml, HasSubstr("exec torchrun "));
}

// ---------------------------------------------------------------------------------------
// The matrix: sizes, long names, many env vars, secrets, both APIs; all through the
// validator and the structural checks.

std::string matrix_recipe(const std::string& name, int64_t ng, int env_count) {
  std::string text = fmt::format(R"(name: "{}"
cluster: {{gpu: h100, num_gpus: {}, gpus_per_node: 8}}
runtime:
  command: [python, train.py]
  container_image: registry.example.com/team/trainer:1.0
plugins:
  perf_env: {{}}
  preemption: {{}}
env:
  API_TOKEN: {{value: MATRIX-SECRET, secret: true}}
  OTHER_SECRET: {{value: "s3cr3t with spaces", secret: true}}
)",
                                 name, ng);
  for (int i = 0; i < env_count; ++i)
    text += fmt::format("  VAR_{}: \"v{} 'q' \\\"dq\\\" $(HOME) $$ ü: # x\\n  next\"\n", i, i);
  return text;
}

TEST(K8sRender, MatrixPassesTheValidatorAndKeepsNamesShort) {
  const std::string long_name =
      "My_Very.Long_Recipe.NAME_for-Qwen3_235B.A22B_with_EXPERT.parallel_overlap_and_many_"
      "extra_words_v2.1_final";
  ASSERT_GT(long_name.size(), 100u);
  test::TempDir dir;
  std::vector<std::string> files;
  for (int64_t ng : {8, 64, 512, 4096})
    for (const std::string& name : {std::string("demo"), long_name})
      for (const std::string api : {"jobset", "job"}) {
        auto p = testing::k8s_plan(matrix_recipe(name, ng, 200),
                                   {"executor.kubernetes.api=" + api,
                                    "executor.kubernetes.retries=" + std::to_string(ng / 512)});
        ASSERT_TRUE(p->plan->complete) << name << " " << ng;
        K8sManifests m = render_ok(*p, "c0de");
        SCOPED_TRACE(fmt::format("ng={} api={} name={}", ng, api, name.substr(0, 10)));
        EXPECT_THAT(m.yaml, Not(HasSubstr("MATRIX-SECRET")));
        EXPECT_THAT(m.yaml, Not(HasSubstr("s3cr3t")));
        auto docs = testing::parse_yaml_docs(m.yaml);
        for (const auto& r : derive_rendezvous(docs)) {
          EXPECT_EQ(r.master_addr, r.dns_of_pod0);
          EXPECT_LE(r.longest_hostname.size(), 63u) << r.longest_hostname;
        }
        for (const auto& d : docs) {
          std::string n = d["metadata"]["name"];
          EXPECT_LE(n.size(), d["kind"] == "Secret" ? 253u : 63u) << n;
          EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-."),
                    std::string::npos)
              << n;
        }
        files.push_back(dir.write(fmt::format("m-{}-{}-{}.yaml", ng, api, name.size()), m.yaml));
        // Same recipe name, another submission: the same stable prefix.
        K8sManifests again = render_ok(*p, "beef");
        EXPECT_EQ(again.name.substr(0, again.name.size() - 4), m.name.substr(0, m.name.size() - 4));
      }
  if (testing::k8s_validator().empty()) GTEST_SKIP() << testing::kNoValidator;
  EXPECT_EQ(validate(files), "");
}

TEST(K8sRender, ValidatorCatchesABrokenManifest) {
  // The validator really runs: an unknown field and an over-long hostname are rejected.
  if (testing::k8s_validator().empty()) GTEST_SKIP() << testing::kNoValidator;
  auto p = golden_plan();
  std::string text = render_ok(*p).yaml;
  text.replace(text.find("    backoffLimit: 0"), 19, "    backoffLimit: 0\n        bogusField: 1");
  test::TempDir dir;
  EXPECT_NE(validate({dir.write("bad.yaml", text)}), "");
}

}  // namespace
}  // namespace bridge
