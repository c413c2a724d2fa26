// The emulated phases of one bridge-probe step besides the gradient all-reduce (train_loop.h):
// EP dispatch/expert/combine, TP all-gather/GEMM/reduce-scatter, PP send/recv between stages and
// the DP parameter all-gather. docs/probe.md, "Emulated phases", describes each one and what it
// does not model.
//
// Contract: every run_*_phase function is collective over its group (all members call it with
// the same setup in the same step) and runs its items through run_schedule (overlap_engine.h):
// communication on `comm`, compute on the calling thread as emulated device time
// (device_compute) around real arithmetic on the received data. Every value that a collective
// delivers is compared with the closed form of what the senders put in; the first difference
// and the count go to `check` (so a corrupt value is reported as data, not as a failure, and every
// rank reaches the step's collective verdict). With ctx.corrupt this rank sends one wrong value in
// the phase's first collective of the step. Buffers are sized from PhaseSetup (tokens x hidden
// floats per micro-batch), so the link time follows from the emulated link bandwidth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "probe/group_comm.h"
#include "probe/knobs.h"
#include "probe/layout.h"
#include "probe/overlap_engine.h"

namespace bridge::probe {

struct PhaseSetup {
  Layout layout;
  OverlapKnobs knobs;
  int microbatches = 1;
  int layers = 2;         // Per pipeline stage.
  double layer_ms = 2.0;  // Forward device time of one layer for one micro-batch.
  int tokens = 64;        // Per micro-batch per rank.
  int hidden = 256;       // Floats per token.
  int buckets = 8;        // DP parameter buckets (the gradient buckets).
  int64_t params = 1;
  double forward_ms = 1.0;  // DP phase: device time of the whole forward.
  // The TP chunks per GEMM when tp_comm_overlap applies: plan_tp_split() of tp_comm_overlap_cfg
  // (Transformer Engine's default split, 4, without one). At most kMaxTpChunks.
  int tp_chunks = 4;
  static constexpr int kMaxTpChunks = 64;
};

struct StepContext {
  int step = 1;
  bool corrupt = false;  // --corrupt-rank/--corrupt-in/--corrupt-at-step hit this phase now.
};

// Where a checked value sits, for the message about the first wrong one.
struct Site {
  const char* phase;
  int step;
  int item;
  int block;  // The group member the value came from (or went to).
  size_t index;
};

// The first wrong value seen in a step, and how many.
struct ResultCheck {
  std::string first;
  int64_t wrong = 0;

  void expect(float got, float expected, const Site& site);
};

ScheduleTiming run_ep_phase(GroupComm& ep, const PhaseSetup& setup, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check);
ScheduleTiming run_tp_phase(GroupComm& tp, const PhaseSetup& setup, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check);
ScheduleTiming run_pp_phase(GroupComm& pp, const PhaseSetup& setup, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check);
ScheduleTiming run_param_gather_phase(GroupComm& dp, const PhaseSetup& setup,
                                      const StepContext& ctx, CommStream& comm, ResultCheck& check);

// Whether tp_comm_overlap is honoured: only with sequence parallelism, as Megatron-Bridge
// decides (without it the TP phase runs its all-reduce exposed).
bool tp_overlap_applies(const PhaseSetup& setup);

}  // namespace bridge::probe
