#include "jobs/job_lifecycle.h"

namespace bridge {

std::optional<PendingEntry> JobLifecycle::submitting(JobRecord& record, Diagnostics& diags) const {
  record.state = JobState::kPending;
  record.state_detail =
      "submitting (if this stays, bridge-launch stopped before it recorded the scheduler's "
      "answer)";
  return registry_.create_pending(record, diags);
}

bool JobLifecycle::flush(PendingEntry& pending, const JobRecord& record, Diagnostics& diags) const {
  return registry_.flush_pending(pending, record, diags);
}

bool JobLifecycle::accepted(const JobRecord& record, Diagnostics& diags,
                            PendingEntry* pending) const {
  if (pending) return registry_.commit_pending(*pending, record, diags);
  return registry_.put(record, diags, /*create=*/true);
}

void JobLifecycle::not_accepted(const PendingEntry& pending) const {
  registry_.drop_pending(pending);
}

namespace {

// Applies a reported status to `record`; false when it changes nothing worth writing.
bool apply_status(JobRecord& record, const JobStatus& status) {
  if (status.state == JobState::kUnknown) return false;
  // A time the scheduler reported is kept; one it does not report (yet) never erases ours.
  bool new_start = !status.started_at.empty() && status.started_at != record.started_at;
  bool new_end = !status.ended_at.empty() && status.ended_at != record.ended_at;
  // An id found for a record that has none (never one that replaces a recorded id).
  bool found_id = record.scheduler_id.empty() && !status.scheduler_id.empty();
  bool changed = status.state != record.state || status.detail != record.state_detail ||
                 (status.exit_code && status.exit_code != record.exit_code) || new_start ||
                 new_end || found_id;
  if (!changed) return false;
  if (found_id) record.scheduler_id = status.scheduler_id;
  if (new_start) record.started_at = status.started_at;
  if (new_end) record.ended_at = status.ended_at;
  record.state = status.state;
  record.state_detail = status.detail;
  if (status.exit_code) record.exit_code = status.exit_code;
  return true;
}

}  // namespace

bool JobLifecycle::observe(JobRecord& record, const JobStatus& status, Diagnostics& diags) const {
  const JobState seen = record.state;
  if (!apply_status(record, status)) return true;
  JobRecord current;
  switch (registry_.update_if_state(record, seen, current, diags)) {
    case UpdateResult::kWritten:
      return true;
    case UpdateResult::kSuperseded:
      // The owner (or another reader) recorded a newer state first: that one stands.
      record = std::move(current);
      return true;
    case UpdateResult::kFailed:
      break;
  }
  return false;
}

bool JobLifecycle::finished(JobRecord& record, const JobStatus& status, Diagnostics& diags) const {
  if (!apply_status(record, status)) return true;
  return registry_.put(record, diags);
}

bool JobLifecycle::cancelled(JobRecord& record, Diagnostics& diags) const {
  record.state = JobState::kCancelled;
  record.state_detail = "cancelled by bridge-launch cancel";
  return registry_.put(record, diags);
}

}  // namespace bridge
