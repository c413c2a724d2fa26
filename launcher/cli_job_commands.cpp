// list, status, logs, cancel, compare and ablate: following jobs and overlap experiments.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "base/utf8.h"
#include "executors/executor.h"
#include "jobs/failure_triage.h"
#include "jobs/job_lifecycle.h"
#include "jobs/job_progress.h"
#include "jobs/registry.h"
#include "jobs/triage_output.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "model/compare.h"
#include "model/recipe_loader.h"
#include "plan/plan_confirm.h"
#include "plan/plan_output.h"
#include "plan/runtime_check.h"
#include "system/file_read.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kBadWindow =
    "--window must be FIRST:LAST, two iterations with FIRST <= LAST, e.g. 3:8";

nlohmann::ordered_json record_summary(const JobRecord& r, SystemTime now) {
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
std::optional<PlanConfirmationVerdict> confirmation_verdict(const JobRecord& r) {
  if (!recorded_plan_confirms(r.plan_json)) return std::nullopt;
  return read_plan_confirmation(r.job_dir);
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
  if (auto verdict = confirmation_verdict(r))
    rows.push_back({"plan", plan_confirmation_line(*verdict)});
  for (const auto& row : rows) c.out << fmt::format("{:<10} {}\n", row[0], row[1]);
}

// A retried job's attempts, under the details: "attempts   1: Slurm job 134 on node1, ...".
void print_attempts(const std::vector<std::string>& lines, const Context& c) {
  for (size_t i = 0; i < lines.size(); ++i)
    c.out << fmt::format("{:<10} {}\n", i == 0 ? "attempts" : "", one_line(lines[i]));
}

void print_records(const std::vector<JobRecord>& recs, const std::string& format,
                   const Context& c) {
  SystemTime now = c.services.clock.now();
  if (format == "json") {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& r : recs) a.push_back(record_summary(r, now));
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
  std::optional<std::map<std::string, std::string>> knobs;
  std::optional<JobState> state;  // registry jobs only
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
  Series s{rec->id, {}, rec->knobs, rec->state};
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
  print_records(recs, o.format, c);
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
    print_records(recs, o.format, c);
  // One job asked for by name and it failed: say why, in one screen.
  if (o.jobs.size() == 1 && recs.size() == 1 && o.format == "text")
    if (auto ex = c.services.executor(recs[0].executor)) print_failure_summary(*ex, recs[0], c.out);
  return kExitOk;
}

int cmd_why(const JobOptions& o, const Context& c) {
  auto rec = find_job(o.jobs.at(0), c);
  if (!rec) return kExitUsage;
  std::unique_ptr<Executor> ex = c.services.executor(rec->executor);
  if (!ex) return kExitRuntime;
  Diagnostics diags;
  std::vector<JobRecord> one{*rec};
  refresh(one, c, diags);
  Triage t = triage(ex->failure_evidence(one[0], diags));
  print_diagnostics(diags, c.err, c.color, false);
  // What the plan confirmation at start found (plan/plan_confirm.h), before the triage.
  std::optional<PlanConfirmationVerdict> verdict = confirmation_verdict(one[0]);
  if (o.format == "json") {
    nlohmann::ordered_json j = triage_to_json(one[0], t);
    if (verdict) j["plan_confirmation"] = plan_confirmation_to_json(*verdict);
    c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    if (verdict) c.out << plan_confirmation_line(*verdict) << "\n";
    c.out << triage_to_text(one[0], t, /*excerpt=*/true);
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
  std::vector<std::vector<std::string>> knob_diffs;
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
                      fmt::join(cmp.knob_diffs[i], ", ")));
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
                    {"differs_in", cmp.knob_diffs[i]}});
  }
  j["jobs"] = jobs;
  j["notes"] = cmp.notes;
  c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
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
                    i == 0 ? "(baseline)" : fmt::format("{}", fmt::join(cmp.knob_diffs[i], ", "))});
  }
  c.out << fmt::format("steady-state step time, iterations {}-{}:\n", cmp.window.first,
                       cmp.window.second)
        << format_table(rows, false);
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

namespace {

// "KEY=V1,V2,[a,b]" -> KEY and its values (commas inside brackets/braces do not split).
std::optional<std::pair<std::string, std::vector<std::string>>> parse_vary(const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) return std::nullopt;
  std::vector<std::string> values;
  std::string cur;
  int depth = 0;
  for (char ch : v.substr(eq + 1)) {
    if (ch == '[' || ch == '{') ++depth;
    if (ch == ']' || ch == '}') --depth;
    if (ch == ',' && depth == 0) {
      values.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  values.push_back(cur);
  for (const auto& x : values)
    if (x.empty()) return std::nullopt;
  return std::pair{v.substr(0, eq), values};
}

// Baseline plus one variant per changed value (one knob at a time), or the full grid.
std::vector<std::vector<std::string>> make_variants(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& vary, bool grid,
    const std::map<std::string, std::string>& baseline_inputs) {
  std::vector<std::vector<std::string>> variants{{}};
  if (grid) {
    for (const auto& [key, values] : vary) {
      std::vector<std::vector<std::string>> next;
      for (const auto& v : variants)
        for (const auto& value : values) {
          auto w = v;
          w.push_back(key + "=" + value);
          next.push_back(std::move(w));
        }
      variants = std::move(next);
    }
    return variants;
  }
  for (const auto& [key, values] : vary)
    for (const auto& value : values) {
      auto it = baseline_inputs.find(key);
      if (it != baseline_inputs.end() && it->second == value) continue;  // = the baseline
      variants.push_back({key + "=" + value});
    }
  return variants;
}

}  // namespace

namespace {

// "<name>-<knob>-<value>...": a variant's own job name, shown by squeue, `list` and its job
// dir; the knob is the key's last part. At most 120 bytes, [A-Za-z0-9._-].
std::string variant_name(const std::string& base, const std::vector<std::string>& extra) {
  std::string text = base;
  for (const auto& kv : extra) {
    size_t eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    text += "-" + key.substr(key.rfind('.') + 1) + "-" + kv.substr(eq + 1);
  }
  std::string out;
  for (char ch : text)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'
               ? ch
               : '-';
  return out.substr(0, 120);
}

// What makes two variants the same experiment: the resolved plan, with the variant's own
// name and job dir (which only label it) masked.
// Keeps what runs and drops why: a value set by the user equal to the one a rule derives is
// the same plan (`value`/`secret` stay; `source`, `rule`, `reason` and the *_sources maps go).
void drop_provenance(nlohmann::ordered_json& j) {
  if (j.is_object()) {
    if (j.contains("value"))
      for (const char* why : {"source", "rule", "reason"}) j.erase(why);
    for (auto& [key, value] : j.items()) drop_provenance(value);
  } else if (j.is_array()) {
    for (auto& item : j) drop_provenance(item);
  }
}

std::string plan_fingerprint(const Plan& plan, const Diagnostics& diags) {
  nlohmann::ordered_json j = plan_to_json(plan, diags);
  j.erase("name");
  j.erase("diagnostics");
  j.erase("runtime_arg_sources");
  j.erase("setup_sources");
  drop_provenance(j);
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto mask = [&](const std::string& what, const char* with) {
    if (what.empty()) return;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at))
      text.replace(at, what.size(), with), at += std::string(with).size();
  };
  mask(plan.job_dir, "<job_dir>");
  if (plan.recipe && plan.recipe->name.value) mask(*plan.recipe->name.value, "<name>");
  return text;
}

std::string variant_label(const std::vector<std::string>& extra) {
  return extra.empty() ? "baseline" : fmt::format("{}", fmt::join(extra, " "));
}

// A variant's overrides as labels and job names show them: the value of a key that names a
// secret of the plan is <secret> (`--vary env.S.value=A,B` must not print A and B). `n`
// tells such variants apart: "<secret 2>".
std::vector<std::string> shown_overrides(const std::vector<std::string>& extra, const Plan& plan,
                                         size_t n) {
  std::vector<std::string> shown = extra;
  for (auto& kv : shown) {
    std::string key = kv.substr(0, kv.find('='));
    if (names_secret(plan, key)) kv = fmt::format("{}=<secret {}>", key, n);
  }
  return shown;
}

using VaryOptions = std::vector<std::pair<std::string, std::vector<std::string>>>;

// --vary and --window as given; nullopt (the error reported) when one is malformed.
std::optional<VaryOptions> parse_ablate_options(const AblateOptions& a, const Context& c) {
  VaryOptions vary;
  for (const auto& v : a.vary) {
    auto parsed = parse_vary(v);
    if (!parsed) {
      // Only the key is shown: the values may be secrets (env.S.value=...).
      report_error(c.err, fmt::format("bad --vary `{}=...`: expected KEY=V1,V2",
                                      printable_text(v.substr(0, v.find('=')), 200)));
      return std::nullopt;
    }
    vary.push_back(std::move(*parsed));
  }
  if (!parse_window(a.window)) {
    report_error(c.err, kBadWindow);
    return std::nullopt;
  }
  return vary;
}

// The jobs of an ablation, in submission order: each one's options and label.
struct Ablation {
  std::vector<Options> options;
  std::vector<std::string> labels;
};

// Validates every variant before submitting any, and skips those whose resolved plan is
// another's; nullopt (the errors reported) when one is invalid.
std::optional<Ablation> plan_variants(const AblateOptions& a, const VaryOptions& vary,
                                      const Context& c) {
  auto base_inputs = flatten_recipe_inputs(a.launch.recipe, make_request(a.launch).overrides);
  auto variants = make_variants(vary, a.grid, base_inputs);
  Ablation ablation;
  std::map<std::string, std::string> seen;  // fingerprint -> label
  std::string base_name;
  bool all_ok = true;
  for (size_t n = 0; n < variants.size(); ++n) {
    const std::vector<std::string>& extra = variants[n];
    Options o = a.launch;
    o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
    Diagnostics diags(o.strict);
    Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
    run_runtime_check(plan, c.services.runner, c.services.clock, diags);  // when asked
    const std::vector<std::string> shown = shown_overrides(extra, plan, n);
    if (!plan.complete || diags.has_errors()) {
      all_ok = false;
      c.err << fmt::format("variant [{}] is invalid:\n", variant_label(shown));
      print_diagnostics(diags, c.err, c.color, false);
      continue;
    }
    if (base_name.empty()) base_name = plan.recipe->name.get_or("job");
    auto [it, fresh] = seen.emplace(plan_fingerprint(plan, diags), variant_label(shown));
    if (!fresh) {
      c.err << fmt::format(
          "ablate: variant [{}] resolves to the same plan as [{}]; not submitted\n",
          variant_label(shown), it->second);
      continue;
    }
    if (!extra.empty()) o.overrides.push_back("name=" + variant_name(base_name, shown));
    ablation.labels.push_back(variant_label(shown));
    ablation.options.push_back(std::move(o));
  }
  if (!all_ok) return std::nullopt;
  return ablation;
}

// What submitting an ablation's jobs gave: the worst exit code, the registry ids (for the
// compare) and the scheduler jobs still to wait for.
struct AblationRun {
  int worst = kExitOk;
  bool all_waited = true;  // every job's outcome is known once the waits are over
  std::vector<std::string> ids;
  std::vector<std::string> to_wait;
};

// Submits (with --dry-run: prints) the jobs in order. Scheduler jobs are all submitted
// first and waited on afterwards; local ones run one after another. A Ctrl-C stops there.
AblationRun submit_variants(const AblateOptions& a, Ablation& ablation, const Context& c) {
  AblationRun run;
  std::vector<Options>& options = ablation.options;
  for (size_t i = 0; i < options.size(); ++i) {
    Options& o = options[i];
    Diagnostics diags(o.strict);
    Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
    const ExecutorInfo* info = find_executor(c.services.executors, plan.executor);
    bool runs_here = info && info->traits.runs_here;
    run.all_waited = run.all_waited && (a.launch.wait || runs_here);
    if (o.dry_run)
      c.out << fmt::format("# ablate {} of {}: {} (job name {})\n", i + 1, options.size(),
                           ablation.labels[i], plan.recipe->name.get_or(""));
    else if (runs_here && i == 0 && options.size() > 1)
      c.err << "ablate: local jobs run one after another (one machine)\n";
    bool wait_later = o.wait && !runs_here;
    o.wait = o.wait && !wait_later;
    LaunchSettings settings;
    settings.sequence = static_cast<int>(i);
    auto [rc, id] = launch_planned(o, c, plan, diags, std::move(settings));
    if (!id.empty()) run.ids.push_back(id);
    if (!id.empty() && wait_later) run.to_wait.push_back(id);
    if (rc != kExitOk) run.worst = rc;
    if (rc == kExitInterrupted) break;
  }
  return run;
}

// Every waited job of one executor is followed by one wait: one scheduler query per poll
// for all of them, not one per job. Returns the worst exit code (a Ctrl-C stops there).
int wait_for_variants(const std::vector<std::string>& to_wait, int worst, const Context& c) {
  std::map<std::string, std::vector<JobRecord>> waited;  // executor -> records
  for (const auto& id : to_wait) {
    Diagnostics diags;
    auto rec = c.services.registry.find(id, diags);
    if (!rec) {
      print_diagnostics(diags, c.err, c.color, false);
      worst = kExitRuntime;
      continue;
    }
    waited[rec->executor].push_back(std::move(*rec));
  }
  for (auto& [name, records] : waited) {
    std::unique_ptr<Executor> ex = c.services.executor(name);
    if (!ex) {
      worst = kExitRuntime;
      continue;
    }
    std::vector<JobRecord*> pointers;
    for (auto& r : records) pointers.push_back(&r);
    int rc = wait_for_jobs(*ex, pointers, c.services.registry, c);
    if (rc != kExitOk) worst = rc;
    if (rc == kExitInterrupted) return rc;
  }
  return worst;
}

}  // namespace

int cmd_ablate(const AblateOptions& a, const Context& c) {
  std::optional<VaryOptions> vary = parse_ablate_options(a, c);
  if (!vary) return kExitUsage;
  std::optional<Ablation> ablation = plan_variants(a, *vary, c);
  if (!ablation) {
    c.err << "no variant was submitted\n";
    return kExitUsage;
  }
  const size_t jobs = ablation->options.size();
  if (jobs < 2) {
    report_error(c.err,
                 fmt::format("ablate has nothing to compare: every value of --vary resolves to "
                             "the same plan as the {}; nothing was submitted",
                             a.grid ? "other combinations" : "baseline"),
                 {"  help: vary a knob to a value that changes the plan (`bridge-launch plan "
                  "--format json` shows the resolved values)"});
    return kExitUsage;
  }
  if (a.grid)
    c.err << fmt::format("ablate: {} jobs (every combination of the --vary values)\n", jobs);
  else
    c.err << fmt::format("ablate: {} jobs (baseline + {} variant{})\n", jobs, jobs - 1,
                         jobs == 2 ? "" : "s");
  AblationRun run = submit_variants(a, *ablation, c);
  if (run.worst == kExitInterrupted) return run.worst;
  int worst = wait_for_variants(run.to_wait, run.worst, c);
  if (worst == kExitInterrupted) return worst;
  if (worst != kExitOk && a.launch.runtime_check_python.empty())
    c.err << "ablate: a variant did not succeed; if its runtime refused the config at start, "
             "`--runtime-check PYTHON` asks the job's own Megatron-Bridge about every variant "
             "before anything is submitted (docs/runtime-check.md)\n";
  JobOptions cmp;
  cmp.window = a.window;
  cmp.jobs = run.ids;
  if (run.all_waited && !cmp.jobs.empty() && !a.launch.dry_run) cmd_compare(cmp, c);
  return worst;
}

}  // namespace bridge
