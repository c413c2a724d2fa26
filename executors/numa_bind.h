// The shell that binds one rank to its GPU's NUMA node (runtime.binding: numa) and then runs
// the rank's command.
//
// Contract: numa_bind_program(binding, sysfs_root) returns a bash program, for `bash -c
// PROGRAM NAME CMD...`, that ends by exec-ing "$@" (CMD...); "" unless binding.mode is kNuma.
// It reads LOCAL_RANK (and RANK for its messages): srun ranks get both from SLURM_* in
// the task, torchrun workers from torchrun. The NUMA node N is local rank / gpus_per_numa
// (the GPU table's rule) or, with gpus_per_numa == 0, the numa_node of the rank's GPU in sysfs:
// the NVIDIA display or 3D controllers under <sysfs_root>/bus/pci/devices in bus order, the
// rank's one picked by its entry of a numeric CUDA_VISIBLE_DEVICES (or its only entry), else
// by its local rank; a host with one NUMA node is node 0 whatever the GPU. The rank then runs
// under `numactl --cpunodebind=N --membind=N` and says so on stderr (its log); where a memory
// policy is not permitted (a container's seccomp profile without CAP_SYS_NICE) but the CPUs
// are, under `numactl --cpunodebind=N` alone, saying so. It never fails
// the rank: without numactl, without NUMA node N on the host, or without an answer from sysfs
// it prints one `bridge-launch: rank R: ... running unbound` warning and runs the command
// unbound (docs/executors/slurm.md, "GPU-local binding"). sysfs_root is "/sys" in every
// script; tests point it at fixture directories.
#pragma once

#include <string>

#include "model/placement.h"

namespace bridge {

std::string numa_bind_program(const NumaBinding& binding, const std::string& sysfs_root = "/sys");

}  // namespace bridge
