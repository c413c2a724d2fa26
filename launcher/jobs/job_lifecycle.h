// JobLifecycle: the one owner of registry writes. Every change of a job's record (accepted,
// a new state seen by status/--wait/logs, cancelled, finished) goes through here, so the
// rules live in one place:
// - `accepted` creates the entry (never overwrites one; JobRegistry::put with create) and
//   consumes the id's reservation;
// - `observe` applies a status the scheduler reported: UNKNOWN never replaces a known state
//   (a scheduler that forgot a job must not erase what we know), an unchanged status writes
//   nothing, and an exit code is kept unless a new one is known;
// - every function returns whether the registry now holds what the caller has in `record`.
#pragma once

#include "launcher/diagnostics.h"
#include "launcher/jobs/job_record.h"
#include "launcher/jobs/registry.h"

namespace bridge {

class JobLifecycle {
 public:
  explicit JobLifecycle(const JobRegistry& registry) : registry_(registry) {}

  // The scheduler took the job: `record` already carries its scheduler id, job dir and
  // first state.
  bool accepted(const JobRecord& record, Diagnostics& diags) const;
  // A status seen for the job; returns true also when nothing needed writing.
  bool observe(JobRecord& record, const JobStatus& status, Diagnostics& diags) const;
  // bridge-launch cancel succeeded.
  bool cancelled(JobRecord& record, Diagnostics& diags) const;

 private:
  const JobRegistry& registry_;
};

}  // namespace bridge
