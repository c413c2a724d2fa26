#include "probe/allreduce.h"

#include <algorithm>
#include <thread>

namespace bridge::probe {

void LinkEmulator::transmit(size_t bytes) {
  if (gbps_ <= 0.0 || bytes == 0) return;
  using Clock = std::chrono::steady_clock;
  const auto wire_time = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) * 8.0 / (gbps_ * 1e9)));
  // Sleeping until an absolute time lets oversleeping on one chunk shorten the next wait.
  wire_free_ = std::max(Clock::now(), wire_free_) + wire_time;
  std::this_thread::sleep_until(wire_free_);
}

RingView world_ring(const Cluster& cluster) {
  return RingView{cluster.world_size,      cluster.rank,        cluster.ring_next.get(),
                  cluster.ring_prev.get(), cluster.next_rank(), cluster.prev_rank(),
                  cluster.timeout_s};
}

RingAllReduce::RingAllReduce(const RingView& ring, double link_gbps)
    : ring_(ring), link_(link_gbps) {}

ProbeStatus RingAllReduce::run(float* data, size_t n, std::string_view phase) {
  const auto world = static_cast<size_t>(ring_.size);
  if (world == 1) return {};
  const auto rank = static_cast<size_t>(ring_.index);
  const auto begin = [&](size_t chunk) { return chunk * n / world; };
  const auto size = [&](size_t chunk) { return begin(chunk + 1) - begin(chunk); };
  incoming_.resize(n / world + 1);  // No chunk is longer than ceil(n / W).
  const int next_fd = ring_.next_fd;
  const int prev_fd = ring_.prev_fd;
  const int next = ring_.next;
  const int prev = ring_.prev;

  // Reduce-scatter: after step k, chunk (rank - k - 1) holds the sum of k + 2 ranks; after
  // W - 1 steps this rank owns the full sum of chunk (rank + 1) mod W.
  for (size_t k = 0; k + 1 < world; ++k) {
    const size_t send_chunk = (rank + world - k) % world;
    const size_t recv_chunk = (rank + 2 * world - k - 1) % world;
    const size_t send_bytes = size(send_chunk) * sizeof(float);
    link_.transmit(send_bytes);
    ProbeStatus status =
        send_recv(Outgoing{next_fd, data + begin(send_chunk), send_bytes, next},
                  Incoming{prev_fd, incoming_.data(), size(recv_chunk) * sizeof(float), prev},
                  ring_.timeout_s, phase);
    if (!status.ok()) return status;
    float* target = data + begin(recv_chunk);
    const size_t count = size(recv_chunk);
    for (size_t i = 0; i < count; ++i) target[i] += incoming_[i];
  }
  // All-gather: pass the reduced chunks around the ring.
  for (size_t k = 0; k + 1 < world; ++k) {
    const size_t send_chunk = (rank + 1 + world - k) % world;
    const size_t recv_chunk = (rank + world - k) % world;
    const size_t send_bytes = size(send_chunk) * sizeof(float);
    link_.transmit(send_bytes);
    ProbeStatus status = send_recv(
        Outgoing{next_fd, data + begin(send_chunk), send_bytes, next},
        Incoming{prev_fd, data + begin(recv_chunk), size(recv_chunk) * sizeof(float), prev},
        ring_.timeout_s, phase);
    if (!status.ok()) return status;
  }
  return {};
}

}  // namespace bridge::probe
