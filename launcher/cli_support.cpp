#include "launcher/cli_support.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "jobs/failure_triage.h"
#include "jobs/triage_output.h"
#include "launcher/services.h"
#include "model/compare.h"
#include "plan/runtime_check.h"

namespace bridge {

namespace fs = std::filesystem;

PlanRequest make_request(const Options& o) {
  PlanRequest r;
  r.recipe_path = o.recipe;
  r.overrides = o.overrides;
  if (!o.num_gpus.empty()) r.overrides.push_back("cluster.num_gpus=" + o.num_gpus);
  if (!o.gpus_per_node.empty()) r.overrides.push_back("cluster.gpus_per_node=" + o.gpus_per_node);
  if (!o.gpu.empty()) r.overrides.push_back("cluster.gpu=" + o.gpu);
  // A JSON string is a YAML double-quoted scalar: any path survives the override parser.
  r.template_from_cli = !o.template_path.empty();
  if (!o.template_path.empty())
    r.overrides.push_back("executor.slurm.template=" +
                          nlohmann::json(o.template_path)
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  // Given empty, it still goes to the recipe, where an empty runtime.check.python is an error
  // (plan/runtime_check.h): an empty `--runtime-check ""` must not silently check nothing.
  if (o.runtime_check_given || !o.runtime_check_python.empty())
    r.overrides.push_back("runtime.check.python=" +
                          nlohmann::json(o.runtime_check_python)
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  r.cli_env = o.env;
  r.executor = o.executor;
  r.strict = o.strict;
  return r;
}

// Pre-flight: the chosen executor renders the job (pure: nothing is written or run), so
// every refusal `--dry-run` or a submission would report for a reason bridge-launch can know
// (local needs one node, Kubernetes needs a container image, Slurm time formats, ...) is
// reported by `validate` and `plan` too. validate ok implies --dry-run ok.
bool inspect_plan_code(Plan& plan, const Context& c, CodeDepth depth, Diagnostics& diags) {
  if (!plan.code || !plan.complete || diags.has_errors()) return true;
  bool ok = inspect_code(*plan.code, c.services.runner, depth, diags);
  plan.complete = plan.complete && ok;
  return ok;
}

Plan build_checked_plan(const Options& o, const Context& c, Diagnostics& diags, CodeDepth depth) {
  Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
  run_runtime_check(plan, c.services.runner, c.services.clock, diags);
  if (!plan.complete || diags.has_errors()) return plan;
  // runtime.code: the tree is read (never written) so that a missing or oversized one is
  // refused by validate and plan as by a launch.
  if (!inspect_plan_code(plan, c, depth, diags)) return plan;
  if (std::unique_ptr<Executor> executor = c.services.executor(plan.executor))
    executor->render(plan, dry_run_identity(plan), diags);
  plan.complete = !diags.has_errors();
  return plan;
}

void report_error(std::ostream& err, std::string_view message,
                  std::initializer_list<std::string_view> more) {
  err << "bridge-launch: error: " << message << "\n";
  for (std::string_view line : more) err << line << "\n";
}

void print_diagnostics(const Diagnostics& diags, std::ostream& err, bool color,
                       bool before_submit) {
  for (const auto& d : diags.by_position())
    err << format_diagnostic(d, color, diags.secrets(), diags.secret_sources());
  size_t errors = diags.count(Severity::kError), warnings = diags.count(Severity::kWarning);
  if (errors && before_submit)
    err << fmt::format("{} error{}, {} warning{}; nothing was submitted\n", errors,
                       errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
}

std::optional<JobProgress> live_progress(const Executor& executor, const JobRecord& job) {
  // A few dozen lines hold the newest iteration lines and enough for the ETA's average. The
  // planned rank is read first and, once it logs, alone: one log per poll in the usual case,
  // at most three whatever the job's size.
  constexpr size_t kLines = 60;
  for (int rank : progress_ranks(job))
    if (auto p = progress_from_lines(rank, executor.rank_log_tail(job, rank, kLines))) return p;
  return std::nullopt;
}

void print_failure_summary(const Executor& executor, const JobRecord& job, std::ostream& out) {
  if (job.state != JobState::kFailed) return;
  Diagnostics ignored;  // a summary that cannot be gathered leaves the state line alone
  Triage t = triage(executor.failure_summary_evidence(job, ignored));
  if (!t.first && t.job_level.empty()) return;
  out << triage_to_text(job, t, /*excerpt=*/false)
      << fmt::format("(bridge-launch why {} shows the log excerpt)\n", job.id);
}

}  // namespace bridge
