#include "executors/slurm_scheduler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <sstream>

#include "base/numbers.h"
#include "base/secret_scrub.h"
#include "base/yaml_tree.h"

namespace bridge {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The value of `key` in a `scontrol --oneliner` record (up to the next blank).
std::string field(const std::string& record, const std::string& key) {
  std::string needle = key + "=";
  size_t at = 0;
  while ((at = record.find(needle, at)) != std::string::npos) {
    if (at == 0 || record[at - 1] == ' ') break;
    at += needle.size();
  }
  if (at == std::string::npos) return "";
  size_t start = at + needle.size();
  size_t end = record.find(' ', start);
  return record.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

JobState map_slurm_state(const std::string& raw) {
  std::string state = raw.substr(0, raw.find(' '));                // "CANCELLED by 0"
  while (!state.empty() && state.back() == '+') state.pop_back();  // sacct's "CANCELLED+"
  static const std::vector<std::pair<std::vector<std::string>, JobState>> kMap{
      {{"COMPLETED"}, JobState::kSucceeded},
      {{"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
        "SPECIAL_EXIT", "REVOKED"},
       JobState::kFailed},
      {{"CANCELLED"}, JobState::kCancelled},
      {{"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"},
       JobState::kPending},
      {{"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"},
       JobState::kRunning},
  };
  for (const auto& [names, js] : kMap)
    if (std::find(names.begin(), names.end(), state) != names.end()) return js;
  return JobState::kUnknown;
}

std::string slurm_time_to_utc(const std::string& slurm_time) {
  std::tm local{};
  const char* end = strptime(slurm_time.c_str(), "%Y-%m-%dT%H:%M:%S", &local);
  if (end == nullptr || *end != '\0') return "";
  local.tm_isdst = -1;  // the client's zone decides, as it did when Slurm printed the time
  std::time_t t = std::mktime(&local);
  if (t == -1) return "";
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

JobStatus to_job_status(const SlurmJobInfo& info) {
  JobStatus s;
  s.state = map_slurm_state(info.state);
  std::vector<std::string> notes;
  if (!info.reason.empty() && info.reason != "None" && info.reason != "(null)")
    notes.push_back(printable_text(info.reason, 200));  // shown in `status`: no raw escapes
  if (!info.exit_code.empty()) {
    notes.push_back("ExitCode=" + printable_text(info.exit_code, 40));  // escaped as the reason
    auto parts = split(info.exit_code, ':');
    auto code = parts.size() == 2 ? parse_decimal<int>(parts[0]) : std::nullopt;
    auto sig = parts.size() == 2 ? parse_decimal<int>(parts[1]) : std::nullopt;
    if (code && sig && *sig < 256) s.exit_code = *sig ? 128 + *sig : *code;
  }
  if (s.state == JobState::kRunning || is_final(s.state))
    s.started_at = slurm_time_to_utc(info.start_time);
  if (is_final(s.state)) s.ended_at = slurm_time_to_utc(info.end_time);
  if (s.state == JobState::kPending && !info.reason.empty() && info.reason != "None" &&
      info.reason != "(null)")
    s.pending_reason = printable_text(info.reason, 200);
  s.detail = printable_text(info.state, 200);
  if (!notes.empty()) s.detail += " (" + fmt::format("{}", fmt::join(notes, ", ")) + ")";
  return s;
}

std::optional<std::string> parse_sbatch_id(const std::string& out) {
  for (const auto& line : lines(out)) {
    std::string id = trim(line.substr(0, line.find(';')));
    if (all_digits(id)) return id;
  }
  return std::nullopt;
}

std::vector<SlurmJobInfo> parse_squeue(const std::string& out) {
  std::vector<SlurmJobInfo> jobs;
  for (const auto& line : lines(out)) {
    auto f = split(line, '|');
    if (f.size() < 2 || trim(f[0]).empty()) continue;
    jobs.push_back({trim(f[0]), trim(f[1]), f.size() > 2 ? trim(f[2]) : "", "",
                    f.size() > 3 ? trim(f[3]) : "", f.size() > 4 ? trim(f[4]) : ""});
  }
  return jobs;
}

std::vector<SlurmJobInfo> parse_sacct(const std::string& out) {
  std::vector<SlurmJobInfo> jobs;
  for (const auto& line : lines(out)) {
    auto f = split(line, '|');
    if (f.size() < 2 || !all_digits(f[0])) continue;  // "123.batch", "123.0": steps
    jobs.push_back({f[0], f[1], "", f.size() > 2 ? f[2] : "", f.size() > 3 ? f[3] : "",
                    f.size() > 4 ? f[4] : ""});
  }
  return jobs;
}

std::vector<SlurmJobInfo> parse_scontrol_jobs(const std::string& out) {
  std::vector<SlurmJobInfo> jobs;
  for (const auto& line : lines(out)) {
    std::string id = field(line, "JobId");
    std::string state = field(line, "JobState");
    if (id.empty() || state.empty()) continue;
    jobs.push_back({id, state, field(line, "Reason"), field(line, "ExitCode"),
                    field(line, "StartTime"), field(line, "EndTime")});
  }
  return jobs;
}

bool is_transient_slurm_error(const std::string& text) {
  std::string t = lower(text);
  for (const char* needle : {"socket timed out", "zero bytes were transmitted or received",
                             "resource temporarily unavailable", "temporarily unable to accept job",
                             "connection reset by peer"})
    if (t.find(needle) != std::string::npos) return true;
  return false;
}

std::string slurm_error_text(const std::string& program, const CommandResult& r) {
  if (!r.started)
    return fmt::format("could not run {}: {} (is Slurm installed and on PATH?)", program,
                       trim(r.err));
  std::string text = lines(r.err).empty() ? r.out : r.err;
  // Scheduler output reaches the user's terminal: escape control bytes (a stray ESC
  // sequence must not recolour or rewrite the screen) and bound its length.
  std::vector<std::string> shown = lines(text);
  for (auto& line : shown) line = printable_text(line, 2000);
  if (shown.size() > 20) shown.resize(20);
  std::string joined = fmt::format("{}", fmt::join(shown, "\n"));
  if (r.timed_out)
    return fmt::format("{} did not finish within its time limit{}", program,
                       joined.empty() ? "" : ": " + joined);
  if (r.cancelled) return fmt::format("{} was stopped: bridge-launch was interrupted", program);
  if (joined.empty()) return fmt::format("{} exited with code {}", program, r.exit_code);
  return joined;
}

CommandResult SlurmClient::run(CommandSpec spec, int* attempts_made,
                               const std::function<bool()>& settled) const {
  spec.timeout = policy_.timeout;
  auto backoff = policy_.first_backoff;
  CommandResult r;
  int attempt = 0;
  while (true) {
    ++attempt;
    log_.debug("running {}", fmt::join(spec.argv, " "));
    r = runner_.run(spec);
    if (r.ok() || !r.started || r.timed_out || r.cancelled || attempt >= policy_.attempts ||
        !is_transient_slurm_error(r.err + r.out))
      break;
    // What the program got in its environment (sbatch: the job's secrets) is never shown.
    std::vector<std::string> given;
    for (const auto& [name, value] : spec.extra_env) given.push_back(value);
    CommandResult shown = r;
    shown.out = scrub_secrets(shown.out, given);
    shown.err = scrub_secrets(shown.err, given);
    log_.warn("{}: {}; retrying in {} ms (attempt {} of {})", spec.argv[0],
              slurm_error_text(spec.argv[0], shown), backoff.count(), attempt + 1,
              policy_.attempts);
    sleeper_.pause_for(backoff);
    backoff *= 2;
    if (settled && settled()) break;
  }
  if (attempts_made) *attempts_made = attempt;
  return r;
}

namespace {

// "0-7,9" -> {0..7, 9}; nullopt when it is not such a list.
std::optional<std::vector<int>> parse_task_list(const std::string& text) {
  std::vector<int> tasks;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = part.find('-');
    auto first = parse_decimal<int>(part.substr(0, dash));
    auto last = dash == std::string::npos ? first : parse_decimal<int>(part.substr(dash + 1));
    if (!first || !last || *last < *first) return std::nullopt;
    for (int64_t t = *first; t <= *last && tasks.size() < 65536; ++t)
      tasks.push_back(static_cast<int>(t));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return tasks;
}

std::optional<int> signal_named(const std::string& text) {
  static const std::pair<const char*, int> kNames[] = {
      {"Terminated", 15},         {"Killed", 9},
      {"Segmentation fault", 11}, {"Aborted", 6},
      {"Bus error", 7},           {"Hangup", 1},
      {"Interrupt", 2},           {"Floating point exception", 8}};
  for (auto [name, sig] : kNames)
    if (text.rfind(name, 0) == 0) return sig;
  return std::nullopt;
}

}  // namespace

std::vector<SrunTaskReport> parse_srun_task_reports(const std::vector<std::string>& lines) {
  static const std::string kPrefix = "srun: error: ";
  std::vector<SrunTaskReport> out;
  for (const auto& line : lines) {
    if (line.size() > 4096 || line.rfind(kPrefix, 0) != 0) continue;
    // "<host>: task<s> <list>: <text>"
    size_t host_end = line.find(": ", kPrefix.size());
    if (host_end == std::string::npos) continue;
    size_t t = host_end + 2;
    size_t list_start;
    if (line.compare(t, 5, "task ") == 0)
      list_start = t + 5;
    else if (line.compare(t, 6, "tasks ") == 0)
      list_start = t + 6;
    else
      continue;
    size_t list_end = line.find(": ", list_start);
    if (list_end == std::string::npos) continue;
    auto tasks = parse_task_list(line.substr(list_start, list_end - list_start));
    if (!tasks) continue;
    SrunTaskReport r;
    r.host = line.substr(kPrefix.size(), host_end - kPrefix.size());
    r.tasks = std::move(*tasks);
    r.text = line.substr(list_end + 2);
    static const std::string kExited = "Exited with exit code ";
    if (r.text.rfind(kExited, 0) == 0)
      r.exit_code = parse_decimal<int>(r.text.substr(kExited.size()));
    else
      r.signal = signal_named(r.text);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace bridge
