#include "model/k8s_network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/numbers.h"
#include "base/suggest.h"
#include "base/utf8.h"

namespace bridge {

namespace {

constexpr const char* kPath = "executor.kubernetes.network";

// Extended resource names are `domain/name` (rdma/ib, rdma/rdma_shared_device_a).
bool is_resource_name(const std::string& s) {
  size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() || s.size() > 253)
    return false;
  auto ok = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
  };
  return std::all_of(s.begin(), s.begin() + static_cast<long>(slash), ok) &&
         std::all_of(s.begin() + static_cast<long>(slash) + 1, s.end(), ok);
}

// A value NCCL reads as a list of names: printable, no blanks or control characters.
bool is_nccl_value(const std::string& s) {
  return !s.empty() && s.size() <= 256 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

struct NcclKey {
  const char* key;
  const char* variable;
  bool number;
};

constexpr NcclKey kNcclKeys[] = {{"nccl_ib_hca", "NCCL_IB_HCA", false},
                                 {"nccl_socket_ifname", "NCCL_SOCKET_IFNAME", false},
                                 {"nccl_ib_gid_index", "NCCL_IB_GID_INDEX", true}};

bool read_type(const std::string& type, const SourceLoc& loc, K8sNetwork& out, Diagnostics& diags) {
  if (type == "none" || type == "rdma") {
    out.rdma = type == "rdma";
    return true;
  }
  diags.error("k8s-bad-network", kPath, loc,
              fmt::format("network `{}` is not none or rdma{}", printable_text(type, 40),
                          did_you_mean(type, {"none", "rdma"})),
              "write `network: rdma` for RDMA NICs (InfiniBand or RoCE), else leave it out");
  return false;
}

void read_mapping(const YamlNode& map, int64_t gpus_per_node, K8sNetwork& out, Diagnostics& diags) {
  static const std::vector<std::string> kKeys{
      "type", "resource", "per_pod", "nccl_ib_hca", "nccl_socket_ifname", "nccl_ib_gid_index"};
  for (const auto& e : map.entries) {
    std::string at = std::string(kPath) + "." + e.key;
    if (std::find(kKeys.begin(), kKeys.end(), e.key) == kKeys.end()) {
      diags.error("k8s-bad-network", at, e.key_loc,
                  fmt::format("unknown network key `{}`{}", printable_text(e.key, 40),
                              did_you_mean(e.key, kKeys)),
                  "network has type, resource, per_pod, nccl_ib_hca, nccl_socket_ifname and "
                  "nccl_ib_gid_index");
      continue;
    }
    if (!e.value.is_scalar()) {
      diags.error("k8s-bad-network", at, e.value.loc, fmt::format("`{}` must be a scalar", at),
                  "write one value");
      continue;
    }
    const std::string& v = e.value.scalar;
    if (e.key == "type") {
      read_type(v, e.value.loc, out, diags);
    } else if (e.key == "resource") {
      if (v == "nvidia.com/gpu")
        diags.error("k8s-bad-network", at, e.value.loc,
                    "nvidia.com/gpu is the plan's GPU count (-gn), not an RDMA device",
                    "write the name the RDMA device plugin advertises, e.g. rdma/ib");
      else if (!is_resource_name(v))
        diags.error("k8s-bad-network", at, e.value.loc,
                    fmt::format("`{}` is not an extended resource name (domain/name)",
                                printable_text(v, 80)),
                    "write the name the RDMA device plugin advertises, e.g. rdma/ib");
      out.resource = v;
    } else if (e.key == "per_pod") {
      auto n = parse_decimal<int64_t>(v);
      if (!n || *n < 1 || *n > 64)
        diags.error(
            "k8s-bad-network", at, e.value.loc,
            fmt::format("per_pod `{}` is not a whole number from 1 to 64", printable_text(v, 40)),
            fmt::format("write the NICs one pod uses, e.g. {}", gpus_per_node));
      else
        out.per_pod = *n;
    }
  }
  for (const auto& k : kNcclKeys) {
    const YamlNode* v = map.find(k.key);
    if (!v || !v->is_scalar()) continue;
    bool ok = k.number ? parse_decimal<int64_t>(v->scalar).has_value() : is_nccl_value(v->scalar);
    if (!ok)
      diags.error(
          "k8s-bad-network", std::string(kPath) + "." + k.key, v->loc,
          fmt::format("`{}` is not a value for {}", printable_text(v->scalar, 80), k.variable),
          k.number ? "write a whole number, e.g. 3" : "write e.g. mlx5 or eth0");
    else
      out.nccl_env.emplace_back(k.variable, v->scalar);
  }
}

}  // namespace

std::optional<K8sNetwork> read_k8s_network(const Field<YamlNode>& field, int64_t gpus_per_node,
                                           Diagnostics& diags) {
  K8sNetwork out;
  out.resource = kDefaultRdmaResource;
  out.per_pod = gpus_per_node;
  if (!field.is_set()) return out;
  out.loc = field.loc;
  size_t errors = diags.count(Severity::kError);
  const YamlNode& node = *field.value;
  if (node.is_scalar())
    read_type(node.scalar, node.loc, out, diags);
  else
    read_mapping(node, gpus_per_node, out, diags);
  if (diags.count(Severity::kError) != errors) return std::nullopt;
  if (!out.rdma && node.is_map() &&
      (node.find("resource") || node.find("per_pod") || !out.nccl_env.empty()))
    diags.warning("k8s-network-not-rdma", kPath, field.loc,
                  "network sets RDMA keys but its type is not rdma: no RDMA device is requested "
                  "(the nccl_* settings are still sent)",
                  "add `type: rdma`");
  return out;
}

void add_k8s_network_env(const K8sNetwork& network, LaunchEnv& env, Diagnostics& diags) {
  for (const auto& [name, value] : network.nccl_env) {
    if (const EnvVar* set = env.find(name)) {
      diags.error(
          "k8s-network-env-twice", kPath, network.loc,
          fmt::format("{} is set by executor.kubernetes.network and by {}", name, set->source),
          "keep one of them");
      continue;
    }
    EnvVar v;
    v.name = name;
    v.value = value;
    v.source = kPath;
    v.reason = "the pods' network (executor.kubernetes.network)";
    env.vars.push_back(std::move(v));
  }
}

}  // namespace bridge
