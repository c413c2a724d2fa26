// executor.kubernetes.network: how a job's pods reach each other besides the pod network.
//
// Contract:
// - read_k8s_network reads `none` (the default), `rdma`, or a mapping
//     {type: none | rdma, resource: rdma/ib, per_pod: N,
//      nccl_ib_hca: TEXT, nccl_socket_ifname: TEXT, nccl_ib_gid_index: N}
//   and reports every problem as an error at its key; nullopt then.
// - `rdma`: every pod asks for `per_pod` (default: its GPUs, one NIC per GPU as on DGX nodes)
//   of the device plugin's `resource` (default rdma/ib), and the trainer container may pin
//   memory (capability IPC_LOCK), which RDMA registration needs.
// - The nccl_* keys, and only they, become launch variables (NCCL_IB_HCA, NCCL_SOCKET_IFNAME,
//   NCCL_IB_GID_INDEX): nothing is sent that the mapping does not say, because NCCL picks
//   its devices itself and a guessed interface name can be wrong on a cluster.
// - add_k8s_network_env puts them into the plan's env with the source
//   `executor.kubernetes.network`; a name env:/-E also sets is an error naming both.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "model/launch_env.h"
#include "model/recipe.h"

namespace bridge {

struct K8sNetwork {
  bool rdma = false;
  std::string resource;  // the RDMA device plugin's resource name
  int64_t per_pod = 0;
  std::vector<std::pair<std::string, std::string>> nccl_env;  // (variable, value)
  SourceLoc loc;
};

inline constexpr const char* kDefaultRdmaResource = "rdma/ib";

std::optional<K8sNetwork> read_k8s_network(const Field<YamlNode>& field, int64_t gpus_per_node,
                                           Diagnostics& diags);

void add_k8s_network_env(const K8sNetwork& network, LaunchEnv& env, Diagnostics& diags);

}  // namespace bridge
