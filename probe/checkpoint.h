// bridge-probe's checkpoints (docs/probe.md, "Checkpoints"): Megatron's keys and on-disk
// layout, so that a job's checkpoint and resume path can be tried without GPUs.
//
// Contract: checkpoint_settings() reads the runtime overrides checkpoint.save, checkpoint.load,
// checkpoint.save_interval and checkpoint.most_recent_k (as Megatron-Bridge names them; a
// Hydra `null` is absent) and fails with kExitUsage on a value that is not a positive whole
// number. A checkpoint of iteration N is the directory <save>/iter_%07d; each rank writes its
// shard there (rank_%05d, holding "iteration N"), and rank 0 marks it complete only after
// every rank has written, by replacing <save>/latest_checkpointed_iteration.txt (the tracker
// Megatron-LM writes, holding N) atomically, then removes the oldest complete checkpoints
// beyond most_recent_k. newest_checkpoint() is what a new attempt resumes from: the tracker's
// iteration when its directory holds every rank's shard, else 0 (a start from scratch), or a
// kExitUsage failure for a tracker that is not a number. File errors are kExitInternal.
#pragma once

#include <string>

#include "probe/options.h"
#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

struct CheckpointSettings {
  std::string save;  // "" = no saving
  std::string load;  // "" = every run starts at iteration 0
  int interval = 0;  // 0 = save only when training ends
  int keep = -1;     // -1 = keep every checkpoint
};

ProbeResult<CheckpointSettings> checkpoint_settings(const Options& options);

// <root>/iter_0000030 for iteration 30.
std::string checkpoint_dir(const std::string& root, int iteration);

// The iteration of the newest complete checkpoint under `root` that has `world_size` shards;
// 0 when there is none.
ProbeResult<int> newest_checkpoint(const std::string& root, int world_size);

// Collective: every rank writes its shard of `iteration`, then rank 0 marks it complete and
// prunes. Returns after every rank has written.
ProbeStatus save_checkpoint(const CheckpointSettings& settings, int iteration, Cluster& cluster);

}  // namespace bridge::probe
