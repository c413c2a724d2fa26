// The training-like loop of bridge-probe: the emulated phases of the plan's layout
// (runtime/phases.h: EP all-to-all, TP all-gather/reduce-scatter, PP send/recv, DP param
// all-gather), then bucketed "backward" compute plus the gradient all-reduce over the DP group,
// each with or without compute/communication overlap.
//
// Contract: run_training() is collective. It reads the layout and the overlap fields from the
// runtime overrides (a layout that does not fit the world, or P2P flags Megatron-Core refuses,
// are a kExitUsage failure), connects each rank to the members of its groups, prints on rank
// 0 the layout, the groups and one line per forwarded overlap field saying what it changes, and
// runs options.steps steps. Each step runs the active phases (group size > 1) in the order EP,
// TP, PP, DP param, then a collective verdict on their results (any wrong value anywhere:
// a kExitWrongSum failure on every rank), then the gradient all-reduce. In it the main
// thread computes the gradient buckets in order; computing a bucket is a calibrated amount of
// real float arithmetic (the whole backward takes about --compute-ms of CPU time on one core)
// followed by filling the bucket with small integers derived from (rank, step, index). A
// communication thread all-reduces the buckets in order: with overlap each bucket is handed over
// as soon as it is computed, without overlap only after the last bucket is computed. After each
// step every rank checks every element against the closed-form sum over its DP group and returns
// a kExitWrongSum failure naming step, bucket and index on a difference. A failure of the
// communication thread ends the process through fatal(); every other failure is returned
// (probe_error.h). Rank 0 prints one Megatron-format line per step (flushed): elapsed time per
// iteration, total compute and comm (ms), and with more than one phase `<kind> exposed (ms): X` per
// phase (kinds ep-a2a, tp, pp-p2p, dp-param, dp-grad), exposed = the phase's wall time minus its
// compute time. The returned report holds the means over the steady-state steps (all but the first
// when steps > 1), in total and per kind. Fault injection
// (--fail-rank: exit 17 at the start of the step, --hang-rank: the communication thread sleeps
// forever before the step's first all-reduce, --corrupt-rank: one wrong contribution in the
// phase --corrupt-in names) lives here.
#pragma once

#include <string>
#include <vector>

#include "probe/options.h"
#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

// Steady-state means of one kind of communication's phase.
struct KindReport {
  std::string name;
  double wall_ms = 0.0;
  double compute_ms = 0.0;
  double comm_ms = 0.0;
};

struct TrainingReport {
  int world_size = 1;
  int first_steady_step = 1;
  int steady_steps = 0;
  double compute_ms = 0.0;
  double comm_ms = 0.0;
  double step_ms = 0.0;
  std::vector<KindReport> kinds;  // Last: dp-grad, the gradient all-reduce.
};

ProbeResult<TrainingReport> run_training(const Options& options, Cluster& cluster);

// Rank 0's closing lines: the steady-state means, `overlap efficiency: X.XX` of the gradient
// all-reduce, and with more than one rank `overlap efficiency (<kind>): X.XX | compute (ms):
// ... | comm (ms): ... | exposed comm (ms): ... | phase (ms): ... |` per kind.
void print_training_summary(const Options& options, const TrainingReport& report);

}  // namespace bridge::probe
