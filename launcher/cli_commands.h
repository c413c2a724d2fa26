// The commands behind the CLI (internal to launcher/): each takes parsed options and a Context
// with the output streams, and returns the process exit code (base/exit_codes.h).
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/exit_codes.h"
#include "executors/executor.h"

namespace bridge {

struct Options {
  std::string executor;
  std::string num_gpus;
  std::string gpus_per_node;
  std::string gpu;
  std::vector<std::string> env;
  bool strict = false;
  bool dry_run = false;
  bool wait = false;
  std::string format = "text";
  std::string template_path;
  std::string runtime_check_python;  // --runtime-check: runtime.check.python
  bool runtime_check_given = false;  // --runtime-check was given, also with an empty value
  int verbose = 0;
  bool quiet = false;
  std::string recipe;
  std::vector<std::string> overrides;
};

struct JobOptions {
  std::vector<std::string> jobs;  // ids, prefixes (compare: also log file paths)
  bool follow = false;
  std::optional<int> rank;
  std::optional<int> node;     // logs --node
  std::optional<size_t> tail;  // logs --tail
  std::string grep;            // logs --grep
  std::string format = "text";
  std::string window = "3:8";
};

struct AblateOptions {
  Options launch;
  std::vector<std::string> vary;  // KEY=V1,V2
  bool grid = false;
  std::string window = "3:8";
};

// `resume JOB`: the recorded job's recipe and overrides, launched again.
struct ResumeOptions {
  std::string job;
  Options launch;  // env, dry_run, wait, format; the rest comes from the record
};

struct Services;

struct Context {
  std::ostream& out;
  std::ostream& err;
  bool color;
  const Services& services;  // the composition root's seams (launcher/services.h)
};

int cmd_validate(const Options& o, const Context& c);
int cmd_plan(const Options& o, const Context& c);
// A submission started before the command line was parsed (run_cli): the executor named on
// it, with prepare_to_submit already done. cmd_launch takes it when the parsed launch names
// the same executor; otherwise it is dropped, which stops it before it got any input.
struct EarlySubmission {
  std::string executor;
  std::unique_ptr<Executor> prepared;
};
int cmd_launch(const Options& o, const Context& c, EarlySubmission early = {});
int cmd_plugins(const std::string& format, const Context& c);
int cmd_resume(const ResumeOptions& o, const Context& c);
int cmd_list(const JobOptions& o, const Context& c);
int cmd_status(const JobOptions& o, const Context& c);
int cmd_logs(const JobOptions& o, const Context& c);
int cmd_why(const JobOptions& o, const Context& c);
int cmd_cancel(const JobOptions& o, const Context& c);
int cmd_compare(const JobOptions& o, const Context& c);
int cmd_ablate(const AblateOptions& o, const Context& c);

// advise (launcher/cli_advise.cpp) takes the plan options; init (launcher/cli_init.cpp) these.
struct InitOptions {
  std::string shape = "dense";  // dense | moe
  std::string gpu = "h100";
  int num_gpus = 0;       // 0 = one node
  int gpus_per_node = 0;  // 0 = the GPU's default
  std::string executor = "slurm";
  std::string output;  // "" = stdout
  bool force = false;
};
int cmd_advise(const Options& o, const Context& c);
int cmd_init(const InitOptions& o, const Context& c);
// schema (launcher/cli_schema.cpp): the recipe's JSON Schema on stdout (JSON is its only format).
int cmd_schema(const Context& c);

}  // namespace bridge
