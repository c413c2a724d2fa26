// list, status, why, logs, cancel and compare: following jobs and comparing their step times
// (ablate, which submits the jobs it compares, is in cli_ablate.cpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "base/utf8.h"
#include "executors/executor.h"
#include "jobs/failure_triage.h"
#include "jobs/job_checkpoint.h"
#include "jobs/job_lifecycle.h"
#include "jobs/job_progress.h"
#include "jobs/job_watchdog.h"
#include "jobs/registry.h"
#include "jobs/triage_output.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "model/compare.h"
#include "plan/plan_confirm.h"
#include "plan/plan_output.h"
#include "system/file_read.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

// `with_job_files`: also what the job dir and the checkpoint dir say (the newest checkpoint,
// the watchdog's verdicts): for the jobs `status` names, not for every job `list` shows.
nlohmann::ordered_json record_summary(const JobRecord& r, SystemTime now, bool with_job_files) {
  auto elapsed = job_elapsed(r, now);
  auto text_or_null = [](const std::string& t) {
    return t.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(t);
  };
  nlohmann::ordered_json j{
      {"id", r.id},
      {"name", r.name},
      {"executor", r.executor},
      {"scheduler_id", r.scheduler_id},
      {"state", job_state_name(r.state)},
      {"detail", r.state_detail},
      {"exit_code", r.exit_code ? nlohmann::ordered_json(*r.exit_code) : nullptr},
      {"submitted_at", r.submitted_at},
      {"started_at", text_or_null(r.started_at)},
      {"ended_at", text_or_null(r.ended_at)},
      {"elapsed_s", elapsed ? nlohmann::ordered_json(elapsed->count()) : nullptr},
      {"nodes", r.nodes},
      {"ranks", r.ranks},
      {"job_dir", r.job_dir}};
  if (r.code) j["code"] = shipped_code_to_json(*r.code);
  if (!with_job_files) return j;
  if (auto checkpoint = newest_checkpoint(r)) j["checkpoint"] = checkpoint_to_json(*checkpoint);
  nlohmann::ordered_json watchdog = nlohmann::ordered_json::array();
  for (const WatchdogEvent& e : read_watchdog_events(r.job_dir))
    watchdog.push_back({{"attempt", e.attempt},
                        {"kind", e.kind},
                        {"iteration", e.iteration < 0 ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(e.iteration)},
                        {"at", e.at},
                        {"text", watchdog_event_text(e)}});
  if (!watchdog.empty()) j["watchdog"] = watchdog;
  return j;
}

// The `code` line of `status JOB`: which source tree the job ran (runtime.code).
std::string shipped_code_text(const ShippedCode& code) {
  std::string git = code.commit.empty() ? std::string("no git commit")
                                        : fmt::format("git {}", code.commit.substr(0, 12));
  if (code.dirty) git += *code.dirty ? " (dirty)" : " (clean)";
  std::string text = fmt::format("{} of {}: {}", code.mode, printable_text(code.source, 200), git);
  if (!code.hash.empty())
    text += fmt::format(", {} files, {}, {}", code.files, byte_size_text(code.bytes),
                        code.hash.substr(0, 23));
  return text + (code.mode == "snapshot" ? " in " + printable_text(code.dir, 200) : "");
}

// A registry field in a table cell: what the scheduler wrote may span lines (a Kubernetes
// condition message) or hold escapes; the row stays one line, the terminal is not driven.
std::string one_line(const std::string& text) { return printable_text(text, 500); }

std::string elapsed_cell(const JobRecord& r, SystemTime now) {
  auto elapsed = job_elapsed(r, now);
  return elapsed ? duration_text(*elapsed) : "-";
}

// The plan confirmation's verdict (plan/plan_confirm.h) of a job whose recorded plan started
// its ranks through the confirmation; nullopt for any other job, whatever its job dir holds.
std::optional<PlanConfirmationVerdict> confirmation_verdict(const JobRecord& r, const Context& c) {
  std::unique_ptr<Executor> ex = c.services.executor(r.executor);
  return ex ? ex->plan_confirmation(r) : std::nullopt;
}

// `status JOB`: one job, one field a line.
void print_record_details(const JobRecord& r, SystemTime now, const Context& c) {
  auto or_dash = [](const std::string& t) { return t.empty() ? std::string("-") : t; };
  std::vector<std::vector<std::string>> rows{
      {"job", r.id},
      {"state", r.state_detail.empty() || r.state_detail == job_state_name(r.state)
                    ? job_state_name(r.state)
                    : fmt::format("{} ({})", job_state_name(r.state), one_line(r.state_detail))},
      {"executor", fmt::format("{} (id {})", r.executor, or_dash(r.scheduler_id))},
      {"nodes", fmt::format("{} ({} rank{})", r.nodes, r.ranks, r.ranks == 1 ? "" : "s")},
      {"submitted", or_dash(r.submitted_at)},
      {"started", or_dash(r.started_at)},
      {"ended", is_final(r.state) ? or_dash(r.ended_at) : "-"},
      {"elapsed", elapsed_cell(r, now) + (r.state == JobState::kRunning ? " (running)" : "")},
      {"job dir", or_dash(r.job_dir)}};
  if (r.code) rows.push_back({"code", shipped_code_text(*r.code)});
  if (auto checkpoint = newest_checkpoint(r))
    rows.push_back({"checkpoint", checkpoint_text(*checkpoint)});
  if (auto verdict = confirmation_verdict(r, c))
    rows.push_back({"plan", plan_confirmation_line(*verdict)});
  for (const WatchdogEvent& e : read_watchdog_events(r.job_dir))
    rows.push_back({"watchdog", fmt::format("attempt {}: {}", e.attempt, watchdog_event_text(e))});
  for (const auto& row : rows) c.out << fmt::format("{:<10} {}\n", row[0], row[1]);
}

// A retried job's attempts, under the details: "attempts   1: Slurm job 134 on node1, ...".
void print_attempts(const std::vector<std::string>& lines, const Context& c) {
  for (size_t i = 0; i < lines.size(); ++i)
    c.out << fmt::format("{:<10} {}\n", i == 0 ? "attempts" : "", one_line(lines[i]));
}

void print_records(const std::vector<JobRecord>& recs, const std::string& format,
                   bool with_job_files, const Context& c) {
  SystemTime now = c.services.clock.now();
  if (format == "json") {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& r : recs) a.push_back(record_summary(r, now, with_job_files));
    c.out << a.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  if (recs.empty()) {  // a bare header reads like a broken command
    c.out << "no jobs in the registry yet (bridge-launch RECIPE.yaml submits one)\n";
    return;
  }
  std::vector<std::vector<std::string>> rows{
      {"job", "executor", "scheduler id", "state", "nodes", "submitted", "elapsed", "detail"}};
  for (const auto& r : recs)
    rows.push_back({one_line(r.id), one_line(r.executor), one_line(r.scheduler_id),
                    job_state_name(r.state), std::to_string(r.nodes), one_line(r.submitted_at),
                    elapsed_cell(r, now), one_line(r.state_detail)});
  c.out << format_table(rows, false);
}

// Refreshes non-final records with one status query per executor and saves changes.
void refresh(std::vector<JobRecord>& recs, const Context& c, Diagnostics& diags) {
  JobLifecycle lifecycle(c.services.registry);
  std::map<std::string, std::vector<JobRecord*>> by_executor;
  for (auto& r : recs)
    if (!is_final(r.state)) by_executor[r.executor].push_back(&r);
  for (auto& [name, list] : by_executor) {
    std::unique_ptr<Executor> ex = c.services.executor(name);
    if (!ex) continue;
    std::vector<JobRecord> query;
    for (auto* r : list) query.push_back(*r);
    std::vector<JobStatus> st = ex->status(query, diags);
    for (size_t i = 0; i < list.size() && i < st.size(); ++i)
      lifecycle.observe(*list[i], st[i], diags);
  }
}

std::optional<JobRecord> find_job(const std::string& ref, const Context& c) {
  Diagnostics diags;
  auto rec = c.services.registry.find(ref, diags);
  if (!rec) print_diagnostics(diags, c.err, c.color, false);
  return rec;
}

// A compare operand: a registry job (its rank logs) or a log file given by path.
struct Series {
  std::string label;
  std::vector<IterationSample> samples;
  std::optional<KnobValues> knobs;  // registry jobs only
  std::optional<JobState> state;    // registry jobs only
};

// The iteration samples of a log, read by the bounded reader (system/file_read.h) in pieces
// of whole lines: a job dir's `.log` may be a FIFO, a link to /dev/zero or one endless line,
// none of which may hang `compare` or grow its memory. Megatron's iteration line is short, so
// a line past 4 KiB is skipped (parse_iteration_lines skips it too).
std::vector<IterationSample> log_samples(const fs::path& path) {
  constexpr size_t kPiece = size_t{1} << 20, kLongestLine = 4096;
  std::vector<IterationSample> out;
  StatusOr<RegularFile> file = open_regular_file(path);
  if (!file.ok()) return out;
  auto parse = [&out](const std::string& lines) {
    std::istringstream in(lines);
    for (const IterationSample& sample : parse_iteration_lines(in)) out.push_back(sample);
  };
  std::string pending;    // the start of a line that ends in a later piece
  bool skipping = false;  // inside a line too long to parse, until its newline
  for (uint64_t offset = 0;;) {
    StatusOr<std::string> piece = file->read_at(offset, kPiece);
    if (!piece.ok() || piece->empty()) break;
    offset += piece->size();
    std::string_view rest = *piece;
    if (skipping) {
      size_t nl = rest.find('\n');
      if (nl == std::string_view::npos) continue;
      rest.remove_prefix(nl + 1);
      skipping = false;
    }
    pending.append(rest);
    if (size_t end = pending.rfind('\n'); end != std::string::npos) {
      parse(pending.substr(0, end + 1));
      pending.erase(0, end + 1);
    }
    if (pending.size() > kLongestLine) {
      pending.clear();
      skipping = true;
    }
  }
  if (!skipping) parse(pending);
  return out;
}

std::optional<Series> load_series(const std::string& ref, const Context& c) {
  std::error_code ec;
  if (fs::is_regular_file(ref, ec)) {  // a path the user gave: its links are theirs to follow
    fs::path resolved = fs::canonical(ref, ec);
    return Series{ref, log_samples(ec ? fs::path(ref) : resolved), std::nullopt, std::nullopt};
  }
  auto rec = find_job(ref, c);
  if (!rec) return std::nullopt;
  Series s{rec->id, {}, KnobValues{rec->knobs, resolved_recipe_values(rec->plan_json)}, rec->state};
  for (const auto& e : fs::directory_iterator(rec->job_dir, ec)) {
    if (e.path().extension() != ".log") continue;
    auto samples = log_samples(e.path());
    if (samples.size() > s.samples.size()) s.samples = std::move(samples);
  }
  return s;
}

}  // namespace

int cmd_list(const JobOptions& o, const Context& c) {
  Diagnostics diags;
  auto recs = c.services.registry.list(diags);
  print_diagnostics(diags, c.err, c.color, false);
  print_records(recs, o.format, /*with_job_files=*/false, c);
  return kExitOk;
}

int cmd_status(const JobOptions& o, const Context& c) {
  const JobRegistry& reg = c.services.registry;
  Diagnostics diags;
  std::vector<JobRecord> recs;
  if (o.jobs.empty()) {
    recs = reg.list(diags);
  } else {
    for (const auto& ref : o.jobs) {
      auto r = reg.find(ref, diags);
      if (r) recs.push_back(std::move(*r));
    }
    if (diags.has_errors()) {
      print_diagnostics(diags, c.err, c.color, false);
      return kExitUsage;
    }
  }
  refresh(recs, c, diags);
  print_diagnostics(diags, c.err, c.color, false);
  if (o.jobs.size() == 1 && recs.size() == 1 && o.format == "text") {
    print_record_details(recs[0], c.services.clock.now(), c);
    if (auto ex = c.services.executor(recs[0].executor))
      print_attempts(ex->attempt_history(recs[0]), c);
  } else
    print_records(recs, o.format, /*with_job_files=*/!o.jobs.empty(), c);
  // One job asked for by name and it failed: say why, in one screen.
  if (o.jobs.size() == 1 && recs.size() == 1 && o.format == "text")
    if (auto ex = c.services.executor(recs[0].executor)) print_failure_summary(*ex, recs[0], c.out);
  return kExitOk;
}

namespace {

// Why `resume` cannot launch `rec` again, or "" when it can.
std::string resume_refusal(const JobRecord& rec, std::string& fix) {
  if (!is_final(rec.state)) {
    fix = fmt::format("wait for it to end, or `bridge-launch cancel {}` first", rec.id);
    return fmt::format("job {} is {}: two attempts would write the same checkpoints", rec.id,
                       job_state_name(rec.state));
  }
  auto dir = rec.knobs.find("checkpoint.dir");
  if (dir == rec.knobs.end() || dir->second.empty() || dir->second == "null") {
    fix = "add `checkpoint: {dir: /shared/path, interval: N}` to the recipe and launch it";
    return fmt::format("job {} has no checkpoint.dir: a new launch would start from iteration 0",
                       rec.id);
  }
  for (const std::string& o : rec.overrides)
    if (o.size() > 9 && o.compare(o.size() - 9, 9, "=<secret>") == 0) {
      fix = "launch the recipe again yourself, passing the secret as you did the first time";
      return fmt::format(
          "job {} was launched with a secret override ({}), which the registry "
          "does not keep",
          rec.id, o.substr(0, o.size() - 9));
    }
  std::error_code ec;
  if (!fs::is_regular_file(rec.recipe_path, ec)) {
    fix =
        "run `bridge-launch resume` from the directory the job was launched from, or launch "
        "the recipe again";
    return fmt::format("the job's recipe {} is not there any more (looked for {})",
                       printable_text(rec.recipe_path, 200),
                       printable_text(fs::absolute(rec.recipe_path, ec).string(), 300));
  }
  return "";
}

}  // namespace

// `resume JOB`: the recipe and overrides the job was launched with, on the same executor,
// launched again. Its checkpoint.load is the save directory, so every rank loads the newest
// complete checkpoint there (docs/long-jobs.md).
int cmd_resume(const ResumeOptions& o, const Context& c) {
  auto rec = find_job(o.job, c);
  if (!rec) return kExitUsage;
  Diagnostics diags;
  std::vector<JobRecord> recs{*rec};
  refresh(recs, c, diags);
  std::string fix;
  if (std::string why = resume_refusal(recs[0], fix); !why.empty()) {
    diags.error("resume-refused", "", {}, why, fix);
    print_diagnostics(diags, c.err, c.color, false);
    return kExitUsage;
  }
  print_diagnostics(diags, c.err, c.color, false);
  Options launch = o.launch;
  launch.executor = recs[0].executor;
  launch.recipe = recs[0].recipe_path;
  launch.overrides = recs[0].overrides;
  std::string from = "no checkpoint yet: it starts from iteration 0";
  if (auto checkpoint = newest_checkpoint(recs[0]))
    from = checkpoint->found ? fmt::format("it loads iteration {}", checkpoint->iteration)
                             : "no checkpoint there yet: it starts from iteration 0";
  c.services.log.info(
      "resuming {}: {}{} on {}; {}", recs[0].id, printable_text(launch.recipe, 200),
      launch.overrides.empty()
          ? ""
          : " " + printable_text(fmt::format("{}", fmt::join(launch.overrides, " ")), 400),
      launch.executor, from);
  return cmd_launch(launch, c);
}

int cmd_why(const JobOptions& o, const Context& c) {
  auto rec = find_job(o.jobs.at(0), c);
  if (!rec) return kExitUsage;
  std::unique_ptr<Executor> ex = c.services.executor(rec->executor);
  if (!ex) return kExitRuntime;
  Diagnostics diags;
  std::vector<JobRecord> one{*rec};
  refresh(one, c, diags);
  // A job the watchdog ended after its last iteration (a teardown hang) succeeded: the
  // processes it stopped are its doing, not a failure to explain (docs/long-jobs.md).
  std::optional<WatchdogEvent> teardown;
  if (std::vector<WatchdogEvent> events = read_watchdog_events(one[0].job_dir);
      one[0].state == JobState::kSucceeded && !events.empty() && events.back().kind == "teardown")
    teardown = events.back();
  Triage t = teardown ? Triage{} : triage(ex->failure_evidence(one[0], diags));
  print_diagnostics(diags, c.err, c.color, false);
  // What the plan confirmation at start found (plan/plan_confirm.h), before the triage.
  std::optional<PlanConfirmationVerdict> verdict = ex->plan_confirmation(one[0]);
  // Which checkpoint the attempt started from (docs/long-jobs.md).
  std::optional<int64_t> resumed = resumed_iteration(one[0]);
  if (o.format == "json") {
    nlohmann::ordered_json j = triage_to_json(one[0], t);
    if (verdict) j["plan_confirmation"] = plan_confirmation_to_json(*verdict);
    if (resumed) j["resumed_from_iteration"] = *resumed;
    if (teardown) j["watchdog"] = watchdog_event_text(*teardown);
    c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    if (verdict) c.out << plan_confirmation_line(*verdict) << "\n";
    if (resumed)
      c.out << fmt::format("resumed: the attempt started from the checkpoint of iteration {}\n",
                           *resumed);
    c.out << triage_to_text(one[0], t, /*excerpt=*/true);
    if (teardown) c.out << watchdog_event_text(*teardown) << "\n";
  }
  // A script can branch on it: 1 when the job failed (the summary is printed either way).
  return one[0].state == JobState::kFailed ? kExitRuntime : kExitOk;
}

int cmd_logs(const JobOptions& o, const Context& c) {
  auto rec = find_job(o.jobs.at(0), c);
  if (!rec) return kExitUsage;
  LogQuery query;
  auto [grep, grep_error] = LineFilter::compile(o.grep);
  if (!grep) {
    report_error(c.err, fmt::format("--grep {}: {}", printable_text(o.grep, 200), grep_error),
                 {"  help: the pattern is an ECMAScript regular expression, e.g. 'NCCL|CUDA "
                  "error'; escape ( [ { with a backslash to match them literally"});
    return kExitUsage;
  }
  query.grep = std::move(*grep);
  query.rank = o.rank;
  query.node = o.node;
  query.tail = o.tail;
  query.follow = o.follow;
  std::unique_ptr<Executor> ex = c.services.executor(rec->executor);
  Diagnostics diags;
  int rc = ex ? ex->logs(*rec, query, c.out, c.err, diags) : kExitRuntime;
  // grep prints nothing when nothing matches; a note on stderr says it was looked for.
  if (rc == kExitOk && !o.grep.empty() && query.grep.kept() == 0)
    c.err << fmt::format("no line matched `{}`{}\n", printable_text(o.grep, 200),
                         o.tail ? fmt::format(" in the last {} lines of each log", *o.tail) : "");
  print_diagnostics(diags, c.err, c.color, false);
  return rc;
}

int cmd_cancel(const JobOptions& o, const Context& c) {
  auto rec = find_job(o.jobs.at(0), c);
  if (!rec) return kExitUsage;
  std::unique_ptr<Executor> ex = c.services.executor(rec->executor);
  Diagnostics diags;
  // Read before the cancel: a retried Slurm job's newest attempt is the one scancel stops, not
  // the first one the registry recorded.
  std::string cancelled_id = ex ? ex->current_scheduler_id(*rec) : rec->scheduler_id;
  int rc = ex ? ex->cancel(*rec, diags) : kExitRuntime;
  if (rc == kExitOk) {
    JobLifecycle(c.services.registry).cancelled(*rec, diags);
    c.out << fmt::format("cancelled {} ({} id {})\n", rec->id, rec->executor,
                         printable_text(cancelled_id, 200));
  }
  print_diagnostics(diags, c.err, c.color, false);
  return rc;
}

namespace {

// What `compare` shows: each operand's steady-state statistics in the window, the knobs in
// which it differs from the first (the baseline), and notes on what makes the comparison weak.
struct Comparison {
  std::pair<int, int> window;
  std::vector<Series> series;
  std::vector<WindowStats> stats;
  std::vector<std::vector<KnobDifference>> knob_diffs;
  std::vector<std::string> notes;
  double base = 0;  // the baseline's mean step time; 0 when it has none in the window
};

// Each operand's statistics, with a note when they describe no finished run or few samples.
void add_window_stats(Comparison& cmp) {
  const auto [first, last] = cmp.window;
  for (const auto& s : cmp.series) {
    cmp.stats.push_back(window_stats(s.samples, first, last));
    const size_t samples = cmp.stats.back().samples;
    // A failed or cancelled job's step times describe a run that did not finish.
    if (s.state && *s.state != JobState::kSucceeded)
      cmp.notes.push_back(fmt::format("{} is {}: its step times are not a finished run's", s.label,
                                      job_state_name(*s.state)));
    if (s.samples.empty())
      cmp.notes.push_back(fmt::format("{}: no iteration lines in its logs", s.label));
    else if (samples == 0)
      cmp.notes.push_back(fmt::format("{}: none of its iteration lines is in iterations {}-{}",
                                      s.label, first, last));
    else if (samples < 5)
      cmp.notes.push_back(
          fmt::format("{}: only {} sample{} in iterations {}-{}: directional, not "
                      "release quality",
                      s.label, samples, samples == 1 ? "" : "s", first, last));
  }
}

std::vector<std::string> knob_keys(const std::vector<KnobDifference>& diffs) {
  std::vector<std::string> keys;
  for (const auto& d : diffs) keys.push_back(d.key);
  return keys;
}

// The knobs each operand changes against the baseline; more than one is a weak comparison.
void add_knob_differences(Comparison& cmp) {
  const std::vector<Series>& series = cmp.series;
  cmp.knob_diffs.resize(series.size());
  for (size_t i = 1; i < series.size(); ++i) {
    if (!series[0].knobs || !series[i].knobs) continue;
    cmp.knob_diffs[i] = knob_differences(*series[0].knobs, *series[i].knobs);
    if (cmp.knob_diffs[i].size() > 1)
      cmp.notes.push_back(
          fmt::format("{} differs from {} in {} knobs ({}): directional, not release "
                      "quality",
                      series[i].label, series[0].label, cmp.knob_diffs[i].size(),
                      fmt::join(knob_keys(cmp.knob_diffs[i]), ", ")));
  }
}

// Nothing to compare: the baseline, or every job, has no step time in the window.
bool nothing_to_compare(Comparison& cmp) {
  const std::vector<WindowStats>& stats = cmp.stats;
  cmp.base = stats.empty() || stats[0].samples == 0 ? 0 : stats[0].mean;
  bool nothing = cmp.base <= 0 || std::none_of(stats.begin() + 1, stats.end(),
                                               [](const auto& w) { return w.samples > 0; });
  if (cmp.series.size() < 2) nothing = cmp.base <= 0;
  if (nothing)
    cmp.notes.push_back(fmt::format(
        "nothing to compare: {} in iterations {}-{}",
        cmp.base <= 0 ? "the baseline has no step time" : "no other job has a step time",
        cmp.window.first, cmp.window.second));
  return nothing;
}

nlohmann::ordered_json differences_json(const std::vector<KnobDifference>& diffs) {
  auto value = [](const std::optional<std::string>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& d : diffs)
    out.push_back({{"key", d.key}, {"value", value(d.value)}, {"baseline", value(d.baseline)}});
  return out;
}

void print_comparison_json(const Comparison& cmp, const Context& c) {
  auto number = [](const WindowStats& w, double v) {
    return w.samples ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json j{{"window", {cmp.window.first, cmp.window.second}}, {"jobs", nullptr}};
  nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < cmp.series.size(); ++i) {
    const Series& s = cmp.series[i];
    const WindowStats& w = cmp.stats[i];
    jobs.push_back({{"job", s.label},
                    {"state", s.state ? nlohmann::ordered_json(job_state_name(*s.state))
                                      : nlohmann::ordered_json(nullptr)},
                    {"samples", w.samples},
                    {"mean_ms", number(w, w.mean)},
                    {"min_ms", number(w, w.min)},
                    {"max_ms", number(w, w.max)},
                    {"stddev_ms", number(w, w.stddev)},
                    {"ratio", cmp.base > 0 && w.samples ? nlohmann::ordered_json(w.mean / cmp.base)
                                                        : nlohmann::ordered_json(nullptr)},
                    {"differs_in", knob_keys(cmp.knob_diffs[i])},
                    {"differences", differences_json(cmp.knob_diffs[i])}});
  }
  j["jobs"] = jobs;
  j["notes"] = cmp.notes;
  c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::string differences_text(const std::vector<KnobDifference>& diffs) {
  std::vector<std::string> items;
  for (const auto& d : diffs) items.push_back(printable_text(describe_knob_value(d), 200));
  return fmt::format("{}", fmt::join(items, ", "));
}

// The baseline's values of the keys the other jobs change, once each: the table shows only
// the other jobs' values.
std::string baseline_values_line(const Comparison& cmp) {
  std::set<std::string> seen;
  std::vector<std::string> items;
  for (const auto& diffs : cmp.knob_diffs)
    for (const auto& d : diffs)
      if (seen.insert(d.key).second)
        items.push_back(printable_text(describe_knob_baseline(d), 200));
  if (items.empty()) return "";
  return fmt::format("baseline: {}\n", fmt::join(items, ", "));
}

void print_comparison_text(const Comparison& cmp, const Context& c) {
  auto cell = [](const WindowStats& w, double v) {
    return w.samples ? fmt::format("{:.1f}", v) : std::string("-");
  };
  std::vector<std::vector<std::string>> rows{{"job", "state", "samples", "mean ms", "min ms",
                                              "max ms", "stddev ms", "ratio", "differs in"}};
  for (size_t i = 0; i < cmp.series.size(); ++i) {
    const Series& s = cmp.series[i];
    const WindowStats& w = cmp.stats[i];
    rows.push_back({s.label, s.state ? job_state_name(*s.state) : "(file)",
                    std::to_string(w.samples), cell(w, w.mean), cell(w, w.min), cell(w, w.max),
                    cell(w, w.stddev),
                    cmp.base > 0 && w.samples ? fmt::format("{:.3f}", w.mean / cmp.base) : "-",
                    i == 0 ? "(baseline)" : differences_text(cmp.knob_diffs[i])});
  }
  c.out << fmt::format("steady-state step time, iterations {}-{}:\n", cmp.window.first,
                       cmp.window.second)
        << format_table(rows, false) << baseline_values_line(cmp);
  for (const auto& n : cmp.notes) c.out << "note: " << n << "\n";
}

}  // namespace

int cmd_compare(const JobOptions& o, const Context& c) {
  auto window = parse_window(o.window);
  if (!window) {
    report_error(c.err, kBadWindow);
    return kExitUsage;
  }
  Comparison cmp;
  cmp.window = *window;
  for (const auto& ref : o.jobs) {
    auto s = load_series(ref, c);
    if (!s) return kExitUsage;
    cmp.series.push_back(std::move(*s));
  }
  add_window_stats(cmp);
  add_knob_differences(cmp);
  int rc = nothing_to_compare(cmp) ? kExitRuntime : kExitOk;
  if (o.format == "json")
    print_comparison_json(cmp, c);
  else
    print_comparison_text(cmp, c);
  return rc;
}

}  // namespace bridge
