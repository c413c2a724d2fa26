// TCP transport of bridge-probe: timed socket I/O, framed control messages and the rendezvous
// that connects W ranks into a ring.
//
// Contract: every operation that waits on a peer is bounded with poll(); after `timeout_s`
// seconds without progress it returns a kExitComm failure with the message
// "timed out after N s waiting for rank R (<phase>)", and a peer that closes or resets its
// connection yields a kExitComm failure "lost connection to rank R (<phase>): ...". Every
// operation that can fail returns a ProbeStatus or ProbeResult (probe_error.h); a malformed
// control message is the kExitComm failure "malformed control message". Nothing here can hang
// forever or raise SIGPIPE. Sockets are IPv4 TCP with TCP_NODELAY, non-blocking
// once connected.
//
// rendezvous(): rank 0 listens on 0.0.0.0:<rendezvous port> (SO_REUSEADDR; normally MASTER_PORT,
// see Identity); the other ranks connect to MASTER_ADDR:<rendezvous port>, retrying until
// `timeout_s` has passed (then the error names the address). Every rank also listens on an
// ephemeral port and reports it in its hello; rank 0 records each rank's address as seen by
// getpeername() on the accepted connection (so ranks on emulated nodes sharing 127.0.0.1 and ranks
// on real hosts both work) and sends the full table to everyone; each rank then connects to its
// successor (rank + 1) mod W and accepts its predecessor. The control connections to rank 0 stay
// open for gather_to_root/broadcast_from_root. WORLD_SIZE=1 opens no socket at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "probe/options.h"
#include "probe/probe_error.h"

namespace bridge::probe {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept;
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// One direction of a timed transfer. An entry with size 0 is skipped.
struct Outgoing {
  int fd = -1;
  const void* data = nullptr;
  size_t size = 0;
  int peer = -1;  // Rank at the other end, for messages.
};
struct Incoming {
  int fd = -1;
  void* data = nullptr;
  size_t size = 0;
  int peer = -1;
};

// Sends `out` and receives `in` concurrently (so two ranks sending to each other cannot
// deadlock on full socket buffers). Each wait is bounded by `timeout_s` without progress.
ProbeStatus send_recv(const Outgoing& out, const Incoming& in, double timeout_s,
                      std::string_view phase);

// Big-endian serialization of control messages.
class WireWriter {
 public:
  void u32(uint32_t value);
  void u64(uint64_t value);
  void bytes(std::string_view bytes);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

// Reading past the end of the message puts the reader in a failed state: that read and every
// later one return 0 or "", and ok() turns false. Decode a message, then check status() once.
class WireReader {
 public:
  explicit WireReader(std::string data) : data_(std::move(data)) {}
  uint32_t u32();
  uint64_t u64();
  std::string bytes();
  bool ok() const { return ok_; }
  // Ok, or the kExitComm failure "malformed control message".
  ProbeStatus status() const;

 private:
  bool need(size_t n);
  std::string data_;  // Owned, so a reader can wrap a temporary message.
  size_t pos_ = 0;
  bool ok_ = true;
};

struct PeerInfo {
  int rank = 0;
  int node_rank = 0;
  int local_rank = 0;
  std::string hostname;
  std::string address;  // Numeric IPv4 address other ranks use to reach this rank.
  int ring_port = 0;
};

struct Cluster {
  int rank = 0;
  int world_size = 1;
  double timeout_s = 60.0;
  std::string master_endpoint;  // "MASTER_ADDR:<rendezvous port>" for messages.
  std::vector<PeerInfo> peers;  // Indexed by rank; the same table on every rank.
  std::vector<Fd> to_rank;      // Rank 0 only: control connection to rank r at index r (r >= 1).
  Fd to_master;                 // Ranks >= 1: control connection to rank 0.
  Fd ring_next;                 // Connection to (rank + 1) mod W; this rank sends on it.
  Fd ring_prev;                 // Connection from (rank - 1) mod W; this rank receives on it.

  int next_rank() const { return (rank + 1) % world_size; }
  int prev_rank() const { return (rank + world_size - 1) % world_size; }
};

ProbeResult<Cluster> rendezvous(const Identity& identity, double timeout_s);

// Collectives over the control connections (rank 0 is the root). gather_to_root returns, on rank
// 0, every rank's message indexed by rank (and an empty vector elsewhere). broadcast_from_root
// returns rank 0's `message` on every rank (the argument is ignored on other ranks).
ProbeResult<std::vector<std::string>> gather_to_root(Cluster& cluster, const std::string& message,
                                                     std::string_view phase);
ProbeResult<std::string> broadcast_from_root(Cluster& cluster, const std::string& message,
                                             std::string_view phase);
ProbeStatus barrier(Cluster& cluster, std::string_view phase);

// Direct connections to other ranks, for the group collectives (runtime/group_comm.h).
class PeerLinks {
 public:
  // The connection to `peer`; a kExitInternal failure when there is none (a bug in the
  // caller's group, not a network condition).
  ProbeResult<int> fd(int peer) const;
  bool has(int peer) const { return links_.count(peer) != 0; }
  void add(int peer, Fd fd) { links_[peer] = std::move(fd); }

 private:
  std::map<int, Fd> links_;
};

// Collective: connects this rank to each of `peers` (the relation must be symmetric: every
// rank passes the ranks that pass it). Each rank listens on a new ephemeral port, the ports go
// through rank 0 over the control connections, then each rank connects to its higher peers
// and accepts its lower ones (a connection completes in the listener's backlog, so the order
// cannot deadlock). Bounded by the cluster timeout like every other wait.
ProbeResult<PeerLinks> connect_peers(Cluster& cluster, const std::vector<int>& peers);

}  // namespace bridge::probe
