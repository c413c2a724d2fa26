// Collectives inside one process group (runtime/layout.h) over direct peer connections, each
// send paced by an emulated link (runtime/allreduce.h, LinkEmulator).
//
// Contract: every member of a group calls the same operations with the same sizes in the same
// order, from one thread at a time. Buffers hold `size() * n` floats arranged as size() blocks
// of n, block j belonging to group member j, except for Shift (n floats each way).
//   AllGather      in: this member's block; out: every block holds its owner's block (ring).
//   ReduceScatter  in: this member's partial of every block; out: this member's block holds the
//                  sum over members of that block (ring); the other blocks are scratch.
//   AllReduce      ReduceScatter then AllGather: every block holds the sum.
//   AllToAll       block j of `send` goes to member j and arrives as block (this index) of
//                  member j's `recv` (pairwise exchange, size()-1 rounds).
//   Shift          `send` goes to the next member and `recv` receives the previous member's.
//                  batched: the send and the receive run together (batch_isend_irecv);
//                  otherwise in Megatron's unbatched order: even members send first, odd
//                  members receive first, so the exchange takes two link transfers.
// Failures throw ProbeError(kExitComm) naming the peer and `phase`. A group of one copies.
#ifndef BRIDGE_RUNTIME_GROUP_COMM_H_
#define BRIDGE_RUNTIME_GROUP_COMM_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "runtime/allreduce.h"
#include "runtime/layout.h"
#include "runtime/transport.h"

namespace bridge::probe {

class GroupComm {
 public:
  // `links` must outlive this object and hold a connection to every peer the operations use.
  GroupComm(const Group& group, const PeerLinks& links, double timeout_s, double link_gbps);

  int size() const { return group_.size(); }
  int index() const { return group_.index; }
  RingView Ring() const;

  void AllGather(float* data, size_t n, std::string_view phase);
  void ReduceScatter(float* data, size_t n, std::string_view phase);
  void AllReduce(float* data, size_t n, std::string_view phase);
  void AllToAll(const float* send, float* recv, size_t n, std::string_view phase);
  void Shift(const float* send, float* recv, size_t n, bool batched, std::string_view phase);

 private:
  int Member(int offset) const;  // The rank `offset` places after this member.
  void SendTo(int rank, const float* data, size_t n, std::string_view phase);
  void RecvFrom(int rank, float* data, size_t n, std::string_view phase);

  Group group_;
  const PeerLinks& links_;
  double timeout_s_;
  LinkEmulator link_;
  std::vector<float> scratch_;
};

}  // namespace bridge::probe

#endif  // BRIDGE_RUNTIME_GROUP_COMM_H_
