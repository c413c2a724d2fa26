#include "executors/k8s_pod_shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "base/json_text.h"
#include "base/numbers.h"
#include "base/suggest.h"
#include "base/time_limit.h"
#include "base/utf8.h"
#include "executors/k8s_names.h"
#include "executors/k8s_render.h"

namespace bridge {

namespace {

using nlohmann::ordered_json;

constexpr double kNodeShareUsed = 0.9;  // the rest of a node's share stays for its daemons
constexpr int64_t kCpuPerGpu = 4;
constexpr int64_t kMemoryGiPerGpu = 32;
constexpr int64_t kEphemeralGi = 64;
constexpr double kMi = 1024.0 * 1024.0;

struct Resource {
  const char* key;   // in executor.kubernetes.node
  const char* name;  // the Kubernetes resource
};
constexpr Resource kResources[] = {
    {"cpu", "cpu"}, {"memory", "memory"}, {"ephemeral_storage", "ephemeral-storage"}};

std::string mebibytes(double bytes) {
  // The epsilon keeps 2000Gi x 0.9 at 1800Gi where the product rounds a hair below it.
  auto mi = static_cast<int64_t>(std::floor(bytes / kMi + 1e-6));
  if (mi >= 1024 && mi % 1024 == 0) return fmt::format("{}Gi", mi / 1024);
  return fmt::format("{}Mi", std::max<int64_t>(mi, 1));
}

std::string quantity_text(const ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::optional<double> quantity_of(const ordered_json& v) {
  return k8s_quantity_value(quantity_text(v));
}

// 0.3 and 300m are one quantity: compared as decimals, they differ in the last bit.
int compare_quantities(double a, double b) {
  double tolerance = 1e-9 * std::max(std::fabs(a), std::fabs(b));
  if (std::fabs(a - b) <= tolerance) return 0;
  return a < b ? -1 : 1;
}

std::string duration_text(int64_t s) {
  if (s == 0) return "0 s";
  if (s % 86400 == 0) return fmt::format("{}d", s / 86400);
  if (s % 3600 == 0) return fmt::format("{}h", s / 3600);
  if (s % 60 == 0) return fmt::format("{}m", s / 60);
  return fmt::format("{}s", s);
}

// executor.kubernetes.node: {cpu, memory, ephemeral_storage}, each a quantity.
std::optional<std::map<std::string, double>> read_node(const Field<YamlNode>& f,
                                                       Diagnostics& diags) {
  std::map<std::string, double> out;
  if (!f.is_set()) return out;
  const std::string path = "executor.kubernetes.node";
  // `ephemeral-storage` as allocatable spells it, so the node's values can be copied.
  static const std::vector<std::string> kKeys{"cpu", "memory", "ephemeral_storage",
                                              "ephemeral-storage"};
  bool ok = true;
  for (const auto& e : f.value->entries) {
    std::string at = path + "." + e.key;
    if (std::find(kKeys.begin(), kKeys.end(), e.key) == kKeys.end()) {
      diags.error("k8s-bad-node", at, e.key_loc,
                  fmt::format("unknown node key `{}`{}", printable_text(e.key, 40),
                              did_you_mean(e.key, kKeys)),
                  "node has cpu, memory and ephemeral_storage: the node's allocatable");
      ok = false;
      continue;
    }
    auto v = e.value.is_scalar() ? k8s_quantity_value(e.value.scalar) : std::nullopt;
    if (!v || *v <= 0) {
      diags.error("k8s-bad-node", at, e.value.loc,
                  fmt::format("`{}` is not a positive Kubernetes quantity",
                              e.value.is_scalar() ? printable_text(e.value.scalar, 40)
                                                  : std::string(e.value.kind_name())),
                  "copy it from `kubectl get node NODE -o jsonpath='{.status.allocatable}'`");
      ok = false;
      continue;
    }
    for (const auto& r : kResources)
      if (e.key == r.key || e.key == r.name) out[r.name] = *v;
  }
  if (!ok) return std::nullopt;
  return out;
}

// The requests the pod gets when the user's resources do not say: the pod's share of the
// node, or the per-GPU floor.
ordered_json derived_requests(const std::map<std::string, double>& node, int64_t gpus_per_node,
                              int64_t node_gpus, std::string& how) {
  ordered_json r = ordered_json::object();
  double share = node_gpus > 0 ? static_cast<double>(gpus_per_node) / node_gpus : 1.0;
  share = std::min(share, 1.0);
  for (const auto& res : kResources) {
    auto at = node.find(res.name);
    if (at != node.end()) {
      double v = at->second * share * kNodeShareUsed;
      if (std::string_view(res.name) == "cpu")
        r[res.name] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(v + 1e-6)));
      else
        r[res.name] = mebibytes(v);
    } else if (std::string_view(res.name) == "cpu") {
      r[res.name] = kCpuPerGpu * gpus_per_node;
    } else if (std::string_view(res.name) == "memory") {
      r[res.name] = fmt::format("{}Gi", kMemoryGiPerGpu * gpus_per_node);
    } else {
      r[res.name] = fmt::format("{}Gi", kEphemeralGi);
    }
  }
  std::string floor_part = fmt::format("{} cores and {}Gi per GPU, {}Gi of ephemeral storage",
                                       kCpuPerGpu, kMemoryGiPerGpu, kEphemeralGi);
  if (node.empty()) {
    how =
        "a floor of " + floor_part + ": set executor.kubernetes.node to size the pod from the node";
  } else {
    how = fmt::format(
        "{:.0f} % of the node's {} share (executor.kubernetes.node)", kNodeShareUsed * 100,
        share == 1.0 ? std::string("whole") : fmt::format("{}/{}", gpus_per_node, node_gpus));
    std::string missing;
    for (const auto& res : kResources)
      if (!node.count(res.name)) missing += (missing.empty() ? "" : ", ") + std::string(res.name);
    if (!missing.empty()) how += "; " + missing + " from the floor";
  }
  return r;
}

bool read_qos(const KubernetesExecutorSpec& kx, const K8sPodSettings& settings,
              const std::map<std::string, double>& node, K8sPodShape& shape, Diagnostics& diags) {
  bool guaranteed = kx.qos.get_or("burstable") == "guaranteed";
  shape.qos_class = guaranteed ? "Guaranteed" : "Burstable";
  if (!guaranteed) return true;
  bool ok = true;
  for (const char* name : {"cpu", "memory"}) {
    bool sized = node.count(name) || settings.requests.contains(name);
    if (!sized) {
      diags.error("k8s-guaranteed-needs-size", "executor.kubernetes.qos", kx.qos.loc,
                  fmt::format("qos guaranteed sets the {0} limit to the {0} request, but neither "
                              "executor.kubernetes.node.{0} nor resources.requests.{0} says "
                              "how much the pod may use",
                              name),
                  "set executor.kubernetes.node to the node's allocatable, or resources.requests");
      ok = false;
      continue;
    }
    auto limit = settings.limits.contains(name) ? quantity_of(settings.limits[name]) : std::nullopt;
    auto request = quantity_of(shape.requests[name]);
    if (limit && request && compare_quantities(*limit, *request) != 0) {
      diags.error("k8s-guaranteed-limit-differs", "executor.kubernetes.resources.limits",
                  kx.resources.loc,
                  fmt::format("qos guaranteed needs the {0} limit equal to the request ({1}), "
                              "but resources.limits.{0} is {2}",
                              name, quantity_text(shape.requests[name]),
                              quantity_text(settings.limits[name])),
                  "drop the limit (it is set to the request) or use qos: burstable");
      ok = false;
    }
    shape.limits[name] = shape.requests[name];
  }
  return ok;
}

// A limit the user set without a request caps the derived request (Kubernetes would refuse a
// request above it); a request the user set above a limit is an error at the limit.
bool fit_requests_under_limits(const KubernetesExecutorSpec& kx, const K8sPodSettings& settings,
                               K8sPodShape& shape, std::string& how, Diagnostics& diags) {
  bool ok = true;
  for (const auto& res : kResources) {
    const std::string name = res.name;
    if (!shape.limits.contains(name) || !shape.requests.contains(name)) continue;
    auto limit = quantity_of(shape.limits[name]);
    auto request = quantity_of(shape.requests[name]);
    if (!limit || !request || compare_quantities(*request, *limit) <= 0) continue;
    if (!settings.requests.contains(name)) {
      shape.requests[name] = shape.limits[name];
      how += fmt::format("; {} capped at its limit", name);
      continue;
    }
    diags.error(
        "k8s-request-above-limit", "executor.kubernetes.resources.limits." + name, kx.resources.loc,
        fmt::format("the {0} request ({1}) is above its limit ({2}): Kubernetes refuses "
                    "the pod",
                    name, quantity_text(shape.requests[name]), quantity_text(shape.limits[name])),
        "raise the limit or lower the request");
    ok = false;
  }
  return ok;
}

bool read_security(const KubernetesExecutorSpec& kx, const K8sNetwork& network, K8sPodShape& shape,
                   Diagnostics& diags) {
  const std::string path = "executor.kubernetes.security";
  static const std::vector<std::string> kKeys{"run_as_user", "run_as_group", "run_as_non_root",
                                              "add_capabilities"};
  ordered_json pod{{"seccompProfile", {{"type", "RuntimeDefault"}}}};
  ordered_json add = ordered_json::array();
  std::optional<bool> non_root;
  bool ok = true;
  auto bad = [&](const std::string& at, const SourceLoc& loc, const std::string& what,
                 const std::string& help) {
    diags.error("k8s-bad-security", at, loc, what, help);
    ok = false;
  };
  if (kx.security.is_set()) {
    for (const auto& e : kx.security.value->entries) {
      std::string at = path + "." + e.key;
      if (std::find(kKeys.begin(), kKeys.end(), e.key) == kKeys.end()) {
        bad(at, e.key_loc,
            fmt::format("unknown security key `{}`{}", printable_text(e.key, 40),
                        did_you_mean(e.key, kKeys)),
            "security has run_as_user, run_as_group, run_as_non_root and add_capabilities");
      } else if (e.key == "add_capabilities") {
        if (!e.value.is_sequence()) {
          bad(at, e.value.loc, "add_capabilities must be a list", "write `[SYS_PTRACE]`");
          continue;
        }
        for (const auto& c : e.value.items) {
          bool name_ok = c.is_scalar() && !c.scalar.empty() && c.scalar.rfind("CAP_", 0) != 0 &&
                         std::all_of(c.scalar.begin(), c.scalar.end(),
                                     [](char ch) { return (ch >= 'A' && ch <= 'Z') || ch == '_'; });
          if (!name_ok)
            bad(at, c.loc,
                fmt::format("`{}` is not a Linux capability as Kubernetes writes it",
                            c.is_scalar() ? printable_text(c.scalar, 40) : c.kind_name()),
                "write it in capitals without CAP_, e.g. SYS_PTRACE");
          else if (std::find(add.begin(), add.end(), c.scalar) == add.end())
            add.push_back(c.scalar);
        }
      } else if (e.key == "run_as_non_root") {
        if (!e.value.is_scalar() || (e.value.scalar != "true" && e.value.scalar != "false"))
          bad(at, e.value.loc, "run_as_non_root must be true or false", "write true");
        else
          non_root = e.value.scalar == "true";
      } else {
        auto id = e.value.is_scalar() ? parse_decimal<int64_t>(e.value.scalar) : std::nullopt;
        if (!id || *id < 0 || *id > 2147483647)
          bad(at, e.value.loc, fmt::format("{} must be a numeric id", e.key), "write e.g. 1000");
        else
          pod[e.key == "run_as_user" ? "runAsUser" : "runAsGroup"] = *id;
      }
    }
  }
  if (!non_root) non_root = pod.contains("runAsUser") && pod["runAsUser"] != 0;
  if (*non_root && !pod.contains("runAsUser"))
    diags.warning("k8s-non-root-image-user", path + ".run_as_non_root", kx.security.loc,
                  "run_as_non_root without run_as_user: the kubelet starts the pod only if the "
                  "image's USER is a non-root uid (NGC images run as root)",
                  "set run_as_user to the uid the image runs as");
  // RDMA registers (pins) memory: a root process needs IPC_LOCK for it. A non-root process
  // never gets an added capability (Kubernetes sets no ambient ones), so adding it there would
  // only fail the namespace's Pod Security level; it relies on the memlock limit instead.
  bool root = !pod.contains("runAsUser") || pod["runAsUser"] == 0;
  if (network.rdma && root && std::find(add.begin(), add.end(), "IPC_LOCK") == add.end())
    add.insert(add.begin(), "IPC_LOCK");
  if (*non_root && pod.contains("runAsUser") && pod["runAsUser"] == 0)
    bad(path + ".run_as_non_root", kx.security.loc,
        "run_as_non_root is true but run_as_user is 0 (root): the kubelet refuses to start it",
        "set run_as_user to the image's non-root uid");
  pod["runAsNonRoot"] = *non_root;
  shape.pod_security = pod;
  ordered_json caps{{"drop", {"ALL"}}};
  if (!add.empty()) caps["add"] = add;
  shape.container_security = {{"allowPrivilegeEscalation", false}, {"capabilities", caps}};
  return ok;
}

// Extended resources (RDMA devices, anything but cpu, memory, ephemeral-storage and
// hugepages) cannot be overcommitted: Kubernetes needs a limit and a request equal to it.
bool check_extended_requests(const KubernetesExecutorSpec& kx, const K8sPodSettings& settings,
                             const K8sNetwork& network, Diagnostics& diags) {
  bool ok = true;
  for (const auto& [name, value] : settings.requests.items()) {
    if (name == "cpu" || name == "memory" || name == "ephemeral-storage" ||
        name.rfind("hugepages-", 0) == 0)
      continue;
    std::string why;
    if (network.rdma && name == network.resource)
      why = fmt::format("{} is set by network (rdma, {} per pod) too", name, network.per_pod);
    else if (!settings.limits.contains(name))
      why = fmt::format(
          "{} is an extended resource: Kubernetes needs its limit, not a request "
          "alone",
          name);
    else if (quantity_of(settings.limits[name]) != quantity_of(value))
      why = fmt::format("{} is an extended resource: its request ({}) must equal its limit ({})",
                        name, quantity_text(value), quantity_text(settings.limits[name]));
    if (why.empty()) continue;
    diags.error("k8s-extended-request", "executor.kubernetes.resources.requests." + name,
                kx.resources.loc, why,
                "set it in resources.limits only (the request follows the limit); RDMA devices "
                "with network.per_pod");
    ok = false;
  }
  return ok;
}

// A request above what the whole node holds can never be scheduled.
bool check_fits_node(const KubernetesExecutorSpec& kx, const std::map<std::string, double>& node,
                     const K8sPodShape& shape, Diagnostics& diags) {
  bool ok = true;
  for (const auto& [name, holds] : node) {
    if (!shape.requests.contains(name)) continue;
    auto request = quantity_of(shape.requests[name]);
    if (!request || compare_quantities(*request, holds) <= 0) continue;
    diags.error("k8s-request-above-node", "executor.kubernetes.resources.requests." + name,
                kx.resources.loc,
                fmt::format("the {} request ({}) is more than the node holds "
                            "(executor.kubernetes.node): the pod can never be scheduled",
                            name, quantity_text(shape.requests[name])),
                "lower the request, or correct executor.kubernetes.node");
    ok = false;
  }
  return ok;
}

// /dev/shm: shm_size, else half the memory request; a limit of 0 is no limit to Kubernetes.
bool read_shm(const KubernetesExecutorSpec& kx, K8sPodShape& shape, Diagnostics& diags) {
  if (!kx.shm_size.is_set()) {
    auto memory = quantity_of(shape.requests["memory"]);
    shape.shm_limit = mebibytes(memory.value_or(2 * 1024 * kMi) / 2);
    return true;
  }
  shape.shm_limit = *kx.shm_size.value;
  auto shm = k8s_quantity_value(shape.shm_limit);
  if (shm && *shm <= 0) {
    diags.error("k8s-bad-shm", "executor.kubernetes.shm_size", kx.shm_size.loc,
                "shm_size 0 is no size limit to Kubernetes",
                "leave shm_size out for half the memory request, or write a size like 64Gi");
    return false;
  }
  auto limit = shape.limits.contains("memory") ? quantity_of(shape.limits["memory"]) : std::nullopt;
  if (shm && limit && compare_quantities(*shm, *limit) > 0)
    diags.warning("k8s-shm-above-memory-limit", "executor.kubernetes.shm_size", kx.shm_size.loc,
                  fmt::format("shm_size {} is above the pod's memory limit ({}), which /dev/shm "
                              "counts against: the pod is OOM-killed before /dev/shm is full",
                              shape.shm_limit, quantity_text(shape.limits["memory"])),
                  "keep shm_size well below the memory limit");
  return true;
}

bool read_lifetime(const KubernetesExecutorSpec& kx, K8sPodShape& shape, Diagnostics& diags) {
  shape.ttl_after_finished = kx.ttl_after_finished.get_or(kDefaultTtlAfterFinished);
  if (shape.ttl_after_finished < 300)
    diags.warning("k8s-ttl-short", "executor.kubernetes.ttl_after_finished",
                  kx.ttl_after_finished.loc,
                  fmt::format("ttl_after_finished {} s: the job's pods are deleted so soon after "
                              "it ends that status, logs and why may find nothing",
                              shape.ttl_after_finished),
                  "keep it at least an hour, e.g. 86400 (a day)");
  if (!kx.time.is_set()) return true;
  auto seconds = time_limit_seconds(*kx.time.value);
  if (!seconds) {
    diags.error("k8s-bad-time", "executor.kubernetes.time", kx.time.loc,
                fmt::format("`{}` is not a time limit", printable_text(*kx.time.value, 40)),
                "write MINUTES, MINUTES:SECONDS, HH:MM:SS or DAYS-HH:MM:SS (e.g. 04:00:00), "
                "as for Slurm");
    return false;
  }
  if (*seconds > 0) shape.active_deadline = *seconds;
  return true;
}

void write_summary(const KubernetesExecutorSpec& kx, const K8sNetwork& network,
                   const std::string& how, K8sPodShape& shape) {
  auto list = [](const ordered_json& m) {
    std::string out;
    for (const auto& [k, v] : m.items())
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", k, quantity_text(v));
    return out.empty() ? std::string("none besides the GPUs") : out;
  };
  shape.summary.push_back(fmt::format("pod: QoS {}; requests {} ({}); limits {}", shape.qos_class,
                                      list(shape.requests), how, list(shape.limits)));
  const auto& caps = shape.container_security["capabilities"];
  std::string added;
  if (caps.contains("add"))
    for (const auto& c : caps["add"])
      added += (added.empty() ? " but " : ", ") + c.get<std::string>();
  shape.summary.push_back(fmt::format(
      "pod: /dev/shm limit {}{}; runAsNonRoot {}; no privilege escalation; capabilities: all "
      "dropped{}; seccomp RuntimeDefault",
      shape.shm_limit, kx.shm_size.is_set() ? "" : " (half the memory request)",
      shape.pod_security["runAsNonRoot"].get<bool>() ? "true" : "false", added));
  if (network.rdma)
    shape.summary.push_back(fmt::format("network: rdma, {} x {} per pod{}", network.resource,
                                        network.per_pod,
                                        network.nccl_env.empty() ? "" : "; NCCL settings in env"));
  shape.summary.push_back(fmt::format(
      "lifetime: {}; objects deleted {} after the job finishes (ttl_after_finished)",
      shape.active_deadline ? fmt::format("active deadline {} (executor.kubernetes.time)",
                                          duration_text(*shape.active_deadline))
      : kx.time.is_set()
          ? fmt::format("no active deadline (executor.kubernetes.time {})", *kx.time.value)
          : std::string("no active deadline (set executor.kubernetes.time)"),
      duration_text(shape.ttl_after_finished)));
}

}  // namespace

std::optional<K8sPodShape> read_pod_shape(const KubernetesExecutorSpec& kx,
                                          const K8sPodSettings& settings, const K8sNetwork& network,
                                          int64_t gpus_per_node, int64_t node_gpus,
                                          Diagnostics& diags) {
  auto node = read_node(kx.node, diags);
  if (!node) return std::nullopt;
  K8sPodShape shape;
  std::string how;
  shape.requests = derived_requests(*node, gpus_per_node, node_gpus, how);
  std::string from_user;
  for (const auto& [k, v] : settings.requests.items()) {
    shape.requests[k] = v;
    from_user += (from_user.empty() ? "" : ", ") + k;
  }
  if (settings.requests.contains("cpu") && settings.requests.contains("memory") &&
      settings.requests.contains("ephemeral-storage"))
    how = "set in executor.kubernetes.resources";
  else if (!from_user.empty())
    how += "; " + from_user + " from executor.kubernetes.resources";
  bool ok = read_qos(kx, settings, *node, shape, diags);
  for (const auto& [k, v] : settings.limits.items()) shape.limits[k] = v;
  ok = fit_requests_under_limits(kx, settings, shape, how, diags) && ok;
  if (network.rdma) {
    if (settings.limits.contains(network.resource)) {
      diags.error("k8s-network-resource-twice", "executor.kubernetes.resources.limits",
                  kx.resources.loc,
                  fmt::format("{} is set by resources.limits and by network (rdma, {} per pod)",
                              network.resource, network.per_pod),
                  "keep one: network.per_pod sets how many RDMA devices a pod gets");
      ok = false;
    }
    shape.limits[network.resource] = network.per_pod;
  }
  ok = check_extended_requests(kx, settings, network, diags) && ok;
  ok = check_fits_node(kx, *node, shape, diags) && ok;
  ok = read_security(kx, network, shape, diags) && ok;
  ok = read_lifetime(kx, shape, diags) && ok;
  ok = read_shm(kx, shape, diags) && ok;
  if (!ok) return std::nullopt;
  write_summary(kx, network, how, shape);
  return shape;
}

void apply_pod_shape(const K8sPodShape& shape, ordered_json& pod) {
  ordered_json& spec = pod["spec"];
  json_set(spec, "securityContext", shape.pod_security);
  for (auto& v : spec["volumes"])
    if (v.value("name", "") == "dshm") v["emptyDir"]["sizeLimit"] = shape.shm_limit;
  for (auto& c : spec["containers"]) {
    if (c.value("name", "") != kK8sContainer) continue;
    ordered_json& res = c["resources"];
    for (const auto& [k, v] : shape.requests.items()) res["requests"][k] = v;
    for (const auto& [k, v] : shape.limits.items()) res["limits"][k] = v;
    json_set(c, "securityContext", shape.container_security);
  }
}

}  // namespace bridge
