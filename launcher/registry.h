// JobRegistry: the local record of submitted jobs, one JSON file per job.
//
// Lives in $XDG_STATE_HOME/bridge-launch (default ~/.local/state/bridge-launch), or
// $BRIDGE_LAUNCH_STATE_DIR when set (tests). Writes are atomic (temp file, fsync, rename)
// and serialized across processes by an exclusive flock on `<dir>/lock`, so concurrent
// bridge-launch processes never corrupt an entry. Reading tolerates damage: a corrupt or
// foreign file is reported as a warning and skipped. Records never hold secret values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/host_env.h"
#include "launcher/job_record.h"

namespace bridge {

class JobRegistry {
 public:
  explicit JobRegistry(std::string dir) : dir_(std::move(dir)) {}
  static std::string default_dir(const HostEnvironment& env);

  const std::string& dir() const { return dir_; }
  // Creates or replaces the entry for r.id. False (with an error) when it cannot be written.
  bool put(const JobRecord& r, Diagnostics& diags) const;
  // Every readable entry, oldest first; damaged files become warnings.
  std::vector<JobRecord> list(Diagnostics& diags) const;
  // By exact id or unique prefix; errors name the ambiguity or suggest ids.
  std::optional<JobRecord> find(const std::string& ref, Diagnostics& diags) const;

 private:
  std::string dir_;
};

// A new job id: "<name>-<yyyymmdd-hhmmss>-<4 hex>".
std::string new_job_id(const std::string& name);
std::string utc_timestamp_iso8601();

}  // namespace bridge
