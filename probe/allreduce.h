// Ring all-reduce over one ring of connections, with an emulated link bandwidth.
//
// Contract: RingAllReduce::run(data, n, phase) replaces data[0, n) on every member of the ring
// with the element-wise sum over all members. All members must call run with the same n in the
// same order, each from a single thread. The buffer is split into W chunks; W-1 reduce-scatter
// steps are followed by W-1 all-gather steps, each member sending one chunk to its successor
// while receiving one from its predecessor (2*(W-1) chunk steps). With link_gbps > 0, before
// each chunk is sent the sender sleeps (no CPU) until an emulated wire of that bandwidth, which
// carries this rank's outgoing bytes one after another, would have transmitted it:
// bytes*8/(link_gbps*1e9) seconds per chunk. run() returns a kExitComm failure naming the peer
// and `phase` (probe_error.h). A ring of one member is a no-op.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

class LinkEmulator {
 public:
  explicit LinkEmulator(double gbps) : gbps_(gbps) {}
  // Sleeps until the emulated wire has carried `bytes` more bytes.
  void transmit(size_t bytes);

 private:
  double gbps_;
  std::chrono::steady_clock::time_point wire_free_{};
};

// One ring: this member's position and the connections to its neighbours.
struct RingView {
  int size = 1;
  int index = 0;
  int next_fd = -1;  // Connection to the successor; this member sends on it.
  int prev_fd = -1;  // Connection to the predecessor; this member receives on it.
  int next = 0;      // Ranks of the neighbours, for messages.
  int prev = 0;
  double timeout_s = 60.0;
};

// The world ring the rendezvous built.
RingView world_ring(const Cluster& cluster);

class RingAllReduce {
 public:
  RingAllReduce(const RingView& ring, double link_gbps);
  ProbeStatus run(float* data, size_t n, std::string_view phase);

 private:
  RingView ring_;
  LinkEmulator link_;
  std::vector<float> incoming_;
};

}  // namespace bridge::probe
