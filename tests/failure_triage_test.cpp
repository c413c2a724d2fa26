// jobs/failure_triage.h: `bridge-launch why JOB`. The log excerpts under
// tests/data/logs/ are written in the style of PyTorch, Megatron-LM, NCCL, torchrun and Slurm
// output (with the noise that surrounds real errors), so that the signature table is checked
// against what the tools print, not against strings made up to fit the table.
#include "jobs/failure_triage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "jobs/triage_output.h"
#include "tests/support/build_paths.h"

namespace bridge {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

// The lines of tests/data/logs/<name>, oldest first, without their line ends.
std::vector<std::string> read_log(const std::string& name) {
  std::string path = std::string(BRIDGE_TEST_DATA) + "/logs/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The first line of a data file containing `marker`: the scenario's key line.
std::string line_with(const std::string& file, const std::string& marker) {
  for (const std::string& line : read_log(file))
    if (line.find(marker) != std::string::npos) return line;
  ADD_FAILURE() << file << " has no line containing \"" << marker << "\"";
  return "";
}

// The data files are written as one rank's log; other ranks print the same with their own
// rank in torch's `[rankN]:` prefix.
std::vector<std::string> replace_all(std::vector<std::string> lines, const std::string& from,
                                     const std::string& to) {
  for (std::string& line : lines) {
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at + to.size()))
      line.replace(at, from.size(), to);
  }
  return lines;
}

RankEvidence rank_unit(int rank, const std::string& host, std::optional<int> exit_code,
                       std::optional<int> failure_order, std::vector<std::string> lines) {
  RankEvidence unit;
  unit.label = "rank " + std::to_string(rank);
  unit.rank = rank;
  unit.host = host;
  unit.exit_code = exit_code;
  unit.failure_order = failure_order;
  unit.log_path = "/jobs/llama3-8b/4242/rank-" + std::to_string(rank) + ".log";
  unit.lines = std::move(lines);
  return unit;
}

RankEvidence node_unit(int node, const std::string& host, std::optional<int> exit_code,
                       std::optional<int> failure_order, std::vector<std::string> lines) {
  RankEvidence unit;
  unit.label = "node " + std::to_string(node);
  unit.node = node;
  unit.host = host;
  unit.exit_code = exit_code;
  unit.failure_order = failure_order;
  unit.log_path = "/jobs/llama3-8b/4242/node-" + std::to_string(node) + ".log";
  unit.lines = std::move(lines);
  return unit;
}

std::string host_of(int rank) { return rank < 8 ? "node1" : "node2"; }

const FindingGroup* group_with(const std::vector<FindingGroup>& groups,
                               const std::string& signature) {
  for (const FindingGroup& group : groups)
    if (group.signature == signature) return &group;
  return nullptr;
}

std::vector<std::string> signatures_of(const std::vector<FindingGroup>& groups) {
  std::vector<std::string> ids;
  for (const FindingGroup& group : groups) ids.push_back(group.signature);
  return ids;
}

std::string id_of(const ErrorSignature* signature) { return signature ? signature->id : "(none)"; }

std::optional<Finding> job_level_finding(const Triage& result, const std::string& signature) {
  for (const Finding& finding : result.job_level)
    if (finding.signature == signature) return finding;
  return std::nullopt;
}

bool printable(const std::string& text) {
  return std::none_of(text.begin(), text.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

// --- classify_line ---------------------------------------------------------------------------

struct KeyLine {
  const char* file;
  const char* marker;  // picks the scenario's key line out of the file
  const char* id;
  SignatureKind kind;
};

TEST(FailureTriageClassifyLine, EachScenariosKeyLineGetsItsSignature) {
  const SignatureKind cause = SignatureKind::kCause;
  const SignatureKind consequence = SignatureKind::kConsequence;
  const std::vector<KeyLine> key_lines = {
      {"python_traceback.log", "ValueError: sample", "python-exception", cause},
      {"cuda_illegal_address.log", "RuntimeError: CUDA error", "cuda-error", cause},
      {"rank11_illegal_address_prefixed.log", "[rank11]: RuntimeError: CUDA error", "cuda-error",
       cause},
      {"cuda_oom.log", "torch.OutOfMemoryError", "cuda-oom", cause},
      {"host_oom_slurmstepd.log", "oom_kill event", "host-oom", cause},
      {"segfault.log", "Fatal Python error: Segmentation fault", "segfault", cause},
      {"slurm_preemption.err", "*** JOB 1234", "preempted", cause},
      {"time_limit.err", "*** JOB 5151", "time-limit", cause},
      {"torch_elastic_childfailed.log", "RuntimeError: CUDA error", "cuda-error", cause},
      {"nccl_connection_closed.log", "NCCL WARN NET/Socket : Connection closed by remote peer",
       "peer-lost", consequence},
      // An exception line carrying a consequence's text is the consequence: the specific entry
      // beats the generic Python exception.
      {"nccl_connection_closed.log", "DistBackendError", "peer-lost", consequence},
      {"nccl_connection_closed.log", "ncclRemoteError", "peer-lost", consequence},
      {"nccl_timeout_watchdog.log", "ProcessGroupNCCL.cpp:616", "watchdog-timeout", consequence},
      {"host_oom_slurmstepd.log", "*** STEP 4242.0", "stopped", consequence},
      {"host_oom_slurmstepd.log", "tasks 0-7: Terminated", "stopped", consequence},
      {"slurm_preemption.err", "tasks 8-15: Terminated", "stopped", consequence},
  };
  for (const KeyLine& key : key_lines) {
    std::string line = line_with(key.file, key.marker);
    const ErrorSignature* signature = classify_line(line);
    ASSERT_NE(signature, nullptr) << key.file << ": " << line;
    EXPECT_EQ(std::string(signature->id), key.id) << key.file << ": " << line;
    EXPECT_EQ(signature->kind, key.kind) << key.file << ": " << line;
  }
}

TEST(FailureTriageClassifyLine, LinesWithoutAFileOfTheirOwnGetTheirSignatures) {
  struct Case {
    std::string line;
    std::string id;
    SignatureKind kind;
  };
  const std::vector<Case> cases = {
      {"Fatal Python error: Aborted", "abort", SignatureKind::kCause},
      {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "gpu-xid",
       SignatureKind::kCause},
      {"RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu-xid",
       SignatureKind::kCause},
      {"[rank3]: NCCL timeout: allreduce on the tensor-parallel group did not finish in 600 s",
       "nccl-timeout", SignatureKind::kCause},
      {"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
       "OpType=ALLREDUCE) ran for 600010 milliseconds before timing out.",
       "watchdog-timeout", SignatureKind::kConsequence},
      {"slurmstepd: error: *** JOB 777 ON node3 CANCELLED AT 2026-11-30T10:00:00 DUE TO NODE "
       "FAILURE ***",
       "node-failure", SignatureKind::kCause},
      {"[rank5]: torch.distributed.DistBackendError: NCCL error in: "
       "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2006, unhandled "
       "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
       "nccl-error", SignatureKind::kCause},
      {"[rank2]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 2.",
       "comm-aborted", SignatureKind::kConsequence},
      // The example: a DistBackendError that says the peer went away is a consequence,
      // even though it is also an NCCL error and a Python exception.
      {"torch.distributed.DistBackendError: NCCL error in: "
       "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a "
       "network error, NCCL version 2.21.5",
       "peer-lost", SignatureKind::kConsequence},
      {"ValueError: bad shape", "python-exception", SignatureKind::kCause},
      {"[rank3]: RuntimeError: boom", "python-exception", SignatureKind::kCause},
      {"KeyError: 'decoder.layers.0.mlp.linear_fc1.weight'", "python-exception",
       SignatureKind::kCause},
  };
  for (const Case& c : cases) {
    const ErrorSignature* signature = classify_line(c.line);
    ASSERT_NE(signature, nullptr) << c.line;
    EXPECT_EQ(std::string(signature->id), c.id) << c.line;
    EXPECT_EQ(signature->kind, c.kind) << c.line;
  }
}

TEST(FailureTriageClassifyLine, NoiseLinesHaveNoSignature) {
  const std::vector<std::string> noise = {
      "",
      "[2026-11-30 09:50:12] INFO: rank 0 of 16 on node1, local rank 0, device cuda:0",
      " [2026-11-30 09:51:06] iteration       10/     100 | consumed samples:        10240 | "
      "elapsed time per iteration (ms): 1502.3 | lm loss: 1.034512E+01 |",
      "  File \"train.py\", line 10, in <module>",
      // The traceback's header is context; the cause is its last line.
      "Traceback (most recent call last):",
      "node1:1843201:1843201 [0] NCCL INFO Bootstrap : Using ib0:10.10.0.1<0>",
  };
  for (const std::string& line : noise) EXPECT_EQ(id_of(classify_line(line)), "(none)") << line;
  // A whole healthy Megatron log (including a UserWarning and NCCL INFO lines) is noise.
  for (const std::string& line : read_log("megatron_healthy.log"))
    EXPECT_EQ(id_of(classify_line(line)), "(none)") << line;
}

// classify_line reads a line once through an index of the needles; it must answer as trying
// every needle of every signature in table order with find() does: the first signature in
// table order with a needle anywhere in the line. Every needle is tried alone, at the start,
// in the middle and at the end of a line, and next to every other needle.
TEST(FailureTriageClassifyLine, TheIndexAnswersAsTryingEveryNeedleInOrder) {
  const auto& table = error_signatures();
  auto by_find = [&](const std::string& line) -> std::string {
    for (const auto& sig : table)
      for (const char* needle : sig.needles)
        if (line.find(needle) != std::string::npos) return sig.id;
    return "(none)";
  };
  std::vector<std::string> needles;
  for (const auto& sig : table)
    for (const char* needle : sig.needles) needles.emplace_back(needle);
  int checked = 0;
  for (const auto& n : needles) {
    for (const std::string& line : {n, "x" + n, n + "x", "iteration 12 | " + n + " | lm loss"}) {
      // A line that looks like a Python exception is decided by that rule, not by needles.
      if (id_of(classify_line(line)) == "python-exception") continue;
      EXPECT_EQ(id_of(classify_line(line)), by_find(line)) << line;
      ++checked;
    }
    for (const auto& other : needles) {
      std::string line = n + " " + other;
      if (id_of(classify_line(line)) == "python-exception") continue;
      EXPECT_EQ(id_of(classify_line(line)), by_find(line)) << line;
      ++checked;
    }
  }
  EXPECT_GT(checked, 4000);
}

TEST(FailureTriageClassifyLine, TheTableHasTheDocumentedIdsAndNoEntryIsShadowed) {
  const std::vector<std::pair<std::string, SignatureKind>> documented = {
      {"gpu-xid", SignatureKind::kCause},
      {"nccl-timeout", SignatureKind::kCause},
      {"cuda-oom", SignatureKind::kCause},
      {"cuda-error", SignatureKind::kCause},
      {"host-oom", SignatureKind::kCause},
      {"segfault", SignatureKind::kCause},
      {"abort", SignatureKind::kCause},
      {"preempted", SignatureKind::kCause},
      {"time-limit", SignatureKind::kCause},
      {"node-failure", SignatureKind::kCause},
      {"nccl-error", SignatureKind::kCause},
      {"peer-lost", SignatureKind::kConsequence},
      {"peer-timeout", SignatureKind::kConsequence},
      {"watchdog-timeout", SignatureKind::kConsequence},
      {"comm-aborted", SignatureKind::kConsequence},
      {"stopped", SignatureKind::kConsequence},
      {"python-exception", SignatureKind::kCause},
      {"error-message", SignatureKind::kCause},
  };
  const std::vector<ErrorSignature>& table = error_signatures();
  for (const auto& entry : documented) {
    const std::string& id = entry.first;  // clang 14: lambdas cannot capture bindings
    const SignatureKind kind = entry.second;
    auto count = std::count_if(table.begin(), table.end(),
                               [&](const ErrorSignature& s) { return s.id == id; });
    EXPECT_EQ(count, 1) << id;
    for (const ErrorSignature& s : table) {
      if (s.id == id) {
        EXPECT_EQ(s.kind, kind) << id;
      }
    }
  }
  // The first matching entry wins, so an entry none of whose needles reaches it on its own is
  // dead: an earlier, more generic entry swallows it.
  for (const ErrorSignature& entry : table) {
    if (std::string(entry.id) == "python-exception") {  // matched by its shape, not needles
      EXPECT_EQ(id_of(classify_line("ValueError: bad shape")), "python-exception");
      continue;
    }
    EXPECT_FALSE(entry.needles.empty()) << entry.id;
    EXPECT_NE(std::string(entry.description), "") << entry.id;
    bool reachable = false;
    for (const char* needle : entry.needles) {
      const ErrorSignature* signature = classify_line(needle);
      if (signature && std::string(signature->id) == entry.id) reachable = true;
    }
    EXPECT_TRUE(reachable) << entry.id << " is shadowed by an earlier entry";
  }
}

TEST(FailureTriageClassifyLine, AHugeLineIsMatchedOnItsBoundedStart) {
  // A 1 MiB line (a progress bar without line ends, a dumped tensor) must not make matching
  // slow; the error at its start is still found, and plain junk matches nothing.
  std::string error = "RuntimeError: CUDA error: an illegal memory access was encountered ";
  EXPECT_EQ(id_of(classify_line(error + std::string(1 << 20, 'x'))), "cuda-error");
  EXPECT_EQ(id_of(classify_line(std::string(1 << 20, '#'))), "(none)");
  // Escape sequences around the text do not hide it.
  EXPECT_EQ(id_of(classify_line("\x1b[31m" + error + "\x1b[0m")), "cuda-error");
}

// --- triage: which unit failed first ---------------------------------------------------------

// The acceptance scenario: 16 ranks on two nodes; rank 11 hits an illegal memory
// access and the 15 others then lose their NCCL peer.
FailureEvidence illegal_address_on_rank_11() {
  FailureEvidence evidence;
  evidence.order_source = "srun's task report";
  std::vector<std::string> closed = read_log("nccl_connection_closed.log");
  int order = 1;
  for (int rank = 0; rank < 16; ++rank) {
    if (rank == 11) {
      RankEvidence unit =
          rank_unit(11, "node2", 17, 0, read_log("rank11_illegal_address_prefixed.log"));
      unit.first_line_number = 380;  // the gatherer kept the log's tail
      evidence.units.push_back(unit);
      continue;
    }
    evidence.units.push_back(
        rank_unit(rank, host_of(rank), 1, order++,
                  replace_all(closed, "[rank0]", "[rank" + std::to_string(rank) + "]")));
  }
  return evidence;
}

TEST(FailureTriage, TheRankWithTheCudaErrorIsFirstAndNcclNoiseIsAConsequence) {
  FailureEvidence evidence = illegal_address_on_rank_11();
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  const FirstFailure& first = *result.first;
  EXPECT_EQ(first.label, "rank 11");
  EXPECT_EQ(first.rank, 11);
  EXPECT_EQ(first.node, std::nullopt);
  EXPECT_EQ(first.host, "node2");
  EXPECT_EQ(first.exit_code, 17);
  EXPECT_EQ(first.signal, std::nullopt);
  EXPECT_EQ(first.log_path, "/jobs/llama3-8b/4242/rank-11.log");
  ASSERT_TRUE(first.finding.has_value());
  EXPECT_EQ(first.finding->signature, "cuda-error");
  EXPECT_TRUE(first.finding->cause);
  EXPECT_NE(first.finding->description, "");
  EXPECT_THAT(first.finding->line,
              HasSubstr("RuntimeError: CUDA error: an illegal memory access was encountered"));

  // line_index and the excerpt's line number point back into the unit's lines, so that the
  // reader can open the log at the right place.
  const RankEvidence& rank11 = evidence.units[11];
  ASSERT_LT(first.finding->line_index, rank11.lines.size());
  EXPECT_EQ(rank11.lines[first.finding->line_index], first.finding->line);
  EXPECT_THAT(first.excerpt, Contains(HasSubstr("Traceback (most recent call last):")));
  EXPECT_THAT(first.excerpt, Contains(HasSubstr("CUDA error: an illegal memory access")));
  ASSERT_FALSE(first.excerpt.empty());
  ASSERT_GE(first.excerpt_first_line, rank11.first_line_number);
  size_t excerpt_index = first.excerpt_first_line - rank11.first_line_number;
  ASSERT_LT(excerpt_index, rank11.lines.size());
  EXPECT_EQ(rank11.lines[excerpt_index], first.excerpt.front());
  // The traceback's header comes before the error line in the excerpt, as in the log.
  auto header = std::find_if(first.excerpt.begin(), first.excerpt.end(), [](const auto& line) {
    return line.find("Traceback (most recent call last):") != std::string::npos;
  });
  auto error = std::find_if(first.excerpt.begin(), first.excerpt.end(), [](const auto& line) {
    return line.find("RuntimeError: CUDA error") != std::string::npos;
  });
  EXPECT_LT(header, error);

  EXPECT_THAT(result.same_error_labels, IsEmpty());
  EXPECT_EQ(result.same_error_text, "");
  EXPECT_THAT(result.other_causes, IsEmpty());
  EXPECT_THAT(result.silent, IsEmpty());
  EXPECT_EQ(result.order_source, "srun's task report");

  // All 15 others printed the same "connection closed": one group, counted by rank.
  ASSERT_EQ(result.consequences.size(), 1u)
      << ::testing::PrintToString(signatures_of(result.consequences));
  const FindingGroup& lost = result.consequences[0];
  EXPECT_EQ(lost.signature, "peer-lost");
  EXPECT_FALSE(lost.cause);
  EXPECT_EQ(lost.units_text, "ranks 0-10, 12-15");
  std::vector<std::string> expected_labels;
  for (int rank = 0; rank < 16; ++rank)
    if (rank != 11) expected_labels.push_back("rank " + std::to_string(rank));
  EXPECT_EQ(lost.labels, expected_labels);
  // The example is the lowest unit's line.
  EXPECT_THAT(evidence.units[0].lines, Contains(lost.example));
}

TEST(FailureTriage, WatchdogTimeoutsAndLostPeersAreSeparateConsequences) {
  FailureEvidence evidence = illegal_address_on_rank_11();
  // Ranks 12-15 were stuck in an all-reduce and their watchdog took them down (SIGABRT).
  std::vector<std::string> watchdog = read_log("nccl_timeout_watchdog.log");
  for (RankEvidence& unit : evidence.units) {
    if (*unit.rank < 12) continue;
    std::string rank = std::to_string(*unit.rank);
    unit.lines = replace_all(replace_all(watchdog, "[rank12]", "[rank" + rank + "]"), "[Rank 12]",
                             "[Rank " + rank + "]");
    unit.exit_code.reset();
    unit.signal = 6;
  }
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 11");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-error");
  EXPECT_THAT(result.other_causes, IsEmpty());

  const FindingGroup* lost = group_with(result.consequences, "peer-lost");
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->units_text, "ranks 0-10");
  // The watchdog's first report is the timeout; its later "watchdog thread terminated" line
  // repeats it, so the ranks may be counted under either name, but together, never twice.
  const FindingGroup* timeout = group_with(result.consequences, "watchdog-timeout");
  const FindingGroup* aborted = group_with(result.consequences, "comm-aborted");
  ASSERT_TRUE(timeout || aborted) << ::testing::PrintToString(signatures_of(result.consequences));
  EXPECT_EQ((timeout ? timeout : aborted)->units_text, "ranks 12-15");
}

TEST(FailureTriage, TheSchedulersOrderBeatsTheRankNumber) {
  FailureEvidence evidence;
  // Rank 2 was seen failing first, but only because its peer vanished: its log shows a
  // consequence, so the first failure is the next one in order that shows a cause.
  evidence.units.push_back(rank_unit(
      2, "node1", 1, 0, replace_all(read_log("nccl_connection_closed.log"), "[rank0]", "[rank2]")));
  evidence.units.push_back(
      rank_unit(9, "node2", 1, 1, replace_all(read_log("cuda_oom.log"), "[rank3]", "[rank9]")));
  evidence.units.push_back(rank_unit(12, "node2", 1, 2, read_log("python_traceback.log")));
  evidence.units.push_back(
      rank_unit(0, "node1", 0, std::nullopt, read_log("megatron_healthy.log")));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 9");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-oom");
  EXPECT_THAT(result.same_error_labels, IsEmpty());

  // A different error on a later rank is listed, not merged into the first one.
  ASSERT_EQ(result.other_causes.size(), 1u);
  EXPECT_EQ(result.other_causes[0].signature, "python-exception");
  EXPECT_TRUE(result.other_causes[0].cause);
  EXPECT_THAT(result.other_causes[0].labels, ElementsAre("rank 12"));
  EXPECT_THAT(result.other_causes[0].example, HasSubstr("ValueError: sample 884213"));

  const FindingGroup* lost = group_with(result.consequences, "peer-lost");
  ASSERT_NE(lost, nullptr);
  EXPECT_THAT(lost->labels, ElementsAre("rank 2"));
}

TEST(FailureTriage, AmongRanksWithCausesTheEarliestByOrderIsFirstNotTheLowest) {
  FailureEvidence evidence;
  evidence.units.push_back(rank_unit(1, "node1", 1, 1, read_log("python_traceback.log")));
  evidence.units.push_back(rank_unit(12, "node2", 1, 0, read_log("cuda_illegal_address.log")));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 12");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-error");
  ASSERT_EQ(result.other_causes.size(), 1u);
  EXPECT_THAT(result.other_causes[0].labels, ElementsAre("rank 1"));
}

TEST(FailureTriage, WithoutAnOrderTheLowestFailingRankWithACauseIsFirst) {
  FailureEvidence evidence;
  // All failure_order unknown (a scheduler that does not report it).
  evidence.units.push_back(rank_unit(3, "node1", 1, std::nullopt, read_log("cuda_oom.log")));
  evidence.units.push_back(
      rank_unit(0, "node1", 1, std::nullopt, read_log("nccl_connection_closed.log")));
  evidence.units.push_back(
      rank_unit(2, "node1", 1, std::nullopt, read_log("cuda_illegal_address.log")));
  // Rank 1 logged an exception but exited 0 (it caught it): it did not fail.
  evidence.units.push_back(
      rank_unit(1, "node1", 0, std::nullopt, read_log("python_traceback.log")));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 2");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-error");
}

TEST(FailureTriage, TheSameErrorOnSeveralRanksIsGroupedWithItsNumbersMasked) {
  // Ranks 3, 5, 7, 8, 9 run out of GPU memory, each with its own GPU, sizes and free memory;
  // the others lose their peers.
  const std::vector<std::string> oom = read_log("cuda_oom.log");
  auto oom_on = [&](int rank, int variant) {
    std::string r = std::to_string(rank);
    std::vector<std::string> lines = replace_all(oom, "[rank3]", "[rank" + r + "]");
    lines = replace_all(lines, "GPU 3 has", "GPU " + std::to_string(rank % 8) + " has");
    lines = replace_all(lines, "1.23 GiB is free", std::to_string(variant) + ".07 GiB is free");
    return replace_all(lines, "Tried to allocate 2.00 GiB",
                       "Tried to allocate " + std::to_string(variant + 1) + ".50 GiB");
  };
  auto build = [&](const std::vector<int>& oom_order) {
    FailureEvidence evidence;
    int order = 0;
    for (int rank : oom_order)
      evidence.units.push_back(rank_unit(rank, host_of(rank), 1, order++, oom_on(rank, rank)));
    for (int rank : {0, 1, 2, 4, 6})
      evidence.units.push_back(
          rank_unit(rank, host_of(rank), 1, order++,
                    replace_all(read_log("nccl_connection_closed.log"), "[rank0]",
                                "[rank" + std::to_string(rank) + "]")));
    return evidence;
  };

  Triage result = triage(build({3, 8, 5, 9, 7}));
  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 3");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-oom");
  EXPECT_THAT(result.first->finding->line, HasSubstr("GPU 3 has"));
  EXPECT_THAT(result.same_error_labels, ElementsAre("rank 5", "rank 7", "rank 8", "rank 9"));
  EXPECT_EQ(result.same_error_text, "ranks 5, 7-9");
  EXPECT_THAT(result.other_causes, IsEmpty());
  const FindingGroup* lost = group_with(result.consequences, "peer-lost");
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->units_text, "ranks 0-2, 4, 6");

  // Order, not the rank number, picks which of them is "first"; the rest are the same error.
  result = triage(build({8, 3, 9, 7, 5}));
  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 8");
  EXPECT_EQ(result.same_error_text, "ranks 3, 5, 7, 9");
}

TEST(FailureTriage, FailingRanksWhoseLogsShowNothingKnownAreListedAsSilent) {
  FailureEvidence evidence;
  const std::vector<std::string> healthy = read_log("megatron_healthy.log");
  evidence.units.push_back(
      rank_unit(11, "node2", 1, 0, read_log("rank11_illegal_address_prefixed.log")));
  int order = 1;
  for (int rank = 0; rank < 4; ++rank)
    evidence.units.push_back(rank_unit(rank, "node1", 1, order++, healthy));
  for (int rank = 4; rank < 6; ++rank) {
    RankEvidence unit = rank_unit(rank, "node1", std::nullopt, order++, {});
    unit.signal = 9;  // killed before it wrote anything
    evidence.units.push_back(unit);
  }
  for (int rank = 6; rank < 16; ++rank) {
    if (rank != 11)
      evidence.units.push_back(rank_unit(rank, host_of(rank), 0, std::nullopt, healthy));
  }
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 11");
  EXPECT_THAT(result.consequences, IsEmpty());
  EXPECT_THAT(result.other_causes, IsEmpty());
  // Grouped by how they ended; ranks that exited 0 are not failures and are not listed.
  ASSERT_EQ(result.silent.size(), 2u) << ::testing::PrintToString(result.silent);
  EXPECT_THAT(result.silent, Contains(Pair(HasSubstr("exit code 1"), "ranks 0-3")));
  EXPECT_THAT(result.silent,
              Contains(Pair(AnyOf(HasSubstr("9"), HasSubstr("SIGKILL")), "ranks 4, 5")));
}

TEST(FailureTriage, WhenNoLogShowsAnErrorTheEarliestFailingRankIsStillFirst) {
  FailureEvidence evidence;
  const std::vector<std::string> healthy = read_log("megatron_healthy.log");
  evidence.units.push_back(rank_unit(0, "node1", 1, 2, healthy));
  evidence.units.push_back(rank_unit(1, "node1", 1, 1, healthy));
  evidence.units.push_back(rank_unit(2, "node1", 137, 0, healthy));
  evidence.units.push_back(rank_unit(3, "node1", 1, 3, healthy));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 2");
  EXPECT_EQ(result.first->exit_code, 137);
  EXPECT_EQ(result.first->finding, std::nullopt);
  EXPECT_THAT(result.same_error_labels, IsEmpty());
  // The other three ended the same way (rank 2 with 137, so it cannot be among them).
  ASSERT_FALSE(result.silent.empty());
  EXPECT_THAT(result.silent, Contains(Pair(HasSubstr("exit code 1"), "ranks 0, 1, 3")));

  // Without any order, the lowest failing rank.
  for (RankEvidence& unit : evidence.units) unit.failure_order.reset();
  evidence.units[0].exit_code = 0;
  evidence.units[1].exit_code = 0;
  result = triage(evidence);
  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 2");
  EXPECT_EQ(result.first->finding, std::nullopt);
}

TEST(FailureTriage, ARankKilledWithoutAWordIsFirstWhenTheSchedulerSawItFailFirst) {
  // The host's OOM killer took rank 11 (SIGKILL, nothing in its log); the others then lost
  // their peer. No rank shows a cause, so the earliest failing one is first, without a
  // finding, and the reason is in Slurm's batch output.
  FailureEvidence evidence = illegal_address_on_rank_11();
  evidence.units[11].lines.clear();
  evidence.units[11].exit_code.reset();
  evidence.units[11].signal = 9;
  evidence.scheduler_lines = read_log("host_oom_slurmstepd.log");
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 11");
  EXPECT_EQ(result.first->signal, 9);
  EXPECT_EQ(result.first->finding, std::nullopt);
  const FindingGroup* lost = group_with(result.consequences, "peer-lost");
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->units_text, "ranks 0-10, 12-15");
  EXPECT_TRUE(job_level_finding(result, "host-oom").has_value());
}

TEST(FailureTriage, WhenOnlyConsequencesAreKnownTheEarliestFailingRankShowsItsConsequence) {
  FailureEvidence evidence;
  std::vector<std::string> closed = read_log("nccl_connection_closed.log");
  evidence.units.push_back(rank_unit(0, "node1", 1, 1, closed));
  evidence.units.push_back(rank_unit(4, "node1", 1, 0, replace_all(closed, "[rank0]", "[rank4]")));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 4");
  // The log shows a known line, so there is a finding, marked as not a cause.
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "peer-lost");
  EXPECT_FALSE(result.first->finding->cause);
}

// A hang (bridge-probe --hang-rank 1): rank 1 stops talking and logs nothing, rank 2 gives up
// on it first ("timed out after 8 s waiting for rank 1"), the launcher then stops the rest.
// The rank that was waited for is the culprit; the ones that timed out are consequences.
TEST(FailureTriage, InAHangTheRankOthersTimedOutWaitingForIsFirst) {
  FailureEvidence evidence;
  evidence.units.push_back(rank_unit(0, "node1", std::nullopt, 2, {"step 1", "Received SIGTERM"}));
  evidence.units.push_back(rank_unit(1, "node1", std::nullopt, 1, {"step 1", "step 2"}));
  evidence.units.push_back(
      rank_unit(2, "node1", 3, 0,
                {"step 1",
                 "bridge-probe: error: timed out after 8 s waiting for rank 1 (step 2 "
                 "gradient all-reduce)"}));
  evidence.units.push_back(rank_unit(3, "node1", std::nullopt, 3, {"step 1", "Received SIGTERM"}));
  for (auto& u : evidence.units)
    if (!u.exit_code) u.signal = 15;
  Triage result = triage(evidence);
  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 1");
  EXPECT_NE(result.first->hung.find("rank 2 timed out waiting for it"), std::string::npos)
      << result.first->hung;
  bool rank2_is_a_consequence = false;
  for (const auto& g : result.consequences)
    if (g.signature == "peer-timeout") rank2_is_a_consequence = g.units_text == "rank 2";
  EXPECT_TRUE(rank2_is_a_consequence);
  JobRecord job;
  job.id = "hang";
  job.state = JobState::kFailed;
  std::string text = triage_to_text(job, result, true);
  EXPECT_NE(text.find("first failure: rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("it hung: rank 2 timed out waiting for it"), std::string::npos) << text;
}

// A chain of waits (0 waited for 1, 1 for 2) ends at the rank that hung first.
TEST(FailureTriage, AChainOfWaitsEndsAtTheRankThatHung) {
  FailureEvidence evidence;
  evidence.units.push_back(
      rank_unit(0, "n", 3, 0, {"bridge-probe: error: timed out after 8 s waiting for rank 1 (x)"}));
  evidence.units.push_back(
      rank_unit(1, "n", 3, 1, {"bridge-probe: error: timed out after 9 s waiting for rank 2 (x)"}));
  evidence.units.push_back(rank_unit(2, "n", std::nullopt, 2, {"step 1"}));
  Triage result = triage(evidence);
  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 2");
}

TEST(FailureTriage, AHealthyJobHasNoFirstFailure) {
  FailureEvidence evidence;
  const std::vector<std::string> healthy = read_log("megatron_healthy.log");
  for (int rank = 0; rank < 16; ++rank)
    evidence.units.push_back(rank_unit(rank, host_of(rank), 0, std::nullopt, healthy));
  Triage result = triage(evidence);

  EXPECT_EQ(result.first, std::nullopt);
  EXPECT_THAT(result.same_error_labels, IsEmpty());
  EXPECT_THAT(result.other_causes, IsEmpty());
  EXPECT_THAT(result.consequences, IsEmpty());
  EXPECT_THAT(result.silent, IsEmpty());
  EXPECT_THAT(result.job_level, IsEmpty());

  // No evidence at all (the job's files are gone) is not a failure either.
  Triage empty = triage(FailureEvidence{});
  EXPECT_EQ(empty.first, std::nullopt);
}

// --- job-level messages ----------------------------------------------------------------------

// Every rank was stopped by Slurm (SIGTERM): the reason is in the batch stderr, not the ranks.
FailureEvidence stopped_by_slurm(const std::string& scheduler_file) {
  FailureEvidence evidence;
  evidence.scheduler_lines = read_log(scheduler_file);
  for (int rank = 0; rank < 16; ++rank) {
    RankEvidence unit = rank_unit(rank, host_of(rank), std::nullopt, std::nullopt,
                                  read_log("megatron_healthy.log"));
    unit.signal = 15;
    evidence.units.push_back(unit);
  }
  return evidence;
}

TEST(FailureTriage, PreemptionInTheBatchOutputIsAJobLevelCause) {
  Triage result = triage(stopped_by_slurm("slurm_preemption.err"));
  std::optional<Finding> preempted = job_level_finding(result, "preempted");
  ASSERT_TRUE(preempted.has_value());
  EXPECT_TRUE(preempted->cause);
  EXPECT_THAT(preempted->line, HasSubstr("CANCELLED AT 2026-11-30T10:00:00 DUE TO PREEMPTION"));
  EXPECT_EQ(job_level_finding(result, "time-limit"), std::nullopt);
}

TEST(FailureTriage, ATimeLimitInTheBatchOutputIsAJobLevelCause) {
  Triage result = triage(stopped_by_slurm("time_limit.err"));
  std::optional<Finding> limit = job_level_finding(result, "time-limit");
  ASSERT_TRUE(limit.has_value());
  EXPECT_TRUE(limit->cause);
  EXPECT_THAT(limit->line, HasSubstr("DUE TO TIME LIMIT"));
  EXPECT_EQ(job_level_finding(result, "preempted"), std::nullopt);
}

TEST(FailureTriage, TheOomKillerInTheBatchOutputIsAJobLevelCause) {
  FailureEvidence evidence = stopped_by_slurm("host_oom_slurmstepd.log");
  Triage result = triage(evidence);
  std::optional<Finding> oom = job_level_finding(result, "host-oom");
  ASSERT_TRUE(oom.has_value());
  EXPECT_TRUE(oom->cause);
  EXPECT_THAT(oom->line, HasSubstr("Detected 1 oom_kill event in StepId=4242.0"));
  // A job-level finding's line_index points into scheduler_lines (the batch output), as a
  // rank's points into its log, so that the reader can find the line there.
  ASSERT_LT(oom->line_index, evidence.scheduler_lines.size());
  EXPECT_EQ(evidence.scheduler_lines[oom->line_index], oom->line);
}

// --- per-node units --------------------------------------------------------------------------

TEST(FailureTriage, NodeUnitsUnderTorchrunAreNamedAndCountedAsNodes) {
  FailureEvidence evidence;
  evidence.order_source = "torchrun exit order";
  std::vector<std::string> closed = read_log("nccl_connection_closed.log");
  evidence.units.push_back(node_unit(0, "node1", 1, 1, closed));
  evidence.units.push_back(node_unit(1, "node2", 1, 0, read_log("torch_elastic_childfailed.log")));
  evidence.units.push_back(node_unit(2, "node3", 1, 2, closed));
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "node 1");
  EXPECT_EQ(result.first->node, 1);
  EXPECT_EQ(result.first->rank, std::nullopt);
  EXPECT_EQ(result.first->host, "node2");
  // torchrun's own ChildFailedError report at the end of the node's log must not hide the
  // child's error that it reports on.
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-error");
  EXPECT_THAT(result.first->excerpt, Contains(HasSubstr("illegal memory access")));

  const FindingGroup* lost = group_with(result.consequences, "peer-lost");
  ASSERT_NE(lost, nullptr);
  EXPECT_THAT(lost->labels, ElementsAre("node 0", "node 2"));
  EXPECT_EQ(lost->units_text, "nodes 0, 2");
}

// --- robustness ------------------------------------------------------------------------------

TEST(FailureTriage, HugeLinesAndControlBytesGiveBoundedPrintableOutput) {
  const size_t bound = 4 * kMaxTriageLineBytes;  // escaping may widen a cut line
  std::string huge(1 << 20, 'x');
  for (size_t i = 0; i < huge.size(); i += 97) huge[i] = '\x1b';
  std::vector<std::string> lines = {
      " [2026-11-30 09:51:06] iteration       10/     100 | lm loss: 1.034512E+01 |",
      huge,
      std::string("binary\0junk\x07\x08\r\x7f", 15),
      "[rank0]: Traceback (most recent call last):",
      "[rank0]:   File \"/workspace/Megatron-LM/pretrain_gpt.py\", line 289, in <module>",
      "\x1b[31m[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered" +
          std::string(1 << 20, '!') + "\x1b[0m",
      huge,
  };
  FailureEvidence evidence;
  evidence.units.push_back(rank_unit(0, "node1", 1, 0, lines));
  evidence.units.push_back(
      rank_unit(1, "node1", 1, 1, {huge, "\x1b[2K" + huge + "Connection closed by remote peer"}));
  evidence.units.push_back(
      rank_unit(2, "node1", 1, 2, {huge, "Connection closed by remote peer\x1b[0m"}));
  evidence.scheduler_lines = {huge, std::string("\x1b]0;title\x07") +
                                        "slurmstepd: error: *** JOB 1234 ON node2 CANCELLED AT "
                                        "2026-11-30T10:00:00 DUE TO PREEMPTION ***"};
  Triage result = triage(evidence);

  ASSERT_TRUE(result.first.has_value());
  EXPECT_EQ(result.first->label, "rank 0");
  ASSERT_TRUE(result.first->finding.has_value());
  EXPECT_EQ(result.first->finding->signature, "cuda-error");
  auto check = [&](const std::string& text, const std::string& what) {
    EXPECT_LE(text.size(), bound) << what;
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << what;
    EXPECT_TRUE(printable(text)) << what;
  };
  check(result.first->finding->line, "finding");
  EXPECT_THAT(result.first->finding->line, HasSubstr("CUDA error: an illegal memory access"));
  EXPECT_FALSE(result.first->excerpt.empty());
  EXPECT_LE(result.first->excerpt.size(), kTriageTailLines);
  for (const std::string& line : result.first->excerpt) check(line, "excerpt");
  for (const FindingGroup& group : result.consequences) check(group.example, group.signature);
  for (const FindingGroup& group : result.other_causes) check(group.example, group.signature);
  ASSERT_FALSE(result.job_level.empty());
  for (const Finding& finding : result.job_level) check(finding.line, finding.signature);
  EXPECT_TRUE(job_level_finding(result, "preempted").has_value());
}

// --- purity ----------------------------------------------------------------------------------

TEST(FailureTriage, TheResultDoesNotDependOnTheOrderOfTheUnits) {
  FailureEvidence evidence = illegal_address_on_rank_11();
  Triage forward = triage(evidence);
  Triage again = triage(evidence);
  std::reverse(evidence.units.begin(), evidence.units.end());
  Triage reversed = triage(evidence);
  for (const Triage* other : {&again, &reversed}) {
    ASSERT_TRUE(other->first.has_value());
    EXPECT_EQ(other->first->label, forward.first->label);
    EXPECT_EQ(other->first->excerpt, forward.first->excerpt);
    ASSERT_EQ(other->consequences.size(), forward.consequences.size());
    for (size_t i = 0; i < forward.consequences.size(); ++i) {
      EXPECT_EQ(other->consequences[i].labels, forward.consequences[i].labels);
      EXPECT_EQ(other->consequences[i].units_text, forward.consequences[i].units_text);
      EXPECT_EQ(other->consequences[i].example, forward.consequences[i].example);
    }
  }
}

// --- compress_numbers ------------------------------------------------------------------------

TEST(FailureTriageCompressNumbers, RunsBecomeRanges) {
  EXPECT_EQ(compress_numbers({}), "");
  EXPECT_EQ(compress_numbers({3}), "3");
  EXPECT_EQ(compress_numbers({0, 1}), "0, 1");  // a run of two is not worth a dash
  EXPECT_EQ(compress_numbers({0, 1, 2, 3, 5, 7, 8, 9}), "0-3, 5, 7-9");
  EXPECT_EQ(compress_numbers({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15}), "0-10, 12-15");
}

TEST(FailureTriageCompressNumbers, UnsortedInputWithDuplicatesIsSortedAndDeduplicated) {
  EXPECT_EQ(compress_numbers({9, 7, 3, 8, 3, 5, 9, 2}), "2, 3, 5, 7-9");
  EXPECT_EQ(compress_numbers({4, 4, 4}), "4");
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// A program's own error line is a cause when nothing more specific matches, after the Python
// exception shape: "ValueError: x" stays a Python exception.
TEST(FailureTriageClassifyLine, AProgramsOwnErrorLineIsTheLeastSpecificCause) {
  EXPECT_EQ(id_of(classify_line("bridge-probe: error: rank 3: injected failure at step 2")),
            "error-message");
  EXPECT_EQ(id_of(classify_line("ERROR: dataset index file is missing")), "error-message");
  EXPECT_EQ(id_of(classify_line("ValueError: bad shape")), "python-exception");
  EXPECT_EQ(id_of(classify_line("bridge-probe: error: rank 0: lost connection to rank 3")),
            "peer-lost");
}

// srun reports tasks that ended alike in one line and not in time order: on the real test
// cluster, "tasks 0-2,4-7: Exited with exit code 5" came before "task 3: ... 17". The rank
// whose log shows a cause is first, even when the ranks that only lost their peer are
// reported earlier.
// Found by a new-user trial: `why` on a cancelled job called the first rank SIGTERM stopped
// its "first failure".
TEST(FailureTriage, ACancelledJobsFirstStoppedRankIsNotCalledAFailure) {
  FailureEvidence evidence;
  for (int rank = 0; rank < 2; ++rank) {
    RankEvidence u = rank_unit(rank, "node1", std::nullopt, rank, {"iteration 3/100"});
    u.signal = 15;
    evidence.units.push_back(u);
  }
  JobRecord job;
  job.id = "demo-1";
  job.state = JobState::kCancelled;
  std::string text = triage_to_text(job, triage(evidence), false);
  EXPECT_THAT(text, ::testing::HasSubstr("the job was cancelled: its ranks were stopped"));
  EXPECT_THAT(text, ::testing::HasSubstr("first rank to stop: rank 0"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("first failure")));
  job.state = JobState::kFailed;
  EXPECT_THAT(triage_to_text(job, triage(evidence), false),
              ::testing::HasSubstr("first failure: rank 0"));
}

TEST(FailureTriage, ACauseBeatsAnEarlierReportedRankThatOnlyLostItsPeer) {
  FailureEvidence evidence;
  for (int rank = 0; rank < 8; ++rank) {
    if (rank == 3) continue;
    evidence.units.push_back(
        rank_unit(rank, "node1", 5, 0,
                  {"iteration 1/200",
                   "bridge-probe: error: rank " + std::to_string(rank) +
                       ": lost connection to rank 3 (step 2): peer closed the connection"}));
  }
  evidence.units.push_back(rank_unit(
      3, "node1", 17, 1,
      {"iteration 1/200", "bridge-probe: error: rank 3: injected failure at the start of step 2"}));
  Triage t = triage(evidence);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->label, "rank 3");
  ASSERT_TRUE(t.first->finding);
  EXPECT_EQ(t.first->finding->signature, "error-message");
  ASSERT_EQ(t.consequences.size(), 1u);
  EXPECT_EQ(t.consequences[0].units_text, "ranks 0-2, 4-7");
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// After a watchdog timeout PyTorch aborts the process: "terminate called after throwing an
// instance of 'c10::DistBackendError'" and "Fatal Python error: Aborted" follow the timeout.
// The rank's finding is its first known line, the timeout: a consequence, not a second cause.
// torchrun's "SignalException: Process 4242 got signal: 15" on a stopped node is one too.
TEST(FailureTriage, AnAbortAfterAWatchdogTimeoutIsAConsequence) {
  FailureEvidence evidence;
  evidence.units.push_back(rank_unit(
      0, "node1", 134, 0,
      {"[rank0]:[E1130 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
       "collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 "
       "milliseconds before timing out.",
       "terminate called after throwing an instance of 'c10::DistBackendError'",
       "Fatal Python error: Aborted"}));
  evidence.units.push_back(
      rank_unit(1, "node1", 1, 1,
                {"torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 "
                 "got signal: 15"}));
  evidence.units.push_back(rank_unit(2, "node2", 17, 2,
                                     {"Traceback (most recent call last):",
                                      "RuntimeError: CUDA error: an illegal memory access "
                                      "was encountered"}));
  Triage t = triage(evidence);
  ASSERT_TRUE(t.first);
  EXPECT_EQ(t.first->label, "rank 2");
  EXPECT_TRUE(t.other_causes.empty()) << t.other_causes[0].description;
  std::set<std::string> signatures;
  for (const auto& g : t.consequences) signatures.insert(g.signature);
  EXPECT_EQ(signatures, (std::set<std::string>{"watchdog-timeout", "stopped"}));
}

}  // namespace
}  // namespace bridge
