#include "launcher/jobs/job_lifecycle.h"

namespace bridge {

bool JobLifecycle::accepted(const JobRecord& record, Diagnostics& diags) const {
  return registry_.put(record, diags, /*create=*/true);
}

bool JobLifecycle::observe(JobRecord& record, const JobStatus& status, Diagnostics& diags) const {
  if (status.state == JobState::kUnknown) return true;
  bool changed = status.state != record.state || status.detail != record.state_detail ||
                 (status.exit_code && status.exit_code != record.exit_code);
  if (!changed) return true;
  record.state = status.state;
  record.state_detail = status.detail;
  if (status.exit_code) record.exit_code = status.exit_code;
  return registry_.put(record, diags);
}

bool JobLifecycle::cancelled(JobRecord& record, Diagnostics& diags) const {
  record.state = JobState::kCancelled;
  record.state_detail = "cancelled by bridge-launch cancel";
  return registry_.put(record, diags);
}

}  // namespace bridge
