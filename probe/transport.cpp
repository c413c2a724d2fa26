#include "probe/transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x42525042;  // "BRPB"
constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kMaxMessageBytes = 64U << 20;

std::string errno_text(int err) { return std::strerror(err); }

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds until `deadline` for poll(), at least 0, rounded up.
int poll_ms(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

// How often a blocked exchange looks at termination_requested().
constexpr int kTerminationCheckMs = 200;
constexpr std::chrono::milliseconds kTerminationLag{1000};

std::string seconds_text(double seconds) { return str_printf("%g", seconds); }

std::string peer_name(int peer) {
  return peer >= 0 ? "rank " + std::to_string(peer) : std::string("a connecting peer");
}

ProbeStatus timeout_error(double timeout_s, int peer, std::string_view phase) {
  return ProbeStatus(kExitComm, str_printf("timed out after %s s waiting for %s (%.*s)",
                                           seconds_text(timeout_s).c_str(), peer_name(peer).c_str(),
                                           static_cast<int>(phase.size()), phase.data()));
}

ProbeStatus lost_error(int peer, std::string_view phase, const std::string& why) {
  return ProbeStatus(kExitComm,
                     str_printf("lost connection to %s (%.*s): %s", peer_name(peer).c_str(),
                                static_cast<int>(phase.size()), phase.data(), why.c_str()));
}

void set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string numeric_host(const sockaddr_in& addr) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return buf;
}

ProbeResult<std::string> peer_address(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ProbeStatus(kExitComm, "getpeername failed: " + errno_text(errno));
  }
  return numeric_host(addr);
}

ProbeResult<std::string> local_address(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ProbeStatus(kExitComm, "getsockname failed: " + errno_text(errno));
  }
  return numeric_host(addr);
}

ProbeResult<int> local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ProbeStatus(kExitComm, "getsockname failed: " + errno_text(errno));
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

// Listens on 0.0.0.0:`port` (0 = ephemeral).
ProbeResult<Fd> listen_on(int port, int backlog, std::string_view what) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ProbeStatus(kExitComm, "socket() failed: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    return ProbeStatus(kExitComm, str_printf("%.*s: cannot listen on 0.0.0.0:%d: %s",
                                             static_cast<int>(what.size()), what.data(), port,
                                             errno_text(errno).c_str()));
  }
  return fd;
}

// Accepts one connection, or returns an invalid Fd when `deadline` passes.
ProbeResult<Fd> accept_until(int listen_fd, Clock::time_point deadline) {
  for (;;) {
    pollfd pfd{listen_fd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, poll_ms(deadline));
    if (rc < 0 && errno != EINTR)
      return ProbeStatus(kExitComm, "poll failed: " + errno_text(errno));
    if (rc > 0) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        set_no_delay(fd);
        return Fd(fd);
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        return ProbeStatus(kExitComm, "accept failed: " + errno_text(errno));
      }
    }
    if (Clock::now() >= deadline) return Fd();
  }
}

// One connection attempt to host:port; a failure says why the last address failed.
ProbeResult<Fd> try_connect(const std::string& host, int port, Clock::time_point deadline) {
  std::string why = "no address to connect to";
  std::string* error = &why;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &result);
  if (gai != 0)
    return ProbeStatus(kExitComm, std::string("cannot resolve host: ") + ::gai_strerror(gai));
  Fd connected;
  for (addrinfo* ai = result; ai != nullptr && !connected.valid(); ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      *error = "socket() failed: " + errno_text(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *error = errno_text(errno);
        continue;
      }
      // Bound a single attempt so an unresponsive host is retried, not waited on for minutes.
      const auto attempt_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      pollfd pfd{fd.get(), POLLOUT, 0};
      int rc;
      do {
        rc = ::poll(&pfd, 1, poll_ms(attempt_deadline));
      } while (rc < 0 && errno == EINTR);
      if (rc <= 0) {
        *error = rc == 0 ? "connection attempt timed out" : errno_text(errno);
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        *error = errno_text(so_error);
        continue;
      }
    }
    set_no_delay(fd.get());
    connected = std::move(fd);
  }
  ::freeaddrinfo(result);
  if (!connected.valid()) return ProbeStatus(kExitComm, why);
  return connected;
}

ProbeResult<Fd> connect_with_retry(const std::string& host, int port, double timeout_s,
                                   std::string_view what) {
  const auto deadline = deadline_after(timeout_s);
  std::string error = "not attempted";
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    ProbeResult<Fd> attempt = try_connect(host, port, deadline);
    if (attempt.ok()) return std::move(attempt.value());
    error = attempt.why();
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  return ProbeStatus(kExitComm, str_printf("%.*s: could not connect to %s:%d within %s s (%s)",
                                           static_cast<int>(what.size()), what.data(), host.c_str(),
                                           port, seconds_text(timeout_s).c_str(), error.c_str()));
}

ProbeStatus send_message(int fd, int peer, const std::string& payload, double timeout_s,
                         std::string_view phase) {
  WireWriter frame;
  frame.u32(static_cast<uint32_t>(payload.size()));
  const std::string data = frame.data() + payload;
  return send_recv(Outgoing{fd, data.data(), data.size(), peer}, Incoming{}, timeout_s, phase);
}

ProbeResult<std::string> recv_message(int fd, int peer, double timeout_s, std::string_view phase) {
  char header[4];
  ProbeStatus status =
      send_recv(Outgoing{}, Incoming{fd, header, sizeof(header), peer}, timeout_s, phase);
  if (!status.ok()) return status;
  const uint32_t size = WireReader(std::string(header, sizeof(header))).u32();
  if (size > kMaxMessageBytes) {
    return ProbeStatus(kExitComm, str_printf("malformed message from %s (length %u)",
                                             peer_name(peer).c_str(), size));
  }
  std::string payload(size, '\0');
  status =
      send_recv(Outgoing{}, Incoming{fd, payload.data(), payload.size(), peer}, timeout_s, phase);
  if (!status.ok()) return status;
  return payload;
}

std::string encode_table(const std::vector<PeerInfo>& peers) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(peers.size()));
  for (const PeerInfo& p : peers) {
    w.u32(static_cast<uint32_t>(p.rank));
    w.u32(static_cast<uint32_t>(p.node_rank));
    w.u32(static_cast<uint32_t>(p.local_rank));
    w.bytes(p.hostname);
    w.bytes(p.address);
    w.u32(static_cast<uint32_t>(p.ring_port));
  }
  return w.data();
}

ProbeResult<std::vector<PeerInfo>> decode_table(const std::string& data, int world_size) {
  WireReader r(data);
  const uint32_t n = r.u32();
  if (!r.ok()) return r.status();
  if (n != static_cast<uint32_t>(world_size)) {
    return ProbeStatus(kExitComm, str_printf("rendezvous: rank 0 sent a table of %u ranks, "
                                             "expected WORLD_SIZE=%d",
                                             n, world_size));
  }
  std::vector<PeerInfo> peers(n);
  for (PeerInfo& p : peers) {
    p.rank = static_cast<int>(r.u32());
    p.node_rank = static_cast<int>(r.u32());
    p.local_rank = static_cast<int>(r.u32());
    p.hostname = r.bytes();
    p.address = r.bytes();
    p.ring_port = static_cast<int>(r.u32());
  }
  if (!r.ok()) return r.status();
  return peers;
}

// The failure of a rendezvous whose deadline passed before every rank connected.
ProbeStatus missing_ranks_error(const Cluster& c, const Fd& master_listener, int joined) {
  std::string missing;
  for (int r = 1; r < c.world_size; ++r) {
    if (!c.to_rank[static_cast<size_t>(r)].valid()) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  const ProbeResult<int> port = local_port(master_listener.get());
  if (!port.ok()) return port.status();
  return ProbeStatus(
      kExitComm, str_printf("rendezvous: timed out after %s s waiting for rank%s %s to "
                            "connect to port %d (%d of %d ranks joined)",
                            seconds_text(c.timeout_s).c_str(), c.world_size - joined > 1 ? "s" : "",
                            missing.c_str(), *port, joined, c.world_size));
}

// Reads a rank's hello (bounded by the rendezvous deadline, so a silent stray connection cannot
// extend it) into `peer` and `world`. A failure means the connection is not a rank to admit.
ProbeStatus read_hello(int fd, Clock::time_point deadline, PeerInfo& peer, int& world) {
  const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  const ProbeResult<std::string> message =
      recv_message(fd, -1, std::max(left, 0.001), "rendezvous hello");
  if (!message.ok()) return message.status();
  WireReader hello(*message);
  const ProbeStatus not_a_rank(kExitComm, "not a bridge-probe rank of this version");
  if (hello.u32() != kHelloMagic) return hello.ok() ? not_a_rank : hello.status();
  if (hello.u32() != kProtocolVersion) return hello.ok() ? not_a_rank : hello.status();
  peer.rank = static_cast<int>(hello.u32());
  world = static_cast<int>(hello.u32());
  peer.node_rank = static_cast<int>(hello.u32());
  peer.local_rank = static_cast<int>(hello.u32());
  peer.ring_port = static_cast<int>(hello.u32());
  peer.hostname = hello.bytes();
  return hello.status();
}

// Rank 0: admits one rank that said hello on `conn`. Returns false when the connection is
// ignored (it is not a rank of this run's version).
ProbeResult<bool> admit_rank(Cluster& c, Fd conn, Clock::time_point deadline) {
  const ProbeResult<std::string> address = peer_address(conn.get());
  if (!address.ok()) return address.status();
  PeerInfo peer;
  int world = 0;
  if (const ProbeStatus hello = read_hello(conn.get(), deadline, peer, world); !hello.ok()) {
    log_warning("rendezvous: ignoring a connection from " + *address + ": " + hello.why());
    return false;
  }
  peer.address = *address;
  if (world != c.world_size) {
    return ProbeStatus(kExitUsage, str_printf("rendezvous: rank %d (%s) has WORLD_SIZE=%d but "
                                              "rank 0 has WORLD_SIZE=%d",
                                              peer.rank, address->c_str(), world, c.world_size));
  }
  if (peer.rank <= 0 || peer.rank >= c.world_size ||
      c.to_rank[static_cast<size_t>(peer.rank)].valid()) {
    return ProbeStatus(kExitUsage,
                       str_printf("rendezvous: two processes claim rank %d (the second from %s)",
                                  peer.rank, address->c_str()));
  }
  if (peer.rank == c.world_size - 1) {
    // Rank W-1 connects to rank 0's ring port; give it the address it already reached us on.
    ProbeResult<std::string> own = local_address(conn.get());
    if (!own.ok()) return own.status();
    c.peers[0].address = std::move(*own);
  }
  const auto rank = static_cast<size_t>(peer.rank);
  c.to_rank[rank] = std::move(conn);
  c.peers[rank] = std::move(peer);
  return true;
}

// Rank 0: accepts every other rank on the rendezvous port and fills the peer table.
ProbeStatus gather_hellos(Cluster& c, const Fd& master_listener, PeerInfo self) {
  const auto deadline = deadline_after(c.timeout_s);
  c.to_rank.resize(static_cast<size_t>(c.world_size));
  c.peers.assign(static_cast<size_t>(c.world_size), PeerInfo{});
  c.peers[0] = std::move(self);
  int joined = 1;
  while (joined < c.world_size) {
    ProbeResult<Fd> conn = accept_until(master_listener.get(), deadline);
    if (!conn.ok()) return conn.status();
    if (!conn->valid()) return missing_ranks_error(c, master_listener, joined);
    const ProbeResult<bool> admitted = admit_rank(c, std::move(*conn), deadline);
    if (!admitted.ok()) return admitted.status();
    if (*admitted) ++joined;
  }
  return {};
}

ProbeStatus connect_ring(Cluster& c, const Fd& ring_listener) {
  const PeerInfo& next = c.peers[static_cast<size_t>(c.next_rank())];
  ProbeResult<Fd> ring_next = connect_with_retry(next.address, next.ring_port, c.timeout_s,
                                                 str_printf("ring setup: rank %d", next.rank));
  if (!ring_next.ok()) return ring_next.status();
  c.ring_next = std::move(*ring_next);
  WireWriter hello;
  hello.u32(kHelloMagic);
  hello.u32(static_cast<uint32_t>(c.rank));
  ProbeStatus sent =
      send_message(c.ring_next.get(), next.rank, hello.data(), c.timeout_s, "ring setup");
  if (!sent.ok()) return sent;

  const auto deadline = deadline_after(c.timeout_s);
  for (;;) {
    ProbeResult<Fd> conn = accept_until(ring_listener.get(), deadline);
    if (!conn.ok()) return conn.status();
    if (!conn->valid()) return timeout_error(c.timeout_s, c.prev_rank(), "ring setup");
    const ProbeResult<std::string> message =
        recv_message(conn->get(), c.prev_rank(), c.timeout_s, "ring setup");
    if (!message.ok()) return message.status();
    WireReader r(*message);
    const uint32_t magic = r.u32();
    const int from = static_cast<int>(r.u32());
    if (!r.ok()) return r.status();
    if (magic == kHelloMagic && from == c.prev_rank()) {
      c.ring_prev = std::move(*conn);
      return {};
    }
    const ProbeResult<std::string> address = peer_address(conn->get());
    if (!address.ok()) return address.status();
    log_warning(
        str_printf("ring setup: ignoring a connection from %s (claims rank %d, expected "
                   "%d)",
                   address->c_str(), from, c.prev_rank()));
  }
}

// Ranks >= 1: connects to rank 0, says hello and receives the peer table.
ProbeStatus join_master(Cluster& c, const Identity& identity, const PeerInfo& self) {
  ProbeResult<Fd> to_master = connect_with_retry(
      identity.master_addr, identity.rendezvous_port, c.timeout_s,
      "rendezvous: rank 0 (MASTER_ADDR, " + identity.rendezvous_port_source + ")");
  if (!to_master.ok()) return to_master.status();
  c.to_master = std::move(*to_master);
  WireWriter hello;
  hello.u32(kHelloMagic);
  hello.u32(kProtocolVersion);
  hello.u32(static_cast<uint32_t>(c.rank));
  hello.u32(static_cast<uint32_t>(c.world_size));
  hello.u32(static_cast<uint32_t>(self.node_rank));
  hello.u32(static_cast<uint32_t>(self.local_rank));
  hello.u32(static_cast<uint32_t>(self.ring_port));
  hello.bytes(self.hostname);
  ProbeStatus sent = send_message(c.to_master.get(), 0, hello.data(), c.timeout_s, "rendezvous");
  if (!sent.ok()) return sent;
  const ProbeResult<std::string> table =
      recv_message(c.to_master.get(), 0, c.timeout_s, "rendezvous");
  if (!table.ok()) return table.status();
  ProbeResult<std::vector<PeerInfo>> peers = decode_table(*table, c.world_size);
  if (!peers.ok()) return peers.status();
  c.peers = std::move(*peers);
  return {};
}

// Rank 0: admits every other rank and sends each the peer table.
ProbeStatus host_rendezvous(Cluster& c, const Identity& identity, const PeerInfo& self) {
  const ProbeResult<Fd> master_listener =
      listen_on(identity.rendezvous_port, std::max(c.world_size, 16),
                "rendezvous (" + identity.rendezvous_port_source + ")");
  if (!master_listener.ok()) return master_listener.status();
  if (ProbeStatus status = gather_hellos(c, *master_listener, self); !status.ok()) return status;
  const std::string table = encode_table(c.peers);
  for (int r = 1; r < c.world_size; ++r) {
    ProbeStatus sent =
        send_message(c.to_rank[static_cast<size_t>(r)].get(), r, table, c.timeout_s, "rendezvous");
    if (!sent.ok()) return sent;
  }
  return {};
}

}  // namespace

Fd::Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

// SIGTERM reached this rank while it waited: whom it waited for (the one it still expects
// bytes from, else the one it still sends to), for `why`'s chain of waits.
ProbeStatus terminated_error(const Incoming& in, const Outgoing& out, size_t received,
                             std::string_view phase) {
  return ProbeStatus(kExitComm,
                     str_printf("terminated while waiting for %s (%.*s)",
                                peer_name(received < in.size ? in.peer : out.peer).c_str(),
                                static_cast<int>(phase.size()), phase.data()));
}

// A peer that went away while this rank is being terminated went away for the same reason:
// the wait is what this rank reports, not the lost connection. The step kill reaches the
// nodes of a job one after another, so a peer may be gone a moment before this rank's own
// SIGTERM arrives: it is given kTerminationLag to arrive.
ProbeStatus lost_or_terminated(const Incoming& in, const Outgoing& out, size_t received,
                               std::string_view phase, const std::string& why, int peer = -2) {
  const auto lag_end = Clock::now() + kTerminationLag;
  while (!termination_requested() && Clock::now() < lag_end) ::usleep(20 * 1000);
  if (termination_requested()) return terminated_error(in, out, received, phase);
  return lost_error(peer == -2 ? in.peer : peer, phase, why);
}

ProbeStatus send_recv(const Outgoing& out, const Incoming& in, double timeout_s,
                      std::string_view phase) {
  size_t sent = 0;
  size_t received = 0;
  auto deadline = deadline_after(timeout_s);
  while (sent < out.size || received < in.size) {
    pollfd fds[2];
    nfds_t count = 0;
    int send_index = -1;
    int recv_index = -1;
    if (received < in.size) {
      recv_index = static_cast<int>(count);
      fds[count++] = pollfd{in.fd, POLLIN, 0};
    }
    if (sent < out.size) {
      send_index = static_cast<int>(count);
      fds[count++] = pollfd{out.fd, POLLOUT, 0};
    }
    if (termination_requested()) return terminated_error(in, out, received, phase);
    const int rc = ::poll(fds, count, std::min(poll_ms(deadline), kTerminationCheckMs));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return ProbeStatus(kExitComm, "poll failed: " + errno_text(errno));
    }
    if (rc == 0) {
      if (Clock::now() < deadline) continue;
      // Blame the peer we wait to hear from; if only sending, the receiver that stopped reading.
      return timeout_error(timeout_s, received < in.size ? in.peer : out.peer, phase);
    }
    bool progress = false;
    if (recv_index >= 0 && fds[recv_index].revents != 0) {
      const ssize_t n =
          ::recv(in.fd, static_cast<char*>(in.data) + received, in.size - received, 0);
      if (n > 0) {
        received += static_cast<size_t>(n);
        progress = true;
      } else if (n == 0) {
        return lost_or_terminated(in, out, received, phase, "peer closed the connection");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return lost_or_terminated(in, out, received, phase, errno_text(errno));
      }
    }
    if (send_index >= 0 && fds[send_index].revents != 0) {
      const ssize_t n =
          ::send(out.fd, static_cast<const char*>(out.data) + sent, out.size - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return lost_or_terminated(in, out, received, phase, errno_text(errno), out.peer);
      }
    }
    if (progress) deadline = deadline_after(timeout_s);
  }
  return {};
}

void WireWriter::u32(uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    data_.push_back(static_cast<char>((value >> shift) & 0xFFU));
  }
}

void WireWriter::u64(uint64_t value) {
  u32(static_cast<uint32_t>(value >> 32));
  u32(static_cast<uint32_t>(value & 0xFFFFFFFFU));
}

void WireWriter::bytes(std::string_view bytes) {
  u32(static_cast<uint32_t>(bytes.size()));
  data_.append(bytes);
}

bool WireReader::need(size_t n) {
  if (ok_ && data_.size() - pos_ < n) ok_ = false;
  return ok_;
}

ProbeStatus WireReader::status() const {
  if (ok_) return {};
  return ProbeStatus(kExitComm, "malformed control message");
}

uint32_t WireReader::u32() {
  if (!need(4)) return 0;
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(data_[pos_++]);
  return value;
}

uint64_t WireReader::u64() {
  const uint64_t high = u32();
  return (high << 32) | u32();
}

std::string WireReader::bytes() {
  const uint32_t n = u32();
  if (!need(n)) return {};
  std::string out(data_.substr(pos_, n));
  pos_ += n;
  return out;
}

ProbeResult<Cluster> rendezvous(const Identity& identity, double timeout_s) {
  Cluster c;
  c.rank = identity.rank;
  c.world_size = identity.world_size;
  c.timeout_s = timeout_s;
  c.master_endpoint = identity.master_addr + ":" + std::to_string(identity.rendezvous_port);
  PeerInfo self;
  self.rank = identity.rank;
  self.node_rank = identity.node_rank;
  self.local_rank = identity.local_rank;
  self.hostname = host_name();
  if (c.world_size == 1) {
    self.address = "-";
    c.peers.push_back(self);
    return c;
  }

  // Listen for our ring predecessor before anyone can learn our port.
  const ProbeResult<Fd> ring_listener = listen_on(0, 8, "ring setup");
  if (!ring_listener.ok()) return ring_listener.status();
  const ProbeResult<int> ring_port = local_port(ring_listener->get());
  if (!ring_port.ok()) return ring_port.status();
  self.ring_port = *ring_port;

  ProbeStatus joined =
      c.rank == 0 ? host_rendezvous(c, identity, self) : join_master(c, identity, self);
  if (!joined.ok()) return joined;
  if (ProbeStatus ring = connect_ring(c, *ring_listener); !ring.ok()) return ring;
  return c;
}

ProbeResult<std::vector<std::string>> gather_to_root(Cluster& cluster, const std::string& message,
                                                     std::string_view phase) {
  if (cluster.rank != 0) {
    ProbeStatus sent = send_message(cluster.to_master.get(), 0, message, cluster.timeout_s, phase);
    if (!sent.ok()) return sent;
    return std::vector<std::string>();
  }
  std::vector<std::string> all(static_cast<size_t>(cluster.world_size));
  all[0] = message;
  for (int r = 1; r < cluster.world_size; ++r) {
    ProbeResult<std::string> received =
        recv_message(cluster.to_rank[static_cast<size_t>(r)].get(), r, cluster.timeout_s, phase);
    if (!received.ok()) return received.status();
    all[static_cast<size_t>(r)] = std::move(*received);
  }
  return all;
}

ProbeResult<std::string> broadcast_from_root(Cluster& cluster, const std::string& message,
                                             std::string_view phase) {
  if (cluster.rank != 0) {
    return recv_message(cluster.to_master.get(), 0, cluster.timeout_s, phase);
  }
  for (int r = 1; r < cluster.world_size; ++r) {
    ProbeStatus sent = send_message(cluster.to_rank[static_cast<size_t>(r)].get(), r, message,
                                    cluster.timeout_s, phase);
    if (!sent.ok()) return sent;
  }
  return message;
}

ProbeStatus barrier(Cluster& cluster, std::string_view phase) {
  const auto gathered = gather_to_root(cluster, "", phase);
  if (!gathered.ok()) return gathered.status();
  const auto released = broadcast_from_root(cluster, "", phase);
  return released.ok() ? ProbeStatus() : released.status();
}

ProbeResult<int> PeerLinks::fd(int peer) const {
  const auto it = links_.find(peer);
  if (it == links_.end()) {
    return ProbeStatus(kExitInternal, str_printf("no connection to rank %d (group setup)", peer));
  }
  return it->second.get();
}

namespace {

ProbeResult<std::vector<int>> exchange_ports(Cluster& cluster, int my_port) {
  WireWriter mine;
  mine.u32(static_cast<uint32_t>(my_port));
  WireWriter table;
  const ProbeResult<std::vector<std::string>> gathered =
      gather_to_root(cluster, mine.data(), "group setup");
  if (!gathered.ok()) return gathered.status();
  for (const std::string& port : *gathered) {  // Empty except on rank 0.
    WireReader reader(port);
    table.u32(reader.u32());
    if (!reader.ok()) return reader.status();
  }
  const ProbeResult<std::string> broadcast =
      broadcast_from_root(cluster, table.data(), "group setup");
  if (!broadcast.ok()) return broadcast.status();
  WireReader all(*broadcast);
  std::vector<int> ports;
  for (int r = 0; r < cluster.world_size; ++r) ports.push_back(static_cast<int>(all.u32()));
  if (!all.ok()) return all.status();
  return ports;
}

// Connects to each peer above this rank, saying hello with this rank's number.
ProbeStatus connect_higher_peers(Cluster& cluster, const std::vector<int>& peers,
                                 const std::vector<int>& ports, PeerLinks& links) {
  for (const int peer : peers) {
    if (peer < cluster.rank) continue;
    const PeerInfo& info = cluster.peers[static_cast<size_t>(peer)];
    ProbeResult<Fd> fd =
        connect_with_retry(info.address, ports[static_cast<size_t>(peer)], cluster.timeout_s,
                           str_printf("group setup: rank %d", peer));
    if (!fd.ok()) return fd.status();
    WireWriter hello;
    hello.u32(kHelloMagic);
    hello.u32(static_cast<uint32_t>(cluster.rank));
    ProbeStatus sent =
        send_message(fd->get(), peer, hello.data(), cluster.timeout_s, "group setup");
    if (!sent.ok()) return sent;
    links.add(peer, std::move(*fd));
  }
  return {};
}

// Accepts each peer below this rank on `listener`, ignoring connections that are none of them.
ProbeStatus accept_lower_peers(Cluster& cluster, const Fd& listener, const std::vector<int>& lower,
                               PeerLinks& links) {
  const auto deadline = deadline_after(cluster.timeout_s);
  size_t accepted = 0;
  while (accepted < lower.size()) {
    ProbeResult<Fd> conn = accept_until(listener.get(), deadline);
    if (!conn.ok()) return conn.status();
    if (!conn->valid()) return timeout_error(cluster.timeout_s, lower[accepted], "group setup");
    const ProbeResult<std::string> message =
        recv_message(conn->get(), -1, cluster.timeout_s, "group setup");
    if (!message.ok()) return message.status();
    WireReader r(*message);
    const uint32_t magic = r.u32();
    const int from = static_cast<int>(r.u32());
    if (!r.ok()) return r.status();
    if (magic != kHelloMagic || std::find(lower.begin(), lower.end(), from) == lower.end() ||
        links.has(from)) {
      const ProbeResult<std::string> address = peer_address(conn->get());
      if (!address.ok()) return address.status();
      log_warning(str_printf("group setup: ignoring a connection from %s (claims rank %d)",
                             address->c_str(), from));
      continue;
    }
    links.add(from, std::move(*conn));
    ++accepted;
  }
  return {};
}

}  // namespace

ProbeResult<PeerLinks> connect_peers(Cluster& cluster, const std::vector<int>& peers) {
  PeerLinks links;
  if (cluster.world_size == 1) return links;
  std::vector<int> lower;
  for (const int peer : peers) {
    if (peer < cluster.rank) lower.push_back(peer);
  }
  const ProbeResult<Fd> listener = listen_on(0, static_cast<int>(lower.size()) + 8, "group setup");
  if (!listener.ok()) return listener.status();
  const ProbeResult<int> port = local_port(listener->get());
  if (!port.ok()) return port.status();
  const ProbeResult<std::vector<int>> ports = exchange_ports(cluster, *port);
  if (!ports.ok()) return ports.status();
  if (ProbeStatus status = connect_higher_peers(cluster, peers, *ports, links); !status.ok()) {
    return status;
  }
  if (ProbeStatus status = accept_lower_peers(cluster, *listener, lower, links); !status.ok()) {
    return status;
  }
  return links;
}

}  // namespace bridge::probe
