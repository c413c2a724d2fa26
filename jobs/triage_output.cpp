#include "jobs/triage_output.h"

#include <fmt/format.h>

#include "base/utf8.h"

namespace bridge {

namespace {

using ordered_json = nlohmann::ordered_json;

std::string how(const FirstFailure& f) {
  if (f.signal) return fmt::format("killed by signal {}", *f.signal);
  if (f.exit_code) return fmt::format("exit code {}", *f.exit_code);
  return "no exit status known";
}

template <typename T>
ordered_json optional_json(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json group_json(const FindingGroup& g) {
  return {{"signature", g.signature},   {"description", g.description}, {"units", g.labels},
          {"units_text", g.units_text}, {"count", g.labels.size()},     {"example", g.example}};
}

}  // namespace

std::string triage_to_text(const JobRecord& job, const Triage& t, bool excerpt) {
  // Slurm's detail already starts with the state ("FAILED (NonZeroExitCode)"): once is enough.
  std::string state = job_state_name(job.state);
  std::string detail = printable_text(job.state_detail, 300);
  std::string out = detail.empty() ? fmt::format("job {}: {}\n", job.id, state)
                    : detail.rfind(state, 0) == 0
                        ? fmt::format("job {}: {}\n", job.id, detail)
                        : fmt::format("job {}: {} ({})\n", job.id, state, detail);
  for (const auto& f : t.job_level)
    out += fmt::format("scheduler: {}: {}\n", f.description, f.line);
  if (!t.first) {
    out += "no rank failed and no log shows an error\n";
    return out;
  }
  const FirstFailure& f = *t.first;
  // A cancelled job's ranks were stopped on purpose: the first to end is no failure's cause.
  const bool cancelled = job.state == JobState::kCancelled;
  if (cancelled) out += "the job was cancelled: its ranks were stopped, not failing on their own\n";
  out += fmt::format("{}: {}{}, {}{}\n", cancelled ? "first rank to stop" : "first failure",
                     f.label, f.host.empty() ? "" : " on " + f.host, how(f),
                     t.order_source.empty() ? "" : " (order: " + t.order_source + ")");
  if (!f.hung.empty()) out += fmt::format("  it hung: {}\n", f.hung);
  if (!f.finding) {
    out += "  its log shows no known error";
    out += f.log_path.empty() ? "\n" : fmt::format("; see {}\n", f.log_path);
  } else if (!excerpt) {
    out += fmt::format("  {}: {}\n", f.finding->description, f.finding->line);
  } else {
    out += fmt::format("  {}", f.finding->description);
    if (!f.log_path.empty())
      out += f.excerpt_first_line > 0
                 ? fmt::format(", {} from line {}", f.log_path, f.excerpt_first_line)
                 : fmt::format(", end of {}", f.log_path);
    out += ":\n";
    for (const auto& line : f.excerpt) out += "    | " + line + "\n";
  }
  if (!t.same_error_labels.empty()) out += fmt::format("same error on {}\n", t.same_error_text);
  for (const auto& g : t.other_causes)
    out += fmt::format("other error on {}: {}: {}\n", g.units_text, g.description, g.example);
  if (!t.consequences.empty()) {
    out += "consequences (follow-on failures):\n";
    for (const auto& g : t.consequences)
      out += fmt::format("  {} ({}): {}\n    e.g. {}\n", g.units_text, g.labels.size(),
                         g.description, g.example);
  }
  for (const auto& [ended, units] : t.silent)
    out += fmt::format("no error in the log: {} ({})\n", units, ended);
  return out;
}

ordered_json triage_to_json(const JobRecord& job, const Triage& t) {
  ordered_json j;
  j["job"] = job.id;
  j["executor"] = job.executor;
  j["state"] = job_state_name(job.state);
  j["detail"] = job.state_detail;
  j["order_source"] = t.order_source;
  ordered_json scheduler = ordered_json::array();
  for (const auto& f : t.job_level)
    scheduler.push_back(
        {{"signature", f.signature}, {"description", f.description}, {"line", f.line}});
  j["scheduler"] = scheduler;
  if (!t.first) {
    j["first_failure"] = nullptr;
  } else {
    const FirstFailure& f = *t.first;
    ordered_json first{{"unit", f.label},
                       {"rank", optional_json(f.rank)},
                       {"node", optional_json(f.node)},
                       {"host", f.host},
                       {"exit_code", optional_json(f.exit_code)},
                       {"signal", optional_json(f.signal)},
                       {"log", f.log_path}};
    if (f.finding) {
      first["signature"] = f.finding->signature;
      first["description"] = f.finding->description;
      first["line"] = f.finding->line;
    } else {
      first["signature"] = nullptr;
    }
    first["hung"] = f.hung.empty() ? ordered_json(nullptr) : ordered_json(f.hung);
    first["excerpt"] = f.excerpt;
    first["excerpt_first_line"] =
        f.excerpt_first_line > 0 ? ordered_json(f.excerpt_first_line) : ordered_json(nullptr);
    j["first_failure"] = first;
  }
  j["same_error"] = {{"units", t.same_error_labels}, {"units_text", t.same_error_text}};
  ordered_json others = ordered_json::array(), consequences = ordered_json::array();
  for (const auto& g : t.other_causes) others.push_back(group_json(g));
  for (const auto& g : t.consequences) consequences.push_back(group_json(g));
  j["other_errors"] = others;
  j["consequences"] = consequences;
  ordered_json silent = ordered_json::array();
  for (const auto& [ended, units] : t.silent)
    silent.push_back({{"ended", ended}, {"units_text", units}});
  j["no_error_in_log"] = silent;
  return j;
}

}  // namespace bridge
