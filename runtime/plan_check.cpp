#include "runtime/plan_check.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "runtime/env_hash.h"
#include "runtime/options.h"
#include "runtime/probe_error.h"

namespace bridge::probe {
namespace {

constexpr std::string_view kNumGpus = "cluster.num_gpus";

std::optional<std::string> PlannedValue(const ExpectedPlan& plan, std::string_view key) {
  for (const PlanEntry& entry : plan.entries) {
    if (entry.key == key) return entry.value;
  }
  return std::nullopt;
}

// How a value appears in the table and the mismatch lines: absent and empty must be visible.
std::string Display(const std::optional<std::string>& value) {
  if (!value) return "(missing)";
  return value->empty() ? "''" : *value;
}

// Canonical form of the plan, so ranks can compare plans by hash.
std::string Canonical(const ExpectedPlan& plan) {
  if (!plan.present) return "(unset)";
  std::string out;
  for (const PlanEntry& entry : plan.entries) out += entry.key + "=" + entry.value + "\n";
  return out;
}

PlanEntry ParseEntry(std::string_view entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ProbeError(kExitUsage,
                     "BRIDGE_EXPECTED_PLAN: entry '" + std::string(entry) + "' is not key=value");
  }
  return PlanEntry{std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1))};
}

PlanRow KeyRow(const PlanEntry& entry, const Options& options) {
  const auto received = OverrideValue(options.runtime_overrides, entry.key);
  return PlanRow{entry.key, entry.value, Display(received), received == entry.value};
}

PlanRow WorldRow(const std::string& planned, const Identity& identity) {
  return PlanRow{"world size (" + identity.world_size_source + ")", planned,
                 std::to_string(identity.world_size), ParseInt64(planned) == identity.world_size};
}

struct Dp {
  std::optional<int64_t> value;  // Set only when the product divides num_gpus.
  std::string text;
};

// One factor of the dp formula; Megatron's default (1) when absent or `null`.
std::optional<int64_t> Factor(const std::optional<std::string>& text, int64_t fallback,
                              std::string& error) {
  if (!text || *text == "null") return fallback;
  const auto value = ParseInt64(*text);
  if (value && *value > 0) return value;
  error = "'" + *text + "' is not a positive integer";
  return std::nullopt;
}

// dp from one side's values; `lookup` maps a plan key to that side's value.
template <typename Lookup>
Dp ComputeDp(const Lookup& lookup, int world_size) {
  std::string error;
  const auto gpus = Factor(lookup(kNumGpus), world_size, error);
  const auto tp = Factor(lookup("model.tensor_model_parallel_size"), 1, error);
  const auto pp = Factor(lookup("model.pipeline_model_parallel_size"), 1, error);
  const auto cp = Factor(lookup("model.context_parallel_size"), 1, error);
  if (!gpus || !tp || !pp || !cp) return Dp{std::nullopt, error};
  const std::string formula =
      StrPrintf("%lld/(%lld*%lld*%lld)", static_cast<long long>(*gpus), static_cast<long long>(*tp),
                static_cast<long long>(*pp), static_cast<long long>(*cp));
  const int64_t product = *tp * *pp * *cp;
  if (*gpus % product != 0) return Dp{std::nullopt, formula + " not divisible"};
  return Dp{*gpus / product, formula + "=" + std::to_string(*gpus / product)};
}

bool PlansParallelism(const ExpectedPlan& plan) {
  for (const std::string_view key : {kNumGpus, std::string_view("model.tensor_model_parallel_size"),
                                     std::string_view("model.pipeline_model_parallel_size"),
                                     std::string_view("model.context_parallel_size")}) {
    if (PlannedValue(plan, key)) return true;
  }
  return false;
}

PlanRow DpRow(const ExpectedPlan& plan, const Options& options, const Identity& identity) {
  const Dp planned =
      ComputeDp([&](std::string_view key) { return PlannedValue(plan, key); }, identity.world_size);
  const Dp received =
      ComputeDp([&](std::string_view key) { return OverrideValue(options.runtime_overrides, key); },
                identity.world_size);
  return PlanRow{"dp = num_gpus/(tp*pp*cp)", planned.text, received.text,
                 planned.value && planned.value == received.value};
}

// The probe's own count (from its flag, or defaulted from the overrides) against the plan.
PlanRow ProbeValueRow(const std::string& field, const std::string& planned, int64_t value,
                      const std::string& source) {
  return PlanRow{field, planned, std::to_string(value) + " (" + source + ")",
                 ParseInt64(planned) == value};
}

void PrintLocalMismatches(const std::vector<PlanRow>& rows, int rank) {
  for (const PlanRow& row : rows) {
    if (row.ok) continue;
    std::fprintf(stderr, "bridge-probe: plan mismatch: rank %d: %s: planned %s, received %s\n",
                 rank, row.field.c_str(), row.planned.c_str(), row.received.c_str());
  }
  std::fflush(stderr);
}

struct RankReport {
  bool present = false;
  uint64_t plan_hash = 0;
  std::vector<std::pair<std::string, bool>> rows;  // (received, ok)
};

std::string EncodeReport(const ExpectedPlan& plan, const std::vector<PlanRow>& rows) {
  WireWriter w;
  w.U32(plan.present ? 1 : 0);
  w.U64(fnv1a64(Canonical(plan)));
  w.U32(static_cast<uint32_t>(rows.size()));
  for (const PlanRow& row : rows) {
    w.Bytes(row.received);
    w.U32(row.ok ? 1 : 0);
  }
  return w.data();
}

RankReport DecodeReport(const std::string& data) {
  WireReader r(data);
  RankReport report;
  report.present = r.U32() != 0;
  report.plan_hash = r.U64();
  const uint32_t count = r.U32();
  for (uint32_t i = 0; i < count; ++i) {
    std::string received = r.Bytes();
    report.rows.emplace_back(std::move(received), r.U32() != 0);
  }
  return report;
}

void PrintVerdict(bool ok) {
  std::printf("plan check: %s\n", ok ? "all ranks match" : "MISMATCH");
  std::fflush(stdout);
}

// Rank 0 without a plan: skipped, unless another rank has one (then the ranks disagree).
bool SummarizeWithoutPlan(const std::vector<RankReport>& reports) {
  std::string set_ranks;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].present)
      set_ranks += (set_ranks.empty() ? "rank " : ", rank ") + std::to_string(r);
  }
  if (set_ranks.empty()) {
    std::printf("plan check: skipped (no BRIDGE_EXPECTED_PLAN)\n");
    std::fflush(stdout);
    return true;
  }
  std::printf("plan check: BRIDGE_EXPECTED_PLAN is not set on rank 0 but is set on: %s\n",
              set_ranks.c_str());
  PrintVerdict(false);
  return false;
}

// Which ranks hold rank 0's plan; prints the others. Returns true when all do.
bool CompareLists(const ExpectedPlan& plan, size_t row_count,
                  const std::vector<RankReport>& reports, std::vector<bool>& same) {
  const uint64_t reference = fnv1a64(Canonical(plan));
  std::string others;
  for (size_t r = 0; r < reports.size(); ++r) {
    same.push_back(reports[r].plan_hash == reference && reports[r].rows.size() == row_count);
    if (!same.back()) {
      others +=
          (others.empty() ? "" : ", ") + std::to_string(r) + (reports[r].present ? "" : " (unset)");
    }
  }
  if (!others.empty()) {
    std::printf("  BRIDGE_EXPECTED_PLAN differs from rank 0's on ranks: %s\n", others.c_str());
  }
  return others.empty();
}

// Status column of row `v`: ok, or MISMATCH naming every differing rank when there are several.
std::string RowStatus(size_t v, const std::vector<RankReport>& reports,
                      const std::vector<bool>& same) {
  std::string differ;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!same[r] || reports[r].rows[v].second) continue;
    differ += StrPrintf("%srank %zu (%s)", differ.empty() ? "" : ", ", r,
                        reports[r].rows[v].first.c_str());
  }
  if (differ.empty()) return "ok";
  return reports.size() > 1 ? "MISMATCH  differ: " + differ : "MISMATCH";
}

// Rank 0: prints the table; returns true when all ranks match.
bool Summarize(const ExpectedPlan& plan, const std::vector<PlanRow>& rows,
               const std::vector<RankReport>& reports) {
  if (!plan.present) return SummarizeWithoutPlan(reports);
  std::printf("plan check: %zu planned values, %zu ranks\n", plan.entries.size(), reports.size());
  std::vector<bool> same;
  bool all_ok = CompareLists(plan, rows.size(), reports, same);
  size_t field_w = 5;
  size_t planned_w = 7;
  size_t received_w = 8;
  for (const PlanRow& row : rows) {
    field_w = std::max(field_w, row.field.size());
    planned_w = std::max(planned_w, row.planned.size());
    received_w = std::max(received_w, row.received.size());
  }
  const auto line = [&](const std::string& a, const std::string& b, const std::string& c,
                        const std::string& d) {
    std::printf("  %-*s  %-*s  %-*s  %s\n", static_cast<int>(field_w), a.c_str(),
                static_cast<int>(planned_w), b.c_str(), static_cast<int>(received_w), c.c_str(),
                d.c_str());
  };
  line("field", "planned", "received", "status");
  for (size_t v = 0; v < rows.size(); ++v) {
    const std::string status = RowStatus(v, reports, same);
    if (status != "ok") all_ok = false;
    line(rows[v].field, rows[v].planned, rows[v].received, status);
  }
  PrintVerdict(all_ok);
  return all_ok;
}

}  // namespace

ExpectedPlan ParseExpectedPlan(std::string_view list) {
  ExpectedPlan plan;
  plan.present = true;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(';', start);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;  // Tolerates a trailing ';'.
    PlanEntry parsed = ParseEntry(entry);
    if (!seen.insert(parsed.key).second) {
      throw ProbeError(kExitUsage, "BRIDGE_EXPECTED_PLAN: key " + parsed.key + " is listed twice");
    }
    plan.entries.push_back(std::move(parsed));
  }
  return plan;
}

ExpectedPlan LoadExpectedPlan() {
  const char* value = std::getenv("BRIDGE_EXPECTED_PLAN");
  if (value == nullptr || *value == '\0') return ExpectedPlan{};
  return ParseExpectedPlan(value);
}

std::vector<PlanRow> EvaluatePlan(const ExpectedPlan& plan, const Options& options,
                                  const Identity& identity) {
  std::vector<PlanRow> rows;
  if (!plan.present) return rows;
  for (const PlanEntry& entry : plan.entries) rows.push_back(KeyRow(entry, options));
  if (const auto gpus = PlannedValue(plan, kNumGpus)) rows.push_back(WorldRow(*gpus, identity));
  if (PlansParallelism(plan)) rows.push_back(DpRow(plan, options, identity));
  if (const auto steps = PlannedValue(plan, "train.max_steps")) {
    rows.push_back(ProbeValueRow("steps", *steps, options.steps, options.steps_source));
  }
  if (const auto batch = PlannedValue(plan, "train.global_batch_size")) {
    rows.push_back(
        ProbeValueRow("global batch", *batch, options.global_batch, options.global_batch_source));
  }
  return rows;
}

bool RunPlanCheck(const ExpectedPlan& plan, const Options& options, const Identity& identity,
                  Cluster& cluster) {
  const std::vector<PlanRow> rows = EvaluatePlan(plan, options, identity);
  PrintLocalMismatches(rows, cluster.rank);
  const std::vector<std::string> gathered =
      GatherToRoot(cluster, EncodeReport(plan, rows), "plan check");
  std::string verdict;
  if (cluster.rank == 0) {
    std::vector<RankReport> reports;
    for (const std::string& data : gathered) reports.push_back(DecodeReport(data));
    verdict = Summarize(plan, rows, reports) ? "ok" : "mismatch";
  }
  return BroadcastFromRoot(cluster, verdict, "plan check") == "ok";
}

}  // namespace bridge::probe
