// JobRegistry: the local record of submitted jobs, one JSON file per job.
//
// Lives in $XDG_STATE_HOME/bridge-launch (default ~/.local/state/bridge-launch), or
// $BRIDGE_LAUNCH_STATE_DIR when set (tests). Writes are atomic (temp file, fsync, rename)
// and serialized across processes by an exclusive flock on `<dir>/lock`, so concurrent
// bridge-launch processes never corrupt an entry. Reading tolerates damage: a corrupt or
// foreign file is reported as a warning and skipped. Records never hold secret values.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/host_env.h"
#include "launcher/jobs/job_record.h"

namespace bridge {

class JobRegistry {
 public:
  // `lock_timeout`: how long a write waits for the registry lock before it gives up.
  explicit JobRegistry(std::string dir,
                       std::chrono::milliseconds lock_timeout = std::chrono::seconds(30))
      : dir_(std::move(dir)), lock_timeout_(lock_timeout) {}
  static std::string default_dir(const HostEnvironment& env);

  const std::string& dir() const { return dir_; }
  // Picks a job id for `name` that no entry and no other reservation of this registry has,
  // and reserves it: under the registry lock, `jobs/.<id>.reservation` is created with
  // O_EXCL and `sample` (the entry-to-be, padded) is written and fsynced into it. So ids are
  // unique by construction (two launches in the same second cannot share one), and the
  // reservation tests exactly what recording will do (lock, create, a name of that length,
  // write, fsync) before anything is submitted. nullopt (with `registry-unwritable`) if not.
  std::optional<std::string> reserve_id(const std::string& name, const std::string& sample,
                                        Diagnostics& diags) const;
  // Drops a reservation whose job was never accepted.
  void release_id(const std::string& id) const;
  // Writes the entry for r.id. With `create`, the entry must not exist yet (an existing
  // entry is never overwritten by a new job) and the id's reservation is dropped. False
  // (with an error) when it cannot be written.
  bool put(const JobRecord& r, Diagnostics& diags, bool create = false) const;
  // Every readable entry, oldest first; damaged files become warnings.
  std::vector<JobRecord> list(Diagnostics& diags) const;
  // By exact id or unique prefix; errors name the ambiguity or suggest ids.
  std::optional<JobRecord> find(const std::string& ref, Diagnostics& diags) const;

 private:
  std::string lock_error() const;
  std::string dir_;
  std::chrono::milliseconds lock_timeout_;
};

// A candidate job id: "<name>-<yyyymmdd-hhmmss>-<4 hex>" (reserve_id makes it unique).
std::string new_job_id(const std::string& name);
std::string utc_timestamp_iso8601();

}  // namespace bridge
