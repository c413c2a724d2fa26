// validate, plan, plugins and the launch itself (submit, registry entry, --wait).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "executors/executor.h"
#include "executors/job_dir.h"
#include "jobs/job_lifecycle.h"
#include "jobs/registry.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/cli_wait.h"
#include "launcher/services.h"
#include "model/recipe_loader.h"
#include "plan/plan_output.h"
#include "plan/runtime_check.h"
#include "plugins/plugin.h"
#include "system/cancel_token.h"

namespace bridge {

// The registry keeps no function of a secret value (not even a hash: a dictionary recovers
// weak secrets from an unsalted one). `env` / `env.NAME...` texts of a secret variable are
// replaced by <secret>; other env values are kept as they are (the dry-run text in the
// entry shows them anyway).
bool names_secret(const Plan& plan, const std::string& dotted_key) {
  if (dotted_key == "env") {
    return std::any_of(plan.env.vars.begin(), plan.env.vars.end(),
                       [](const EnvVar& v) { return v.secret; });
  }
  if (dotted_key.rfind("env.", 0) != 0) return false;
  std::string name = dotted_key.substr(4, dotted_key.find('.', 4) - 4);
  const EnvVar* v = plan.env.find(name);
  return v == nullptr || v->secret;  // unknown: keep nothing rather than guess
}

namespace {

std::vector<std::string> recorded_overrides(const Plan& plan, const Options& o) {
  std::vector<std::string> out = make_request(o).overrides;
  for (auto& text : out) {
    std::string key = text.substr(0, text.find('='));
    if (names_secret(plan, key)) text = key + "=<secret>";
  }
  return out;
}

JobRecord new_record(const Options& o, const Plan& plan,
                     std::chrono::system_clock::time_point now) {
  JobRecord rec;
  rec.name = *plan.recipe->name.value;
  rec.executor = plan.executor;
  rec.recipe_path = o.recipe;
  rec.overrides = recorded_overrides(plan, o);
  rec.submitted_at = utc_timestamp_iso8601(now);
  rec.nodes = static_cast<int>(plan.topology->nodes);
  rec.ranks = static_cast<int>(plan.topology->num_gpus);
  // rec.knobs and rec.plan_json are left for the submission to fill in (complete_record:
  // recorded_knobs and plan_to_json): they cost more than the rest of the record, and are
  // written while the scheduler command works. rec.rendered is the job's (render_job).
  rec.progress_rank = plan.progress_rank;
  return rec;
}

// What `compare` diffs; a secret shows as <secret> (equal in every job).
std::map<std::string, std::string> recorded_knobs(const Options& o, const Plan& plan) {
  std::map<std::string, std::string> knobs = plan.recipe->inputs;
  for (auto& [key, value] : knobs)
    if (names_secret(plan, key)) value = "<secret>";
  for (const auto& e : o.env) {
    size_t eq = e.find('=');
    std::string name = e.substr(0, eq);
    const EnvVar* v = plan.env.find(name);
    knobs["-E " + name] = (v == nullptr || v->secret)
                              ? "<secret>"
                              : (eq == std::string::npos ? "" : e.substr(eq + 1));
  }
  knobs["executor"] = plan.executor;
  return knobs;
}

}  // namespace

int cmd_validate(const Options& o, const Context& c) {
  Diagnostics diags(o.strict);
  Plan plan = build_checked_plan(o, c, diags);
  bool ok = plan.complete && !diags.has_errors();
  if (o.format == "json") {
    nlohmann::ordered_json j{{"ok", ok}, {"diagnostics", diagnostics_to_json(diags)}};
    c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_diagnostics(diags, c.err, c.color);
    if (ok)
      c.out << fmt::format("{}: ok ({} warning{})\n", o.recipe, diags.count(Severity::kWarning),
                           diags.count(Severity::kWarning) == 1 ? "" : "s");
  }
  return ok ? kExitOk : kExitUsage;
}

int cmd_plan(const Options& o, const Context& c) {
  Diagnostics diags(o.strict);
  Plan plan = build_checked_plan(o, c, diags, CodeDepth::kHash);
  bool ok = plan.complete && !diags.has_errors();
  if (o.format == "json") {
    c.out << plan_to_json(plan, diags).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
  } else {
    print_diagnostics(diags, c.err, c.color);
    if (ok) c.out << plan_to_text(plan, c.color && isatty(STDOUT_FILENO));
  }
  return ok ? kExitOk : kExitUsage;
}

int cmd_plugins(const std::string& format, const Context& c) {
  if (format == "json") {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& p : c.services.plugins)
      list.push_back({{"name", p.name}, {"description", p.description}});
    c.out << list.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows{{"plugin", "description"}};
  for (const auto& p : c.services.plugins) rows.push_back({p.name, p.description});
  c.out << format_table(rows, false);
  return kExitOk;
}

namespace {

// One launch's state, handed from pass to pass: plan -> preview (--dry-run) -> render ->
// record -> submit -> outcome -> wait (launch_planned). A pass returns the exit code when the
// launch ends there, nullopt to go on.
struct Launch {
  Launch(const Options& options, const Context& context, Plan& p, Diagnostics& d)
      : o(options),
        c(context),
        plan(p),
        diags(d),
        reg(context.services.registry),
        lifecycle(context.services.registry) {}

  const Options& o;
  const Context& c;
  Plan& plan;
  Diagnostics& diags;  // the plan's, then the renders'
  const JobRegistry& reg;
  JobLifecycle lifecycle;
  const ExecutorInfo* info = nullptr;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<PreparedJob> preview;  // --dry-run: rendered with the dry-run identity
  std::unique_ptr<PreparedJob> job;      // rendered with the reserved id: what is submitted
  std::string job_id;                    // the id `job` was rendered with
  int sequence = 0;
  Diagnostics submit_diags;  // what the scheduler and the registry say
  Diagnostics plan_diags;    // what the recorded plan lists (later renders add none)
  JobRecord rec;
  std::string snapshot_dir;  // runtime.code's copy for this job, "" when none was made
  std::optional<PendingEntry> pending;
  bool recorded = true;  // every registry write since acceptance succeeded
  SubmitResult sr;

  bool runs_here() const { return info->kind().runs_here; }
};

// A launch that stops before submitting: the plan (JSON) or its diagnostics, and `code`.
int stop_before_submit(const Launch& l, int code) {
  if (l.o.format == "json")
    l.c.out << plan_to_json(l.plan, l.diags)
                   .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
  else
    print_diagnostics(l.diags, l.c.err, l.c.color);
  return code;
}

// plan: a complete plan and its executor; `prepared` is used when it is the plan's, and
// otherwise its preparation stops here, before anything is submitted.
std::optional<int> choose_executor(Launch& l, std::unique_ptr<Executor> prepared,
                                   const std::string& prepared_name) {
  if (!l.plan.complete || l.diags.has_errors()) return stop_before_submit(l, kExitUsage);
  l.info = find_executor(l.c.services.executors, l.plan.executor);
  l.executor = prepared && prepared_name == l.plan.executor
                   ? std::move(prepared)
                   : l.c.services.executor(l.plan.executor);
  prepared.reset();
  if (!l.executor || !l.info) {
    l.diags.error("executor-unavailable", "", {},
                  fmt::format("the {} executor is not available in this build", l.plan.executor));
    return stop_before_submit(l, kExitUsage);
  }
  return std::nullopt;
}

// What --dry-run says of runtime.code, after the rendered job: comment lines, valid in a
// script and in YAML alike. Nothing is copied.
std::string code_dry_run_text(const CodePlan& code, const std::string& job_id) {
  std::string out = fmt::format("# runtime.code: {} of {}\n", code_mode_name(code.mode),
                                printable_text(code.source, 200));
  if (!code.inspection) return out;
  const CodeInspection& found = *code.inspection;
  if (found.git)
    out += fmt::format("#   git commit {}{}\n", found.commit.empty() ? "(none yet)" : found.commit,
                       found.dirty ? ", dirty: uncommitted changes are shipped" : ", clean");
  if (code.mode == CodeMode::kSnapshot)
    out += fmt::format(
        "#   would copy {} files, {} (sha256 {}) to {} at submission; --dry-run copies "
        "nothing\n",
        found.files.size(), byte_size_text(found.bytes), found.hash,
        printable_text(code_host_dir(code, job_id), 200));
  return out;
}

// preview: the dry-run identity renders what --dry-run prints. A launch renders only once, with
// the id it is about to reserve (render_job; render is pure, so the two differ only in what
// the id names): a render is a quarter of the launcher's work before the scheduler gets the
// job (docs/performance.md).
// A dry-run that ends its command ends the process once everything is printed: freeing the
// plan, the recipe and the parser is a tenth of a dry-run's instructions (docs/performance.md).
std::optional<int> render_preview(Launch& l, bool ends_command) {
  if (!l.o.dry_run) return std::nullopt;
  l.preview = l.executor->render(l.plan, dry_run_identity(l.plan), l.diags);
  if (!l.preview || l.diags.has_errors()) return stop_before_submit(l, kExitUsage);
  print_diagnostics(l.diags, l.c.err, l.c.color);  // warnings stay visible in every output
  l.c.out << l.preview->dry_run_text();
  if (l.plan.code) l.c.out << code_dry_run_text(*l.plan.code, dry_run_identity(l.plan).job_id);
  if (ends_command && l.c.services.end_process) l.c.services.end_process(kExitOk);
  return kExitOk;
}

// render: the job as it is submitted, named by the id reserve_id is about to take. Nothing
// exists on disk yet, so a job that does not render leaves nothing behind.
std::optional<int> render_job(Launch& l, int sequence) {
  l.sequence = sequence;
  l.job_id = l.reg.candidate_id(*l.plan.recipe->name.value);
  l.job = l.executor->render(l.plan, SubmissionIdentity{l.job_id, sequence}, l.diags);
  if (!l.job || l.diags.has_errors()) return stop_before_submit(l, kExitUsage);
  print_diagnostics(l.diags, l.c.err, l.c.color);  // warnings stay visible in every output
  return std::nullopt;
}

// record: the registry id only (lock, exclusive create), the rendered job's when it is still
// free (else the job is rendered again with the id taken); the entry itself is written by
// write_pending_entry, before the scheduler can take the job.
std::optional<int> reserve_id(Launch& l) {
  l.submit_diags.add_secrets(l.diags.secrets());  // what the scheduler says is scrubbed too
  l.rec = new_record(l.o, l.plan, l.c.services.clock.now());
  l.plan_diags = l.diags;
  std::optional<std::string> id = l.reg.reserve_id(l.rec.name, "", l.submit_diags, l.job_id);
  if (!id) {
    print_diagnostics(l.submit_diags, l.c.err, l.c.color);
    return kExitRuntime;
  }
  l.rec.id = *id;
  if (*id != l.job_id) {  // another launch took the candidate meanwhile
    Diagnostics again;    // the same messages as the first render's, already shown
    l.job = l.executor->render(l.plan, SubmissionIdentity{*id, l.sequence}, again);
    if (!l.job || again.has_errors()) {  // render is pure: not expected, never silent
      l.reg.release_id(*id);
      for (const Diagnostic& d : again.items())
        if (d.severity == Severity::kError) l.diags.error(d.code, d.path, d.loc, d.message, d.help);
      return stop_before_submit(l, kExitUsage);
    }
  }
  l.rec.rendered = l.job->dry_run_text();
  return std::nullopt;
}

// Whether this launch copies a snapshot (the only long step before the submission).
bool copies_code(const Plan& plan) {
  return plan.code && plan.code->inspection && plan.code->mode == CodeMode::kSnapshot;
}

// A snapshot copy stopped by a signal (or a failed one): nothing was submitted, and neither
// the partial copy (copy_code_snapshot removes it) nor the reserved id is left behind.
int code_not_shipped(Launch& l, const CodePlan& code, const std::string& why, bool interrupted) {
  l.reg.release_id(l.rec.id);
  if (interrupted) {
    print_diagnostics(l.submit_diags, l.c.err, l.c.color, false);
    l.c.err << "interrupted while copying the snapshot of runtime.code; nothing was submitted "
               "and the partial copy was removed\n";
    return kExitInterrupted;
  }
  l.submit_diags.error("code-copy-failed", "runtime.code.path", code.loc,
                       "cannot copy the snapshot of runtime.code: " + why,
                       "free space or fix permissions there (the job dir), keep the tree "
                       "unchanged while it is copied, or use mode: mount");
  print_diagnostics(l.submit_diags, l.c.err, l.c.color);
  return kExitRuntime;
}

// runtime.code: the snapshot is copied once, before the scheduler can take the job, into a
// new directory of its own (executors/job_dir.h); the entry records the commit, the dirty
// state and the hash of what was copied. A mounted tree is recorded as inspected. `cancel`
// is the token the signal handler launch_planned installs for the copy cancels.
std::optional<int> ship_code(Launch& l, const CancelToken& cancel) {
  if (!l.plan.code || !l.plan.code->inspection) return std::nullopt;
  if (copies_code(l.plan) && cancel.cancelled()) return code_not_shipped(l, *l.plan.code, "", true);
  CodePlan& code = *l.plan.code;
  CodeInspection& found = *code.inspection;
  ShippedCode shipped{code_mode_name(code.mode),
                      code.source,
                      code_host_dir(code, l.rec.id),
                      found.commit,
                      std::nullopt,
                      "",
                      0,
                      0};
  if (found.git) shipped.dirty = found.dirty;
  if (code.mode == CodeMode::kSnapshot) {
    std::string dir = code_host_dir(code, l.rec.id);
    std::filesystem::path where(dir);
    StatusOr<CopiedCode> copied =
        copy_code_snapshot(code.source, found.files, where.parent_path().string(),
                           where.filename().string(), CodeCopyOptions{code.max_bytes, &cancel});
    if (copied.ok() && cancel.cancelled()) {  // a signal after the last chunk was read
      remove_code_snapshot(copied->dir);
      return code_not_shipped(l, code, "", true);
    }
    if (!copied.ok()) return code_not_shipped(l, code, copied.why(), cancel.cancelled());
    l.snapshot_dir = copied->dir;
    found.hash = copied->hash;  // what was copied, also when the tree changed since listed
    shipped.hash = "sha256:" + copied->hash;
    shipped.files = copied->files;
    shipped.bytes = copied->bytes;
  }
  l.rec.code = std::move(shipped);
  return std::nullopt;
}

// The pending entry (docs/reliability.md, "Submission durability"): written before the
// scheduler can take the job, so a job it took is never missing from the registry, also
// when bridge-launch is killed right after; then completed with the plan and fsynced.
// Slurm writes it while sbatch starts up and completes it while sbatch talks to the
// controller (a failure is then a warning: sbatch has the script); other executors get both
// done before submit (write_entry_first). A full disk or an unwritable registry stops the
// launch at the write, before anything runs.
bool write_pending_entry(Launch& l) {
  l.pending = l.lifecycle.submitting(l.rec, l.submit_diags);
  return l.pending.has_value();
}

// The knobs and the plan cost more than the rest of the record: written while the
// scheduler command works.
void complete_record(Launch& l) {
  if (!l.rec.plan_json.is_null()) return;
  l.rec.knobs = recorded_knobs(l.o, l.plan);
  l.rec.plan_json = plan_to_json(l.plan, l.plan_diags);
}

void flush_while_submitting(Launch& l) {
  complete_record(l);
  Diagnostics flush_diags;
  if (l.pending && !l.lifecycle.flush(*l.pending, l.rec, flush_diags))
    l.submit_diags.add_as_warnings(flush_diags,
                                   "; the submission was already under way, so the job may run "
                                   "and a crash of this machine could lose its entry");
}

// A job that does not call before_submit itself gets its entry written and flushed here.
std::optional<int> write_entry_first(Launch& l) {
  if (l.job->calls_before_submit()) return std::nullopt;
  complete_record(l);
  bool ready = write_pending_entry(l) && l.lifecycle.flush(*l.pending, l.rec, l.submit_diags);
  if (ready) return std::nullopt;
  if (l.pending) l.lifecycle.not_accepted(*l.pending);
  l.reg.release_id(l.rec.id);
  print_diagnostics(l.submit_diags, l.c.err, l.c.color);
  return kExitRuntime;
}

// The scheduler took the job: its answer goes into the entry, the id to the user.
void record_acceptance(Launch& l, const SubmitResult& accepted) {
  complete_record(l);  // when the submission found the job without giving it its input
  JobRecord& rec = l.rec;
  rec.scheduler_id = accepted.scheduler_id;
  rec.job_dir = accepted.job_dir;
  rec.context = accepted.context;
  rec.namespace_ = accepted.namespace_;
  rec.state = l.runs_here() ? JobState::kRunning : JobState::kPending;
  if (l.runs_here()) rec.started_at = utc_time_text(l.c.services.clock.now());  // ranks start
  if (accepted.final_state != JobState::kUnknown) rec.state = accepted.final_state;
  rec.state_detail = accepted.state_detail;
  l.recorded =
      l.lifecycle.accepted(rec, l.submit_diags, l.pending ? &*l.pending : nullptr) && l.recorded;
  l.c.err << fmt::format("bridge-launch: submitted job {} ({} id {})\n", rec.id, l.plan.executor,
                         accepted.scheduler_id);
  if (!l.runs_here()) l.c.out << rec.id << "\n";
}

// submit: the scheduler (or the local ranks) gets the job; Ctrl-C and SIGTERM are held back
// until the entry is written.
// A signal held back since the snapshot was copied (`deferred`) that arrived before the
// scheduler got anything: nothing is submitted, the id, the entry and the snapshot go.
std::optional<int> interrupted_before_submission(Launch& l, DeferredInterrupts& deferred) {
  if (!deferred.arrived()) return std::nullopt;
  deferred.release();
  if (l.pending) l.lifecycle.not_accepted(*l.pending);
  l.reg.release_id(l.rec.id);
  if (!l.snapshot_dir.empty()) remove_code_snapshot(l.snapshot_dir);
  print_diagnostics(l.submit_diags, l.c.err, l.c.color, false);
  l.c.err << "interrupted before the job was submitted: nothing was submitted, and the "
             "snapshot of runtime.code was removed\n";
  return kExitInterrupted;
}

// `deferred`: SIGINT/SIGTERM/SIGHUP held back since the end of the snapshot's copy (empty
// when no snapshot was copied); a scheduler's submission holds them back from here anyway.
std::optional<int> submit(Launch& l, std::optional<DeferredInterrupts>& deferred,
                          bool ends_command) {
  SubmitOptions so;
  so.wait = l.o.wait || l.runs_here();
  so.ends_after = ends_command && !so.wait;
  so.verbosity = l.o.quiet ? -1 : l.o.verbose;
  so.before_submit = [&l] { return write_pending_entry(l); };
  so.while_submitting = [&l] { flush_while_submitting(l); };
  if (!deferred && !l.runs_here()) deferred.emplace();
  if (std::optional<int> stop = write_entry_first(l)) return stop;
  if (deferred)
    if (std::optional<int> stop = interrupted_before_submission(l, *deferred)) return stop;
  // Local ranks take Ctrl-C themselves (the process group stops them).
  if (l.runs_here()) deferred.reset();
  l.sr = l.job->submit(so, l.c.out, l.submit_diags,
                       [&l](const SubmitResult& accepted) { record_acceptance(l, accepted); });
  bool interrupted = deferred && deferred->release();
  if (!l.sr.accepted) {
    if (l.pending) l.lifecycle.not_accepted(*l.pending);
    l.reg.release_id(l.rec.id);
    if (!l.snapshot_dir.empty()) remove_code_snapshot(l.snapshot_dir);
  }
  if (!interrupted) return std::nullopt;
  print_diagnostics(l.submit_diags, l.c.err, l.c.color, false);
  if (l.sr.accepted)
    l.c.err << fmt::format(
        "interrupted: job {} was submitted and recorded and keeps running "
        "(bridge-launch status {}; bridge-launch cancel {})\n",
        l.rec.id, l.rec.id, l.rec.id);
  return kExitInterrupted;
}

// outcome: a local run ends inside submit, so its outcome is news (a scheduler's "pending"
// was recorded on acceptance and observe writes nothing for it). A job whose outcome is not
// on record must not look like a clean success to a script.
void record_outcome(Launch& l) {
  if (!l.sr.accepted) return;
  JobStatus outcome;
  outcome.state = l.sr.final_state;
  outcome.detail = l.sr.state_detail;
  outcome.exit_code = l.sr.exit_code_of_rank;
  if (l.runs_here() && is_final(l.sr.final_state))
    outcome.ended_at = utc_time_text(l.c.services.clock.now());
  l.recorded = (l.runs_here() ? l.lifecycle.finished(l.rec, outcome, l.submit_diags)
                              : l.lifecycle.observe(l.rec, outcome, l.submit_diags)) &&
               l.recorded;
  if (l.recorded) return;
  l.submit_diags.error(
      "registry-stale", "", {},
      fmt::format("job {} ({} id {}): its state {} could not be saved in the registry", l.rec.id,
                  l.plan.executor, l.rec.scheduler_id, job_state_name(l.rec.state)),
      "free space or fix permissions under " + l.reg.dir() +
          "; `bridge-launch status` may show an out-of-date state for this job");
}

// wait: --wait follows a scheduler's job; a command that ends with this launch may end the
// process here (Services::end_process).
int finish(Launch& l, bool ends_command) {
  print_diagnostics(l.submit_diags, l.c.err, l.c.color, false);
  const SubmitResult& sr = l.sr;
  if (sr.accepted && !l.recorded && sr.exit_code == kExitOk) return kExitRuntime;
  if (sr.accepted && l.o.wait && !l.runs_here() && sr.exit_code == kExitOk)
    return wait_for_job(*l.executor, l.rec, l.reg, l.c);
  if (ends_command && l.c.services.end_process) l.c.services.end_process(sr.exit_code);
  return sr.exit_code;
}

}  // namespace

LaunchOutcome launch_planned(const Options& o, const Context& c, Plan& plan, Diagnostics& diags,
                             LaunchSettings settings) {
  Launch l(o, c, plan, diags);
  // runtime.code's tree is read before anything else: a missing or oversized one stops the
  // launch with exit 2. A launch hashes the snapshot as it copies it; --dry-run reads it.
  inspect_plan_code(plan, c, o.dry_run ? CodeDepth::kHash : CodeDepth::kList, diags);
  std::optional<int> stop =
      choose_executor(l, std::move(settings.prepared), settings.prepared_name);
  if (!stop) stop = render_preview(l, settings.ends_command);
  std::optional<DeferredInterrupts> deferred;
  {
    // From the reserved id to the copied snapshot, SIGINT/SIGTERM/SIGHUP cancel a token the
    // copy watches instead of killing the process, so both are removed (docs/reliability.md).
    std::optional<CancelToken> own_token;
    CancelToken& token = c.services.cancel ? *c.services.cancel : own_token.emplace();
    std::optional<WaitInterrupts> copy_interrupts;
    if (!stop && copies_code(plan)) copy_interrupts.emplace(token);
    if (!stop) stop = render_job(l, settings.sequence);
    if (!stop) stop = reserve_id(l);
    if (!stop) stop = ship_code(l, token);
    // Held back before the copy's handlers go, so that no signal falls between the copy and
    // the submission (it would end the process and leave the snapshot and the reservation).
    if (!stop && copy_interrupts) deferred.emplace();
  }
  if (!stop) stop = submit(l, deferred, settings.ends_command);
  if (!stop) record_outcome(l);
  return {stop ? *stop : finish(l, settings.ends_command), l.rec.id};
}

int cmd_launch(const Options& o, const Context& c, EarlySubmission early) {
  Diagnostics diags(o.strict);
  // An executor named by --executor prepares its submission first (Slurm starts sbatch, which
  // then waits for its script), so that the scheduler command's start-up overlaps planning
  // (docs/performance.md); run_cli usually did so before parsing. A plan that fails stops it
  // before it got anything to submit.
  std::unique_ptr<Executor> prepared;
  if (!o.dry_run && !o.executor.empty()) {
    if (early.prepared && early.executor == o.executor) {
      prepared = std::move(early.prepared);
    } else {
      prepared = c.services.executor(o.executor);
      if (prepared) prepared->prepare_to_submit();
    }
  }
  early.prepared.reset();
  Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
  // The check takes seconds to minutes: a scheduler command started early would wait for
  // its script that long, so it is stopped (before it got any input) and started again later.
  if (runtime_check_asked(plan)) prepared.reset();
  run_runtime_check(plan, c.services.runner, c.services.clock, diags);
  LaunchSettings settings;
  settings.prepared = std::move(prepared);
  settings.prepared_name = o.executor;
  settings.ends_command = true;
  return launch_planned(o, c, plan, diags, std::move(settings)).exit_code;
}

}  // namespace bridge
