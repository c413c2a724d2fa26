#include "executors/k8s_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "base/utf8.h"
#include "base/yaml_tree.h"
#include "executors/k8s_names.h"
#include "executors/k8s_pod_shape.h"
#include "executors/k8s_pod_spec.h"
#include "executors/k8s_status.h"
#include "executors/k8s_trainjob.h"
#include "executors/k8s_yaml.h"
#include "executors/numa_bind.h"
#include "executors/rank_env.h"
#include "model/watchdog.h"
#include "plan/plan_confirm.h"
#include "system/templates.h"

namespace bridge {

namespace {

using nlohmann::ordered_json;

constexpr int kDnsWaitTries = 300;  // x 2 s
// The node label NVIDIA's GPU feature discovery sets to a node's NVLink domain (clique).
constexpr const char* kDefaultTopologyLabel = "nvidia.com/gpu.clique";
constexpr const char* kKueueRequiredTopology = "kueue.x-k8s.io/podset-required-topology";
constexpr const char* kKueuePreferredTopology = "kueue.x-k8s.io/podset-preferred-topology";
constexpr const char* kKueueSliceTopology = "kueue.x-k8s.io/podset-slice-required-topology";
constexpr const char* kKueueSliceSize = "kueue.x-k8s.io/podset-slice-size";
constexpr int kDnsWaitSeconds = 2;

// The variables the executor itself sets on every pod (or torchrun sets on every rank).
const std::set<std::string>& rendezvous_names() {
  static const std::set<std::string> kNames{
      "RANK",        "LOCAL_RANK",  "WORLD_SIZE",     "LOCAL_WORLD_SIZE",      "NODE_RANK",
      "MASTER_ADDR", "MASTER_PORT", "BRIDGE_ATTEMPT", "BRIDGE_RESTART_ATTEMPT"};
  return kNames;
}

struct Inputs {
  const Plan& plan;
  const JobSpec& job;
  const KubernetesExecutorSpec& kx;
  std::string api;
  int64_t nodes;
  int64_t gpus_per_node;
  int64_t retries;
  std::string image;
  std::string secret_object;  // the Secret the secretKeyRefs point at ("" = no secrets)
  bool generated_secret = false;
  ordered_json common_labels;
  ordered_json object_labels;  // of the JobSet / Job: common labels + recipe labels + queue
  ordered_json annotations;
  const K8sPodSettings* pod = nullptr;  // executor.kubernetes pod settings, applied last
  const K8sPodShape* shape = nullptr;   // requests, shm, security context, lifetime
  std::string code_dir;                 // runtime.code's directory on the nodes ("" = none)
  std::string submission_dir;           // <job dir>/<object name>: this submission's files
  std::string plan_config_map;          // the plan confirmation's ConfigMap ("" = none)
};

// Retries: Kueue with the Job API's suspended attempts, and a recipe value that overrides a
// plugin's.
void check_retries(const Plan& plan, const Inputs& in, Diagnostics& diags) {
  const JobSpec& r = in.job;
  const auto& kx = in.kx;
  // A JobSet restart recreates its Jobs from one template: it cannot keep a node out.
  if (in.api != "job" && kx.exclude_failed_nodes.is_set() && *kx.exclude_failed_nodes.value)
    diags.error("k8s-exclude-needs-job-api", "executor.kubernetes.exclude_failed_nodes",
                kx.exclude_failed_nodes.loc,
                fmt::format("a {} restarts its Jobs from one template on any node: it cannot keep "
                            "the next attempt off the node that failed",
                            k8s_api(in.api)->kind),
                "set executor.kubernetes.api: job (each attempt is its own Job, started with the "
                "failed nodes excluded), or drop exclude_failed_nodes");
  // Kueue admits every queued Job it sees, so the Job API's suspended retry attempts would
  // all start at once instead of one after another.
  if (in.api == "job" && in.retries > 0 && kx.queue.is_set())
    diags.error("k8s-queue-job-retries", "executor.kubernetes.queue", kx.queue.loc,
                fmt::format("a Kueue queue with api: job and {} retries: Kueue would start the "
                            "suspended retry attempts at once, not after a failure",
                            in.retries),
                "use api: jobset (its restarts stay one Kueue workload), or retries: 0");
  // The next Job API attempt starts when `status` (or --wait) sees the failed one; deleted by
  // its TTL before that, the failure is never seen and the retries never start.
  constexpr int64_t kMinTtlWithJobRetries = 86400;
  if (in.api == "job" && in.retries > 0 && kx.ttl_after_finished.is_set() &&
      *kx.ttl_after_finished.value < kMinTtlWithJobRetries)
    diags.error("k8s-ttl-too-short-for-retries", "executor.kubernetes.ttl_after_finished",
                kx.ttl_after_finished.loc,
                fmt::format("ttl_after_finished {} s with api: job and {} retries: a failed "
                            "attempt can be deleted before bridge-launch starts the next one",
                            *kx.ttl_after_finished.value, in.retries),
                fmt::format("keep it at least {} s (a day), or use api: jobset, whose restarts "
                            "the JobSet controller makes itself",
                            kMinTtlWithJobRetries));
  if (r.executor.kubernetes.retries.is_set() && plan.executor_changes.retries &&
      *plan.executor_changes.retries != *r.executor.kubernetes.retries.value)
    diags.warning(
        "k8s-retries-override", "executor.kubernetes.retries", r.executor.kubernetes.retries.loc,
        fmt::format("executor.kubernetes.retries ({}) overrides the {} value ({})",
                    *r.executor.kubernetes.retries.value, plan.executor_changes.retries_source,
                    *plan.executor_changes.retries));
}

// The launch env on Kubernetes: the executor's own variables (and, for a TrainJob, torchrun's
// PET_*) cannot be set by the job, and values are UTF-8 strings.
void check_env(const Plan& plan, const Inputs& in, Diagnostics& diags) {
  const JobSpec& r = in.job;
  auto env_loc = [&](const std::string& name) {
    auto at = r.env_locations.find(name);
    return at == r.env_locations.end() ? SourceLoc{} : at->second;
  };
  for (const auto& v : plan.env.vars) {
    if (rendezvous_names().count(v.name)) {
      diags.error("k8s-reserved-env", "env." + v.name, env_loc(v.name),
                  fmt::format("launch variable {} is set by the kubernetes executor (or by "
                              "torchrun on every rank) and cannot be set by the job",
                              v.name),
                  "remove it from env:/-E; MASTER_ADDR is pod 0's DNS name, MASTER_PORT 29500, "
                  "NODE_RANK the pod's completion index");
    }
    if (in.api == "trainjob" && v.name.starts_with(kTrainerReservedEnvPrefix))
      diags.error("k8s-reserved-env", "env." + v.name, env_loc(v.name),
                  fmt::format("launch variable {} is torchrun's: torchrun reads every PET_* "
                              "variable as an option's default, and the Trainer's torch plugin "
                              "sets five of them on every TrainJob pod",
                              v.name),
                  "remove it from env:/-E, or use api: jobset");
    if (!v.secret && !is_valid_utf8(v.value))
      diags.error("k8s-env-not-utf8", "env." + v.name, env_loc(v.name),
                  fmt::format("the value of {} is not valid UTF-8; Kubernetes env values are "
                              "UTF-8 strings",
                              v.name));
  }
}

bool check_inputs(const Plan& plan, Inputs& in, Diagnostics& diags) {
  const JobSpec& r = in.job;
  const auto& kx = in.kx;
  size_t errors = diags.count(Severity::kError);
  const auto& image = r.runtime.container_image;
  if (!image.is_set() || image.value->empty()) {
    SourceLoc loc = image.is_set() ? image.loc : SourceLoc{r.file, 0, 0, {}};
    diags.error("k8s-container-image-required", "runtime.container_image", loc,
                "the kubernetes executor needs runtime.container_image: every pod runs that "
                "image",
                "set runtime.container_image, e.g. nvcr.io/nvidia/nemo:25.11");
  } else {
    in.image = *image.value;
  }
  if (kx.namespace_.is_set() && !is_rfc1123_label(*kx.namespace_.value))
    diags.error("k8s-invalid-name", "executor.kubernetes.namespace", kx.namespace_.loc,
                fmt::format("namespace `{}` is not a valid Kubernetes namespace name (RFC 1123 "
                            "label: lowercase letters, digits and '-', at most 63 characters)",
                            printable_text(*kx.namespace_.value, 64)));
  auto check_subdomain = [&](const Field<std::string>& f, const std::string& path) {
    if (f.is_set() && !is_rfc1123_subdomain(*f.value))
      diags.error("k8s-invalid-name", path, f.loc,
                  fmt::format("`{}` is not a valid Kubernetes object name (lowercase RFC 1123 "
                              "subdomain)",
                              printable_text(*f.value, 64)),
                  "use the object's name as `kubectl get` prints it: lowercase letters, digits, "
                  "'-' and '.', at most 253 characters");
  };
  check_subdomain(kx.secret_name, "executor.kubernetes.secret_name");
  check_subdomain(kx.training_runtime, "executor.kubernetes.training_runtime");
  if (in.api != "trainjob" && kx.training_runtime.is_set())
    diags.warning(
        "k8s-training-runtime-unused", "executor.kubernetes.training_runtime",
        kx.training_runtime.loc,
        fmt::format("training_runtime is read only with api: trainjob, not api: {}", in.api),
        "set executor.kubernetes.api: trainjob, or drop training_runtime");
  check_subdomain(kx.service_account, "executor.kubernetes.service_account");
  for (const auto& s : kx.image_pull_secrets.get_or({}))
    if (!is_rfc1123_subdomain(s))
      diags.error("k8s-invalid-name", "executor.kubernetes.image_pull_secrets",
                  kx.image_pull_secrets.loc,
                  fmt::format("image pull secret `{}` is not a valid Kubernetes object name",
                              printable_text(s, 64)));
  if (kx.shm_size.is_set() && !is_k8s_quantity(*kx.shm_size.value))
    diags.error("k8s-invalid-quantity", "executor.kubernetes.shm_size", kx.shm_size.loc,
                fmt::format("shm_size `{}` is not a Kubernetes quantity",
                            printable_text(*kx.shm_size.value, 40)),
                "write it like 64Gi, 512Mi or 1000000000");
  const auto& launcher = r.runtime.launcher;
  if (launcher.is_set() && *launcher.value != "torchrun")
    diags.warning("k8s-launcher-torchrun", "runtime.launcher", launcher.loc,
                  fmt::format("runtime.launcher `{}` is not used on Kubernetes: each pod starts "
                              "its {} ranks with torchrun",
                              *launcher.value, in.gpus_per_node));
  check_env(plan, in, diags);
  for (const auto& a : rank_command(plan))
    if (!is_valid_utf8(a))
      diags.error("k8s-arg-not-utf8", "runtime.args", {},
                  "a command argument is not valid UTF-8; Kubernetes carries UTF-8 strings only");
  check_retries(plan, in, diags);
  return diags.count(Severity::kError) == errors;
}

// Every rank's command: through the plan confirmation when the plan confirms (the program
// and request from the ConfigMap, the verdict into the submission's directory).
std::vector<std::string> pod_rank_command(const Inputs& in) {
  if (in.plan_config_map.empty()) return rank_command(in.plan);
  return rank_command(in.plan, kK8sPlanMountPath,
                      in.submission_dir + "/" + std::string(kConfirmVerdictFile));
}

ordered_json env_value(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", k8s_escape_dollars(value)}};
}

// Container env: launch variables (secrets by reference, `expand: true` ones are exported
// by the entrypoint instead), the probe's check variables, then the rendezvous variables.
ordered_json pod_env(const Inputs& in, const std::string& master_addr) {
  ordered_json env = ordered_json::array();
  for (const auto& v : in.plan.env.vars) {
    if (v.secret)
      env.push_back(
          {{"name", v.name},
           {"valueFrom", {{"secretKeyRef", {{"name", in.secret_object}, {"key", v.name}}}}}});
    else if (!v.expand)
      env.push_back(env_value(v.name, v.value));
  }
  // BRIDGE_EXPECTED_ENV and the like are bridge-probe's checks; another runtime never reads
  // them, and an admin reading the pod should not have to ask what they are.
  if (runs_bridge_probe(in.plan))
    for (const auto& [k, v] : bridge_check_vars(in.plan)) env.push_back(env_value(k, v));
  if (in.plan.code) env.push_back(env_value("BRIDGE_CODE_DIR", in.plan.code->container_path));
  env.push_back(env_value("MASTER_ADDR", master_addr));
  env.push_back(env_value("MASTER_PORT", std::to_string(kK8sMasterPort)));
  env.push_back({{"name", "BRIDGE_RESTART_ATTEMPT"},
                 {"valueFrom",
                  {{"fieldRef",
                    {{"fieldPath", fmt::format("metadata.labels['{}']",
                                               in.api == "job" ? kK8sAttemptLabel
                                                               : kJobSetRestartAttemptLabel)}}}}}});
  env.push_back(
      {{"name", "NODE_RANK"},
       {"valueFrom",
        {{"fieldRef",
          {{"fieldPath", fmt::format("metadata.annotations['{}']", kK8sCompletionIndex)}}}}}});
  return env;
}

// Every planned variable, checked in the pod before torchrun starts the ranks (they inherit
// the pod's environment): a value the image, an admission webhook or the kubelet changed stops
// the pod with the line and the exit code of the plan confirmation on Slurm (env-differs,
// plan/plan_confirm.h). Values are compared byte for byte; a secret or an expanded value only
// for presence, and never written into the script.
void append_env_check(const Plan& plan, std::string& s) {
  if (plan.env.vars.empty()) return;
  s += "# The planned launch env, checked before torchrun starts the ranks (they inherit it).\n";
  s += "env_bad=0\n";
  s += "env_differs() {\n";
  s += "  echo \"bridge-launch: the rank's environment differs from the planned launch env: "
       "env $1\" >&2\n";
  s += "  env_bad=1\n";
  s += "}\n";
  for (const auto& v : plan.env.vars) {
    if (v.secret || v.expand)
      s += fmt::format("[ \"${{{0}+set}}\" = set ] || env_differs '{0} is unset, planned set'\n",
                       v.name);
    else
      s += fmt::format(
          "[ \"${{{0}+set}}\" = set ] && [ \"${{{0}-}}\" = {1} ] || "
          "env_differs \"{0} is ${{{0}-unset}}, planned \"{1}\n",
          v.name, shell_word(v.value));
  }
  s += fmt::format("[ \"$env_bad\" = 0 ] || exit {}\n", kConfirmExitCode);
}

// The pod holding the plan's progress rank (runtime.progress_rank: Megatron's last rank,
// bridge-probe's rank 0). Only it runs the watchdog: a pod's watchdog sees only its own
// ranks' lines, and one whose ranks print no iteration line would take the job for hung.
int64_t watched_node(const Inputs& in) {
  return in.plan.progress_rank / std::max<int64_t>(1, in.gpus_per_node);
}

// runtime.watchdog in the pods (templates/k8s-watchdog.sh.tmpl): the pod holding the progress
// rank runs the launcher beside a watchdog loop; the others exec it as without one.
std::string watchdog_script(const Inputs& in, const std::string& launch) {
  const WatchdogSettings& w = in.plan.watchdog;
  std::string text(embedded_template("k8s-watchdog.sh.tmpl").value_or(""));
  const std::pair<std::string_view, std::string> values[] = {
      {"@WATCH_NODE@", std::to_string(watched_node(in))},
      {"@LAUNCH@", launch},
      {"@ERE_Q@", shell_word(kIterationLineEre)},
      {"@STARTUP@", std::to_string(w.startup_timeout)},
      {"@PROGRESS@", std::to_string(w.progress_timeout)},
      {"@GRACE@", std::to_string(w.teardown_grace)},
      {"@POLL@", std::to_string(w.poll_seconds())},
      {"@KILL_AFTER@", std::to_string(kWatchdogKillAfter)},
      {"@HANG_EXIT@", std::to_string(kWatchdogHangExitCode)},
      {"@GPUS_PER_NODE@", std::to_string(in.gpus_per_node)},
      {"@JOB_DIR@", shell_word(in.submission_dir)},
  };
  // One pass: a value is never searched for placeholders (a launcher word may hold an `@`).
  std::string out;
  size_t from = 0;
  for (size_t at = text.find('@'); at != std::string::npos; at = text.find('@', from)) {
    out.append(text, from, at - from);
    from = at + 1;
    for (const auto& [name, value] : values)
      if (text.compare(at, name.size(), name) == 0) {
        out += value;
        from = at + name.size();
        break;
      }
    if (from == at + 1) out += '@';
  }
  out.append(text, from, std::string::npos);
  return out;
}

// runtime.binding: numa. Every torchrun worker starts through the binding program of the
// Slurm executor (executors/numa_bind.h: numactl on its GPU's NUMA node, or one line saying
// why it runs unbound: no numactl, a node outside the pod's cpuset, no such node); the program
// is bash, so an image without bash runs its ranks unbound and says so once per pod.
// Whether the pods bind: a pod that takes only some of a node's GPUs gets the ones the device
// plugin picks, so its local rank says nothing about which GPU (and NUMA node) it has.
bool pods_bind(const Inputs& in) {
  const Topology& t = *in.plan.topology;
  return in.plan.binding.mode == BindingMode::kNuma &&
         (t.node_gpus <= 0 || in.gpus_per_node >= t.node_gpus);
}

void append_numa_binding(const Inputs& in, std::string& s) {
  if (!pods_bind(in)) return;
  std::string bind = numa_bind_program(in.plan.binding);
  s += "# runtime.binding: numa: each rank on its GPU's NUMA node (numactl), through bash.\n";
  s += "if command -v bash >/dev/null 2>&1; then\n";
  s += fmt::format("  set -- bash -c {} bridge-worker \"$@\"\n", shell_word(bind));
  s += "else\n";
  s += "  echo \"bridge-launch: pod of node $NODE_RANK: no bash in the image: its ranks run "
       "unbound\" >&2\n";
  s += "fi\n";
}

// The pod's entrypoint: a bounded DNS wait for MASTER_ADDR, the job dir, `expand: true`
// exports, the planned env's check and setup steps, then one torchrun (or ft_launcher) whose
// command is "$@" (the container args, passed through without any re-quoting).
std::string entrypoint_script(const Inputs& in) {
  const Plan& plan = in.plan;
  std::string s;
  s += "set -eu\n";
  s += "# Wait until pod 0's DNS name resolves (the headless service publishes it).\n";
  s += "resolves() {\n";
  s += "  getent hosts \"$1\" >/dev/null 2>&1 ||\n";
  s += "    python3 -c 'import socket, sys; socket.getaddrinfo(sys.argv[1], None)' \"$1\" "
       ">/dev/null 2>&1\n";
  s += "}\n";
  s += "tries=0\n";
  s += "until resolves \"$MASTER_ADDR\"; do\n";
  s += "  tries=`expr \"$tries\" + 1`\n";
  s += fmt::format("  if [ \"$tries\" -ge {} ]; then\n", kDnsWaitTries);
  s += fmt::format(
      "    echo \"bridge-launch: MASTER_ADDR $MASTER_ADDR did not resolve within {} s\" >&2\n",
      kDnsWaitTries * kDnsWaitSeconds);
  s += "    exit 1\n";
  s += "  fi\n";
  s += fmt::format("  sleep {}\n", kDnsWaitSeconds);
  s += "done\n";
  s += fmt::format("mkdir -p {} 2>/dev/null || true\n", shell_word(in.submission_dir));
  // A TrainJob has no field for the container's working directory: the script goes there.
  // A missing one is made, as a container runtime makes a missing workingDir.
  if (in.api == "trainjob" && in.job.runtime.workdir.is_set())
    s += fmt::format(
        "mkdir -p {0} 2>/dev/null || true\ncd {0} || {{ echo \"bridge-launch: cannot enter "
        "runtime.workdir \"{0} >&2; exit 1; }}\n",
        shell_word(*in.job.runtime.workdir.value));
  // The attempt, 1 first, as on Slurm: the restart label of the pod (0 first) plus one.
  s += "case \"${BRIDGE_RESTART_ATTEMPT:-0}\" in\n"
       "  '' | *[!0-9]*) BRIDGE_ATTEMPT=1 ;;\n"
       "  *) BRIDGE_ATTEMPT=$((${BRIDGE_RESTART_ATTEMPT:-0} + 1)) ;;\n"
       "esac\n";
  s += "export BRIDGE_ATTEMPT\n";
  for (const auto& v : plan.env.vars)
    if (v.expand && !v.secret) s += fmt::format("export {}=\"{}\"\n", v.name, v.value);
  append_env_check(plan, s);
  for (const auto& step : plan.setup_steps) s += step.command + "\n";
  std::string launch;
  std::vector<std::string> launcher = plan.executor_changes.launcher_wrapper;
  if (launcher.empty()) launcher.push_back("torchrun");
  for (const auto& w : launcher) launch += (launch.empty() ? "" : " ") + shell_word(w);
  launch += fmt::format(" --nnodes={} --nproc-per-node={}", in.nodes, in.gpus_per_node);
  launch += " --node-rank=\"$NODE_RANK\" --master-addr=\"$MASTER_ADDR\"";
  launch += " --master-port=\"$MASTER_PORT\" --no-python";
  append_numa_binding(in, s);
  if (plan.watchdog.enabled)
    s += watchdog_script(in, launch);
  else
    s += "exec " + launch + " \"$@\"\n";
  return s;
}

// runtime.code: the tree (the snapshot, or the tree itself when mounted) from the node's file
// system, where the runtime's sources live in the image; a snapshot read-only.
void add_code_volume(const Inputs& in, ordered_json& spec) {
  if (!in.plan.code) return;
  const CodePlan& code = *in.plan.code;
  bool read_only = code.mode == CodeMode::kSnapshot;
  spec["volumes"].push_back(
      {{"name", kK8sCodeVolume}, {"hostPath", {{"path", in.code_dir}, {"type", "Directory"}}}});
  ordered_json mount{{"name", kK8sCodeVolume}, {"mountPath", code.container_path}};
  if (read_only) mount["readOnly"] = true;
  spec["containers"][0]["volumeMounts"].push_back(mount);
}

// runtime.confirm in the pods: the ConfigMap with the program and its request, read-only.
void add_plan_volume(const Inputs& in, ordered_json& spec) {
  if (in.plan_config_map.empty()) return;
  spec["volumes"].push_back(
      {{"name", kK8sPlanVolume}, {"configMap", {{"name", in.plan_config_map}}}});
  spec["containers"][0]["volumeMounts"].push_back(
      {{"name", kK8sPlanVolume}, {"mountPath", kK8sPlanMountPath}, {"readOnly", true}});
}

// How the NVLink-domain placement (Plan::nvlink) is asked for. With Kueue: its
// topology-aware scheduling on the pod set (the whole job in one domain, or slices of
// `segment` pods each in one), only when the recipe sets segment or topology, since Kueue
// admits a topology request only on a flavor with a Topology. Without Kueue: pod affinity
// among the job's pods on the domain label, a preference unless `topology: required` (a
// required one leaves the pods Pending on nodes without the label), and only for the whole
// job (affinity cannot split the pods into blocks). Nothing for a one-node job.
struct NvlinkRequest {
  enum Kind { kNone, kKueueWhole, kKueueSlices, kAffinity, kBlocksNeedKueue, kKueueNotAsked };
  Kind kind = kNone;
  std::string label;
  bool required = false;
};

NvlinkRequest nvlink_request(const Inputs& in) {
  const NvlinkPlacement& p = in.plan.nvlink;
  const auto& kx = in.kx;
  NvlinkRequest r;
  if (p.segment <= 0 || in.nodes < 2 || in.nodes % p.segment != 0) return r;
  r.label = kx.topology_label.get_or(kDefaultTopologyLabel);
  r.required = kx.topology.get_or("preferred") == "required";
  const bool whole = p.segment >= in.nodes;
  if (kx.queue.is_set())
    r.kind = !kx.topology.is_set() && !kx.segment.is_set() ? NvlinkRequest::kKueueNotAsked
             : whole                                       ? NvlinkRequest::kKueueWhole
                                                           : NvlinkRequest::kKueueSlices;
  else
    r.kind = whole ? NvlinkRequest::kAffinity : NvlinkRequest::kBlocksNeedKueue;
  return r;
}

void add_nvlink_placement(const Inputs& in, const ordered_json& pod_labels, ordered_json& pod) {
  const NvlinkRequest r = nvlink_request(in);
  ordered_json& a = pod["metadata"]["annotations"];
  if (r.kind == NvlinkRequest::kKueueWhole) {
    a[r.required ? kKueueRequiredTopology : kKueuePreferredTopology] = r.label;
  } else if (r.kind == NvlinkRequest::kKueueSlices) {
    a[kKueueSliceTopology] = r.label;
    a[kKueueSliceSize] = std::to_string(in.plan.nvlink.segment);
  } else if (r.kind == NvlinkRequest::kAffinity) {
    ordered_json term{{"labelSelector", {{"matchLabels", pod_labels}}}, {"topologyKey", r.label}};
    ordered_json& pod_affinity = pod["spec"]["affinity"]["podAffinity"];
    if (r.required)
      pod_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = ordered_json::array({term});
    else
      pod_affinity["preferredDuringSchedulingIgnoredDuringExecution"] =
          ordered_json::array({{{"weight", 100}, {"podAffinityTerm", term}}});
  }
  if (a.empty()) pod["metadata"].erase("annotations");
}

// The header's line about it, and what is not asked for; false after an error.
bool check_nvlink_placement(const Inputs& in, std::vector<std::string>& header,
                            Diagnostics& diags) {
  const NvlinkPlacement& p = in.plan.nvlink;
  if (p.segment <= 0 || in.nodes < 2) return true;
  if (in.nodes % p.segment != 0) {
    diags.error("k8s-segment-does-not-divide", "executor.kubernetes.segment", p.loc,
                fmt::format("the job's {} node(s) cannot be split into NVLink-domain blocks of {}",
                            in.nodes, p.segment),
                fmt::format("use a segment that divides {}, change -ng, or set "
                            "executor.kubernetes.segment: 0 to place nothing",
                            in.nodes));
    return false;
  }
  const NvlinkRequest r = nvlink_request(in);
  const std::string mode = r.required ? "required" : "preferred";
  std::string how;
  switch (r.kind) {
    case NvlinkRequest::kKueueWhole:
      how = fmt::format("Kueue topology-aware scheduling, {}: {}",
                        r.required ? kKueueRequiredTopology : kKueuePreferredTopology, r.label);
      break;
    case NvlinkRequest::kKueueSlices:
      how = fmt::format("Kueue topology-aware scheduling in slices of {} pods, required: {}",
                        p.segment, r.label);
      if (!r.required)
        diags.info("k8s-slices-required", "executor.kubernetes.topology", in.kx.topology.loc,
                   "Kueue knows no preferred slices: each block of the job is required to fit "
                   "in one NVLink domain");
      break;
    case NvlinkRequest::kAffinity:
      how = fmt::format("pod affinity among the job's pods, {}, topologyKey {}", mode, r.label);
      break;
    case NvlinkRequest::kBlocksNeedKueue:
      diags.info("k8s-segment-needs-kueue", "executor.kubernetes.segment", p.loc,
                 fmt::format("NVLink-domain blocks of {} of the job's {} nodes ({}) need Kueue's "
                             "topology-aware scheduling; without a queue the pods are placed "
                             "without regard to NVLink domains",
                             p.segment, in.nodes, p.source),
                 "set executor.kubernetes.queue to a LocalQueue whose ClusterQueue has a "
                 "topology-aware ResourceFlavor, or executor.kubernetes.segment: 0");
      header.push_back(fmt::format(
          "placement: not by NVLink domain (blocks of {} nodes need Kueue)", p.segment));
      return true;
    case NvlinkRequest::kKueueNotAsked:
      diags.info("k8s-topology-not-requested", "executor.kubernetes.topology", in.kx.queue.loc,
                 fmt::format("the job's nodes are not placed by NVLink domain ({}): Kueue admits "
                             "a topology request only on a flavor with a Topology, so it is "
                             "asked for only when the recipe sets it",
                             p.source),
                 "set executor.kubernetes.topology: required (or preferred) when the queue's "
                 "ResourceFlavor has a Kueue Topology with the domain label as a level");
      header.push_back(
          "placement: not by NVLink domain (set executor.kubernetes.topology to "
          "ask Kueue)");
      return true;
    case NvlinkRequest::kNone:
      return true;
  }
  header.push_back(fmt::format("placement: {} node{} per NVLink domain, {}; {}", p.segment,
                               p.segment == 1 ? "" : "s", p.source, how));
  return true;
}

ordered_json pod_template(const Inputs& in, const std::string& master_addr,
                          const ordered_json& labels, const std::string& subdomain) {
  const auto& kx = in.kx;
  ordered_json container;
  container["name"] = kK8sContainer;
  container["image"] = in.image;
  if (in.job.runtime.workdir.is_set() && in.api != "trainjob")
    container["workingDir"] = *in.job.runtime.workdir.value;
  container["command"] = {"/bin/sh", "-c", k8s_escape_dollars(entrypoint_script(in)),
                          "bridge-launch"};
  ordered_json args = ordered_json::array();
  for (const auto& a : pod_rank_command(in)) args.push_back(k8s_escape_dollars(a));
  container["args"] = args;
  container["env"] = pod_env(in, master_addr);
  container["resources"] = {{"limits", {{"nvidia.com/gpu", in.gpus_per_node}}}};
  container["volumeMounts"] = {{{"name", "dshm"}, {"mountPath", "/dev/shm"}}};

  ordered_json spec;
  spec["restartPolicy"] = "Never";
  if (!subdomain.empty()) spec["subdomain"] = subdomain;
  spec["enableServiceLinks"] = false;
  if (in.plan.executor_changes.preempt_signal_seconds)
    spec["terminationGracePeriodSeconds"] = *in.plan.executor_changes.preempt_signal_seconds;
  if (kx.service_account.is_set()) spec["serviceAccountName"] = *kx.service_account.value;
  if (kx.image_pull_secrets.is_set() && !kx.image_pull_secrets.value->empty()) {
    ordered_json pulls = ordered_json::array();
    for (const auto& s : *kx.image_pull_secrets.value) pulls.push_back({{"name", s}});
    spec["imagePullSecrets"] = pulls;
  }
  spec["containers"] = ordered_json::array({container});
  ordered_json empty_dir{{"medium", "Memory"}};
  if (kx.shm_size.is_set()) empty_dir["sizeLimit"] = *kx.shm_size.value;
  spec["volumes"] = {{{"name", "dshm"}, {"emptyDir", empty_dir}}};
  add_code_volume(in, spec);
  add_plan_volume(in, spec);
  ordered_json pod{{"metadata", {{"labels", labels}}}, {"spec", spec}};
  add_nvlink_placement(in, labels, pod);
  if (in.shape) apply_pod_shape(*in.shape, pod);
  if (in.pod) {
    Diagnostics checked_once;  // render_k8s_manifests checked these settings on a sample pod
    apply_pod_settings(*in.pod, in.kx, pod, checked_once);
  }
  return pod;
}

ordered_json metadata(const Inputs& in, const std::string& name, const ordered_json& labels,
                      const ordered_json& annotations) {
  ordered_json m{{"name", name}};
  if (in.kx.namespace_.is_set()) m["namespace"] = *in.kx.namespace_.value;
  m["labels"] = labels;
  if (!annotations.empty()) m["annotations"] = annotations;
  return m;
}

ordered_json indexed_job_spec(const Inputs& in, ordered_json pod) {
  ordered_json spec{{"completionMode", "Indexed"},
                    {"completions", in.nodes},
                    {"parallelism", in.nodes},
                    {"backoffLimit", 0}};
  if (in.shape && in.shape->active_deadline)
    spec["activeDeadlineSeconds"] = *in.shape->active_deadline;
  spec["template"] = std::move(pod);
  return spec;
}

ordered_json secret_doc(const Inputs& in, bool reveal) {
  ordered_json data = ordered_json::object();
  for (const auto& v : in.plan.env.vars)
    if (v.secret) data[v.name] = reveal ? v.value : redacted_value(v);
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", metadata(in, in.secret_object, in.common_labels, ordered_json::object())},
          {"type", "Opaque"},
          {"stringData", data}};
}

// The plan confirmation's program and request (plan/plan_confirm.h), mounted into every pod.
ordered_json plan_config_map_doc(const Inputs& in) {
  ordered_json data = ordered_json::object();
  for (const auto& [file, text] : plan_confirmation_files(in.plan)) data[file] = text;
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(in, in.plan_config_map, in.common_labels, ordered_json::object())},
          // Never changed after apply: the kubelets of a large job need not watch it.
          {"immutable", true},
          {"data", data}};
}

ordered_json jobset_doc(const Inputs& in, const std::string& name, std::string& master_addr) {
  master_addr = jobset_master_addr(name, kK8sReplicatedJob);
  ordered_json pod = pod_template(in, master_addr, in.common_labels, "");
  ordered_json rjob{{"name", kK8sReplicatedJob},
                    {"replicas", 1},
                    {"template", {{"spec", indexed_job_spec(in, std::move(pod))}}}};
  ordered_json spec;
  spec["failurePolicy"] = {{"maxRestarts", in.retries}};
  // A Job past its deadline has used the job's time: a restart would start it over.
  if (in.shape && in.shape->active_deadline)
    spec["failurePolicy"]["rules"] = {{{"name", "TimeLimit"},
                                       {"action", "FailJobSet"},
                                       {"onJobFailureReasons", {"DeadlineExceeded"}}}};
  spec["network"] = {{"enableDNSHostnames", true}, {"publishNotReadyAddresses", true}};
  spec["replicatedJobs"] = ordered_json::array({rjob});
  if (in.shape) spec["ttlSecondsAfterFinished"] = in.shape->ttl_after_finished;
  return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", metadata(in, name, in.object_labels, in.annotations)},
          {"spec", spec}};
}

// What a TrainJob cannot carry or leaves to its runtime, each an error naming the setting (the
// runtime's value would run instead of the planned one): a pod field (k8s_trainjob.h), the
// CRD's list limits, retries and a TTL (the runtime's JobSet decides both).
void check_trainjob_carries(const Inputs& in, const TrainJobMapping& t, const std::string& runtime,
                            Diagnostics& diags) {
  const auto& kx = in.kx;
  for (const auto& gap : t.gaps) {
    if (gap.runtime_decides) continue;
    const std::string key = trainjob_gap_source(gap.pointer);
    const SourceLoc loc = key == "executor.kubernetes.priority_class" ? kx.priority_class.loc
                          : key == "executor.kubernetes.pod_patch"    ? kx.pod_patch.loc
                                                                      : SourceLoc{};
    diags.error(
        "k8s-trainjob-cannot-carry", key, loc,
        fmt::format("a TrainJob has no field for the pod's {} (set by {}): ClusterTrainingRuntime "
                    "{}'s value would run instead of the planned one",
                    gap.pointer, key, runtime),
        key == "executor.kubernetes.priority_class"
            ? "drop priority_class (with Kueue, its label kueue.x-k8s.io/priority-class in "
              "executor.kubernetes.labels sets the workload's priority), put it into the "
              "runtime's pod template, or use api: jobset"
            : fmt::format("drop it from {}, put it into the runtime's pod template, or use api: "
                          "jobset",
                          key));
  }
  for (const auto& problem : trainjob_limit_problems(t.spec))
    diags.error("k8s-trainjob-too-large", "executor.kubernetes.api", kx.api.loc,
                "the TrainJob would be refused: " + problem,
                "use fewer env variables or arguments (or pod settings), or use api: jobset");
  if (in.retries > 0)
    diags.error(
        "k8s-trainjob-retries", "executor.kubernetes.retries",
        kx.retries.is_set() ? kx.retries.loc : SourceLoc{},
        fmt::format("{} retr{} asked for{}, but a TrainJob cannot set its JobSet's failure policy: "
                    "ClusterTrainingRuntime {}'s decides",
                    in.retries, in.retries == 1 ? "y" : "ies",
                    kx.retries.is_set()
                        ? ""
                        : fmt::format(" (by {})", in.plan.executor_changes.retries_source),
                    runtime),
        "set executor.kubernetes.retries: 0 (and name a runtime whose failurePolicy restarts), or "
        "use api: jobset or api: job");
  if (kx.ttl_after_finished.is_set())
    diags.error("k8s-trainjob-ttl", "executor.kubernetes.ttl_after_finished",
                kx.ttl_after_finished.loc,
                "a TrainJob has no field for its JobSet's ttlSecondsAfterFinished: the "
                "ClusterTrainingRuntime's decides",
                "drop ttl_after_finished (the TrainJob stays until `bridge-launch cancel` deletes "
                "it), or use api: jobset");
  // Kueue writes its flavor's tolerations into a runtime patch of its own, after ours; a
  // strategic merge replaces a list without a merge key, so the recipe's would be lost.
  if (kx.queue.is_set() && kx.tolerations.is_set())
    diags.warning("k8s-trainjob-kueue-tolerations", "executor.kubernetes.tolerations",
                  kx.tolerations.loc,
                  "with a Kueue queue, a ResourceFlavor with tolerations replaces the TrainJob's "
                  "(Kueue's runtime patch comes after bridge-launch's, and a toleration list is "
                  "replaced, not merged)",
                  "put these tolerations on the queue's ResourceFlavor too, or use api: jobset");
}

// api: trainjob: the pod of the JobSet above, carried by a TrainJob's fields (k8s_trainjob.h).
// The runtime's JobSet gets the job's labels (the queue's aside: the TrainJob is the workload)
// and annotations. Those the runtime decides are the header's `left to the runtime` line.
std::optional<ordered_json> trainjob_doc(const Inputs& in, const std::string& name,
                                         std::string& master_addr,
                                         std::vector<std::string>& runtime_decides,
                                         Diagnostics& diags) {
  master_addr = jobset_master_addr(name, kK8sReplicatedJob);
  ordered_json pod = pod_template(in, master_addr, in.common_labels, "");
  const std::string runtime = in.kx.training_runtime.get_or(kTrainerDefaultRuntime);
  ordered_json jobset_labels = in.object_labels;
  jobset_labels.erase(kKueueQueueLabel);
  const ordered_json jobset_metadata{{"labels", jobset_labels}, {"annotations", in.annotations}};
  TrainJobMapping t = trainjob_spec(pod, runtime, in.nodes, in.gpus_per_node, jobset_metadata);
  const size_t errors = diags.count(Severity::kError);
  check_trainjob_carries(in, t, runtime, diags);
  if (diags.count(Severity::kError) != errors) return std::nullopt;
  for (const auto& gap : t.gaps)
    if (gap.runtime_decides)
      runtime_decides.push_back(gap.pointer.substr(gap.pointer.rfind('/') + 1));
  if (in.shape && in.shape->active_deadline)
    t.spec["activeDeadlineSeconds"] = *in.shape->active_deadline;
  return ordered_json{{"apiVersion", kTrainerApiVersion},
                      {"kind", "TrainJob"},
                      {"metadata", metadata(in, name, in.object_labels, in.annotations)},
                      {"spec", std::move(t.spec)}};
}

// The Service and the Job of one attempt of the Job API.
std::vector<ordered_json> job_attempt_docs(const Inputs& in, const std::string& base,
                                           int64_t attempt, std::string& master_addr) {
  std::string job = job_attempt_name(base, attempt);
  std::string service = job_service_name(job);
  master_addr = job_master_addr(job);
  ordered_json labels = in.common_labels;
  labels[kK8sAttemptLabel] = std::to_string(attempt);
  ordered_json selector{{kK8sJobLabel, base}, {kK8sAttemptLabel, std::to_string(attempt)}};
  ordered_json svc{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", metadata(in, service, labels, ordered_json::object())},
      {"spec",
       {{"clusterIP", "None"}, {"publishNotReadyAddresses", true}, {"selector", selector}}}};
  ordered_json spec = indexed_job_spec(in, pod_template(in, master_addr, labels, service));
  if (attempt > 0) spec["suspend"] = true;
  if (in.shape) spec["ttlSecondsAfterFinished"] = in.shape->ttl_after_finished;
  ordered_json annotations = in.annotations;
  annotations[kK8sAttemptsAnnotation] = std::to_string(in.retries + 1);
  if (in.retries > 0 && in.kx.exclude_failed_nodes.get_or(true))
    annotations[kK8sExcludeFailedNodesAnnotation] = "true";
  ordered_json job_labels = in.object_labels;
  job_labels[kK8sAttemptLabel] = std::to_string(attempt);
  ordered_json jobdoc{{"apiVersion", "batch/v1"},
                      {"kind", "Job"},
                      {"metadata", metadata(in, job, job_labels, annotations)},
                      {"spec", spec}};
  return {svc, jobdoc};
}

// "pod_patch: replace /spec/containers/0/resources/requests/memory = \"512Gi\"; ...": what a
// pod_patch changed in the pod (a JSON Patch of before -> after), at most 8 changes shown.
std::vector<std::string> pod_patch_summary(const ordered_json& before, const ordered_json& after) {
  constexpr size_t kShown = 8;
  const ordered_json changes = ordered_json::diff(before, after);
  std::vector<std::string> parts;
  for (const auto& c : changes) {
    if (parts.size() == kShown) break;
    std::string value = c.contains("value") ? c["value"].dump() : "";
    if (value.size() > 60) value = value.substr(0, 57) + "...";
    parts.push_back(fmt::format("{} {}{}", c.value("op", ""), c.value("path", ""),
                                value.empty() ? "" : " = " + value));
  }
  std::vector<std::string> lines;
  if (parts.empty()) return {"pod_patch: changes nothing in the pod"};
  std::string line = "pod_patch:";
  for (const auto& p : parts) {
    if (line.size() + p.size() > 110) {
      lines.push_back(line);
      line = "  ";
    }
    line += (line == "pod_patch:" || line == "  " ? " " : "; ") + p;
  }
  if (changes.size() > kShown) line += fmt::format("; and {} more", changes.size() - kShown);
  lines.push_back(line);
  return lines;
}

// executor.kubernetes' pod settings and the pod's shape, checked (a pod_patch once, on a
// sample pod, so each error is reported once) and pointed at by `in` with the labels and
// annotations of the top object; false after an error.
bool prepare_pod(const Plan& plan, Inputs& in, std::optional<K8sPodSettings>& settings,
                 std::optional<K8sPodShape>& shape, Diagnostics& diags) {
  const auto& kx = in.kx;
  settings = read_pod_settings(kx, plan.job_dir, diags);
  if (!settings) return false;
  Diagnostics reported_by_the_plan;  // build_plan checked executor.kubernetes.network
  auto network = read_k8s_network(kx.network, in.gpus_per_node, reported_by_the_plan);
  if (!network) return false;
  shape =
      read_pod_shape(kx, *settings, *network, in.gpus_per_node, plan.topology->node_gpus, diags);
  if (!shape) return false;
  in.shape = &*shape;
  {
    // A pod_patch is checked once, on a sample pod, so each error is reported once.
    ordered_json sample = pod_template(in, "sample", in.common_labels, "");
    if (!apply_pod_settings(*settings, kx, sample, diags)) return false;
    // The header describes the pod that runs: what the pod_patch changed, after the lines
    // it changed.
    if (!settings->pod_patch.is_null()) {
      ordered_json unpatched = pod_template(in, "sample", in.common_labels, "");
      K8sPodSettings without_patch = *settings;
      without_patch.pod_patch = ordered_json();
      apply_pod_settings(without_patch, kx, unpatched, diags);
      for (auto& line : pod_patch_summary(unpatched, sample)) shape->summary.push_back(line);
    }
  }
  in.pod = &*settings;
  in.object_labels = in.common_labels;
  const ordered_json extra_labels = object_labels(*settings);
  for (const auto& [k, v] : extra_labels.items()) in.object_labels[k] = v;
  for (const auto& [k, v] : settings->annotations.items()) in.annotations[k] = v;
  const CheckpointSpec& checkpoint = plan.job.checkpoint;
  if (checkpoint.is_set() && !on_writable_volume(*settings, *checkpoint.dir.value))
    diags.error("checkpoint-dir-not-mounted", "checkpoint.dir", checkpoint.dir.loc,
                fmt::format("checkpoint.dir `{}` is not on a writable volume of the pods: the "
                            "checkpoints would go away with each pod, and a retry would resume "
                            "from nothing",
                            *checkpoint.dir.value),
                fmt::format("add a writable volume mounted at or above it, e.g. "
                            "`executor.kubernetes.volumes: [{{name: ckpt, mount_path: {}, pvc: "
                            "my-claim}}]`",
                            *checkpoint.dir.value));
  if (!settings->job_dir_on_volume)
    diags.info("k8s-job-dir-not-persistent", "executor.kubernetes.job_dir", kx.job_dir.loc,
               fmt::format("the job dir {} is inside the container: its logs and profiles go "
                           "away with the pods",
                           plan.job_dir),
               fmt::format("to keep them, add a writable volume mounted at or above it, e.g. "
                           "`volumes: [{{name: jobs, mount_path: {}, pvc: my-claim}}]`",
                           kx.job_dir.get_or("/workspace/bridge-launch/jobs")));
  return true;
}

// "the Secret", "the ConfigMap", "the Services": what the executor makes owned by the top
// objects after apply.
std::vector<std::string> owned_objects(const Inputs& in) {
  std::vector<std::string> names;
  if (in.generated_secret) names.emplace_back("the Secret");
  if (!in.plan_config_map.empty()) names.emplace_back("the ConfigMap");
  if (in.api == "job") names.emplace_back("the Services");
  return names;
}

// Whether the pod keeps CAP_SYS_NICE: a container runtime's default seccomp profile allows
// set_mempolicy/mbind (numactl --membind) only with it, and our pods drop every capability
// but those the recipe adds.
bool may_set_memory_policy(const Inputs& in) {
  if (!in.shape) return true;
  const auto& caps = in.shape->container_security;
  const ordered_json::json_pointer add("/capabilities/add");
  if (!caps.contains(add) || !caps.at(add).is_array()) return false;
  for (const auto& c : caps.at(add))
    if (c == "SYS_NICE" || c == "CAP_SYS_NICE") return true;
  return false;
}

// The header's lines about what each pod does beyond the plan's env: NUMA binding, retries,
// and what the TTL removes with the job.
void describe_binding_retries_cleanup(const Inputs& in, const K8sManifests& m,
                                      std::vector<std::string>& header, Diagnostics& diags) {
  if (pods_bind(in))
    header.push_back(fmt::format(
        "binding: every rank on its GPU's NUMA node: {}{} (a rank that cannot bind, e.g. a node "
        "outside the pod's cpuset or no numactl in the image, says why and runs unbound)",
        in.plan.binding.rule,
        may_set_memory_policy(in)
            ? ""
            : "; without CAP_SYS_NICE (executor.kubernetes.security add_capabilities), which "
              "--membind needs under the default seccomp profile, each rank binds its CPUs only"));
  else if (in.plan.binding.mode == BindingMode::kNuma && in.job.runtime.binding.is_set())
    diags.warning("binding-not-applied", "runtime.binding", in.job.runtime.binding.loc,
                  fmt::format("runtime.binding is numa, but each pod takes {} of a node's {} "
                              "GPUs, chosen by the device plugin: its ranks run unbound",
                              in.gpus_per_node, in.plan.topology->node_gpus),
                  "give each pod a whole node (-gn equal to the node's GPUs), or drop "
                  "runtime.binding");
  if (!pods_bind(in) && in.plan.binding.mode == BindingMode::kNuma)
    header.push_back(fmt::format(
        "binding: none: each pod takes {} of a node's {} GPUs, and which ones is the device "
        "plugin's choice (runtime.binding numa needs whole nodes on Kubernetes)",
        in.gpus_per_node, in.plan.topology->node_gpus));
  if (in.api == "job" && m.attempts > 1)
    header.push_back(fmt::format(
        "retries: {} more attempt{} created suspended, started in turn when the previous one "
        "fails{}",
        in.retries, in.retries == 1 ? "" : "s",
        in.kx.exclude_failed_nodes.get_or(true)
            ? ", each away from the nodes the failures were blamed on (exclude_failed_nodes)"
            : ""));
  else if (in.retries > 0 && in.api == "jobset")
    header.push_back(
        fmt::format("retries: the JobSet restarts up to {} time{} in place, on any node (api: job "
                    "retries away from a failed node)",
                    in.retries, in.retries == 1 ? "" : "s"));
  if (std::vector<std::string> owned = owned_objects(in); !owned.empty()) {
    const bool one = owned.size() == 1 && owned[0] != "the Services";
    std::string list;
    for (size_t i = 0; i < owned.size(); ++i)
      list += (i == 0 ? "" : i + 1 == owned.size() ? " and " : ", ") + owned[i];
    header.push_back(fmt::format(
        "cleanup: {} get{} ownerReferences to the {} once applied: {} of the job removes {} "
        "too",
        list, one ? "s" : "", in.api == "job" ? "Jobs" : k8s_api(in.api)->kind,
        in.api == "trainjob" ? "a deletion" : "the TTL or a deletion", one ? "it" : "them"));
  }
}

// What a TrainJob leaves to its ClusterTrainingRuntime. Its restarts are read from the runtime
// at submission (runtime_restarts): the header says what upstream's does.
void describe_trainjob(const Inputs& in, const std::vector<std::string>& runtime_decides,
                       std::vector<std::string>& header) {
  const std::string runtime = in.kx.training_runtime.get_or(kTrainerDefaultRuntime);
  header.push_back(fmt::format(
      "runtime: ClusterTrainingRuntime {}; the Trainer controller makes a JobSet of the same "
      "name (replicated job {}, container {}) from it and this TrainJob; a torch runtime adds "
      "torchrun's PET_* variables to every pod",
      runtime, kK8sReplicatedJob, k8s_api("trainjob")->container));
  std::string decided;
  for (const auto& key : runtime_decides) decided += ", " + key;
  header.push_back(fmt::format(
      "failures: the runtime's: its JobSet's failure policy and TTL, the pods'{} (upstream's "
      "torch-distributed restarts a failed container in place, up to 6 times: restartPolicy "
      "OnFailure, backoffLimit 6; bridge-launch warns at submission when the runtime restarts)",
      decided.empty() ? " restart policy" : decided.substr(1)));
}

// The header lines about secrets. The generated Secret is left out of the printed documents
// unless revealed.
void describe_secrets(const Inputs& in, bool has_secrets, bool reveal,
                      std::vector<std::string>& header, std::vector<ordered_json>& printed) {
  const Plan& plan = in.plan;
  const auto& kx = in.kx;
  if (in.generated_secret && reveal) {
    header.push_back(fmt::format("Secret {} holds the secret values", in.secret_object));
  } else if (in.generated_secret) {
    // No Secret object with placeholder values: this text, applied by hand, must not start
    // pods with "<secret>" as a token. It names the Secret and how to create it instead.
    printed.erase(printed.begin());
    std::string names, literals;
    for (const auto& v : plan.env.vars) {
      if (!v.secret) continue;
      names += (names.empty() ? "" : ", ") + v.name;
      literals += fmt::format(" --from-literal={0}=\"${0}\"", v.name);
    }
    header.push_back(
        fmt::format("Secret {} (not shown): bridge-launch creates it at submission "
                    "with the values of {} from the submitting environment.",
                    in.secret_object, names));
    header.push_back("To apply this text yourself, create it first:");
    header.push_back(fmt::format("  kubectl create secret generic {}{}{}", in.secret_object,
                                 kx.namespace_.is_set() ? " -n " + *kx.namespace_.value : "",
                                 literals));
  } else if (has_secrets) {
    header.push_back(fmt::format("secrets are read from the existing Secret {}", in.secret_object));
  }
}

// The plan confirmation's lines. Its ConfigMap is left out of the printed documents (the
// program is some 65 KB of Python); `kubectl get configmap NAME -o yaml` shows it.
void describe_plan_confirmation(const Inputs& in, bool applied, std::vector<std::string>& header,
                                std::vector<ordered_json>& printed) {
  if (in.plan_config_map.empty()) return;
  if (!applied)
    std::erase_if(printed,
                  [](const ordered_json& d) { return d.value("kind", "") == "ConfigMap"; });
  header.push_back(fmt::format(
      "plan confirmation: every rank starts through {}/{} (ConfigMap {}{}: the program and "
      "the planned values); the verdict goes to {}/{} and rank 0's log",
      kK8sPlanMountPath, kConfirmProgramFile, in.plan_config_map, applied ? "" : ", not shown",
      in.submission_dir, kConfirmVerdictFile));
}

// The JobSet, the Job API's attempts, or the TrainJob; false when a TrainJob cannot carry the
// pod (the diagnostics say why).
bool add_top_objects(const Inputs& in, K8sManifests& m, std::vector<std::string>& runtime_decides,
                     Diagnostics& diags) {
  if (in.api == "job") {
    for (int64_t a = 0; a < m.attempts; ++a) {
      std::string addr;
      for (auto& d : job_attempt_docs(in, m.name, a, addr)) m.docs.push_back(std::move(d));
      if (a == 0) m.master_addr = addr;
    }
  } else if (in.api == "trainjob") {
    auto doc = trainjob_doc(in, m.name, m.master_addr, runtime_decides, diags);
    if (!doc) return false;
    m.docs.push_back(std::move(*doc));
  } else {
    m.docs.push_back(jobset_doc(in, m.name, m.master_addr));
  }
  return true;
}

// The header's first lines: what is submitted, its name, the rendezvous, what a TrainJob
// leaves to its runtime, and the pod shape.
std::vector<std::string> header_head(const Inputs& in, const K8sManifests& m,
                                     const std::string& suffix, const K8sPodShape& shape,
                                     const std::vector<std::string>& runtime_decides) {
  std::vector<std::string> header{
      fmt::format("bridge-launch: Kubernetes manifests, api: {} ({}), {} node{} x {} GPU{}", in.api,
                  k8s_api(in.api)->described, in.nodes, in.nodes == 1 ? "" : "s", in.gpus_per_node,
                  in.gpus_per_node == 1 ? "" : "s"),
      fmt::format("object: {} (name suffix {}: from the job id, new for every submission)",
                  m.scheduler_id, suffix),
      fmt::format("rendezvous: MASTER_ADDR={} MASTER_PORT={}", m.master_addr, kK8sMasterPort)};
  if (in.api == "trainjob") describe_trainjob(in, runtime_decides, header);
  for (const auto& line : shape.summary) {
    // A TrainJob has no TTL field: the pod shape's lifetime line says what the TTL would do.
    if (in.api == "trainjob" && line.starts_with("lifetime: "))
      header.push_back(line.substr(0, line.find("; objects deleted")) +
                       "; the TrainJob stays until it is deleted (bridge-launch cancel): it has "
                       "no TTL");
    else
      header.push_back(line);
  }
  return header;
}

}  // namespace

std::string k8s_escape_dollars(const std::string& s) {
  // The text between two `$` is copied whole: the pod's command carries programs of tens
  // of KB, which a byte at a time cost a million instructions per render.
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  size_t from = 0;
  for (size_t at = s.find('$'); at != std::string::npos; at = s.find('$', at + 1)) {
    out.append(s, from, at + 1 - from);
    from = at + 1;
    if (at + 1 < s.size() && (s[at + 1] == '$' || s[at + 1] == '(')) out += '$';
  }
  out.append(s, from, std::string::npos);
  return out;
}

std::optional<K8sManifests> render_k8s_manifests(const Plan& plan, const K8sRenderOptions& options,
                                                 Diagnostics& diags) {
  if (!plan.topology) return std::nullopt;
  const JobSpec& r = plan.job;
  const auto& kx = r.executor.kubernetes;
  Inputs in{plan,
            r,
            kx,
            kx.api.get_or("jobset"),
            plan.topology->nodes,
            plan.topology->gpus_per_node,
            0,
            {},
            {},
            false,
            {},
            {},
            {},
            nullptr,
            nullptr,
            plan.code ? code_host_dir(*plan.code, options.job_id) : std::string(),
            {},
            {}};
  in.retries = effective_retries(plan);
  if (!check_inputs(plan, in, diags)) return std::nullopt;

  K8sManifests m;
  m.api = in.api;
  // A TrainJob's JobSet has its name: its pods are named as a JobSet's.
  size_t reserved =
      in.api == "job" ? job_reserved(in.nodes, in.retries) : jobset_reserved(in.nodes);
  m.name = k8s_base_name(r.name.get_or("job"), options.suffix, reserved);
  m.scheduler_id = in.api + "/" + m.name;
  m.attempts = in.api == "job" ? in.retries + 1 : 1;
  in.common_labels = {{kK8sManagedByKey, kK8sManagedBy}, {kK8sJobLabel, m.name}};
  in.submission_dir = plan.job_dir + "/" + m.name;
  m.submission_dir = in.submission_dir;
  if (plan.confirm) in.plan_config_map = m.plan_config_map = m.name + "-plan";
  in.annotations = {{kK8sRecipeAnnotation, r.name.get_or("")}};
  std::optional<K8sPodSettings> pod_settings;
  std::optional<K8sPodShape> shape;
  if (!prepare_pod(plan, in, pod_settings, shape, diags)) return std::nullopt;
  std::vector<std::string> placement;
  if (!check_nvlink_placement(in, placement, diags)) return std::nullopt;

  bool has_secrets = false;
  for (const auto& v : plan.env.vars) has_secrets = has_secrets || v.secret;
  if (has_secrets) {
    in.generated_secret = !kx.secret_name.is_set();
    in.secret_object = in.generated_secret ? m.name + "-env" : *kx.secret_name.value;
    if (in.generated_secret) {
      m.secret_object = in.secret_object;
      m.docs.push_back(secret_doc(in, options.reveal_secrets));
    }
  }
  if (!in.plan_config_map.empty()) m.docs.push_back(plan_config_map_doc(in));
  std::vector<std::string> runtime_decides;
  if (!add_top_objects(in, m, runtime_decides, diags)) return std::nullopt;

  std::vector<std::string> header = header_head(in, m, options.suffix, *shape, runtime_decides);
  for (auto& line : placement) header.push_back(std::move(line));
  describe_binding_retries_cleanup(in, m, header, diags);
  std::vector<ordered_json> printed = m.docs;
  describe_secrets(in, has_secrets, options.reveal_secrets, header, printed);
  describe_plan_confirmation(in, options.reveal_secrets, header, printed);
  m.yaml = to_yaml_stream(printed, header);
  return m;
}

}  // namespace bridge
