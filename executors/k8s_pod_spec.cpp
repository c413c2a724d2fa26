#include "executors/k8s_pod_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "base/numbers.h"
#include "base/suggest.h"
#include "base/utf8.h"
#include "base/yaml_tree.h"
#include "executors/k8s_names.h"
#include "executors/k8s_render.h"

namespace bridge {

namespace {

using nlohmann::ordered_json;

constexpr const char* kKueueQueueLabel = "kueue.x-k8s.io/queue-name";

bool is_label_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A qualified key: [prefix/]name, the prefix a DNS subdomain (label and annotation keys).
bool is_qualified_key(const std::string& key) {
  size_t slash = key.find('/');
  if (slash == std::string::npos) return is_label_name(key);
  return is_rfc1123_subdomain(key.substr(0, slash)) && is_label_name(key.substr(slash + 1));
}

bool is_label_value(const std::string& v) { return v.empty() || is_label_name(v); }

class Checker {
 public:
  explicit Checker(Diagnostics& diags) : diags_(diags), errors_(diags.count(Severity::kError)) {}
  bool ok() const { return diags_.count(Severity::kError) == errors_; }

  void error(const std::string& path, const SourceLoc& loc, const std::string& what,
             const std::string& help) {
    diags_.error("k8s-bad-pod-setting", path, loc, what, help);
  }

  // A mapping of strings to strings (labels, annotations, node selector).
  ordered_json string_map(const Field<YamlNode>& f, const std::string& path, bool label_values) {
    ordered_json out = ordered_json::object();
    if (!f.is_set()) return out;
    if (!f.value->is_map()) {
      error(path, f.loc, fmt::format("`{}` must be a mapping of keys to values", path),
            fmt::format("write e.g. `{}: {{team: llm}}`", path.substr(path.rfind('.') + 1)));
      return out;
    }
    for (const auto& e : f.value->entries) {
      std::string key_path = path + "." + e.key;
      if (!is_qualified_key(e.key))
        error(key_path, e.key_loc,
              fmt::format("`{}` is not a valid Kubernetes key ([prefix/]name: a name of at "
                          "most 63 letters, digits, '-', '_' or '.', starting and ending with "
                          "a letter or digit)",
                          printable_text(e.key, 80)),
              "rename the key");
      if (!e.value.is_scalar()) {
        error(key_path, e.value.loc, fmt::format("`{}` must be a string", key_path),
              "quote the value");
        continue;
      }
      if (label_values && !is_label_value(e.value.scalar))
        error(key_path, e.value.loc,
              fmt::format("`{}` is not a valid label value (at most 63 letters, digits, '-', "
                          "'_' or '.', starting and ending with a letter or digit)",
                          printable_text(e.value.scalar, 80)),
              "shorten or rename the value");
      out[e.key] = e.value.scalar;
    }
    return out;
  }

  Diagnostics& diags_;

 private:
  size_t errors_;
};

const YamlNode* scalar_entry(const YamlNode& map, const char* key) {
  const YamlNode* v = map.find(key);
  return v && v->is_scalar() ? v : nullptr;
}

void read_volumes(const Field<YamlNode>& f, const std::string& job_dir, Checker& c,
                  K8sPodSettings& s) {
  const std::string path = "executor.kubernetes.volumes";
  if (!f.is_set()) return;
  if (!f.value->is_sequence()) {
    c.error(path, f.loc, "`executor.kubernetes.volumes` must be a list of volumes",
            "write `volumes: [{name: data, mount_path: /data, pvc: my-claim}]`");
    return;
  }
  // The executor's own volumes: shared memory, runtime.code, the plan confirmation's ConfigMap.
  std::set<std::string> names{"dshm", kK8sCodeVolume, kK8sPlanVolume},
      paths{"/dev/shm", kK8sPlanMountPath};
  static const std::vector<std::string> kKeys{"name", "mount_path", "read_only",
                                              "pvc",  "host_path",  "config_map"};
  for (size_t i = 0; i < f.value->items.size(); ++i) {
    const YamlNode& v = f.value->items[i];
    std::string at = fmt::format("{}[{}]", path, i);
    if (!v.is_map()) {
      c.error(at, v.loc, fmt::format("`{}` must be a mapping", at),
              "write `{name: data, mount_path: /data, pvc: my-claim}`");
      continue;
    }
    for (const auto& e : v.entries)
      if (std::find(kKeys.begin(), kKeys.end(), e.key) == kKeys.end())
        c.error(at + "." + e.key, e.key_loc,
                fmt::format("unknown volume key `{}`{}", printable_text(e.key, 40),
                            did_you_mean(e.key, kKeys)),
                "a volume has name, mount_path, read_only and one of pvc, host_path, config_map");
    const YamlNode* name = scalar_entry(v, "name");
    const YamlNode* mount = scalar_entry(v, "mount_path");
    if (!name || !is_rfc1123_label(name->scalar) || !names.insert(name->scalar).second)
      c.error(at + ".name", name ? name->loc : v.loc,
              name ? fmt::format("volume name `{}` is not a new RFC 1123 label (lowercase "
                                 "letters, digits, '-'; `dshm`, `bridge-code` and `bridge-plan` "
                                 "are taken)",
                                 printable_text(name->scalar, 80))
                   : "a volume needs a `name`",
              "name it like `data` or `checkpoints`");
    if (!mount || mount->scalar.empty() || mount->scalar.front() != '/' ||
        !paths.insert(mount->scalar).second)
      c.error(at + ".mount_path", mount ? mount->loc : v.loc,
              mount ? fmt::format("mount_path `{}` must be a new absolute path",
                                  printable_text(mount->scalar, 80))
                    : "a volume needs a `mount_path`",
              "mount it at e.g. /data; /dev/shm is the shared-memory volume");
    ordered_json source;
    int sources = 0;
    if (const YamlNode* p = scalar_entry(v, "pvc")) {
      ++sources;
      if (!is_rfc1123_subdomain(p->scalar))
        c.error(at + ".pvc", p->loc,
                fmt::format("`{}` is not a valid PersistentVolumeClaim name",
                            printable_text(p->scalar, 80)),
                "use the claim's name as `kubectl get pvc` shows it");
      source = {{"persistentVolumeClaim", {{"claimName", p->scalar}}}};
    }
    if (const YamlNode* h = scalar_entry(v, "host_path")) {
      ++sources;
      if (h->scalar.empty() || h->scalar.front() != '/')
        c.error(at + ".host_path", h->loc, "host_path must be an absolute path on the node",
                "write e.g. /lustre/datasets");
      source = {{"hostPath", {{"path", h->scalar}, {"type", "Directory"}}}};
    }
    if (const YamlNode* m = scalar_entry(v, "config_map")) {
      ++sources;
      if (!is_rfc1123_subdomain(m->scalar))
        c.error(at + ".config_map", m->loc,
                fmt::format("`{}` is not a valid ConfigMap name", printable_text(m->scalar, 80)),
                "use the ConfigMap's name");
      source = {{"configMap", {{"name", m->scalar}}}};
    }
    if (sources != 1)
      c.error(at, v.loc,
              fmt::format("a volume needs exactly one source of pvc, host_path and config_map "
                          "(this one has {})",
                          sources),
              "keep one");
    bool read_only = false;
    if (const YamlNode* ro = scalar_entry(v, "read_only")) {
      if (ro->scalar != "true" && ro->scalar != "false")
        c.error(at + ".read_only", ro->loc, "read_only must be true or false", "write true");
      read_only = ro->scalar == "true";
    }
    if (!c.ok() || !name || !mount) continue;
    ordered_json vol{{"name", name->scalar}};
    for (auto& [k, val] : source.items()) vol[k] = val;
    s.volumes.push_back(vol);
    ordered_json m{{"name", name->scalar}, {"mountPath", mount->scalar}};
    if (read_only) m["readOnly"] = true;
    s.mounts.push_back(m);
    if (!read_only) s.writable_mounts.push_back(mount->scalar);
  }
  s.job_dir_on_volume = on_writable_volume(s, job_dir);
}

void read_tolerations(const Field<YamlNode>& f, Checker& c, K8sPodSettings& s) {
  const std::string path = "executor.kubernetes.tolerations";
  if (!f.is_set()) return;
  if (!f.value->is_sequence()) {
    c.error(path, f.loc, "`executor.kubernetes.tolerations` must be a list",
            "write `tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]`");
    return;
  }
  static const std::vector<std::string> kKeys{"key", "operator", "value", "effect",
                                              "tolerationSeconds"};
  s.tolerations = ordered_json::array();
  for (size_t i = 0; i < f.value->items.size(); ++i) {
    const YamlNode& t = f.value->items[i];
    std::string at = fmt::format("{}[{}]", path, i);
    if (!t.is_map()) {
      c.error(at, t.loc, fmt::format("`{}` must be a mapping", at),
              "write `{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}`");
      continue;
    }
    for (const auto& e : t.entries) {
      if (std::find(kKeys.begin(), kKeys.end(), e.key) == kKeys.end())
        c.error(at + "." + e.key, e.key_loc,
                fmt::format("unknown toleration field `{}`{}", printable_text(e.key, 40),
                            did_you_mean(e.key, kKeys)),
                "a toleration has key, operator, value, effect and tolerationSeconds");
      else if (!e.value.is_scalar())
        c.error(at + "." + e.key, e.value.loc, fmt::format("`{}` must be a scalar", e.key), "");
    }
    if (const YamlNode* op = scalar_entry(t, "operator");
        op && op->scalar != "Exists" && op->scalar != "Equal")
      c.error(at + ".operator", op->loc,
              fmt::format("operator `{}` is not Exists or Equal", printable_text(op->scalar, 40)),
              "write Exists or Equal");
    if (const YamlNode* ef = scalar_entry(t, "effect");
        ef && !ef->scalar.empty() && ef->scalar != "NoSchedule" &&
        ef->scalar != "PreferNoSchedule" && ef->scalar != "NoExecute")
      c.error(at + ".effect", ef->loc,
              fmt::format("effect `{}` is not NoSchedule, PreferNoSchedule or NoExecute",
                          printable_text(ef->scalar, 40)),
              "write one of those");
    if (const YamlNode* ts = scalar_entry(t, "tolerationSeconds");
        ts && !parse_decimal<int64_t>(ts->scalar))
      c.error(at + ".tolerationSeconds", ts->loc, "tolerationSeconds must be a whole number",
              "write e.g. 300");
    s.tolerations.push_back(yaml_to_json(t));
  }
}

void read_resources(const Field<YamlNode>& f, Checker& c, K8sPodSettings& s) {
  const std::string path = "executor.kubernetes.resources";
  if (!f.is_set()) return;
  if (!f.value->is_map()) {
    c.error(path, f.loc, "`executor.kubernetes.resources` must be a mapping",
            "write `resources: {requests: {cpu: 32}, limits: {rdma/ib: 8}}`");
    return;
  }
  for (const auto& e : f.value->entries) {
    if (e.key != "requests" && e.key != "limits") {
      c.error(path + "." + e.key, e.key_loc,
              fmt::format("unknown key `{}`{}", printable_text(e.key, 40),
                          did_you_mean(e.key, {"requests", "limits"})),
              "resources has requests and limits");
      continue;
    }
    ordered_json& out = e.key == "requests" ? s.requests : s.limits;
    if (!e.value.is_map()) {
      c.error(path + "." + e.key, e.value.loc, fmt::format("`{}` must be a mapping", e.key),
              "write e.g. `{cpu: 32, memory: 512Gi}`");
      continue;
    }
    for (const auto& r : e.value.entries) {
      std::string at = path + "." + e.key + "." + r.key;
      if (r.key == "nvidia.com/gpu") {
        c.error(at, r.key_loc,
                "nvidia.com/gpu is set by the plan (cluster.gpus_per_node / -gn), not here",
                "remove it; set the GPUs per node with -gn");
        continue;
      }
      if (!is_qualified_key(r.key))
        c.error(at, r.key_loc,
                fmt::format("`{}` is not a valid resource name", printable_text(r.key, 80)),
                "write e.g. cpu, memory, rdma/ib");
      if (!r.value.is_scalar() || !k8s_quantity_value(r.value.scalar)) {
        c.error(at, r.value.loc,
                fmt::format("`{}` is not a Kubernetes quantity",
                            r.value.is_scalar() ? printable_text(r.value.scalar, 40)
                                                : std::string(r.value.kind_name())),
                "write it like 8, 500m, 64Gi");
        continue;
      }
      out[r.key] = r.value.scalar;
    }
  }
}

// Strategic merge, the part pod templates need: mappings merge key by key (null deletes),
// lists of mappings that all carry the list's merge key (`name`; `mountPath` for
// volumeMounts) merge item by item, other lists are replaced.
void merge(ordered_json& base, const ordered_json& patch, const std::string& key = "") {
  if (patch.is_object() && base.is_object()) {
    for (const auto& [k, v] : patch.items()) {
      if (v.is_null())
        base.erase(k);
      else if (base.contains(k))
        merge(base[k], v, k);
      else
        base[k] = v;
    }
    return;
  }
  const char* merge_key = key == "volumeMounts" ? "mountPath" : "name";
  auto keyed = [&](const ordered_json& list) {
    return std::all_of(list.begin(), list.end(), [&](const ordered_json& item) {
      return item.is_object() && item.contains(merge_key) && item[merge_key].is_string();
    });
  };
  if (patch.is_array() && base.is_array() && keyed(patch) && keyed(base)) {
    for (const auto& item : patch) {
      auto it = std::find_if(base.begin(), base.end(), [&](const ordered_json& b) {
        return b[merge_key] == item[merge_key];
      });
      if (it == base.end())
        base.push_back(item);
      else
        merge(*it, item);
    }
    return;
  }
  base = patch;
}

ordered_json* trainer_of(ordered_json& pod) {
  if (!pod.contains("spec") || !pod["spec"].contains("containers")) return nullptr;
  for (auto& c : pod["spec"]["containers"])
    if (c.is_object() && c.value("name", "") == kK8sContainer) return &c;
  return nullptr;
}

}  // namespace

ordered_json yaml_to_json(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kNull:
      return nullptr;
    case YamlNode::Kind::kSequence: {
      ordered_json a = ordered_json::array();
      for (const auto& item : node.items) a.push_back(yaml_to_json(item));
      return a;
    }
    case YamlNode::Kind::kMap: {
      ordered_json o = ordered_json::object();
      for (const auto& e : node.entries) o[e.key] = yaml_to_json(e.value);
      return o;
    }
    case YamlNode::Kind::kScalar:
      break;
  }
  const std::string& s = node.scalar;
  if (node.quoted) return s;
  if (s == "true") return true;
  if (s == "false") return false;
  if (s == "null" || s == "~") return nullptr;
  if (auto i = parse_decimal<int64_t>(s); i && (s.size() == 1 || s[0] != '0')) return *i;
  return s;
}

bool on_writable_volume(const K8sPodSettings& s, const std::string& dir) {
  return std::any_of(s.writable_mounts.begin(), s.writable_mounts.end(),
                     [&](const auto& mp) { return path_at_or_below(dir, mp); });
}

std::optional<K8sPodSettings> read_pod_settings(const KubernetesExecutorSpec& kx,
                                                const std::string& job_dir, Diagnostics& diags) {
  Checker c(diags);
  K8sPodSettings s;
  read_volumes(kx.volumes, job_dir, c, s);
  if (kx.node_selector.is_set())
    s.node_selector = c.string_map(kx.node_selector, "executor.kubernetes.node_selector", true);
  read_tolerations(kx.tolerations, c, s);
  if (kx.affinity.is_set()) {
    static const std::vector<std::string> kKinds{"nodeAffinity", "podAffinity", "podAntiAffinity"};
    if (!kx.affinity.value->is_map())
      c.error("executor.kubernetes.affinity", kx.affinity.loc,
              "`executor.kubernetes.affinity` must be a Kubernetes Affinity mapping",
              "write `affinity: {nodeAffinity: {...}}`");
    else
      for (const auto& e : kx.affinity.value->entries)
        if (std::find(kKinds.begin(), kKinds.end(), e.key) == kKinds.end())
          c.error("executor.kubernetes.affinity." + e.key, e.key_loc,
                  fmt::format("unknown affinity kind `{}`{}", printable_text(e.key, 40),
                              did_you_mean(e.key, kKinds)),
                  "an Affinity has nodeAffinity, podAffinity and podAntiAffinity");
    s.affinity = yaml_to_json(*kx.affinity.value);
  }
  read_resources(kx.resources, c, s);
  s.labels = c.string_map(kx.labels, "executor.kubernetes.labels", true);
  s.annotations = c.string_map(kx.annotations, "executor.kubernetes.annotations", false);
  for (const auto& map : {&s.labels, &s.annotations})
    for (const auto& [k, v] : map->items())
      if (k.rfind("bridge-launch/", 0) == 0 || k == kK8sManagedByKey)
        c.error(map == &s.labels ? "executor.kubernetes.labels" : "executor.kubernetes.annotations",
                map == &s.labels ? kx.labels.loc : kx.annotations.loc,
                fmt::format("`{}` is bridge-launch's own key (status, logs and cancel find the "
                            "job by it)",
                            k),
                "use another key");
  if (kx.topology_label.is_set() && !is_qualified_key(*kx.topology_label.value))
    c.error("executor.kubernetes.topology_label", kx.topology_label.loc,
            fmt::format("`{}` is not a Kubernetes label key",
                        printable_text(*kx.topology_label.value, 80)),
            "write the node label that names a node's NVLink domain, e.g. "
            "`nvidia.com/gpu.clique` (set by NVIDIA's GPU feature discovery)");
  if (kx.priority_class.is_set()) {
    s.priority_class = *kx.priority_class.value;
    if (!is_rfc1123_subdomain(s.priority_class))
      c.error("executor.kubernetes.priority_class", kx.priority_class.loc,
              fmt::format("`{}` is not a valid PriorityClass name",
                          printable_text(s.priority_class, 80)),
              "use the name `kubectl get priorityclasses` shows");
  }
  if (kx.queue.is_set()) {
    s.queue = *kx.queue.value;
    if (!is_label_value(s.queue) || !is_rfc1123_subdomain(s.queue))
      c.error("executor.kubernetes.queue", kx.queue.loc,
              fmt::format("`{}` is not a valid Kueue queue name (a LocalQueue's name: lowercase "
                          "letters, digits, '-' and '.', at most 63 characters)",
                          printable_text(s.queue, 80)),
              "use the LocalQueue's name");
  }
  if (kx.pod_patch.is_set()) {
    if (!kx.pod_patch.value->is_map()) {
      c.error("executor.kubernetes.pod_patch", kx.pod_patch.loc,
              "`executor.kubernetes.pod_patch` must be a mapping with metadata and/or spec",
              "write `pod_patch: {spec: {hostNetwork: true}}`");
    } else {
      for (const auto& e : kx.pod_patch.value->entries)
        if (e.key != "metadata" && e.key != "spec")
          c.error("executor.kubernetes.pod_patch." + e.key, e.key_loc,
                  fmt::format("a pod template has metadata and spec, not `{}`{}",
                              printable_text(e.key, 40), did_you_mean(e.key, {"metadata", "spec"})),
                  "patch metadata or spec");
      s.pod_patch = yaml_to_json(*kx.pod_patch.value);
    }
  }
  if (!c.ok()) return std::nullopt;
  return s;
}

bool apply_pod_settings(const K8sPodSettings& s, const KubernetesExecutorSpec& kx,
                        ordered_json& pod, Diagnostics& diags) {
  ordered_json& spec = pod["spec"];
  ordered_json* trainer = trainer_of(pod);
  for (const auto& v : s.volumes) spec["volumes"].push_back(v);
  if (trainer) {
    for (const auto& m : s.mounts) (*trainer)["volumeMounts"].push_back(m);
    for (const auto& [k, v] : s.requests.items()) (*trainer)["resources"]["requests"][k] = v;
    for (const auto& [k, v] : s.limits.items()) (*trainer)["resources"]["limits"][k] = v;
  }
  if (!s.node_selector.is_null() && !s.node_selector.empty())
    spec["nodeSelector"] = s.node_selector;
  if (!s.tolerations.is_null() && !s.tolerations.empty()) spec["tolerations"] = s.tolerations;
  // Per kind: a kind of the recipe's replaces the executor's own (the NVLink-domain podAffinity).
  if (!s.affinity.is_null())
    for (const auto& [kind, value] : s.affinity.items()) spec["affinity"][kind] = value;
  if (!s.priority_class.empty()) spec["priorityClassName"] = s.priority_class;
  for (const auto& [k, v] : s.labels.items()) pod["metadata"]["labels"][k] = v;
  for (const auto& [k, v] : s.annotations.items()) pod["metadata"]["annotations"][k] = v;
  if (s.pod_patch.is_null()) return true;

  ordered_json before = pod;
  merge(pod, s.pod_patch);
  ordered_json* after = trainer_of(pod);
  ordered_json* was = trainer_of(before);
  std::vector<std::string> changed;
  if (!after) {
    changed.push_back("the training container `trainer`");
  } else if (was) {
    for (const char* field : {"image", "command", "args", "env"})
      if (after->value(field, ordered_json()) != was->value(field, ordered_json()))
        changed.push_back(std::string("spec.containers[trainer].") + field);
    auto gpus = [](const ordered_json& c) {
      return c.contains("resources") && c["resources"].contains("limits") &&
                     c["resources"]["limits"].contains("nvidia.com/gpu")
                 ? c["resources"]["limits"]["nvidia.com/gpu"]
                 : ordered_json();
    };
    if (gpus(*after) != gpus(*was))
      changed.push_back("spec.containers[trainer].resources.limits.nvidia.com/gpu");
  }
  if (pod["spec"].value("restartPolicy", ordered_json()) !=
      before["spec"].value("restartPolicy", ordered_json()))
    changed.push_back("spec.restartPolicy");
  for (const auto& [k, v] : before["metadata"]["labels"].items())
    if (k.rfind("bridge-launch/", 0) == 0 || k == kK8sManagedByKey)
      if (!pod["metadata"].contains("labels") || pod["metadata"]["labels"].value(k, "") != v)
        changed.push_back("metadata.labels." + k);
  if (changed.empty()) return true;
  std::string list;
  for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
  diags.error("k8s-patch-changes-plan", "executor.kubernetes.pod_patch", kx.pod_patch.loc,
              fmt::format("pod_patch changes {}, which the plan sets", list),
              "set the image with runtime.container_image, env with env:/-E, GPUs with -gn; "
              "patch only what the plan leaves open");
  return false;
}

ordered_json object_labels(const K8sPodSettings& s) {
  ordered_json labels = s.labels;
  if (!s.queue.empty()) labels[kKueueQueueLabel] = s.queue;
  return labels;
}

}  // namespace bridge
