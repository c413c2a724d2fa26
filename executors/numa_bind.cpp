#include "executors/numa_bind.h"

#include <fmt/format.h>

#include "base/shell_quote.h"

namespace bridge {

namespace {

// Sets n (the NUMA node) and how (why, for the messages) by the table's rule.
std::string table_rule(int gpus_per_numa) {
  return fmt::format("n=$((LOCAL_RANK / {0})); how=\"local rank $LOCAL_RANK / {0}\"; ",
                     gpus_per_numa);
}

// Sets n and how from sysfs: the rank's GPU among the NVIDIA display/3D controllers in bus
// order (nvidia-smi's order; nvidia-smi itself may be absent), its numa_node; -1 (the kernel
// has no NUMA data for it) or no GPU leaves n empty unless the host has one NUMA node.
std::string sysfs_rule(const std::string& root) {
  std::string q = shell_word(root);
  return fmt::format(
      "i=$LOCAL_RANK; case ${{CUDA_VISIBLE_DEVICES:-}} in \"\"|*[!0-9,]*) ;; *) IFS=, read -ra "
      "v <<<\"$CUDA_VISIBLE_DEVICES\"; if [ ${{#v[@]}} -eq 1 ]; then i=${{v[0]}}; elif [ -n "
      "\"${{v[LOCAL_RANK]:-}}\" ]; then i=${{v[LOCAL_RANK]}}; fi;; esac; "
      "g=; k=0; for d in {0}/bus/pci/devices/*; do [ \"$(cat \"$d/vendor\" 2>/dev/null)\" = "
      "0x10de ] || continue; case $(cat \"$d/class\" 2>/dev/null) in 0x0300*|0x0302*) ;; *) "
      "continue;; esac; if [ \"$k\" -eq \"$i\" ]; then g=$d; break; fi; k=$((k + 1)); done; "
      "n=; how=\"no GPU $i in sysfs\"; if [ -n \"$g\" ]; then n=$(cat \"$g/numa_node\" "
      "2>/dev/null); how=\"GPU ${{g##*/}} in sysfs\"; fi; case $n in \"\"|-*) n=; "
      "nn=({0}/devices/system/node/node[0-9]*); if [ ${{#nn[@]}} -eq 1 ] && [ -d \"${{nn[0]}}\" "
      "]; then n=${{nn[0]##*node}}; how=\"$how; one NUMA node on this host\"; fi;; esac; ",
      q);
}

}  // namespace

std::string numa_bind_program(const NumaBinding& binding, const std::string& sysfs_root) {
  if (binding.mode != BindingMode::kNuma) return "";
  std::string nodes = shell_word(sysfs_root + "/devices/system/node/node");
  std::string program =
      binding.gpus_per_numa > 0 ? table_rule(binding.gpus_per_numa) : sysfs_rule(sysfs_root);
  program += fmt::format(
      "w=\"bridge-launch: rank ${{RANK:-?}}:\"; "
      "if [ -z \"$n\" ]; then echo \"$w no NUMA node for its GPU ($how); running unbound\" >&2; "
      "elif [ ! -d {0}\"$n\" ]; then echo \"$w NUMA node $n ($how) is not on this host; running "
      "unbound\" >&2; "
      "elif ! command -v numactl >/dev/null 2>&1; then echo \"$w numactl not found; running "
      "unbound instead of on NUMA node $n ($how)\" >&2; "
      // A container's default seccomp profile allows a memory policy only with CAP_SYS_NICE:
      // bound to the node's CPUs, its memory left to first touch.
      "elif ! numactl --cpunodebind=\"$n\" --membind=\"$n\" /bin/true >/dev/null 2>&1 && "
      "numactl --cpunodebind=\"$n\" /bin/true >/dev/null 2>&1; then "
      "echo \"$w numactl --cpunodebind=$n ($how; CPUs only: a memory policy is not permitted "
      "here, e.g. a container without CAP_SYS_NICE)\" >&2; "
      "exec numactl --cpunodebind=\"$n\" \"$@\"; "
      "elif ! numactl --cpunodebind=\"$n\" --membind=\"$n\" /bin/true >/dev/null 2>&1; then "
      "a=; while read -r k v; do [ \"$k\" = Cpus_allowed_list: ] && a=$v; done 2>/dev/null "
      "</proc/self/status; "
      "echo \"$w numactl cannot bind to NUMA node $n ($how; this task may use CPUs "
      "${{a:-unknown}}); running unbound\" >&2; "
      "else echo \"$w numactl --cpunodebind=$n --membind=$n ($how)\" >&2; "
      "exec numactl --cpunodebind=\"$n\" --membind=\"$n\" \"$@\"; fi; exec \"$@\"",
      nodes);
  return program;
}

}  // namespace bridge
