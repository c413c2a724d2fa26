// Executors: turn a Plan into something that runs.
//
// Each executor has a pure `render` (plan in, RenderedJob out: exactly what --dry-run
// prints and golden tests compare) and a `submit` that performs side effects through the
// seams it is given. Executors are listed in an explicit name -> factory table.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/plan.h"

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
  bool wait = true;
  int verbosity = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual RenderedJob render(const Plan& plan, Diagnostics& diags) const = 0;
  // Runs or submits the job; returns the process exit code the CLI should use.
  virtual int submit(const Plan& plan, const RenderedJob& job, const SubmitOptions& options,
                     std::ostream& out, Diagnostics& diags) const = 0;
};

struct ExecutorInfo {
  const char* name;
  const char* description;
  std::unique_ptr<Executor> (*make)();
};

const std::vector<ExecutorInfo>& executor_registry();
std::unique_ptr<Executor> make_executor(const std::string& name);

}  // namespace bridge
