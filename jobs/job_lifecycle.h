// JobLifecycle: the one owner of registry writes. Every change of a job's record (accepted,
// a new state seen by status/--wait/logs, cancelled, finished) goes through here, so the
// rules live in one place:
// - `submitting` writes the pending entry before the scheduler can take the job, `flush`
//   makes it durable (before the submission starts, or while it runs: Slurm);
// - `accepted` commits the scheduler's answer into it, or creates the entry (never
//   overwrites one; JobRegistry::put with create) and consumes the id's reservation;
// - `observe` applies a status the scheduler reported: UNKNOWN never replaces a known state
//   (a scheduler that forgot a job must not erase what we know), an unchanged status writes
//   nothing, and an exit code is kept unless a new one is known; start/end times the status
//   carries are recorded, and a status without them keeps the recorded ones; a scheduler id
//   found for an entry without one (a submission interrupted before it was recorded) is
//   recorded. It is a reader's write: if the entry's state changed since the caller read it
//   (the job's owner recorded how it ended), the entry is left as it is and `record` becomes
//   it, so no status, --wait or logs ever overwrites what the owner wrote after it read;
// - `finished` is the owner's write of a job it ran itself (local runs end inside submit):
//   it always stands;
// - every function returns whether the registry now holds what the caller has in `record`.
#pragma once

#include <optional>

#include "base/diagnostics.h"
#include "jobs/job_record.h"
#include "jobs/registry.h"

namespace bridge {

class JobLifecycle {
 public:
  explicit JobLifecycle(const JobRegistry& registry) : registry_(registry) {}

  // The job is about to be submitted: its entry, PENDING "submitting", is written before the
  // scheduler can take it (JobRegistry::create_pending; no kill can lose it from then on).
  // nullopt (with the error): submit nothing.
  std::optional<PendingEntry> submitting(JobRecord& record, Diagnostics& diags) const;
  // Completes that entry with what `submitting` had not yet (record.plan_json) and flushes
  // it to disk (JobRegistry::flush_pending): a crash of the machine cannot lose it either.
  // False with the error.
  bool flush(PendingEntry& pending, const JobRecord& record, Diagnostics& diags) const;
  // The scheduler took the job: `record` already carries its scheduler id, job dir and
  // first state. With `pending` the changed fields are committed into the pending entry;
  // without, the entry is created.
  bool accepted(const JobRecord& record, Diagnostics& diags, PendingEntry* pending = nullptr) const;
  // The scheduler did not take the job: its pending entry is removed.
  void not_accepted(const PendingEntry& pending) const;
  // A status seen for the job; returns true also when nothing needed writing.
  bool observe(JobRecord& record, const JobStatus& status, Diagnostics& diags) const;
  // The outcome of a run this process owned and saw end (a local job): written whatever a
  // reader recorded meanwhile.
  bool finished(JobRecord& record, const JobStatus& status, Diagnostics& diags) const;
  // bridge-launch cancel succeeded.
  bool cancelled(JobRecord& record, Diagnostics& diags) const;

 private:
  const JobRegistry& registry_;
};

}  // namespace bridge
