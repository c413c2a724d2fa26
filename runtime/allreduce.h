// Ring all-reduce over the cluster's ring connections, with an emulated link bandwidth.
//
// Contract: RingAllReduce::Run(data, n, phase) replaces data[0, n) on every rank with the
// element-wise sum over all ranks. All ranks must call Run with the same n in the same order,
// each from a single thread. The buffer is split into W chunks; W-1 reduce-scatter steps are
// followed by W-1 all-gather steps, each rank sending one chunk to rank+1 while receiving one
// from rank-1 (2*(W-1) chunk steps). With link_gbps > 0, before each chunk is sent the sender
// sleeps (no CPU) until an emulated wire of that bandwidth, which carries this rank's outgoing
// bytes one after another, would have transmitted it: bytes*8/(link_gbps*1e9) seconds per chunk.
// Failures throw ProbeError(kExitComm) naming the peer and `phase`. W = 1 is a no-op.
#ifndef BRIDGE_RUNTIME_ALLREDUCE_H_
#define BRIDGE_RUNTIME_ALLREDUCE_H_

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "runtime/transport.h"

namespace bridge::probe {

class LinkEmulator {
 public:
  explicit LinkEmulator(double gbps) : gbps_(gbps) {}
  // Sleeps until the emulated wire has carried `bytes` more bytes.
  void Transmit(size_t bytes);

 private:
  double gbps_;
  std::chrono::steady_clock::time_point wire_free_{};
};

class RingAllReduce {
 public:
  // `cluster` must outlive this object.
  RingAllReduce(const Cluster& cluster, double link_gbps);
  void Run(float* data, size_t n, std::string_view phase);

 private:
  const Cluster& cluster_;
  LinkEmulator link_;
  std::vector<float> incoming_;
};

}  // namespace bridge::probe

#endif  // BRIDGE_RUNTIME_ALLREDUCE_H_
