// Failure triage: which rank of a failed job failed first, and why (`bridge-launch why`).
//
// Contract:
// - Executors gather FailureEvidence (per rank, or per node/pod under a per-node launcher:
//   exit code or signal, host, the order in which the scheduler saw the units fail, and the
//   last lines of each log). triage() is pure: the same evidence gives the same Triage.
// - Lines are classified by one data table (error_signatures()): causes (a Python exception,
//   a CUDA error, GPU or host out of memory, a segfault, preemption, ...) and consequences
//   (NCCL "connection closed", watchdog timeouts, aborted communicators, ranks stopped by the
//   launcher), matched by plain substrings on lines of at most kMaxTriageLineBytes, so no
//   input can make matching slow or recursive. The first matching entry of the table wins,
//   so specific entries come before generic ones.
// - A unit's finding is the first line of its log that a signature matches (a rank whose log
//   first shows a consequence, then aborts, died of another rank's failure).
// - The first failure is the earliest failing unit (scheduler order) whose log shows a cause;
//   when no failing unit shows a cause, a rank that another timed out waiting for
//   ("timed out after 8 s waiting for rank 1": rank 1 hung, down a chain of such waits);
//   else the earliest failing unit. Ranks with the same error
//   (same signature, same text once numbers are masked) are grouped as "same error on ranks
//   3, 5, 7-9"; consequences are grouped per signature and counted by rank.
// - Everything it returns for display is printable (control bytes escaped) and bounded.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace bridge {

inline constexpr size_t kMaxTriageLineBytes = 4096;  // longer lines are cut before matching
inline constexpr size_t kTriageTailLines = 400;      // lines kept per unit by the gatherers

// One unit of output: one rank's log, or one node's (torchrun per node, a Kubernetes pod).
struct RankEvidence {
  std::string label;        // "rank 11", "node 1", "pod llama-x-0-0"
  std::optional<int> rank;  // the global rank when the unit is one rank
  std::optional<int> node;  // the node index when the unit is one node (rank range unknown)
  std::string host;         // the host it ran on, "" when unknown
  std::optional<int> exit_code;
  std::optional<int> signal;  // killed by this signal
  std::string ended;          // the scheduler's words when it names neither (e.g. "Killed by UID")
  std::optional<int> failure_order;  // 0 = the scheduler saw this unit fail first
  std::string log_path;              // where `lines` come from, for the reader
  std::vector<std::string> lines;    // the log's last lines, oldest first
  size_t first_line_number = 0;      // line number of lines[0] in the log (1-based); 0 unknown
  bool failed() const {
    return (exit_code && *exit_code != 0) || signal.has_value() || !ended.empty();
  }
};

struct FailureEvidence {
  std::vector<RankEvidence> units;
  // Job-level messages (Slurm's batch stderr, Kubernetes events): preemption, time limit,
  // node failure and OOM-killer lines are found here.
  std::vector<std::string> scheduler_lines;
  std::string order_source;  // how failure_order was known, e.g. "srun's task report"
};

enum class SignatureKind { kCause, kConsequence };

struct ErrorSignature {
  const char* id;  // stable, for --format json and tests: "cuda-error"
  SignatureKind kind;
  const char* description;           // what it means, for people: "CUDA error"
  std::vector<const char*> needles;  // any one of these substrings matches
};

// The table, most specific first. A Python exception line (`SomeError: ...`, also behind a
// `[rank3]:` prefix) that no entry claims is the generic cause "python-exception".
const std::vector<ErrorSignature>& error_signatures();

// The signature of one line, nullptr when none matches.
const ErrorSignature* classify_line(const std::string& line);

struct Finding {
  std::string signature;    // ErrorSignature::id
  std::string description;  // ErrorSignature::description
  bool cause = false;
  std::string line;       // the matching line, printable and bounded
  size_t line_index = 0;  // index in RankEvidence::lines
};

// Units sharing one signature and text (numbers masked), e.g. 15 ranks' "connection closed".
struct FindingGroup {
  std::string signature;
  std::string description;
  bool cause = false;
  std::string example;              // the line of the lowest unit, printable
  std::vector<std::string> labels;  // units, in rank/node order
  std::string units_text;           // "ranks 0-10, 12-15" / "nodes 0, 1"
};

struct FirstFailure {
  std::string label;
  std::optional<int> rank;
  std::optional<int> node;
  std::string host;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<Finding> finding;    // nullopt: the log shows no known error
  std::vector<std::string> excerpt;  // the error with its context (traceback), printable
  size_t excerpt_first_line = 0;     // line number of excerpt[0] in the log; 0 unknown
  std::string log_path;
  // Set when this unit is blamed because another timed out waiting for it (a hang): which
  // unit, and its line. Such a unit's own log may show nothing.
  std::string hung;
};

struct Triage {
  std::optional<FirstFailure> first;           // nullopt: no unit failed and no log shows an error
  std::vector<std::string> same_error_labels;  // other units with the first one's error
  std::string same_error_text;                 // "ranks 3, 5, 7-9"
  std::vector<FindingGroup> other_causes;      // different errors on other units
  std::vector<FindingGroup> consequences;      // follow-on failures, by signature
  // Failing units whose logs show nothing known, grouped by how they ended ("exit code 1").
  std::vector<std::pair<std::string, std::string>> silent;  // (how, units_text)
  std::vector<Finding> job_level;                           // from scheduler_lines
  std::string order_source;
};

Triage triage(const FailureEvidence& evidence);

// "0-10, 12, 13" from {0..10, 12, 13}: sorted, duplicates dropped, runs of three or more as
// ranges.
std::string compress_numbers(std::vector<int> numbers);

}  // namespace bridge
