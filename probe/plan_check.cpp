#include "probe/plan_check.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "probe/env_hash.h"
#include "probe/options.h"
#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

constexpr std::string_view kNumGpus = "cluster.num_gpus";

std::optional<std::string> planned_value(const ExpectedPlan& plan, std::string_view key) {
  for (const PlanEntry& entry : plan.entries) {
    if (entry.key == key) return entry.value;
  }
  return std::nullopt;
}

// How a value appears in the table and the mismatch lines: absent and empty must be visible.
std::string display(const std::optional<std::string>& value) {
  if (!value) return "(missing)";
  return value->empty() ? "''" : *value;
}

// Canonical form of the plan, so ranks can compare plans by hash.
std::string canonical(const ExpectedPlan& plan) {
  if (!plan.present) return "(unset)";
  std::string out;
  for (const PlanEntry& entry : plan.entries) out += entry.key + "=" + entry.value + "\n";
  return out;
}

ProbeResult<PlanEntry> parse_entry(std::string_view entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return ProbeStatus(kExitUsage,
                       "BRIDGE_EXPECTED_PLAN: entry '" + std::string(entry) + "' is not key=value");
  }
  return PlanEntry{std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1))};
}

PlanRow key_row(const PlanEntry& entry, const Options& options) {
  const auto received = override_value(options.runtime_overrides, entry.key);
  return PlanRow{entry.key, entry.value, display(received), received == entry.value};
}

PlanRow world_row(const std::string& planned, const Identity& identity) {
  return PlanRow{"world size (" + identity.world_size_source + ")", planned,
                 std::to_string(identity.world_size), parse_int64(planned) == identity.world_size};
}

struct Dp {
  std::optional<int64_t> value;  // Set only when the product divides num_gpus.
  std::string text;
};

// One factor of the dp formula; Megatron's default (1) when absent or `null`.
ProbeResult<int64_t> factor(const std::optional<std::string>& text, int64_t fallback) {
  if (!text || *text == "null") return fallback;
  const auto value = parse_int64(*text);
  if (value && *value > 0) return *value;
  return ProbeStatus(kExitUsage, "'" + *text + "' is not a positive integer");
}

// dp from one side's values; `lookup` maps a plan key to that side's value.
template <typename Lookup>
Dp compute_dp(const Lookup& lookup, int world_size) {
  const ProbeResult<int64_t> factors[] = {factor(lookup(kNumGpus), world_size),
                                          factor(lookup("model.tensor_model_parallel_size"), 1),
                                          factor(lookup("model.pipeline_model_parallel_size"), 1),
                                          factor(lookup("model.context_parallel_size"), 1)};
  std::string error;  // the last factor's problem, as before
  for (const auto& f : factors)
    if (!f.ok()) error = f.why();
  if (!error.empty()) return Dp{std::nullopt, error};
  const auto gpus = &factors[0].value(), tp = &factors[1].value(), pp = &factors[2].value(),
             cp = &factors[3].value();
  const std::string formula = str_printf("%lld/(%lld*%lld*%lld)", static_cast<long long>(*gpus),
                                         static_cast<long long>(*tp), static_cast<long long>(*pp),
                                         static_cast<long long>(*cp));
  const int64_t product = *tp * *pp * *cp;
  if (*gpus % product != 0) return Dp{std::nullopt, formula + " not divisible"};
  return Dp{*gpus / product, formula + "=" + std::to_string(*gpus / product)};
}

bool plans_parallelism(const ExpectedPlan& plan) {
  for (const std::string_view key : {kNumGpus, std::string_view("model.tensor_model_parallel_size"),
                                     std::string_view("model.pipeline_model_parallel_size"),
                                     std::string_view("model.context_parallel_size")}) {
    if (planned_value(plan, key)) return true;
  }
  return false;
}

PlanRow dp_row(const ExpectedPlan& plan, const Options& options, const Identity& identity) {
  const Dp planned = compute_dp([&](std::string_view key) { return planned_value(plan, key); },
                                identity.world_size);
  const Dp received = compute_dp(
      [&](std::string_view key) { return override_value(options.runtime_overrides, key); },
      identity.world_size);
  return PlanRow{"dp = num_gpus/(tp*pp*cp)", planned.text, received.text,
                 planned.value && planned.value == received.value};
}

// The probe's own count (from its flag, or defaulted from the overrides) against the plan.
PlanRow probe_value_row(const std::string& field, const std::string& planned, int64_t value,
                        const std::string& source) {
  return PlanRow{field, planned, std::to_string(value) + " (" + source + ")",
                 parse_int64(planned) == value};
}

void print_local_mismatches(const std::vector<PlanRow>& rows, int rank) {
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

std::string encode_report(const ExpectedPlan& plan, const std::vector<PlanRow>& rows) {
  WireWriter w;
  w.u32(plan.present ? 1 : 0);
  w.u64(fnv1a64(canonical(plan)));
  w.u32(static_cast<uint32_t>(rows.size()));
  for (const PlanRow& row : rows) {
    w.bytes(row.received);
    w.u32(row.ok ? 1 : 0);
  }
  return w.data();
}

ProbeResult<RankReport> decode_report(const std::string& data) {
  WireReader r(data);
  RankReport report;
  report.present = r.u32() != 0;
  report.plan_hash = r.u64();
  const uint32_t count = r.u32();
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    std::string received = r.bytes();
    report.rows.emplace_back(std::move(received), r.u32() != 0);
  }
  if (!r.ok()) return r.status();
  return report;
}

void print_verdict(bool ok) {
  std::printf("plan check: %s\n", ok ? "all ranks match" : "MISMATCH");
  std::fflush(stdout);
}

// Rank 0 without a plan: skipped, unless another rank has one (then the ranks disagree).
bool summarize_without_plan(const std::vector<RankReport>& reports) {
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
  print_verdict(false);
  return false;
}

// Which ranks hold rank 0's plan; prints the others. Returns true when all do.
bool compare_lists(const ExpectedPlan& plan, size_t row_count,
                   const std::vector<RankReport>& reports, std::vector<bool>& same) {
  const uint64_t reference = fnv1a64(canonical(plan));
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
std::string row_status(size_t v, const std::vector<RankReport>& reports,
                       const std::vector<bool>& same) {
  std::string differ;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!same[r] || reports[r].rows[v].second) continue;
    differ += str_printf("%srank %zu (%s)", differ.empty() ? "" : ", ", r,
                         reports[r].rows[v].first.c_str());
  }
  if (differ.empty()) return "ok";
  return reports.size() > 1 ? "MISMATCH  differ: " + differ : "MISMATCH";
}

// Rank 0: prints the table; returns true when all ranks match.
bool summarize(const ExpectedPlan& plan, const std::vector<PlanRow>& rows,
               const std::vector<RankReport>& reports) {
  if (!plan.present) return summarize_without_plan(reports);
  std::printf("plan check: %zu planned values, %zu ranks\n", plan.entries.size(), reports.size());
  std::vector<bool> same;
  bool all_ok = compare_lists(plan, rows.size(), reports, same);
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
    const std::string status = row_status(v, reports, same);
    if (status != "ok") all_ok = false;
    line(rows[v].field, rows[v].planned, rows[v].received, status);
  }
  print_verdict(all_ok);
  return all_ok;
}

}  // namespace

ProbeResult<ExpectedPlan> parse_expected_plan(std::string_view list) {
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
    ProbeResult<PlanEntry> parsed = parse_entry(entry);
    if (!parsed.ok()) return parsed.status();
    if (!seen.insert(parsed->key).second) {
      return ProbeStatus(kExitUsage,
                         "BRIDGE_EXPECTED_PLAN: key " + parsed->key + " is listed twice");
    }
    plan.entries.push_back(std::move(*parsed));
  }
  return plan;
}

ProbeResult<ExpectedPlan> load_expected_plan() {
  const char* value = std::getenv("BRIDGE_EXPECTED_PLAN");
  if (value == nullptr || *value == '\0') return ExpectedPlan{};
  return parse_expected_plan(value);
}

std::vector<PlanRow> evaluate_plan(const ExpectedPlan& plan, const Options& options,
                                   const Identity& identity) {
  std::vector<PlanRow> rows;
  if (!plan.present) return rows;
  for (const PlanEntry& entry : plan.entries) rows.push_back(key_row(entry, options));
  if (const auto gpus = planned_value(plan, kNumGpus)) rows.push_back(world_row(*gpus, identity));
  if (plans_parallelism(plan)) rows.push_back(dp_row(plan, options, identity));
  if (const auto steps = planned_value(plan, "train.max_steps")) {
    rows.push_back(probe_value_row("steps", *steps, options.steps, options.steps_source));
  }
  if (const auto batch = planned_value(plan, "train.global_batch_size")) {
    rows.push_back(
        probe_value_row("global batch", *batch, options.global_batch, options.global_batch_source));
  }
  return rows;
}

ProbeResult<bool> run_plan_check(const ExpectedPlan& plan, const Options& options,
                                 const Identity& identity, Cluster& cluster) {
  const std::vector<PlanRow> rows = evaluate_plan(plan, options, identity);
  print_local_mismatches(rows, cluster.rank);
  const ProbeResult<std::vector<std::string>> gathered =
      gather_to_root(cluster, encode_report(plan, rows), "plan check");
  if (!gathered.ok()) return gathered.status();
  std::string verdict;
  if (cluster.rank == 0) {
    std::vector<RankReport> reports;
    for (const std::string& data : *gathered) {
      ProbeResult<RankReport> report = decode_report(data);
      if (!report.ok()) return report.status();
      reports.push_back(std::move(*report));
    }
    verdict = summarize(plan, rows, reports) ? "ok" : "mismatch";
  }
  const ProbeResult<std::string> shared = broadcast_from_root(cluster, verdict, "plan check");
  if (!shared.ok()) return shared.status();
  return *shared == "ok";
}

}  // namespace bridge::probe
