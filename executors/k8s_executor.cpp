// The Kubernetes executor: manifests from k8s_render.h, applied and followed with kubectl
// through the CommandRunner seam (the user's kubeconfig, context and auth plugins unchanged).
//
// - render: the manifests, every name ending in a 4-hex suffix derived from the job id the CLI
//   fixed (k8s_names.h), secret values redacted in what --dry-run shows. The same render
//   keeps the text with the real values, which only `kubectl apply` reads.
// - submit: `kubectl [--context C] [--namespace N] apply -f -` with that text on stdin.
//   If apply fails, or reports that one of our objects already existed, the objects it
//   reported as created are deleted again (`kubectl delete --ignore-not-found -f -`, the
//   redacted manifests of exactly those objects) and the job is not accepted (exit 1, with
//   kubectl's own message). Waiting (--wait) is the CLI's: it polls status().
// - status: one `kubectl get <the top objects' kinds> -l app.kubernetes.io/managed-by=
//   bridge-launch -o json` per (context, namespace) for any number of jobs (a TrainJob's with
//   the JobSet the Trainer controller made for it, which carries the job's labels); Job API
//   attempts: when the current attempt failed and another is left, it is started with one
//   `kubectl patch` (unsuspend; with exclude_failed_nodes also the node affinity that keeps it
//   off the node blamed, found by one `kubectl get pods` of the failed attempt) and the job
//   reports PENDING. After apply, the Secret, the ConfigMap and the Services get
//   ownerReferences (`kubectl get` + `kubectl patch`).
// - status JOB: the plan confirmation's verdict from the job dir, else from the first MiB of
//   pod 0's log (`kubectl logs --limit-bytes`); the Job API's attempts from one
//   `kubectl get jobs,pods`.
// - logs: `kubectl get pods -l bridge-launch/job=<name>` picks the newest attempt's pods;
//   `kubectl logs <pod> -c <container>` per pod (`trainer`; a TrainJob's runtime's `node`) (`--rank
//   N` -> the pod of node N / gpus_per_node);
//   `-f` polls with --timestamps/--since-time until the job ends.
// - cancel: `kubectl delete <kinds> -l bridge-launch/job=<name> --ignore-not-found` (the top
//   objects, the Secret, the ConfigMap, the Services).
// kubectl's messages are shown with any secret value of the plan replaced by <secret>.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>

#include "base/exit_codes.h"
#include "base/json_limits.h"
#include "base/secret_scrub.h"
#include "base/utf8.h"
#include "executors/executor.h"
#include "executors/k8s_names.h"
#include "executors/k8s_render.h"
#include "executors/k8s_status.h"
#include "executors/k8s_trainjob.h"
#include "executors/k8s_yaml.h"
#include "executors/rank_logs.h"
#include "jobs/job_watchdog.h"
#include "system/command_runner.h"

namespace bridge {

namespace {

// The training container of the job's pods (a Trainer runtime names it `node`).
std::string container_of(const JobRecord& job) {
  auto ref = parse_k8s_scheduler_id(job.scheduler_id);
  const K8sApi* api = ref ? k8s_api(ref->api) : nullptr;
  return api ? api->container : kK8sContainer;
}

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::chrono::milliseconds kApplyTimeout{180000};
constexpr std::chrono::milliseconds kQueryTimeout{60000};
constexpr std::chrono::milliseconds kFollowInterval{2000};
// How much of pod 0's log `status` reads for the plan confirmation's line: the runtime prints
// it when it has built its config, before training, after the imports' and torchrun's lines.
constexpr size_t kVerdictLogHeadBytes = size_t{1} << 20;

std::vector<std::string> kubectl(const std::string& context, const std::string& ns,
                                 std::initializer_list<std::string> rest) {
  std::vector<std::string> argv{"kubectl"};
  if (!context.empty()) argv.insert(argv.end(), {"--context", context});
  if (!ns.empty()) argv.insert(argv.end(), {"--namespace", ns});
  argv.insert(argv.end(), rest);
  return argv;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t first = s.find_first_not_of("\n ");
  return first == std::string::npos ? std::string() : s.substr(first);
}

// kubectl's own words about a failed command.
std::string kubectl_message(const CommandResult& r, const std::vector<std::string>& secrets = {}) {
  if (!r.started)
    return fmt::format("kubectl could not be started ({}); install kubectl or put it on PATH",
                       trim(r.err));
  std::string msg = trim(r.err);
  if (msg.empty()) msg = trim(r.out);
  if (r.timed_out) msg = "kubectl timed out" + (msg.empty() ? "" : ": " + msg);
  if (r.cancelled) msg = "kubectl was stopped: bridge-launch was interrupted";
  if (msg.empty()) msg = fmt::format("kubectl exited with code {}", r.exit_code);
  return scrub_secrets(msg, secrets);
}

std::vector<std::string> secret_values(const Plan& plan) {
  std::vector<std::string> v;
  for (const auto& e : plan.env.vars)
    if (e.secret && !e.value.empty()) v.push_back(e.value);
  return v;
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// The documents kubectl apply reported with `verb` ("created", "configured", "unchanged").
// kubectl prints `<kind>[.<group>]/<name> <verb>` per object.
std::vector<ordered_json> reported(const std::string& apply_out,
                                   const std::vector<ordered_json>& docs, const std::string& verb) {
  std::vector<ordered_json> hits;
  std::istringstream in(apply_out);
  std::set<std::pair<std::string, std::string>> seen;
  for (std::string line; std::getline(in, line);) {
    size_t slash = line.find('/');
    size_t space = line.find(' ', slash == std::string::npos ? 0 : slash);
    if (slash == std::string::npos || space == std::string::npos) continue;
    if (trim(line.substr(space + 1)).rfind(verb, 0) != 0) continue;
    std::string kind = lower(line.substr(0, std::min(line.find('.'), slash)));
    seen.insert({kind, line.substr(slash + 1, space - slash - 1)});
  }
  for (const auto& d : docs)
    if (seen.count({lower(d.value("kind", "")), d["metadata"].value("name", "")}))
      hits.push_back(d);
  return hits;
}

std::string object_list(const std::vector<ordered_json>& docs) {
  std::vector<std::string> names;
  for (const auto& d : docs)
    names.push_back(lower(d.value("kind", "")) + "/" + d["metadata"].value("name", ""));
  return fmt::format("{}", fmt::join(names, ", "));
}

// "2024-05-01T10:00:00.5Z" -> "2024-05-01T10:00:00.500000000Z": comparable as text.
std::string canonical_timestamp(const std::string& ts) {
  size_t dot = ts.find('.');
  std::string base = ts.substr(0, std::min(dot, ts.find('Z')));
  std::string frac;
  if (dot != std::string::npos)
    for (size_t i = dot + 1; i < ts.size() && ts[i] >= '0' && ts[i] <= '9'; ++i) frac += ts[i];
  frac.resize(9, '0');
  return base + "." + frac + "Z";
}

struct LogCursor {
  std::string since;              // kubectl's timestamp of the newest line printed
  std::string canonical;          // the same, comparable
  std::multiset<std::string> at;  // lines printed with exactly that timestamp
};

class KubernetesExecutor : public Executor {
 public:
  explicit KubernetesExecutor(const ExecutorServices& services) : services_(services) {}

  std::unique_ptr<PreparedJob> render(const Plan& plan, const SubmissionIdentity& identity,
                                      Diagnostics& diags) const override {
    K8sRenderOptions opts;
    opts.suffix = k8s_submission_suffix(identity.job_id);
    opts.job_id = identity.job_id;
    auto shown = render_k8s_manifests(plan, opts, diags);
    if (!shown) return nullptr;
    opts.reveal_secrets = true;
    Diagnostics same_checks;  // the render above already reported them
    auto applied = render_k8s_manifests(plan, opts, same_checks);
    if (!applied) return nullptr;
    std::string text = shown->yaml;
    // The applied text (real secret values) lives only in the closure, never in the output.
    return std::make_unique<BoundJob>(
        std::move(text),
        [this, &plan, manifests = std::move(*shown), applied_yaml = std::move(applied->yaml)](
            const SubmitOptions&, std::ostream&, Diagnostics& submit_diags,
            const OnAccepted& accepted) {
          return apply(plan, manifests, applied_yaml, submit_diags, accepted);
        });
  }

  SubmitResult apply(const Plan& plan, const K8sManifests& shown, const std::string& applied_yaml,
                     Diagnostics& diags, const OnAccepted& on_accepted) const {
    SubmitResult res;
    res.exit_code = kExitRuntime;
    const auto& kx = plan.job.executor.kubernetes;
    std::string ctx = kx.context.get_or(""), ns = kx.namespace_.get_or("");
    std::vector<std::string> secrets = secret_values(plan);
    if (shown.api == "trainjob" && !check_training_runtime(kx, ctx, ns, diags)) {
      res.exit_code = kExitUsage;
      return res;
    }

    CommandResult r = run(kubectl(ctx, ns, {"apply", "-f", "-"}), applied_yaml, kApplyTimeout);
    std::vector<ordered_json> existing = reported(r.out, shown.docs, "configured");
    for (auto& d : reported(r.out, shown.docs, "unchanged")) existing.push_back(std::move(d));
    if (!r.ok() || !existing.empty()) {
      std::vector<ordered_json> created =
          r.timed_out ? shown.docs : reported(r.out, shown.docs, "created");
      std::string why =
          r.ok() ? fmt::format("{} already existed (a name collision); nothing new was started",
                               object_list(existing))
                 : kubectl_message(r, secrets);
      diags.error("kubectl-apply-failed", "", {},
                  fmt::format("kubectl apply failed: {}{}", why, clean_up(ctx, ns, created)),
                  "fix the cause and submit again; nothing of this submission is left running");
      return res;
    }
    for (const auto& line : split_lines(scrub_secrets(trim(r.out), secrets)))
      services_.log.info("kubectl: {}", line);
    own_dependents(shown, ctx, ns, diags);
    res.exit_code = kExitOk;
    res.accepted = true;
    res.scheduler_id = shown.scheduler_id;
    res.context = ctx;
    res.namespace_ = ns;
    res.job_dir = shown.submission_dir;
    if (on_accepted) on_accepted(res);
    return res;
  }

  // api: trainjob: the runtime the TrainJob names, read before anything is applied. A missing
  // one is an error (nothing is created); one that restarts failed ranks, where the plan fails
  // at once, a warning that says how (k8s_trainjob.h runtime_restarts). A runtime that cannot
  // be read (no permission to get cluster-scoped objects) is left to the Trainer's webhook.
  bool check_training_runtime(const KubernetesExecutorSpec& kx, const std::string& ctx,
                              const std::string& ns, Diagnostics& diags) const {
    const std::string name = kx.training_runtime.get_or(kTrainerDefaultRuntime);
    CommandResult r = run(kubectl(
        ctx, ns, {"get", "clustertrainingruntimes.trainer.kubeflow.org", name, "-o", "json"}));
    if (!r.ok()) {
      if (r.err.find("NotFound") == std::string::npos) {
        services_.log.debug("not checking ClusterTrainingRuntime {}: {}", name, kubectl_message(r));
        return true;
      }
      diags.error("k8s-trainjob-runtime-missing", "executor.kubernetes.training_runtime",
                  kx.training_runtime.loc,
                  fmt::format("ClusterTrainingRuntime {} does not exist in the cluster: the "
                              "Trainer would refuse the TrainJob; nothing was applied",
                              name),
                  "`kubectl get clustertrainingruntimes` lists those there; name one with "
                  "executor.kubernetes.training_runtime");
      return false;
    }
    if (!json_depth_within(r.out)) return true;
    json runtime = json::parse(r.out, nullptr, false);
    if (runtime.is_discarded()) return true;
    if (std::string restarts = runtime_restarts(runtime); !restarts.empty())
      diags.warning("k8s-trainjob-runtime-restarts", "executor.kubernetes.training_runtime",
                    kx.training_runtime.loc,
                    fmt::format("ClusterTrainingRuntime {} retries failed ranks where the plan "
                                "fails at once: {}; such a restart runs the job again as attempt "
                                "1",
                                name, printable_text(restarts, 400)),
                    "name a runtime whose pods say restartPolicy: Never and whose Job says "
                    "backoffLimit: 0, or use api: jobset with executor.kubernetes.retries");
    return true;
  }

  // The objects a submission generates besides its top objects (the Secret, the plan
  // confirmation's ConfigMap, the Job API's headless Services) get ownerReferences to them
  // once they exist (their uids are known only then), so that the TTL or a deletion of the
  // job removes them too: the garbage collector deletes a dependent once all of its owners are
  // gone. The Secret and the ConfigMap are owned by every top object (all attempts of the Job
  // API), a Service by its attempt's Job. A failure is a warning: the job runs, and `cancel`
  // deletes the objects by label.
  void own_dependents(const K8sManifests& shown, const std::string& ctx, const std::string& ns,
                      Diagnostics& diags) const {
    std::vector<ordered_json> dependents;
    for (const auto& d : shown.docs) {
      std::string kind = d.value("kind", "");
      if (kind == "Secret" || kind == "ConfigMap" || kind == "Service") dependents.push_back(d);
    }
    if (dependents.empty()) return;
    auto warn = [&](const std::string& what, const std::string& why) {
      diags.warning("k8s-owner-not-set", "", {},
                    fmt::format("{} of job {} got no owner ({}): a deletion of the job (or "
                                "its TTL) leaves it behind",
                                what, shown.name, why),
                    "`bridge-launch cancel` deletes it, or `kubectl delete` it by hand");
    };
    const std::string kinds = k8s_api(shown.api)->resource;
    CommandResult got = run(
        kubectl(ctx, ns,
                {"get", kinds, "-l", fmt::format("{}={}", kK8sJobLabel, shown.name), "-o", "json"}),
        "", kQueryTimeout);
    auto items = got.ok() ? parse_kubectl_items(got.out)
                          : StatusOr<std::vector<json>>(Status::failed(kubectl_message(got)));
    if (!items.ok()) return warn(object_list(dependents), items.why());
    std::map<std::string, json> owner_of;  // top object name -> its ownerReference
    for (const auto& o : *items) {
      std::string name = o["metadata"].value("name", ""), uid = o["metadata"].value("uid", "");
      if (name.empty() || uid.empty()) continue;
      owner_of[name] = {{"apiVersion", o.value("apiVersion", "")},
                        {"kind", o.value("kind", "")},
                        {"name", name},
                        {"uid", uid}};
    }
    for (const auto& d : dependents) {
      const std::string kind = d.value("kind", ""), name = d["metadata"].value("name", "");
      json owners = json::array();
      for (const auto& [owner, ref] : owner_of)
        if (kind != "Service" || owner == name) owners.push_back(ref);
      std::string what = fmt::format("{} {}", kind, name);
      if (owners.empty()) {
        warn(what, "its owner was not found");
        continue;
      }
      json patch = {{"metadata", {{"ownerReferences", owners}}}};
      CommandResult r =
          run(kubectl(ctx, ns, {"patch", lower(kind), name, "--type=merge", "-p", patch.dump()}),
              "", kQueryTimeout);
      if (!r.ok()) warn(what, kubectl_message(r));
    }
  }

  std::vector<JobStatus> status(const std::vector<JobRecord>& jobs,
                                Diagnostics& diags) const override {
    std::vector<JobStatus> result(jobs.size());
    std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!parse_k8s_scheduler_id(jobs[i].scheduler_id)) {
        result[i].detail = "no Kubernetes object recorded for this job";
        continue;
      }
      groups[{jobs[i].context, jobs[i].namespace_}].push_back(i);
    }
    for (const auto& [where, members] : groups) {
      std::set<std::string> wanted;  // a TrainJob's status needs its JobSet too
      for (size_t i : members) {
        auto ref = parse_k8s_scheduler_id(jobs[i].scheduler_id);
        wanted.insert(ref->api);
        if (ref->api == "trainjob") wanted.insert("jobset");
      }
      std::string kinds;
      for (const K8sApi& api : k8s_apis())
        if (wanted.count(api.name)) kinds += (kinds.empty() ? "" : ",") + std::string(api.resource);
      CommandResult r =
          run(kubectl(where.first, where.second,
                      {"get", kinds, "-l", fmt::format("{}={}", kK8sManagedByKey, kK8sManagedBy),
                       "-o", "json"}));
      StatusOr<std::vector<json>> items =
          r.ok() ? parse_kubectl_items(r.out) : Status::failed(kubectl_message(r));
      if (!items.ok()) {
        const std::string& msg = items.why();
        diags.error("kubectl-failed", "", {}, "kubectl get failed: " + msg);
        for (size_t i : members) result[i].detail = "kubectl get failed: " + msg;
        continue;
      }
      for (size_t i : members)
        result[i] =
            status_of(jobs[i], *parse_k8s_scheduler_id(jobs[i].scheduler_id), *items, diags);
      add_kueue_reasons(where, members, jobs, *items, result);
    }
    return result;
  }

  // A PENDING job in a Kueue queue says why Kueue holds it. One more `kubectl get` for the
  // group, and only when such a job is in it; without Kueue (no Workload kind) the plain
  // PENDING detail stays.
  void add_kueue_reasons(const std::pair<std::string, std::string>& where,
                         const std::vector<size_t>& members, const std::vector<JobRecord>& jobs,
                         const std::vector<json>& items, std::vector<JobStatus>& result) const {
    struct Queued {
      size_t index;
      std::string kind, name, queue;
    };
    std::vector<Queued> queued;
    for (size_t i : members) {
      if (result[i].state != JobState::kPending) continue;
      auto ref = parse_k8s_scheduler_id(jobs[i].scheduler_id);
      const std::string kind = k8s_api(ref->api)->kind;
      if (const json* obj = find_object(kind, ref->name, items))
        if (std::string q = kueue_queue_of(*obj); !q.empty())
          queued.push_back({i, kind, ref->name, q});
    }
    if (queued.empty()) return;
    CommandResult r =
        run(kubectl(where.first, where.second, {"get", "workloads.kueue.x-k8s.io", "-o", "json"}));
    StatusOr<std::vector<json>> workloads =
        r.ok() ? parse_kubectl_items(r.out) : Status::failed(kubectl_message(r));
    if (!workloads.ok()) return;
    for (const auto& q : queued)
      if (std::string d = kueue_wait_detail(q.kind, q.name, q.queue, *workloads); !d.empty())
        result[q.index].detail = d;
  }

  int logs(const JobRecord& job, const LogQuery& query, std::ostream& out, std::ostream& notes,
           Diagnostics& diags) const override {
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref) {
      diags.error("k8s-no-object", "", {},
                  fmt::format("job {} has no Kubernetes object recorded", job.id));
      return kExitRuntime;
    }
    if (!check_log_query(job, query, diags)) return kExitUsage;
    // A pod is a node: a rank's lines are in its node's pod (torchrun starts the ranks).
    std::optional<int64_t> node;
    if (query.rank) node = *query.rank / ranks_per_node(job);
    if (query.node) node = *query.node;
    if (!query.follow) return print_logs_once(job, *ref, node, query, out, diags);
    return follow_logs(job, *ref, node, query, out, notes, diags);
  }

  std::vector<std::string> rank_log_tail(const JobRecord& job, int rank,
                                         size_t max_lines) const override {
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref) return {};
    Diagnostics quiet;  // progress is best effort: no pod yet is no error
    auto pods = list_pods(job, *ref, rank / ranks_per_node(job), quiet);
    if (!pods || pods->empty()) return {};
    CommandResult r = run(kubectl(job.context, job.namespace_,
                                  {"logs", pods->front().name, "-c", container_of(job),
                                   fmt::format("--tail={}", max_lines)}));
    return r.ok() ? split_lines(r.out) : std::vector<std::string>{};
  }

  // Job API attempts, from the API (the Jobs and pods are kept until the TTL).
  std::vector<std::string> attempt_history(const JobRecord& job) const override {
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref || ref->api != "job") return {};
    CommandResult r = run(kubectl(job.context, job.namespace_,
                                  {"get", "jobs.batch,pods", "-l",
                                   fmt::format("{}={}", kK8sJobLabel, ref->name), "-o", "json"}));
    StatusOr<std::vector<json>> items =
        r.ok() ? parse_kubectl_items(r.out) : Status::failed(kubectl_message(r));
    return items.ok() ? job_api_attempt_lines(ref->name, *items) : std::vector<std::string>{};
  }

  // The job dir's verdict where it is visible here (a shared volume), else the line rank 0
  // printed at the head of pod 0's log (the newest attempt's pod).
  std::optional<PlanConfirmationVerdict> plan_confirmation(const JobRecord& job) const override {
    if (auto verdict = Executor::plan_confirmation(job)) return verdict;
    if (!recorded_plan_confirms(job.plan_json)) return std::nullopt;
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref) return std::nullopt;
    Diagnostics quiet;  // best effort, as the progress: no pod yet is no verdict yet
    auto pods = list_pods(job, *ref, 0, quiet);
    if (!pods || pods->empty()) return std::nullopt;
    CommandResult r = run(kubectl(job.context, job.namespace_,
                                  {"logs", pods->front().name, "-c", container_of(job),
                                   fmt::format("--limit-bytes={}", kVerdictLogHeadBytes)}));
    return r.ok() ? find_plan_confirmation_line(r.out) : std::nullopt;
  }

  // One unit per pod (a pod is a node: torchrun starts its ranks), ordered by the time its
  // container ended; the pod's node and the container's exit code or signal come from the
  // pod objects, the lines from `kubectl logs --tail`.
  FailureEvidence failure_evidence(const JobRecord& job, Diagnostics& diags) const override {
    FailureEvidence e;
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref) return e;
    auto pods = list_pods(job, *ref, std::nullopt, diags);
    if (!pods) return e;
    std::vector<std::pair<std::string, size_t>> ended;  // (finishedAt, unit)
    // Logs of every pod for a job of up to 16 nodes; of the failed ones only beyond that
    // (one `kubectl logs` each, in series).
    bool all_logs = pods->size() <= 16;
    for (const auto& p : *pods) {
      RankEvidence u;
      int64_t gpn = std::max(1, job.ranks) / std::max(1, job.nodes);
      u.label = gpn > 1 ? fmt::format("node {} (ranks {}-{})", p.index, p.index * gpn,
                                      p.index * gpn + gpn - 1)
                        : fmt::format("node {}", p.index);
      u.node = static_cast<int>(p.index);
      u.host = p.node_name;
      u.log_path = "pod " + p.name;
      if (p.exit_code) u.exit_code = static_cast<int>(*p.exit_code);
      if (p.signal) u.signal = static_cast<int>(*p.signal);
      // A pod that failed as a whole (evicted, its node lost) has no container exit status.
      if (p.phase == "Failed" && !u.failed())
        u.ended = p.pod_reason.empty() ? "pod failed" : "pod " + p.pod_reason;
      if (!p.pod_reason.empty())
        e.scheduler_lines.push_back(fmt::format("pod {} ({}): {}", p.name, u.label, p.pod_reason));
      if (!p.reason.empty() && p.reason != "Completed" && p.reason != "Error")
        e.scheduler_lines.push_back(
            fmt::format("pod {} ({}): {}{}", p.name, u.label, p.reason,
                        p.exit_code ? fmt::format(", exit code {}", *p.exit_code) : ""));
      // The watchdog's verdict (a pod that holds a progress rank): the job-level `hang`.
      for (const WatchdogEvent& w : parse_watchdog_events(p.message))
        e.scheduler_lines.push_back(fmt::format("the watchdog of pod {} ({}): {}", p.name, u.label,
                                                watchdog_event_text(w)));
      if (all_logs || u.failed()) {
        CommandResult r = run(kubectl(
            job.context, job.namespace_,
            {"logs", p.name, "-c", container_of(job), fmt::format("--tail={}", kTriageTailLines)}));
        if (r.ok()) u.lines = split_lines(r.out);
      }
      // No finish time known (a pod that failed as a whole): after those with one.
      if (u.failed())
        ended.emplace_back(p.finished_at.empty() ? "~" : p.finished_at, e.units.size());
      e.units.push_back(std::move(u));
    }
    std::stable_sort(ended.begin(), ended.end());
    for (size_t i = 0; i < ended.size(); ++i)
      e.units[ended[i].second].failure_order = static_cast<int>(i);
    if (!ended.empty()) e.order_source = "the pods' container finish times";
    return e;
  }

  int cancel(const JobRecord& job, Diagnostics& diags) const override {
    auto ref = parse_k8s_scheduler_id(job.scheduler_id);
    if (!ref) {
      diags.error("k8s-no-object", "", {},
                  fmt::format("job {} has no Kubernetes object recorded", job.id));
      return kExitRuntime;
    }
    std::string kinds = k8s_api(ref->api)->cancel_kinds;
    CommandResult r =
        run(kubectl(job.context, job.namespace_,
                    {"delete", kinds, "-l", fmt::format("{}={}", kK8sJobLabel, ref->name),
                     "--ignore-not-found", "--wait=false"}));
    if (!r.ok()) {
      diags.error("kubectl-delete-failed", "", {}, "kubectl delete failed: " + kubectl_message(r));
      return kExitRuntime;
    }
    for (const auto& line : split_lines(trim(r.out))) services_.log.info("kubectl: {}", line);
    return kExitOk;
  }

 private:
  CommandResult run(std::vector<std::string> argv, std::string stdin_text = {},
                    std::chrono::milliseconds timeout = kQueryTimeout) const {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.stdin_text = std::move(stdin_text);
    spec.timeout = timeout;
    services_.log.debug("running: {}", fmt::join(spec.argv, " "));
    return services_.runner.run(spec);
  }

  static std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  // Deletes what a failed apply created; returns a sentence for the error message.
  std::string clean_up(const std::string& ctx, const std::string& ns,
                       const std::vector<ordered_json>& created) const {
    if (created.empty()) return "; nothing had been created";
    CommandResult d =
        run(kubectl(ctx, ns, {"delete", "--ignore-not-found", "--wait=false", "-f", "-"}),
            to_yaml_stream(created));
    if (d.ok()) return fmt::format("; deleted what it had created ({})", object_list(created));
    return fmt::format(
        "; deleting what it had created ({}) failed too: {}; delete them by hand "
        "with `kubectl delete`",
        object_list(created), kubectl_message(d));
  }

  JobStatus status_of(const JobRecord& rec, const K8sJobRef& ref, const std::vector<json>& items,
                      Diagnostics& diags) const {
    JobStatus st;
    std::string where =
        rec.namespace_.empty() ? "the current namespace" : "namespace " + rec.namespace_;
    if (ref.api == "jobset") {
      if (const json* js = find_jobset(ref.name, items)) return jobset_status(*js);
      st.detail = fmt::format("JobSet {} not found in {} (deleted?)", ref.name, where);
      return st;
    }
    if (ref.api == "trainjob") {
      if (const json* tj = find_object(k8s_api(ref.api)->kind, ref.name, items))
        return trainjob_status(*tj, find_jobset(ref.name, items));
      st.detail = fmt::format("TrainJob {} not found in {} (deleted?)", ref.name, where);
      return st;
    }
    K8sAttemptStatus a = job_api_status(ref.name, items);
    if (!a.found) {
      st.detail = fmt::format("Job {} not found in {} (deleted?)", ref.name, where);
      return st;
    }
    if (!a.start_next.empty()) {
      const json* next = find_job(a.start_next, items);
      std::vector<std::string> excluded = nodes_to_exclude(rec, ref, a, next, items);
      json patch = next_attempt_patch(next ? *next : json::object(), excluded);
      CommandResult r =
          run(kubectl(rec.context, rec.namespace_,
                      {"patch", "jobs.batch", a.start_next, "--type=merge", "-p", patch.dump()}));
      if (!r.ok()) {
        diags.error("kubectl-patch-failed", "", {},
                    fmt::format("could not start the next attempt {}: {}", a.start_next,
                                kubectl_message(r)));
        st.detail = a.status.detail + " (starting it failed)";
        return st;
      }
      services_.log.info("job {}: started the next attempt, Job {}{}", rec.id, a.start_next,
                         excluded.empty()
                             ? std::string()
                             : fmt::format(" (excluding {})", fmt::join(excluded, ",")));
    }
    return a.status;
  }

  // The nodes the next attempt stays off (exclude_failed_nodes, rendered as an annotation on
  // its Job): those the failed attempt excluded, and the node blamed for its failure.
  std::vector<std::string> nodes_to_exclude(const JobRecord& rec, const K8sJobRef& ref,
                                            const K8sAttemptStatus& a, const json* next,
                                            const std::vector<json>& items) const {
    if (!next || !excludes_failed_nodes(*next)) return {};
    const json* failed = find_job(a.failed, items);
    std::vector<std::string> excluded =
        failed ? excluded_nodes_of(*failed) : std::vector<std::string>{};
    CommandResult r = run(kubectl(
        rec.context, rec.namespace_,
        {"get", "pods", "-l",
         fmt::format("{}={},{}={}", kK8sJobLabel, ref.name, kK8sAttemptLabel, a.failed_attempt),
         "-o", "json"}));
    StatusOr<std::vector<json>> pods =
        r.ok() ? parse_kubectl_items(r.out) : Status::failed(kubectl_message(r));
    std::string blamed = pods.ok() ? blamed_node(all_pods(*pods)) : std::string();
    if (!blamed.empty() && std::find(excluded.begin(), excluded.end(), blamed) == excluded.end())
      excluded.push_back(blamed);
    return excluded;
  }

  std::optional<std::vector<K8sPod>> list_pods(const JobRecord& job, const K8sJobRef& ref,
                                               std::optional<int64_t> node,
                                               Diagnostics& diags) const {
    CommandResult r = run(
        kubectl(job.context, job.namespace_,
                {"get", "pods", "-l", fmt::format("{}={}", kK8sJobLabel, ref.name), "-o", "json"}));
    StatusOr<std::vector<json>> items =
        r.ok() ? parse_kubectl_items(r.out) : Status::failed(kubectl_message(r));
    if (!items.ok()) {
      diags.error("kubectl-failed", "", {}, "kubectl get pods failed: " + items.why());
      return std::nullopt;
    }
    std::vector<K8sPod> pods = latest_attempt_pods(*items);
    if (node) std::erase_if(pods, [&](const K8sPod& p) { return p.index != *node; });
    return pods;
  }

  static void print_lines(const std::string& text, const std::string& prefix,
                          const LineFilter& grep, std::ostream& out) {
    for (const auto& line : split_lines(text))
      if (grep.keep(line)) out << prefix << printable_line(line) << '\n';  // any bytes
    out << std::flush;
  }

  // "[node 1 kwok-node-1] " before each line of a job with more than one pod; "" otherwise.
  static std::string pod_prefix(const K8sPod& pod, bool prefix) {
    if (!prefix) return "";
    return pod.node_name.empty() ? fmt::format("[node {}] ", pod.index)
                                 : fmt::format("[node {} {}] ", pod.index, pod.node_name);
  }

  std::vector<std::string> logs_argv(const JobRecord& job, const K8sPod& pod, const LogQuery& query,
                                     bool timestamps, const std::string& since) const {
    std::vector<std::string> argv =
        kubectl(job.context, job.namespace_, {"logs", pod.name, "-c", container_of(job)});
    if (timestamps) argv.push_back("--timestamps");
    if (!since.empty())
      argv.push_back("--since-time=" + since);
    else if (query.tail)
      argv.push_back(fmt::format("--tail={}", *query.tail));
    return argv;
  }

  int print_logs_once(const JobRecord& job, const K8sJobRef& ref, std::optional<int64_t> node,
                      const LogQuery& query, std::ostream& out, Diagnostics& diags) const {
    auto pods = list_pods(job, ref, node, diags);
    if (!pods) return kExitRuntime;
    if (pods->empty()) {
      diags.error("k8s-no-pods", "", {},
                  node ? fmt::format("job {} has no pod for node {} (yet)", job.id, *node)
                       : fmt::format("job {} has no pods (yet)", job.id));
      return kExitRuntime;
    }
    int rc = kExitOk;
    bool prefix = !node && pods->size() > 1;
    for (const auto& p : *pods) {
      CommandResult r = run(logs_argv(job, p, query, /*timestamps=*/false, ""));
      if (!r.ok()) {
        diags.error("kubectl-logs-failed", "", {},
                    fmt::format("kubectl logs {} failed: {}", p.name, kubectl_message(r)));
        rc = kExitRuntime;
        continue;
      }
      print_lines(r.out, pod_prefix(p, prefix), query.grep, out);
    }
    return rc;
  }

  // Prints the lines of `pod` newer than its cursor.
  static void print_new_lines(const std::string& text, const std::string& prefix,
                              const LineFilter& grep, LogCursor& cur, std::ostream& out) {
    LogCursor next = cur;
    for (const auto& line : split_lines(text)) {
      size_t sp = line.find(' ');
      std::string ts = line.substr(0, sp);
      std::string body = sp == std::string::npos ? std::string() : line.substr(sp + 1);
      std::string canon = canonical_timestamp(ts);
      if (!cur.canonical.empty()) {
        if (canon < cur.canonical) continue;
        if (canon == cur.canonical) {
          auto it = cur.at.find(body);
          if (it != cur.at.end()) {
            cur.at.erase(it);
            continue;
          }
        }
      }
      if (canon != next.canonical) {
        next.canonical = canon;
        next.since = ts;
        next.at.clear();
      }
      next.at.insert(body);
      if (grep.keep(body)) out << prefix << printable_line(body) << '\n';
    }
    out << std::flush;
    cur = std::move(next);
  }

  int follow_logs(const JobRecord& job, const K8sJobRef& ref, std::optional<int64_t> node,
                  const LogQuery& query, std::ostream& out, std::ostream& notes,
                  Diagnostics& diags) const {
    std::map<std::string, LogCursor> cursors;
    PendingNotice pending;
    for (;;) {
      Diagnostics status_diags;
      JobStatus st = status({job}, status_diags)[0];
      bool done = is_final(st.state);
      auto pods = list_pods(job, ref, node, diags);
      if (!pods) return kExitRuntime;
      if (st.pending_reason.empty())  // the JobSet/Job says nothing: the pods' own reason
        for (const auto& p : *pods)
          if (!p.waiting.empty()) {
            st.pending_reason = fmt::format("pod {}: {}", p.name, printable_text(p.waiting, 200));
            break;
          }
      if (!status_diags.has_errors()) pending.update(job, st, notes);
      bool prefix = !node && job.nodes > 1;
      for (const auto& p : *pods) {
        LogCursor& cur = cursors[p.name];
        CommandResult r = run(logs_argv(job, p, query, /*timestamps=*/true, cur.since));
        if (!r.ok()) continue;  // not started yet, or gone
        print_new_lines(r.out, pod_prefix(p, prefix), query.grep, cur, out);
      }
      if (done) return kExitOk;
      services_.sleeper.pause_for(kFollowInterval);
    }
  }

  ExecutorServices services_;
};

}  // namespace

std::unique_ptr<Executor> make_kubernetes_executor(const ExecutorServices& services) {
  return std::make_unique<KubernetesExecutor>(services);
}

}  // namespace bridge
