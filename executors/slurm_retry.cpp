#include "executors/slurm_retry.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <string_view>

#include "base/numbers.h"
#include "jobs/failure_triage.h"
#include "model/retry_policy.h"
#include "system/file_read.h"

namespace bridge {

namespace {

// Appends an awk string literal: backslash and double quote escaped, control bytes as octal.
// The table is a few hundred lines in every script, so it is appended, not formatted.
void append_awk_string(fmt::memory_buffer& out, std::string_view s) {
  auto needs_escape = [](char c) {
    auto u = static_cast<unsigned char>(c);
    return c == '\\' || c == '"' || u < 0x20 || u == 0x7f;
  };
  out.push_back('"');
  // Runs of plain bytes (nearly every needle is one run) are appended whole.
  for (size_t at = 0; at < s.size();) {
    size_t run = at;
    while (run < s.size() && !needs_escape(s[run])) ++run;
    out.append(s.data() + at, s.data() + run);
    if (run == s.size()) break;
    auto u = static_cast<unsigned char>(s[run]);
    if (u == '\\' || u == '"') {
      out.push_back('\\');
      out.push_back(s[run]);
    } else {
      char octal[4] = {'\\', static_cast<char>('0' + (u >> 6)),
                       static_cast<char>('0' + ((u >> 3) & 7)), static_cast<char>('0' + (u & 7))};
      out.append(octal, octal + 4);
    }
    at = run + 1;
  }
  out.push_back('"');
}

void append_text(fmt::memory_buffer& out, std::string_view s) { out.append(s); }

void append_number(fmt::memory_buffer& out, size_t n) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, end);
}

// BEGIN's table: sid/skind per signature (in error_signatures() order), its needles, and
// the retry class of each signature the policy retries.
void append_signature_table(fmt::memory_buffer& t, const SlurmRetry& policy) {
  size_t i = 0;
  for (const ErrorSignature& s : error_signatures()) {
    ++i;
    const char* kind = s.kind == SignatureKind::kCause ? "cause" : "consequence";
    append_text(t, "  sid[");
    append_number(t, i);
    append_text(t, "] = ");
    append_awk_string(t, s.id);
    append_text(t, "; skind[");
    append_number(t, i);
    append_text(t, "] = \"");
    append_text(t, kind);
    append_text(t, "\"; nn[");
    append_number(t, i);
    append_text(t, "] = ");
    append_number(t, s.needles.size());
    append_text(t, "\n");
    for (size_t j = 0; j < s.needles.size(); ++j) {
      append_text(t, "  nd[");
      append_number(t, i);
      append_text(t, ", ");
      append_number(t, j + 1);
      append_text(t, "] = ");
      append_awk_string(t, s.needles[j]);
      append_text(t, "\n");
    }
    if (s.needles.empty()) {
      append_text(t, "  py = ");
      append_number(t, i);
      append_text(t, "\n");
    }
  }
  append_text(t, "  ns = ");
  append_number(t, i);
  append_text(t, "\n");
  bool any = std::find(policy.retry_on.begin(), policy.retry_on.end(), kRetryAnyFailure) !=
             policy.retry_on.end();
  if (any) append_text(t, "  any = 1\n");
  for (const RetryClass& c : retry_classes())
    if (std::find(policy.retry_on.begin(), policy.retry_on.end(), c.id) != policy.retry_on.end())
      for (const char* sig : c.signatures) {
        append_text(t, "  cls[");
        append_awk_string(t, sig);
        append_text(t, "] = ");
        append_awk_string(t, c.id);
        append_text(t, "\n");
      }
}

// The program's functions and main part; `unit` is "rank" or "node" (per-node launchers).
constexpr const char* kTriageBody = R"AWK(
# The signature index of a line: the first entry of the table with a needle in it, the
# Python exception shape at its place; 0 for none (jobs/failure_triage.h).
function classify(l,   i, j) {
  l = substr(l, 1, 4096)
  for (i = 1; i <= ns; i++) {
    if (i == py) {
      if (l ~ /^(\[rank[0-9]+\]: )?[A-Za-z0-9_.]*(Error|Exception|Interrupt):/) return i
      continue
    }
    for (j = 1; j <= nn[i]; j++) if (index(l, nd[i, j])) return i
  }
  return 0
}
# The signature of a unit's log: the first of its last 400 lines that one matches.
function unit_signature(file,   line, n, k, s) {
  n = 0
  while ((getline line < file) > 0) ring[n++ % 400] = line
  close(file)
  for (k = (n > 400 ? n - 400 : 0); k < n; k++) if ((s = classify(ring[k % 400])) > 0) return s
  return 0
}
function out(s, host, unit,   c) {
  c = s ? (s in cls_by_index ? cls_by_index[s] : "-") : "-"
  # A config that differs from the plan (plan-differs) fails the same way on every node.
  if (any && c == "-" && !(s && sid[s] == "plan-differs")) c = "any"
  printf "%s %s %s %s %s\n", s ? sid[s] : "-", s ? skind[s] : "-", c, host == "" ? "-" : host, unit == "" ? "-" : unit
  done = 1
  exit
}
# The hang watchdog ended this attempt (<job dir>/watchdog, jobs/job_watchdog.h): blame the
# rank at the end of the chain of waits the ranks name ("... waiting for rank 5"; in a ring,
# each rank waits for the one before it), as `why` does, and its node (block layout: rank /
# (ranks / hosts)).
function hang_verdict(   attempt, line, t, nt, first, cur, hops, nh, host) {
  attempt = ENVIRON["BRIDGE_ATTEMPT"] == "" ? 1 : ENVIRON["BRIDGE_ATTEMPT"]
  found = 0
  while ((getline line < (dir "/watchdog")) > 0)
    if (line ~ /^hang / && index(line " ", " attempt=" attempt " ")) found = 1
  close(dir "/watchdog")
  if (!found) return
  for (i = 1; i <= ns; i++) if (sid[i] == "hang") hs = i
  if (UNIT != "rank") out(hs, "", "")
  first = -1
  nt = ENVIRON["SLURM_NTASKS"] + 0
  if (nt < 1 || nt > 4096) nt = 4096
  for (t = 0; t < nt; t++) {
    f = dir "/rank" t ".log"
    while ((getline line < f) > 0)
      if (match(line, /waiting for rank [0-9]+/)) waits[t] = substr(line, RSTART + 17, RLENGTH - 17) + 0
    close(f)
    if (first < 0 && (t in waits)) first = t
  }
  if (first < 0) out(hs, "", "")
  cur = waits[first]
  for (hops = 0; (cur in waits) && hops < nt; hops++) cur = waits[cur]
  if (cur in waits) out(hs, "", "")  # a cycle: nobody to blame
  nh = 0
  while ((getline line < (dir "/hosts")) > 0) hosts[nh++] = line
  close(dir "/hosts")
  host = nh > 0 && nt >= nh && nt < 4096 ? hosts[int(cur / int(nt / nh))] : ""
  out(hs, host, "rank_" cur)
}
BEGIN {
  for (k in cls) for (i = 1; i <= ns; i++) if (sid[i] == k) cls_by_index[i] = cls[k]
  dir = ENVIRON["BRIDGE_JOB_DIR"]
  hang_verdict()
  err = dir "/slurm-" ENVIRON["SLURM_JOB_ID"] ".err"
  nr = 0; nj = 0
  # srun's task reports of this attempt, in its order ("srun: error: node1: task 3: ..."); a
  # line the script wrote when an attempt of this Slurm job started begins the list again.
  while ((getline line < err) > 0) {
    if (line ~ /^bridge-launch: attempt [0-9]+ starts/) { nr = 0; nj = 0; continue }
    if (line ~ /^srun: error: [^:]+: tasks? [0-9]/) rep[++nr] = line
    else job[++nj] = line
  }
  close(err)
  first_s = -1; checked = 0
  for (r = 1; r <= nr && checked < 4096; r++) {
    rest = substr(rep[r], 14)
    host = substr(rest, 1, index(rest, ": ") - 1)
    rest = substr(rest, index(rest, ": ") + 2)
    sub(/^tasks? /, "", rest)
    list = substr(rest, 1, index(rest, ":") - 1)
    np = split(list, parts, ",")
    for (p = 1; p <= np && checked < 4096; p++) {
      lo = parts[p] + 0; hi = lo
      if (index(parts[p], "-")) hi = substr(parts[p], index(parts[p], "-") + 1) + 0
      for (t = lo; t <= hi && checked < 4096; t++) {
        checked++
        s = unit_signature(dir "/" UNIT t ".log")
        if (s && skind[s] == "cause") out(s, host, UNIT "_" t)
        if (first_s < 0) { first_s = s; first_host = host; first_unit = UNIT "_" t }
      }
    }
  }
  # No unit shows a cause: Slurm's own words (a node failure names the node: "ON node3").
  for (k = 1; k <= nj; k++) if ((s = classify(job[k])) > 0 && skind[s] == "cause") {
    h = ""
    if (match(job[k], / ON [^ ]+ /)) h = substr(job[k], RSTART + 4, RLENGTH - 5)
    out(s, h != "" ? h : first_host, first_unit)
  }
  if (first_s >= 0) out(first_s, first_host, first_unit)
  out(0, "", "")
}
)AWK";

std::map<std::string, std::string> words(const std::string& line) {
  std::map<std::string, std::string> kv;
  std::istringstream in(line);
  std::string w;
  in >> w;  // the event
  while (in >> w) {
    size_t eq = w.find('=');
    if (eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return kv;
}

std::string value(const std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() || it->second == "-" ? std::string() : it->second;
}

}  // namespace

SlurmRetry slurm_retry(const Plan& plan) {
  const SlurmExecutorSpec& s = plan.job.executor.slurm;
  SlurmRetry r;
  r.retries = effective_retries(plan);
  r.retry_on = s.retry_on.get_or(default_retry_on());
  r.exclude_failed_nodes = s.exclude_failed_nodes.get_or(true);
  r.max_attempts =
      plan.job.checkpoint.is_set() ? kProgressAttemptFactor * (r.retries + 1) : r.retries + 1;
  return r;
}

std::string awk_string_literal(std::string_view text) {
  fmt::memory_buffer out;
  append_awk_string(out, text);
  return fmt::to_string(out);
}

std::string retry_triage_program(const SlurmRetry& policy, bool per_node) {
  fmt::memory_buffer program;
  append_text(program, per_node ? "BEGIN {\n  UNIT = \"node\"\n" : "BEGIN {\n  UNIT = \"rank\"\n");
  append_signature_table(program, policy);
  append_text(program, "}\n");
  append_text(program, kTriageBody);
  return fmt::to_string(program);
}

std::vector<SlurmAttempt> parse_slurm_attempts(const std::string& text) {
  std::map<int, SlurmAttempt> by_number;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string event = line.substr(0, line.find(' '));
    if (event != "start" && event != "retry" && event != "end") continue;
    auto kv = words(line);
    auto number = parse_decimal<int>(value(kv, "attempt"));
    if (!number || *number < 1 || *number > 100000) continue;  // a torn or foreign line
    SlurmAttempt& a = by_number[*number];
    a.number = *number;
    if (event == "start") {
      // Attempts allowed in all: at least 1; anything else (`of=-3`) is unknown, not shown.
      auto of = parse_decimal<int>(value(kv, "of"));
      a.of = of && *of >= 1 && *of <= 100000 ? *of : 0;
      a.slurm_job = value(kv, "slurm_job");
      a.nodes = value(kv, "nodes");
      a.started_at = value(kv, "at");
      a.checkpoint_at_start = parse_decimal<long long>(value(kv, "ckpt"));
      continue;
    }
    a.ended = true;
    if (a.slurm_job.empty()) a.slurm_job = value(kv, "slurm_job");
    a.ended_at = value(kv, "at");
    a.rc = parse_decimal<int>(value(kv, "rc"));
    a.signature = value(kv, "signature");
    a.failure_class = value(kv, "class");
    a.host = value(kv, "host");
    a.unit = value(kv, "unit");
    std::replace(a.unit.begin(), a.unit.end(), '_', ' ');  // "rank_3" on the line
    a.excluded = value(kv, "excluded");
    a.not_retried = value(kv, "reason");
    a.next_slurm_job = value(kv, "next_slurm_job");
    a.checkpoint_at_end = parse_decimal<long long>(value(kv, "ckpt"));
    a.progress = value(kv, "progress");
    if (event == "retry" && !a.next_slurm_job.empty()) {
      SlurmAttempt& next = by_number[*number + 1];
      next.number = *number + 1;
      if (next.slurm_job.empty()) next.slurm_job = a.next_slurm_job;
      if (next.of == 0) next.of = a.of;
    }
  }
  std::vector<SlurmAttempt> out;
  for (auto& [n, a] : by_number) out.push_back(std::move(a));
  return out;
}

std::vector<SlurmAttempt> read_slurm_attempts(const std::string& job_dir) {
  // The batch script appends about 250 bytes an attempt: 1 MiB is thousands of attempts, and
  // a FIFO, a link or a huge file in its place is no record (system/file_read.h).
  constexpr size_t kMaxAttemptsBytes = size_t{1} << 20;
  StatusOr<std::string> text =
      read_regular_file(std::filesystem::path(job_dir) / kAttemptsFile, kMaxAttemptsBytes);
  return text.ok() ? parse_slurm_attempts(*text) : std::vector<SlurmAttempt>{};
}

std::string latest_slurm_job(const std::vector<SlurmAttempt>& attempts) {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (!it->slurm_job.empty()) return it->slurm_job;
  return "";
}

std::string started_slurm_job(const std::vector<SlurmAttempt>& attempts) {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (!it->started_at.empty() && !it->slurm_job.empty()) return it->slurm_job;
  return "";
}

namespace {

std::string of_text(const SlurmAttempt& a) {
  return a.of > 0 ? fmt::format("attempt {} of {}", a.number, a.of)
                  : fmt::format("attempt {}", a.number);
}

// "nccl-timeout on node1 (rank 3)"
std::string failure_text(const SlurmAttempt& a) {
  std::string what = !a.signature.empty() ? a.signature : "a failure no log explains";
  if (!a.host.empty()) what += " on " + a.host;
  if (!a.unit.empty()) what += " (" + a.unit + ")";
  return what;
}

}  // namespace

std::string attempt_headline(const std::vector<SlurmAttempt>& attempts) {
  if (attempts.size() < 2) return "";
  const SlurmAttempt& last = attempts.back();
  const SlurmAttempt& before = attempts[attempts.size() - 2];
  std::string why = !before.signature.empty() ? before.signature : "a failure";
  if (!before.host.empty()) why += " on " + before.host;
  return fmt::format("{} after {}{}", of_text(last), why,
                     before.excluded.empty() ? "" : " (excluded)");
}

std::vector<std::string> attempt_lines(const std::vector<SlurmAttempt>& attempts) {
  std::vector<std::string> out;
  for (const SlurmAttempt& a : attempts) {
    std::string line =
        fmt::format("{}: Slurm job {}", a.number, a.slurm_job.empty() ? "?" : a.slurm_job);
    if (!a.nodes.empty()) line += " on " + a.nodes;
    if (a.started_at.empty())
      line += ", not started yet";
    else if (!a.ended)
      line += ", started " + a.started_at;
    if (a.checkpoint_at_start && *a.checkpoint_at_start >= 0)
      line += fmt::format(", from checkpoint {}", *a.checkpoint_at_start);
    if (a.ended && a.not_retried == "requeued") {
      line += ", requeued";
      if (a.checkpoint_at_end && *a.checkpoint_at_end >= 0)
        line += a.progress == "yes"
                    ? fmt::format(" after checkpoint {} landed", *a.checkpoint_at_end)
                    : " with no newer checkpoint";
      out.push_back(std::move(line));
      continue;
    }
    if (a.ended) {
      line += a.rc ? fmt::format(", failed (srun exit {}): ", *a.rc) : ", failed: ";
      line += failure_text(a);
      if (a.progress == "yes" && a.checkpoint_at_end)
        line += fmt::format(" (saved up to checkpoint {}: not counted against retries)",
                            *a.checkpoint_at_end);
      if (!a.next_slurm_job.empty())
        line += fmt::format("; attempt {} is Slurm job {}{}", a.number + 1, a.next_slurm_job,
                            a.excluded.empty() ? "" : ", " + a.excluded + " excluded");
      else if (!a.not_retried.empty())
        line += "; not retried: " + a.not_retried;
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace bridge
