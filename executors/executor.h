// Executors: turn a Plan into something that runs.
//
// Each executor has a pure `render` (plan in, RenderedJob out: exactly what --dry-run
// prints and golden tests compare) and a `submit` that performs side effects through the
// seams it is given. Executors are listed in an explicit name -> factory table.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/jobs/job_record.h"
#include "launcher/plan/plan.h"

namespace bridge {

struct RenderedFile {
  std::string name;     // file name inside the job dir, e.g. "job.sbatch"
  std::string content;  // never contains secret values
};

struct RenderedJob {
  std::string executor;
  std::string dry_run_text;  // what --dry-run prints
  std::vector<RenderedFile> files;
};

struct SubmitOptions {
  bool wait = true;  // local always waits; schedulers only with --wait
  int verbosity = 0;
  std::string template_path;  // --template override ("" = embedded)
  std::string job_id;         // the registry id chosen by the CLI
};

// What a submission produced. `accepted` means the scheduler took the job (or the local
// ranks started): only then does the registry get an entry.
struct SubmitResult {
  int exit_code = 0;
  bool accepted = false;
  std::string scheduler_id;
  std::string job_dir;
  JobState final_state = JobState::kUnknown;  // when the executor waited for the end
  std::string state_detail;
  std::optional<int> exit_code_of_rank;  // the failing rank's code (128+N for signal N)
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual RenderedJob render(const Plan& plan, Diagnostics& diags) const = 0;
  // Runs or submits the job. `on_accepted` is called once the scheduler accepted it (before
  // any waiting), so the CLI can write the registry entry while the job runs.
  virtual SubmitResult submit(
      const Plan& plan, const RenderedJob& job, const SubmitOptions& options, std::ostream& out,
      Diagnostics& diags, const std::function<void(const SubmitResult&)>& on_accepted) const = 0;
  // States of many jobs of this executor with ONE scheduler query (not one per job).
  virtual std::vector<JobStatus> status(const std::vector<JobRecord>& jobs,
                                        Diagnostics& diags) const = 0;
  // Prints a job's logs (one rank, or all), optionally following until the job ends.
  virtual int logs(const JobRecord& job, std::optional<int> rank, bool follow, std::ostream& out,
                   Diagnostics& diags) const = 0;
  virtual int cancel(const JobRecord& job, Diagnostics& diags) const = 0;
};

struct ExecutorInfo {
  const char* name;
  const char* description;
  std::unique_ptr<Executor> (*make)();
};

const std::vector<ExecutorInfo>& executor_registry();
std::unique_ptr<Executor> make_executor(const std::string& name);

}  // namespace bridge
