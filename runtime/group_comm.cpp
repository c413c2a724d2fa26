#include "runtime/group_comm.h"

#include <algorithm>

namespace bridge::probe {

GroupComm::GroupComm(const Group& group, const PeerLinks& links, double timeout_s, double link_gbps)
    : group_(group), links_(links), timeout_s_(timeout_s), link_(link_gbps) {}

int GroupComm::Member(int offset) const {
  const int size = group_.size();
  return group_.ranks[static_cast<size_t>(((group_.index + offset) % size + size) % size)];
}

RingView GroupComm::Ring() const {
  if (size() == 1) return RingView{1, 0, -1, -1, group_.ranks[0], group_.ranks[0], timeout_s_};
  return RingView{
      size(),        index(),   links_.fd(group_.next()), links_.fd(group_.prev()), group_.next(),
      group_.prev(), timeout_s_};
}

void GroupComm::SendTo(int rank, const float* data, size_t n, std::string_view phase) {
  link_.Transmit(n * sizeof(float));
  SendRecv(Outgoing{links_.fd(rank), data, n * sizeof(float), rank}, Incoming{}, timeout_s_, phase);
}

void GroupComm::RecvFrom(int rank, float* data, size_t n, std::string_view phase) {
  SendRecv(Outgoing{}, Incoming{links_.fd(rank), data, n * sizeof(float), rank}, timeout_s_, phase);
}

void GroupComm::AllGather(float* data, size_t n, std::string_view phase) {
  const int w = size();
  const int next = Member(1);
  const int prev = Member(-1);
  // Step k passes on the block received in step k-1 (this member's own block first).
  for (int k = 0; k + 1 < w; ++k) {
    const auto send_block = static_cast<size_t>((index() - k + w) % w);
    const auto recv_block = static_cast<size_t>((index() - k - 1 + 2 * w) % w);
    link_.Transmit(n * sizeof(float));
    SendRecv(Outgoing{links_.fd(next), data + send_block * n, n * sizeof(float), next},
             Incoming{links_.fd(prev), data + recv_block * n, n * sizeof(float), prev}, timeout_s_,
             phase);
  }
}

void GroupComm::ReduceScatter(float* data, size_t n, std::string_view phase) {
  const int w = size();
  const int next = Member(1);
  const int prev = Member(-1);
  scratch_.resize(n);
  // Step k sends the running sum of block index-k-1 and adds the predecessor's running sum of
  // block index-k-2 to this member's partial; the last step delivers block `index`.
  for (int k = 0; k + 1 < w; ++k) {
    const auto send_block = static_cast<size_t>((index() - k - 1 + 2 * w) % w);
    const auto recv_block = static_cast<size_t>((index() - k - 2 + 3 * w) % w);
    link_.Transmit(n * sizeof(float));
    SendRecv(Outgoing{links_.fd(next), data + send_block * n, n * sizeof(float), next},
             Incoming{links_.fd(prev), scratch_.data(), n * sizeof(float), prev}, timeout_s_,
             phase);
    float* target = data + recv_block * n;
    for (size_t i = 0; i < n; ++i) target[i] += scratch_[i];
  }
}

void GroupComm::AllReduce(float* data, size_t n, std::string_view phase) {
  ReduceScatter(data, n, phase);
  AllGather(data, n, phase);
}

void GroupComm::AllToAll(const float* send, float* recv, size_t n, std::string_view phase) {
  const int w = size();
  std::copy_n(send + static_cast<size_t>(index()) * n, n, recv + static_cast<size_t>(index()) * n);
  // Round k: send to the member k places ahead while receiving from the one k places behind,
  // so every member sends and receives exactly once per round.
  for (int k = 1; k < w; ++k) {
    const int to = Member(k);
    const int from = Member(-k);
    const auto to_block = static_cast<size_t>((index() + k) % w);
    const auto from_block = static_cast<size_t>((index() - k + w) % w);
    link_.Transmit(n * sizeof(float));
    SendRecv(Outgoing{links_.fd(to), send + to_block * n, n * sizeof(float), to},
             Incoming{links_.fd(from), recv + from_block * n, n * sizeof(float), from}, timeout_s_,
             phase);
  }
}

void GroupComm::Shift(const float* send, float* recv, size_t n, bool batched,
                      std::string_view phase) {
  if (size() == 1) {
    std::copy_n(send, n, recv);
    return;
  }
  const int next = Member(1);
  const int prev = Member(-1);
  if (batched) {
    link_.Transmit(n * sizeof(float));
    SendRecv(Outgoing{links_.fd(next), send, n * sizeof(float), next},
             Incoming{links_.fd(prev), recv, n * sizeof(float), prev}, timeout_s_, phase);
  } else if (index() % 2 == 0) {
    SendTo(next, send, n, phase);
    RecvFrom(prev, recv, n, phase);
  } else {
    RecvFrom(prev, recv, n, phase);
    SendTo(next, send, n, phase);
  }
}

}  // namespace bridge::probe
