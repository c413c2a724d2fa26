// Printing a Triage (`bridge-launch why`, and the failure summary of `--wait` and `status`):
// one screen of text, or the stable JSON of `why --format json` (docs/experiments.md).
//
// Pure functions. Every string they print came through failure_triage's printable, bounded
// copies, so a rank's raw escape sequences never reach the terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "jobs/failure_triage.h"
#include "jobs/job_record.h"

namespace bridge {

// `job` gives the heading (id, state, executor); `excerpt` includes the log excerpt of the
// first failure (`why`), or only its error line (the short summary after --wait/status).
std::string triage_to_text(const JobRecord& job, const Triage& t, bool excerpt);
nlohmann::ordered_json triage_to_json(const JobRecord& job, const Triage& t);

}  // namespace bridge
