#include "probe/group_comm.h"

#include <algorithm>

namespace bridge::probe {

GroupComm::GroupComm(const Group& group, const PeerLinks& links, double timeout_s, double link_gbps)
    : group_(group), links_(links), timeout_s_(timeout_s), link_(link_gbps) {}

int GroupComm::member(int offset) const {
  const int size = group_.size();
  return group_.ranks[static_cast<size_t>(((group_.index + offset) % size + size) % size)];
}

ProbeResult<RingView> GroupComm::ring() const {
  if (size() == 1) return RingView{1, 0, -1, -1, group_.ranks[0], group_.ranks[0], timeout_s_};
  const ProbeResult<int> next_fd = links_.fd(group_.next());
  if (!next_fd.ok()) return next_fd.status();
  const ProbeResult<int> prev_fd = links_.fd(group_.prev());
  if (!prev_fd.ok()) return prev_fd.status();
  return RingView{size(), index(), *next_fd, *prev_fd, group_.next(), group_.prev(), timeout_s_};
}

ProbeStatus GroupComm::exchange(int to, const float* send, int from, float* recv, size_t n,
                                std::string_view phase) {
  const size_t bytes = n * sizeof(float);
  if (send != nullptr) link_.transmit(bytes);
  Outgoing out;
  Incoming in;
  if (send != nullptr) {
    const ProbeResult<int> fd = links_.fd(to);
    if (!fd.ok()) return fd.status();
    out = Outgoing{*fd, send, bytes, to};
  }
  if (recv != nullptr) {
    const ProbeResult<int> fd = links_.fd(from);
    if (!fd.ok()) return fd.status();
    in = Incoming{*fd, recv, bytes, from};
  }
  return send_recv(out, in, timeout_s_, phase);
}

ProbeStatus GroupComm::all_gather(float* data, size_t n, std::string_view phase) {
  const int w = size();
  const int next = member(1);
  const int prev = member(-1);
  // Step k passes on the block received in step k-1 (this member's own block first).
  for (int k = 0; k + 1 < w; ++k) {
    const auto send_block = static_cast<size_t>((index() - k + w) % w);
    const auto recv_block = static_cast<size_t>((index() - k - 1 + 2 * w) % w);
    ProbeStatus status =
        exchange(next, data + send_block * n, prev, data + recv_block * n, n, phase);
    if (!status.ok()) return status;
  }
  return {};
}

ProbeStatus GroupComm::reduce_scatter(float* data, size_t n, std::string_view phase) {
  const int w = size();
  const int next = member(1);
  const int prev = member(-1);
  scratch_.resize(n);
  // Step k sends the running sum of block index-k-1 and adds the predecessor's running sum of
  // block index-k-2 to this member's partial; the last step delivers block `index`.
  for (int k = 0; k + 1 < w; ++k) {
    const auto send_block = static_cast<size_t>((index() - k - 1 + 2 * w) % w);
    const auto recv_block = static_cast<size_t>((index() - k - 2 + 3 * w) % w);
    ProbeStatus status = exchange(next, data + send_block * n, prev, scratch_.data(), n, phase);
    if (!status.ok()) return status;
    float* target = data + recv_block * n;
    for (size_t i = 0; i < n; ++i) target[i] += scratch_[i];
  }
  return {};
}

ProbeStatus GroupComm::all_reduce(float* data, size_t n, std::string_view phase) {
  if (ProbeStatus status = reduce_scatter(data, n, phase); !status.ok()) return status;
  return all_gather(data, n, phase);
}

ProbeStatus GroupComm::all_to_all(const float* send, float* recv, size_t n,
                                  std::string_view phase) {
  const int w = size();
  std::copy_n(send + static_cast<size_t>(index()) * n, n, recv + static_cast<size_t>(index()) * n);
  // Round k: send to the member k places ahead while receiving from the one k places behind,
  // so every member sends and receives exactly once per round.
  for (int k = 1; k < w; ++k) {
    const int to = member(k);
    const int from = member(-k);
    const auto to_block = static_cast<size_t>((index() + k) % w);
    const auto from_block = static_cast<size_t>((index() - k + w) % w);
    ProbeStatus status = exchange(to, send + to_block * n, from, recv + from_block * n, n, phase);
    if (!status.ok()) return status;
  }
  return {};
}

ProbeStatus GroupComm::shift(const float* send, float* recv, size_t n, bool batched,
                             std::string_view phase) {
  if (size() == 1) {
    std::copy_n(send, n, recv);
    return {};
  }
  const int next = member(1);
  const int prev = member(-1);
  if (batched) return exchange(next, send, prev, recv, n, phase);
  // Unbatched: even members send first, odd members receive first.
  const bool send_first = index() % 2 == 0;
  ProbeStatus first = send_first ? exchange(next, send, prev, nullptr, n, phase)
                                 : exchange(next, nullptr, prev, recv, n, phase);
  if (!first.ok()) return first;
  return send_first ? exchange(next, nullptr, prev, recv, n, phase)
                    : exchange(next, send, prev, nullptr, n, phase);
}

}  // namespace bridge::probe
