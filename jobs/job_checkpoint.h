// The newest checkpoint of a job (docs/long-jobs.md), as `status` shows it.
//
// Contract: newest_checkpoint(record) reads the job's checkpoint.dir (from its recorded
// inputs; nullopt for a job without one) as it is on this machine, where a shared file system
// shows what the ranks wrote. The newest complete checkpoint is the iteration named by
// Megatron-LM's tracker latest_checkpointed_iteration.txt (bridge-probe writes it too); where
// there is none (Megatron-Bridge 0.6's own tracker, latest_train_state.pt, is a torch file)
// it is the highest iter_NNNNNNN directory, said so. Every read is bounded (system/
// file_read.h): the tracker at 64 bytes, the listing at 100,000 entries. `found` is false,
// with the reason, when the directory is not there (yet) or holds no checkpoint.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "jobs/job_record.h"

namespace bridge {

struct CheckpointState {
  std::string dir;  // checkpoint.dir
  bool found = false;
  int64_t iteration = 0;
  std::string saved_at;  // the checkpoint directory's modification time (UTC), "" unknown
  std::string source;    // "tracker" | "newest iter_ directory"
  std::string why_none;  // when !found
};

std::optional<CheckpointState> newest_checkpoint(const JobRecord& record);

// The iteration the job's (latest) attempt resumed from, as its rank 0 said it at start:
// Megatron-Bridge's "successfully loaded checkpoint from DIR [ ... ] at iteration N" or
// bridge-probe's "rank 0 resumes from checkpoint iteration N"; nullopt when it started from
// scratch, has no checkpoint section, or its log is not readable here. Reads the first 256 KiB
// of the log (the line is printed before training starts).
std::optional<int64_t> resumed_iteration(const JobRecord& record);

// Finds the resume line in `text` (what resumed_iteration reads).
std::optional<int64_t> resumed_iteration_in(const std::string& text);

// "iteration 30, saved 2026-12-04T14:20:01Z (/shared/ckpt/iter_0000030)" or why there is none.
std::string checkpoint_text(const CheckpointState& c);
nlohmann::ordered_json checkpoint_to_json(const CheckpointState& c);

}  // namespace bridge
