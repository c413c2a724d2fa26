// Collectives inside one process group (runtime/layout.h) over direct peer connections, each
// send paced by an emulated link (runtime/allreduce.h, LinkEmulator).
//
// Contract: every member of a group calls the same operations with the same sizes in the same
// order, from one thread at a time. Buffers hold `size() * n` floats arranged as size() blocks
// of n, block j belonging to group member j, except for Shift (n floats each way).
//   all_gather      in: this member's block; out: every block holds its owner's block (ring).
//   reduce_scatter  in: this member's partial of every block; out: this member's block holds the
//                  sum over members of that block (ring); the other blocks are scratch.
//   all_reduce      reduce_scatter then all_gather: every block holds the sum.
//   all_to_all       block j of `send` goes to member j and arrives as block (this index) of
//                  member j's `recv` (pairwise exchange, size()-1 rounds).
//   Shift          `send` goes to the next member and `recv` receives the previous member's.
//                  batched: the send and the receive run together (batch_isend_irecv);
//                  otherwise in Megatron's unbatched order: even members send first, odd
//                  members receive first, so the exchange takes two link transfers.
// Each operation returns a kExitComm failure naming the peer and `phase` (probe_error.h).
// A group of one copies.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "probe/allreduce.h"
#include "probe/layout.h"
#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

class GroupComm {
 public:
  // `links` must outlive this object and hold a connection to every peer the operations use.
  GroupComm(const Group& group, const PeerLinks& links, double timeout_s, double link_gbps);

  int size() const { return group_.size(); }
  int index() const { return group_.index; }
  ProbeResult<RingView> ring() const;

  ProbeStatus all_gather(float* data, size_t n, std::string_view phase);
  ProbeStatus reduce_scatter(float* data, size_t n, std::string_view phase);
  ProbeStatus all_reduce(float* data, size_t n, std::string_view phase);
  ProbeStatus all_to_all(const float* send, float* recv, size_t n, std::string_view phase);
  ProbeStatus shift(const float* send, float* recv, size_t n, bool batched, std::string_view phase);

 private:
  int member(int offset) const;  // The rank `offset` places after this member.
  // Sends n floats of `send` to rank `to` (after the emulated link has carried them) while
  // receiving n floats into `recv` from rank `from`; a null buffer skips that direction.
  ProbeStatus exchange(int to, const float* send, int from, float* recv, size_t n,
                       std::string_view phase);

  Group group_;
  const PeerLinks& links_;
  double timeout_s_;
  LinkEmulator link_;
  std::vector<float> scratch_;
};

}  // namespace bridge::probe
