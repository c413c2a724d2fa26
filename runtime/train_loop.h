// The training-like loop of bridge-probe: bucketed "backward" compute plus ring all-reduce,
// with or without compute/communication overlap.
//
// Contract: RunTraining() is collective and runs options.steps steps. In each step the main
// thread computes the gradient buckets in order; computing a bucket is a calibrated amount of
// real float arithmetic (the whole backward takes about --compute-ms of CPU time on one core)
// followed by filling the bucket with small integers derived from (rank, step, index). A
// communication thread all-reduces the buckets in order: with overlap each bucket is handed over
// as soon as it is computed, without overlap only after the last bucket is computed. After each
// step every rank checks every element against the closed-form sum and throws
// ProbeError(kExitWrongSum) naming step, bucket and index on a difference. Rank 0 prints one
// Megatron-format line per step (flushed). Compute time is the main thread's time in the
// compute phase, comm time the time an all-reduce is in flight on the communication thread, step
// time the wall time of the step (the check is not timed). The returned report holds their means
// over the steady-state steps (all but the first when steps > 1). Fault injection
// (--fail-rank: exit 17 at the start of the step, --hang-rank: the communication thread sleeps
// forever before the step's first all-reduce, --corrupt-rank: one wrong contribution) lives here.
#ifndef BRIDGE_RUNTIME_TRAIN_LOOP_H_
#define BRIDGE_RUNTIME_TRAIN_LOOP_H_

#include "runtime/options.h"
#include "runtime/transport.h"

namespace bridge::probe {

struct TrainingReport {
  int world_size = 1;
  int first_steady_step = 1;
  int steady_steps = 0;
  double compute_ms = 0.0;
  double comm_ms = 0.0;
  double step_ms = 0.0;
};

TrainingReport RunTraining(const Options& options, const Cluster& cluster);

// Rank 0's closing lines: the steady-state means and `overlap efficiency: X.XX`.
void PrintTrainingSummary(const Options& options, const TrainingReport& report);

}  // namespace bridge::probe

#endif  // BRIDGE_RUNTIME_TRAIN_LOOP_H_
