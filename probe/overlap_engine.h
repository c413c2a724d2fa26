// The two-stream schedule behind every emulated overlap of bridge-probe: a compute stream (the
// calling thread) and a communication stream (one worker thread), as a GPU has a compute stream
// and a communication stream.
//
// Contract: run_schedule(items, overlap, comm) runs each item's four parts with these
// dependencies: `before` (communication) -> `compute` -> `after` (communication), and
// `deferred` (compute) after `compute`. `after` needs only `compute`, so a `deferred` part
// (the delayed weight-gradient GEMM) runs while `after` is in flight. An item whose
// `waits_for` names an earlier item (its index) also waits for that item's `after` before its
// `compute`: communication launched early (a parameter all-gather started during the optimizer
// step, or all chunks' gathers launched together) is waited on only where its result is used.
//   overlap off: item i+1 starts when item i has finished entirely (its communication is
//                exposed except where `deferred` hides `after`);
//   overlap on:  the communication stream runs before(0), before(1), after(0), before(2),
//                after(1), ... so item i+1's `before` and item i-1's `after` are in flight
//                while item i computes (double buffering: at most one `before` ahead).
// The order of communication is the same on every rank for the same items and mode, so
// collectives inside the parts line up across ranks. Empty parts are skipped. The result
// holds the wall time, the compute stream's busy time and the communication stream's busy
// time; exposed communication = wall - compute (the time the compute stream waited).
// Communication parts return a ProbeStatus: a failure on the communication thread ends the
// process through fatal() (probe_error.h), as the probe's other communication failures do.
// Compute parts cannot fail (they compute and check values; see phases.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "probe/probe_error.h"

namespace bridge::probe {

// A piece of communication run on the communication stream.
using CommPart = std::function<ProbeStatus()>;

// A FIFO of communication jobs on one thread, with completion tickets.
class CommStream {
 public:
  CommStream();
  ~CommStream();
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  // Queues `job`; returns its ticket (tickets increase by one per call).
  uint64_t submit(CommPart job);
  // Blocks until the job with `ticket` (and every earlier one) has finished.
  void wait(uint64_t ticket);
  // The time (ms) jobs were running since the previous call.
  double take_busy_ms();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<CommPart> queue_;
  uint64_t submitted_ = 0;
  uint64_t finished_ = 0;
  double busy_ms_ = 0.0;
  bool stop_ = false;
  std::thread thread_;  // Last: starts after the members above exist.
};

struct ScheduleItem {
  CommPart before;
  std::function<void()> compute;
  std::function<void()> deferred;
  CommPart after;
  int waits_for = -1;  // An earlier item whose `after` this item's `compute` needs; -1: none.
};

struct ScheduleTiming {
  double wall_ms = 0.0;
  double compute_ms = 0.0;
  double comm_ms = 0.0;

  double exposed_ms() const { return wall_ms > compute_ms ? wall_ms - compute_ms : 0.0; }
  ScheduleTiming& operator+=(const ScheduleTiming& other);
};

ScheduleTiming run_schedule(const std::vector<ScheduleItem>& items, bool overlap, CommStream& comm);

// Emulated device time: runs `work` (the real arithmetic on the phase's data) and then sleeps
// until `ms` have passed since the start, as a GPU kernel of that duration would occupy its
// stream without occupying the CPU.
void device_compute(double ms, const std::function<void()>& work);

}  // namespace bridge::probe
