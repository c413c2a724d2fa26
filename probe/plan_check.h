// Plan check of bridge-probe: did every rank receive the plan the launcher resolved (parallelism,
// precision, batch sizes, steps), and does that plan fit the world the probe actually runs in?
//
// Contract: BRIDGE_EXPECTED_PLAN holds `key=value` pairs separated by ';' (empty entries are
// ignored; the key is the text before the first '=', the value the rest, compared byte for byte,
// nothing trimmed). A key appears once and is not empty; otherwise a kExitUsage failure. Unset or
// empty means "no plan". Per rank the check builds rows (field, planned, received, ok):
//   - one per planned key, in the list's order: received is the value of the key's last
//     `key=value` override in argv (override_value); ok when it equals the planned text exactly,
//     a key missing from argv is a mismatch;
//   - `world size (<VAR>)` when cluster.num_gpus is planned: the planned number must equal the
//     world size from read_identity (WORLD_SIZE or SLURM_NTASKS);
//   - `dp = num_gpus/(tp*pp*cp)` when any of cluster.num_gpus, model.tensor_model_parallel_size,
//     model.pipeline_model_parallel_size, model.context_parallel_size is planned: computed once
//     from the planned and once from the received values (a factor that is absent or `null` is 1,
//     an absent num_gpus is the world size); ok when both are positive integers, the product
//     divides num_gpus and both give the same dp;
//   - `steps` / `global batch` when train.max_steps / train.global_batch_size is planned: the
//     probe's own --steps / --global-batch (or the default they took from the overrides) must
//     equal the planned number.
// Each rank prints one line per failing row to stderr,
//   bridge-probe: plan mismatch: rank R: FIELD: planned P, received V
// (an absent value reads `(missing)`, an empty one `''`)
// before the collective part, so a mismatch is named even on the rank that has it. run_plan_check()
// is then collective like run_env_check(): rank 0 gathers every rank's rows and prints
//   plan check: N planned values, W ranks
//     field  planned  received  status        (received = rank 0's; status ok | MISMATCH, with
//     ...                                      `differ: rank r (value), ...` when W > 1)
//   plan check: all ranks match | plan check: MISMATCH
// (or `plan check: skipped (no BRIDGE_EXPECTED_PLAN)` when no rank has a plan) and broadcasts the
// verdict, so every rank returns the same value and none is left waiting. A rank whose plan differs
// from rank 0's fails the check. The caller turns `false` into exit 3 on every rank; a
// communication failure during the check is returned (probe_error.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "probe/options.h"
#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

struct PlanEntry {
  std::string key;
  std::string value;
};

struct ExpectedPlan {
  bool present = false;  // BRIDGE_EXPECTED_PLAN set (and non-empty).
  std::vector<PlanEntry> entries;
};

// One line of the check; `ok` decides the verdict.
struct PlanRow {
  std::string field;
  std::string planned;
  std::string received;
  bool ok = false;
};

// Parses a list in the format above.
ProbeResult<ExpectedPlan> parse_expected_plan(std::string_view list);

// Reads BRIDGE_EXPECTED_PLAN.
ProbeResult<ExpectedPlan> load_expected_plan();

// This rank's rows (empty without a plan).
std::vector<PlanRow> evaluate_plan(const ExpectedPlan& plan, const Options& options,
                                   const Identity& identity);

// Returns true when every rank matches (or the check is skipped).
ProbeResult<bool> run_plan_check(const ExpectedPlan& plan, const Options& options,
                                 const Identity& identity, Cluster& cluster);

}  // namespace bridge::probe
