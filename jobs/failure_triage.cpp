#include "jobs/failure_triage.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>
#include <string_view>

#include "base/parallel_for.h"
#include "base/utf8.h"

namespace bridge {

namespace {

using K = SignatureKind;

// Plain substrings, matched case-sensitively as the tools print them. Causes that name a
// specific failure come first; consequences (what the other ranks print once one rank is
// gone) come before the generic NCCL and Python entries, so "DistBackendError: ... remote
// process exited" counts as a consequence, not as a second cause.
// Built on first use, not at start-up: most commands never classify a line.
const std::vector<ErrorSignature>& specific_signatures() {
  static const std::vector<ErrorSignature> kTable = {
      // The plan confirmation at start (plan/plan_confirm.h; the line is CONFIRM_LINE of
      // python/bridge_config_check.py).
      {"plan-differs",
       K::kCause,
       "the runtime built a config that differs from the plan",
       {"bridge-launch: the runtime built a config that differs from the plan"}},
      // The same program's env comparison before the runtime starts (ENV_LINE).
      {"env-differs",
       K::kCause,
       "a rank's environment differs from the planned launch env",
       {"bridge-launch: the rank's environment differs from the planned launch env"}},
      // Before cuda-error: "CUDA error: uncorrectable ECC error encountered" is a GPU fault,
      // which a retry on another node may not meet (model/retry_policy.h).
      {"gpu-xid",
       K::kCause,
       "GPU fault (Xid, ECC error)",
       {"NVRM: Xid", "Xid (PCI:", "ECC error", "CUDA_ERROR_ECC_UNCORRECTABLE",
        "GPU has fallen off the bus"}},
      {"cuda-oom",
       K::kCause,
       "GPU out of memory",
       {"CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory",
        "CUBLAS_STATUS_ALLOC_FAILED"}},
      {"cuda-error",
       K::kCause,
       "CUDA error",
       {"CUDA error", "cudaError", "illegal memory access", "CUBLAS_STATUS_", "CUDNN_STATUS_",
        "device-side assert triggered", "ncclUnhandledCudaError"}},
      {"host-oom",
       K::kCause,
       "killed by the kernel's OOM killer (host memory)",
       {"oom_kill event", "oom-kill", "Out of memory: Killed process", "OOMKilled",
        "Killed process", "MemoryError"}},
      {"segfault",
       K::kCause,
       "segmentation fault",
       {"Segmentation fault", "SIGSEGV", "signal 11 (SIGSEGV)", "segfault"}},
      {"abort",
       K::kCause,
       "aborted",
       {"terminate called after throwing", "SIGABRT", "Aborted (core dumped)",
        "Fatal Python error"}},
      {"preempted", K::kCause, "preempted by the scheduler", {"DUE TO PREEMPTION", "Preempted"}},
      // The hang watchdog's verdict (jobs/job_watchdog.h watchdog_event_text), a job-level line.
      {"hang",
       K::kCause,
       "no progress: the watchdog ended the ranks",
       {"bridge-launch watchdog: hang"}},
      {"time-limit",
       K::kCause,
       "ran past its time limit",
       {"DUE TO TIME LIMIT", "DeadlineExceeded"}},
      {"node-failure",
       K::kCause,
       "a node failed",
       {"DUE TO NODE FAILURE", "NODE_FAIL", "NodeLost"}},
      // A rank that says itself that NCCL timed out: a cause (the transient failure retries are
      // for). torch's watchdog lines on the other ranks stay consequences (watchdog-timeout).
      {"nccl-timeout",
       K::kCause,
       "NCCL timed out",
       {"NCCL timeout", "NCCL Timeout", "NCCL WARN Timeout", "NCCL operation timed out",
        "NCCL communicator timed out"}},
      {"peer-lost",
       K::kConsequence,
       "lost its peer (another rank is gone)",
       {"Connection closed by", "Connection reset by peer", "connection closed", "ncclRemoteError",
        "remote process exited", "lost connection", "Lost connection", "Broken pipe",
        "Connection refused"}},
      // bridge-probe and other runtimes name the rank they waited for: that rank hung, and it
      // is the culprit even when its own log shows nothing (UnitScan::waited_for).
      {"peer-timeout",
       K::kConsequence,
       "timed out waiting for another rank",
       {" waiting for rank ", "Timed out waiting for rank"}},
      {"watchdog-timeout",
       K::kConsequence,
       "collective timed out (waiting for a failed rank)",
       {"Watchdog caught collective operation timeout", "collective operation timeout",
        "Timeout at NCCL work", "Socket Timeout"}},
      {"comm-aborted",
       K::kConsequence,
       "communicator aborted after another failure",
       {"communicator was aborted", "Communicator was aborted", "watchdog thread terminated",
        "NCCL communicator aborted", "ncclCommAbort"}},
      {"stopped",
       K::kConsequence,
       "stopped by the launcher or scheduler after another failure",
       {"Received SIGTERM", "received SIGTERM", "got SIGTERM", "Terminated", "signal 15",
        "got signal: 15", "SignalException", "SIGTERM", "CANCELLED AT", "Killed"}},
      {"nccl-error",
       K::kCause,
       "NCCL error",
       {"NCCL error", "ncclInternalError", "ncclInvalidUsage", "ncclSystemError",
        "ncclInvalidArgument"}},
  };
  return kTable;
}

// Tried after the Python exception check: a program's own error line ("prog: error: ...",
// "ERROR: ..."), the least specific cause there is.
const std::vector<ErrorSignature>& generic_signatures() {
  static const std::vector<ErrorSignature> kTable = {
      {"error-message",
       K::kCause,
       "error message",
       {": error: ", "ERROR:", "FATAL:", "Fatal error", "fatal error"}},
  };
  return kTable;
}

// The generic Python exception line: `Name: text` or `pkg.mod.NameError: text` where the
// name ends in Error, Exception or Interrupt, optionally behind torch's `[rank3]: ` prefix.
bool is_python_exception(std::string_view line) {
  size_t i = 0;
  if (line.rfind("[rank", 0) == 0) {
    size_t close = line.find("]: ");  // npos is > 16 too
    if (close > 16) return false;
    i = close + 3;
  }
  size_t start = i;
  while (i < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == '.'))
    ++i;
  if (i == start || i >= line.size() || line[i] != ':') return false;
  std::string_view name = line.substr(start, i - start);
  for (const char* suffix : {"Error", "Exception", "Interrupt"}) {
    std::string_view s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

const ErrorSignature kPythonException = {"python-exception", K::kCause, "Python exception", {}};

std::string shown(const std::string& line) { return printable_text(line, 300); }

// The text used to group equal errors: numbers masked (ranks, addresses, sizes, pids differ
// between ranks), torch's rank prefix dropped, at most 200 bytes.
std::string group_key(const std::string& signature, const std::string& line) {
  std::string out = signature + "|";
  size_t i = 0;
  if (line.rfind("[rank", 0) == 0) {
    size_t close = line.find("]: ");  // npos is > 16 too
    if (close <= 16) i = close + 3;
  }
  bool in_number = false;
  for (; i < line.size() && out.size() < 200; ++i) {
    bool digit = std::isdigit(static_cast<unsigned char>(line[i])) != 0;
    if (digit && !in_number) out += '#';
    if (!digit) out += line[i];
    in_number = digit;
  }
  return out;
}

struct UnitScan {
  const RankEvidence* unit = nullptr;
  std::optional<Finding> cause;        // the first cause in the log
  std::optional<Finding> consequence;  // the first consequence in the log
  std::optional<int> waited_for;       // the rank a peer-timeout line says it waited for
  const std::optional<Finding>& primary() const { return cause ? cause : consequence; }
};

// The rank number after "waiting for rank " in a peer-timeout line.
std::optional<int> waited_for_rank(const std::string& line) {
  for (std::string_view needle : {"waiting for rank ", "waiting for rank"}) {
    size_t at = line.find(needle);
    if (at == std::string::npos) continue;
    size_t i = at + needle.size();
    while (i < line.size() && line[i] == ' ') ++i;
    int rank = 0;
    size_t digits = 0;
    for (; i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])) && digits < 7;
         ++i, ++digits)
      rank = rank * 10 + (line[i] - '0');
    if (digits > 0) return rank;
  }
  return std::nullopt;
}

Finding make_finding(const ErrorSignature& sig, const std::string& line, size_t index) {
  Finding f;
  f.signature = sig.id;
  f.description = sig.description;
  f.cause = sig.kind == K::kCause;
  f.line = shown(line);
  f.line_index = index;
  return f;
}

// A unit's finding is the first known line of its log, cause or consequence: a rank whose
// log first shows a watchdog timeout and then aborts ("terminate called after throwing
// ... DistBackendError", "Fatal Python error: Aborted") died of another rank's failure.
UnitScan scan(const RankEvidence& unit) {
  UnitScan s;
  s.unit = &unit;
  for (size_t i = 0; i < unit.lines.size(); ++i) {
    const ErrorSignature* sig = classify_line(unit.lines[i]);
    if (!sig) continue;
    Finding f = make_finding(*sig, unit.lines[i], i);
    if (f.cause) {
      s.cause = f;
    } else {
      if (f.signature == "peer-timeout") s.waited_for = waited_for_rank(unit.lines[i]);
      s.consequence = f;
    }
    break;
  }
  return s;
}

// The error with its context: a Python traceback from its header (first 3 frames' lines and
// the last 4 before the error), else the 3 lines before it; then the error line.
std::vector<std::string> excerpt_of(const RankEvidence& unit, size_t at, size_t& first_index) {
  size_t header = at;
  for (size_t back = 0; back < 60 && header > 0; ++back) {
    --header;
    if (unit.lines[header].find("Traceback (most recent call last)") != std::string::npos) break;
    if (back + 1 == 60 || header == 0) header = at;
  }
  bool traceback = header < at && unit.lines[header].find("Traceback (most recent call last)") !=
                                      std::string::npos;
  std::vector<std::string> out;
  if (!traceback) {
    first_index = at >= 3 ? at - 3 : 0;
    for (size_t i = first_index; i <= at; ++i) out.push_back(shown(unit.lines[i]));
  } else {
    first_index = header;
    size_t head_end = std::min(at, header + 3);
    size_t tail_start = at >= 4 ? std::max(head_end, at - 4) : head_end;
    for (size_t i = header; i < head_end; ++i) out.push_back(shown(unit.lines[i]));
    if (tail_start > head_end) out.push_back("...");
    for (size_t i = tail_start; i <= at; ++i) out.push_back(shown(unit.lines[i]));
  }
  // A Python exception's message may continue on the next lines (CUDA errors add advice).
  for (size_t i = at + 1; i < unit.lines.size() && i <= at + 2; ++i) {
    const std::string& l = unit.lines[i];
    if (l.empty() || l.find("Traceback") != std::string::npos) break;
    if (l.find("CUDA kernel errors") == std::string::npos &&
        l.find("For debugging consider") == std::string::npos &&
        l.find("Compile with") == std::string::npos)
      break;
    out.push_back(shown(l));
  }
  return out;
}

int unit_number(const RankEvidence& u) { return u.rank ? *u.rank : u.node ? *u.node : 0; }

std::string units_text(const std::vector<const RankEvidence*>& units) {
  std::vector<int> ranks, nodes;
  std::vector<std::string> others;
  for (const auto* u : units) {
    if (u->rank)
      ranks.push_back(*u->rank);
    else if (u->node)
      nodes.push_back(*u->node);
    else
      others.push_back(u->label);
  }
  std::vector<std::string> parts;
  if (!ranks.empty())
    parts.push_back((ranks.size() == 1 ? "rank " : "ranks ") + compress_numbers(ranks));
  if (!nodes.empty())
    parts.push_back((nodes.size() == 1 ? "node " : "nodes ") + compress_numbers(nodes));
  for (auto& o : others) parts.push_back(o);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string how_it_ended(const RankEvidence& u) {
  if (u.signal) return fmt::format("killed by signal {}", *u.signal);
  if (u.exit_code) return fmt::format("exit code {}", *u.exit_code);
  if (!u.ended.empty()) return printable_text(u.ended, 100);
  return "failed";
}

// Earlier failure order first; units without an order after those with one, by number.
bool earlier(const RankEvidence& a, const RankEvidence& b) {
  if (a.failure_order.has_value() != b.failure_order.has_value())
    return a.failure_order.has_value();
  if (a.failure_order && *a.failure_order != *b.failure_order)
    return *a.failure_order < *b.failure_order;
  return unit_number(a) < unit_number(b);
}

// A rank that others timed out waiting for, with no cause in its own log: it hung, and the
// ranks that gave up on it are its consequences (they fail first, having timed out). The
// earliest such timeout names it; `by` is the unit that waited.
const UnitScan* hung_rank(const std::vector<UnitScan>& scans, const UnitScan*& by) {
  by = nullptr;
  for (const auto& s : scans)
    if (s.waited_for && (!by || earlier(*s.unit, *by->unit))) by = &s;
  if (!by) return nullptr;
  auto rank_unit = [&](int rank) -> const UnitScan* {
    for (const auto& s : scans)
      if (s.unit->rank == rank && !s.cause) return &s;
    return nullptr;
  };
  const UnitScan* blamed = rank_unit(*by->waited_for);
  if (!blamed || blamed == by) {
    by = nullptr;  // nobody to blame: the caller must not report a hang
    return nullptr;
  }
  // Down a chain (rank 0 waited for 1, which waited for 2): the end of it hung first.
  for (size_t hops = 0; blamed && blamed->waited_for && hops < scans.size(); ++hops) {
    const UnitScan* next = rank_unit(*blamed->waited_for);
    if (!next || next == by) break;
    by = blamed;
    blamed = next;
  }
  return blamed;
}

// The earliest failing unit that shows a cause; else a rank the others timed out waiting for
// (hung_rank); else the earliest failing unit; else (no exit codes known) the earliest unit
// that shows a cause.
const UnitScan* pick_first(const std::vector<UnitScan>& scans, const UnitScan*& waited_by) {
  auto earliest = [&](auto&& accept) {
    const UnitScan* best = nullptr;
    for (const auto& s : scans)
      if (accept(s) && (!best || earlier(*s.unit, *best->unit))) best = &s;
    return best;
  };
  waited_by = nullptr;
  if (auto* s = earliest([](const UnitScan& x) { return x.unit->failed() && x.cause; })) return s;
  if (auto* s = hung_rank(scans, waited_by)) return s;
  if (auto* s = earliest([](const UnitScan& x) { return x.unit->failed(); })) return s;
  return earliest([](const UnitScan& x) { return x.cause.has_value(); });
}

std::vector<FindingGroup> group(const std::vector<std::pair<const RankEvidence*, Finding>>& in) {
  std::map<std::string, std::vector<std::pair<const RankEvidence*, Finding>>> by_key;
  std::vector<std::string> order;
  for (const auto& [unit, f] : in) {
    std::string key = group_key(f.signature, f.line);
    if (!by_key.count(key)) order.push_back(key);
    by_key[key].emplace_back(unit, f);
  }
  std::vector<FindingGroup> out;
  for (const auto& key : order) {
    auto& members = by_key[key];
    std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
      return unit_number(*a.first) < unit_number(*b.first);
    });
    FindingGroup g;
    g.signature = members.front().second.signature;
    g.description = members.front().second.description;
    g.cause = members.front().second.cause;
    g.example = members.front().second.line;
    std::vector<const RankEvidence*> units;
    for (const auto& [unit, f] : members) {
      g.labels.push_back(unit->label);
      units.push_back(unit);
    }
    g.units_text = units_text(units);
    out.push_back(std::move(g));
  }
  // The biggest groups first: they are what most of the log lines say.
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.labels.size() > b.labels.size(); });
  return out;
}

}  // namespace

const std::vector<ErrorSignature>& error_signatures() {
  static const std::vector<ErrorSignature> all = [] {
    std::vector<ErrorSignature> v = specific_signatures();
    v.push_back(kPythonException);
    v.insert(v.end(), generic_signatures().begin(), generic_signatures().end());
    return v;
  }();
  return all;
}

namespace {

// A table's needles indexed by one byte each, so that a line is read once: only at the
// positions whose byte anchors some needle are those needles compared. The anchor is the
// needle's rarest byte in log text (an upper-case letter or punctuation before a rare
// lower-case letter, digits and blanks last), so most bytes of a line anchor nothing. Trying
// every needle with find() read each line about 60 times and took three quarters of `why` on
// 4096 rank logs (bench/triage_bench.cpp). The first signature in table order that matches
// anywhere in the line wins, as before.
class NeedleIndex {
 public:
  explicit NeedleIndex(const std::vector<ErrorSignature>& table) : table_(table) {
    for (size_t i = 0; i < table.size(); ++i)
      for (const char* needle : table[i].needles) {
        std::string_view n(needle);
        if (n.empty()) continue;
        size_t anchor = 0;
        for (size_t k = 1; k < n.size(); ++k)
          if (commonness(n[k]) < commonness(n[anchor])) anchor = k;
        auto byte = static_cast<unsigned char>(n[anchor]);
        buckets_[byte].push_back({n, anchor, i});
        anchors_[byte] = true;
      }
  }

  const ErrorSignature* first_match(std::string_view text) const {
    size_t best = table_.size();
    for (size_t pos = 0; pos < text.size() && best > 0; ++pos) {
      const auto byte = static_cast<unsigned char>(text[pos]);
      if (!anchors_[byte]) continue;
      for (const auto& e : buckets_[byte]) {
        if (e.index >= best || pos < e.anchor) continue;
        size_t start = pos - e.anchor;
        if (text.compare(start, e.needle.size(), e.needle) == 0) best = e.index;
      }
    }
    return best < table_.size() ? &table_[best] : nullptr;
  }

 private:
  // How common a byte is in log lines, low = rare: what makes a good anchor.
  static int commonness(char c) {
    static constexpr std::string_view kLowerByFrequency = "zqxjkvbpygfwmucldrhsnioate";
    if (c == ' ') return 100;
    if (std::isdigit(static_cast<unsigned char>(c))) return 90;
    if (std::islower(static_cast<unsigned char>(c)))
      return 50 + static_cast<int>(kLowerByFrequency.find(c));
    return 0;  // upper case, punctuation
  }

  struct Entry {
    std::string_view needle;
    size_t anchor;  // the position of the indexed byte in the needle
    size_t index;   // of its signature in the table
  };
  const std::vector<ErrorSignature>& table_;
  std::array<std::vector<Entry>, 256> buckets_{};
  std::array<bool, 256> anchors_{};  // whether the byte anchors any needle
};

}  // namespace

const ErrorSignature* classify_line(const std::string& line) {
  static const NeedleIndex kSpecific(specific_signatures());
  static const NeedleIndex kGeneric(generic_signatures());
  std::string_view text(line.data(), std::min(line.size(), kMaxTriageLineBytes));
  if (const auto* sig = kSpecific.first_match(text)) return sig;
  if (is_python_exception(text)) return &kPythonException;
  return kGeneric.first_match(text);
}

std::string compress_numbers(std::vector<int> numbers) {
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  std::string out;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    // A run of two reads better as "3, 4" than as "3-4".
    if (j == i + 1) j = i;
    out += j == i ? std::to_string(numbers[i]) : fmt::format("{}-{}", numbers[i], numbers[j]);
    i = j + 1;
  }
  return out;
}

Triage triage(const FailureEvidence& evidence) {
  Triage t;
  t.order_source = evidence.order_source;
  for (size_t i = 0; i < evidence.scheduler_lines.size(); ++i) {
    const std::string& line = evidence.scheduler_lines[i];
    const ErrorSignature* sig = classify_line(line);
    if (sig && sig->kind == K::kCause && std::string(sig->id) != "python-exception")
      t.job_level.push_back(make_finding(*sig, line, i));
  }
  // Classifying every unit's lines is most of `why`'s time on a large job: in parallel.
  std::vector<UnitScan> scans(evidence.units.size());
  parallel_for(scans.size(), /*min_per_thread=*/64,
               [&](size_t i) { scans[i] = scan(evidence.units[i]); });
  const UnitScan* waited_by = nullptr;
  const UnitScan* first = pick_first(scans, waited_by);
  if (!first) return t;

  FirstFailure f;
  const RankEvidence& u = *first->unit;
  f.label = u.label;
  f.rank = u.rank;
  f.node = u.node;
  f.host = printable_text(u.host, 200);
  f.exit_code = u.exit_code;
  f.signal = u.signal;
  f.log_path = printable_text(u.log_path, 1000);
  f.finding = first->primary();
  if (waited_by)
    f.hung = fmt::format("{} timed out waiting for it: {}", waited_by->unit->label,
                         waited_by->consequence->line);
  if (f.finding) {
    size_t first_index = 0;
    f.excerpt = excerpt_of(u, f.finding->line_index, first_index);
    if (u.first_line_number > 0) f.excerpt_first_line = u.first_line_number + first_index;
  }
  std::string first_key = f.finding ? group_key(f.finding->signature, f.finding->line) : "";

  std::vector<const RankEvidence*> same;
  std::vector<std::pair<const RankEvidence*, Finding>> causes, consequences;
  std::map<std::string, std::vector<const RankEvidence*>> silent;
  for (const auto& s : scans) {
    if (&s == first) continue;
    const auto& p = s.primary();
    if (p && !first_key.empty() && group_key(p->signature, p->line) == first_key)
      same.push_back(s.unit);
    else if (p && p->cause)
      causes.emplace_back(s.unit, *p);
    else if (p)
      consequences.emplace_back(s.unit, *p);
    else if (s.unit->failed())
      silent[how_it_ended(*s.unit)].push_back(s.unit);
  }
  std::sort(same.begin(), same.end(),
            [](const auto* a, const auto* b) { return unit_number(*a) < unit_number(*b); });
  for (const auto* s : same) t.same_error_labels.push_back(s->label);
  t.same_error_text = units_text(same);
  t.other_causes = group(causes);
  t.consequences = group(consequences);
  for (auto& [how, units] : silent) t.silent.emplace_back(how, units_text(units));
  t.first = std::move(f);
  return t;
}

}  // namespace bridge
