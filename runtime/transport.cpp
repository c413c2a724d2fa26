#include "runtime/transport.h"

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

#include "runtime/probe_error.h"

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x42525042;  // "BRPB"
constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kMaxMessageBytes = 64U << 20;

std::string Errno(int err) { return std::strerror(err); }

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds until `deadline` for poll(), at least 0, rounded up.
int PollMs(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

std::string Seconds(double seconds) { return StrPrintf("%g", seconds); }

std::string PeerName(int peer) {
  return peer >= 0 ? "rank " + std::to_string(peer) : std::string("a connecting peer");
}

ProbeError TimeoutError(double timeout_s, int peer, std::string_view phase) {
  return ProbeError(
      kExitComm, StrPrintf("timed out after %s s waiting for %s (%.*s)", Seconds(timeout_s).c_str(),
                           PeerName(peer).c_str(), static_cast<int>(phase.size()), phase.data()));
}

ProbeError LostError(int peer, std::string_view phase, const std::string& why) {
  return ProbeError(kExitComm,
                    StrPrintf("lost connection to %s (%.*s): %s", PeerName(peer).c_str(),
                              static_cast<int>(phase.size()), phase.data(), why.c_str()));
}

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string NumericHost(const sockaddr_in& addr) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return buf;
}

std::string PeerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw ProbeError(kExitComm, "getpeername failed: " + Errno(errno));
  }
  return NumericHost(addr);
}

std::string LocalAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw ProbeError(kExitComm, "getsockname failed: " + Errno(errno));
  }
  return NumericHost(addr);
}

int LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw ProbeError(kExitComm, "getsockname failed: " + Errno(errno));
  }
  return ntohs(addr.sin_port);
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

// Listens on 0.0.0.0:`port` (0 = ephemeral).
Fd Listen(int port, int backlog, std::string_view what) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw ProbeError(kExitComm, "socket() failed: " + Errno(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    throw ProbeError(
        kExitComm, StrPrintf("%.*s: cannot listen on 0.0.0.0:%d: %s", static_cast<int>(what.size()),
                             what.data(), port, Errno(errno).c_str()));
  }
  return fd;
}

// Accepts one connection or returns an invalid Fd when `deadline` passes.
Fd AcceptUntil(int listen_fd, Clock::time_point deadline) {
  for (;;) {
    pollfd pfd{listen_fd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, PollMs(deadline));
    if (rc < 0 && errno != EINTR) throw ProbeError(kExitComm, "poll failed: " + Errno(errno));
    if (rc > 0) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        SetNoDelay(fd);
        return Fd(fd);
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        throw ProbeError(kExitComm, "accept failed: " + Errno(errno));
      }
    }
    if (Clock::now() >= deadline) return Fd();
  }
}

// One connection attempt to host:port; returns an invalid Fd and sets `error` on failure.
Fd TryConnect(const std::string& host, int port, Clock::time_point deadline, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &result);
  if (gai != 0) {
    *error = std::string("cannot resolve host: ") + ::gai_strerror(gai);
    return Fd();
  }
  Fd connected;
  for (addrinfo* ai = result; ai != nullptr && !connected.valid(); ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      *error = "socket() failed: " + Errno(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *error = Errno(errno);
        continue;
      }
      // Bound a single attempt so an unresponsive host is retried, not waited on for minutes.
      const auto attempt_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      pollfd pfd{fd.get(), POLLOUT, 0};
      int rc;
      do {
        rc = ::poll(&pfd, 1, PollMs(attempt_deadline));
      } while (rc < 0 && errno == EINTR);
      if (rc <= 0) {
        *error = rc == 0 ? "connection attempt timed out" : Errno(errno);
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        *error = Errno(so_error);
        continue;
      }
    }
    SetNoDelay(fd.get());
    connected = std::move(fd);
  }
  ::freeaddrinfo(result);
  return connected;
}

Fd ConnectWithRetry(const std::string& host, int port, double timeout_s, std::string_view what) {
  const auto deadline = DeadlineAfter(timeout_s);
  std::string error = "not attempted";
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    Fd fd = TryConnect(host, port, deadline, &error);
    if (fd.valid()) return fd;
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  throw ProbeError(kExitComm, StrPrintf("%.*s: could not connect to %s:%d within %s s (%s)",
                                        static_cast<int>(what.size()), what.data(), host.c_str(),
                                        port, Seconds(timeout_s).c_str(), error.c_str()));
}

void SendMessage(int fd, int peer, const std::string& payload, double timeout_s,
                 std::string_view phase) {
  WireWriter frame;
  frame.U32(static_cast<uint32_t>(payload.size()));
  const std::string data = frame.data() + payload;
  SendRecv(Outgoing{fd, data.data(), data.size(), peer}, Incoming{}, timeout_s, phase);
}

std::string RecvMessage(int fd, int peer, double timeout_s, std::string_view phase) {
  char header[4];
  SendRecv(Outgoing{}, Incoming{fd, header, sizeof(header), peer}, timeout_s, phase);
  const uint32_t size = WireReader(std::string(header, sizeof(header))).U32();
  if (size > kMaxMessageBytes) {
    throw ProbeError(kExitComm, StrPrintf("malformed message from %s (length %u)",
                                          PeerName(peer).c_str(), size));
  }
  std::string payload(size, '\0');
  SendRecv(Outgoing{}, Incoming{fd, payload.data(), payload.size(), peer}, timeout_s, phase);
  return payload;
}

std::string EncodeTable(const std::vector<PeerInfo>& peers) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(peers.size()));
  for (const PeerInfo& p : peers) {
    w.U32(static_cast<uint32_t>(p.rank));
    w.U32(static_cast<uint32_t>(p.node_rank));
    w.U32(static_cast<uint32_t>(p.local_rank));
    w.Bytes(p.hostname);
    w.Bytes(p.address);
    w.U32(static_cast<uint32_t>(p.ring_port));
  }
  return w.data();
}

std::vector<PeerInfo> DecodeTable(const std::string& data, int world_size) {
  WireReader r(data);
  const uint32_t n = r.U32();
  if (n != static_cast<uint32_t>(world_size)) {
    throw ProbeError(kExitComm, StrPrintf("rendezvous: rank 0 sent a table of %u ranks, "
                                          "expected WORLD_SIZE=%d",
                                          n, world_size));
  }
  std::vector<PeerInfo> peers(n);
  for (PeerInfo& p : peers) {
    p.rank = static_cast<int>(r.U32());
    p.node_rank = static_cast<int>(r.U32());
    p.local_rank = static_cast<int>(r.U32());
    p.hostname = r.Bytes();
    p.address = r.Bytes();
    p.ring_port = static_cast<int>(r.U32());
  }
  return peers;
}

// Rank 0: accepts every other rank on the rendezvous port and fills the peer table.
void GatherHellos(Cluster& c, const Fd& master_listener, PeerInfo self) {
  const auto deadline = DeadlineAfter(c.timeout_s);
  c.to_rank.resize(static_cast<size_t>(c.world_size));
  c.peers.assign(static_cast<size_t>(c.world_size), PeerInfo{});
  c.peers[0] = std::move(self);
  int joined = 1;
  while (joined < c.world_size) {
    Fd conn = AcceptUntil(master_listener.get(), deadline);
    if (!conn.valid()) {
      std::string missing;
      for (int r = 1; r < c.world_size; ++r) {
        if (!c.to_rank[static_cast<size_t>(r)].valid()) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      throw ProbeError(
          kExitComm,
          StrPrintf("rendezvous: timed out after %s s waiting for rank%s %s to "
                    "connect to port %d (%d of %d ranks joined)",
                    Seconds(c.timeout_s).c_str(), c.world_size - joined > 1 ? "s" : "",
                    missing.c_str(), LocalPort(master_listener.get()), joined, c.world_size));
    }
    const std::string address = PeerAddress(conn.get());
    PeerInfo peer;
    int world = 0;
    try {
      // Bound by the rendezvous deadline so a silent stray connection cannot extend it.
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      WireReader hello(RecvMessage(conn.get(), -1, std::max(left, 0.001), "rendezvous hello"));
      if (hello.U32() != kHelloMagic || hello.U32() != kProtocolVersion) {
        throw ProbeError(kExitComm, "not a bridge-probe rank of this version");
      }
      peer.rank = static_cast<int>(hello.U32());
      world = static_cast<int>(hello.U32());
      peer.node_rank = static_cast<int>(hello.U32());
      peer.local_rank = static_cast<int>(hello.U32());
      peer.ring_port = static_cast<int>(hello.U32());
      peer.hostname = hello.Bytes();
    } catch (const ProbeError& e) {
      LogWarning("rendezvous: ignoring a connection from " + address + ": " + e.what());
      continue;
    }
    peer.address = address;
    if (world != c.world_size) {
      throw ProbeError(kExitUsage, StrPrintf("rendezvous: rank %d (%s) has WORLD_SIZE=%d but "
                                             "rank 0 has WORLD_SIZE=%d",
                                             peer.rank, address.c_str(), world, c.world_size));
    }
    if (peer.rank <= 0 || peer.rank >= c.world_size ||
        c.to_rank[static_cast<size_t>(peer.rank)].valid()) {
      throw ProbeError(kExitUsage,
                       StrPrintf("rendezvous: two processes claim rank %d (the second from %s)",
                                 peer.rank, address.c_str()));
    }
    if (peer.rank == c.world_size - 1) {
      // Rank W-1 connects to rank 0's ring port; give it the address it already reached us on.
      c.peers[0].address = LocalAddress(conn.get());
    }
    c.to_rank[static_cast<size_t>(peer.rank)] = std::move(conn);
    c.peers[static_cast<size_t>(peer.rank)] = std::move(peer);
    ++joined;
  }
}

void ConnectRing(Cluster& c, const Fd& ring_listener) {
  const PeerInfo& next = c.peers[static_cast<size_t>(c.next_rank())];
  c.ring_next = ConnectWithRetry(next.address, next.ring_port, c.timeout_s,
                                 StrPrintf("ring setup: rank %d", next.rank));
  WireWriter hello;
  hello.U32(kHelloMagic);
  hello.U32(static_cast<uint32_t>(c.rank));
  SendMessage(c.ring_next.get(), next.rank, hello.data(), c.timeout_s, "ring setup");

  const auto deadline = DeadlineAfter(c.timeout_s);
  for (;;) {
    Fd conn = AcceptUntil(ring_listener.get(), deadline);
    if (!conn.valid()) throw TimeoutError(c.timeout_s, c.prev_rank(), "ring setup");
    WireReader r(RecvMessage(conn.get(), c.prev_rank(), c.timeout_s, "ring setup"));
    const uint32_t magic = r.U32();
    const int from = static_cast<int>(r.U32());
    if (magic == kHelloMagic && from == c.prev_rank()) {
      c.ring_prev = std::move(conn);
      return;
    }
    LogWarning(
        StrPrintf("ring setup: ignoring a connection from %s (claims rank %d, expected "
                  "%d)",
                  PeerAddress(conn.get()).c_str(), from, c.prev_rank()));
  }
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

void SendRecv(const Outgoing& out, const Incoming& in, double timeout_s, std::string_view phase) {
  size_t sent = 0;
  size_t received = 0;
  auto deadline = DeadlineAfter(timeout_s);
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
    const int rc = ::poll(fds, count, PollMs(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw ProbeError(kExitComm, "poll failed: " + Errno(errno));
    }
    if (rc == 0) {
      if (Clock::now() < deadline) continue;
      // Blame the peer we wait to hear from; if only sending, the receiver that stopped reading.
      throw TimeoutError(timeout_s, received < in.size ? in.peer : out.peer, phase);
    }
    bool progress = false;
    if (recv_index >= 0 && fds[recv_index].revents != 0) {
      const ssize_t n =
          ::recv(in.fd, static_cast<char*>(in.data) + received, in.size - received, 0);
      if (n > 0) {
        received += static_cast<size_t>(n);
        progress = true;
      } else if (n == 0) {
        throw LostError(in.peer, phase, "peer closed the connection");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw LostError(in.peer, phase, Errno(errno));
      }
    }
    if (send_index >= 0 && fds[send_index].revents != 0) {
      const ssize_t n =
          ::send(out.fd, static_cast<const char*>(out.data) + sent, out.size - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw LostError(out.peer, phase, Errno(errno));
      }
    }
    if (progress) deadline = DeadlineAfter(timeout_s);
  }
}

void WireWriter::U32(uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    data_.push_back(static_cast<char>((value >> shift) & 0xFFU));
  }
}

void WireWriter::U64(uint64_t value) {
  U32(static_cast<uint32_t>(value >> 32));
  U32(static_cast<uint32_t>(value & 0xFFFFFFFFU));
}

void WireWriter::Bytes(std::string_view bytes) {
  U32(static_cast<uint32_t>(bytes.size()));
  data_.append(bytes);
}

void WireReader::Need(size_t n) const {
  if (data_.size() - pos_ < n) throw ProbeError(kExitComm, "malformed control message");
}

uint32_t WireReader::U32() {
  Need(4);
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(data_[pos_++]);
  return value;
}

uint64_t WireReader::U64() {
  const uint64_t high = U32();
  return (high << 32) | U32();
}

std::string WireReader::Bytes() {
  const uint32_t n = U32();
  Need(n);
  std::string out(data_.substr(pos_, n));
  pos_ += n;
  return out;
}

Cluster Rendezvous(const Identity& identity, double timeout_s) {
  Cluster c;
  c.rank = identity.rank;
  c.world_size = identity.world_size;
  c.timeout_s = timeout_s;
  c.master_endpoint = identity.master_addr + ":" + std::to_string(identity.rendezvous_port);
  PeerInfo self;
  self.rank = identity.rank;
  self.node_rank = identity.node_rank;
  self.local_rank = identity.local_rank;
  self.hostname = HostName();
  if (c.world_size == 1) {
    self.address = "-";
    c.peers.push_back(self);
    return c;
  }

  // Listen for our ring predecessor before anyone can learn our port.
  const Fd ring_listener = Listen(0, 8, "ring setup");
  self.ring_port = LocalPort(ring_listener.get());

  if (c.rank == 0) {
    const Fd master_listener = Listen(identity.rendezvous_port, std::max(c.world_size, 16),
                                      "rendezvous (" + identity.rendezvous_port_source + ")");
    GatherHellos(c, master_listener, self);
    const std::string table = EncodeTable(c.peers);
    for (int r = 1; r < c.world_size; ++r) {
      SendMessage(c.to_rank[static_cast<size_t>(r)].get(), r, table, c.timeout_s, "rendezvous");
    }
  } else {
    c.to_master = ConnectWithRetry(
        identity.master_addr, identity.rendezvous_port, timeout_s,
        "rendezvous: rank 0 (MASTER_ADDR, " + identity.rendezvous_port_source + ")");
    WireWriter hello;
    hello.U32(kHelloMagic);
    hello.U32(kProtocolVersion);
    hello.U32(static_cast<uint32_t>(c.rank));
    hello.U32(static_cast<uint32_t>(c.world_size));
    hello.U32(static_cast<uint32_t>(self.node_rank));
    hello.U32(static_cast<uint32_t>(self.local_rank));
    hello.U32(static_cast<uint32_t>(self.ring_port));
    hello.Bytes(self.hostname);
    SendMessage(c.to_master.get(), 0, hello.data(), c.timeout_s, "rendezvous");
    c.peers =
        DecodeTable(RecvMessage(c.to_master.get(), 0, c.timeout_s, "rendezvous"), c.world_size);
  }
  ConnectRing(c, ring_listener);
  return c;
}

std::vector<std::string> GatherToRoot(Cluster& cluster, const std::string& message,
                                      std::string_view phase) {
  if (cluster.rank != 0) {
    SendMessage(cluster.to_master.get(), 0, message, cluster.timeout_s, phase);
    return {};
  }
  std::vector<std::string> all(static_cast<size_t>(cluster.world_size));
  all[0] = message;
  for (int r = 1; r < cluster.world_size; ++r) {
    all[static_cast<size_t>(r)] =
        RecvMessage(cluster.to_rank[static_cast<size_t>(r)].get(), r, cluster.timeout_s, phase);
  }
  return all;
}

std::string BroadcastFromRoot(Cluster& cluster, const std::string& message,
                              std::string_view phase) {
  if (cluster.rank != 0) {
    return RecvMessage(cluster.to_master.get(), 0, cluster.timeout_s, phase);
  }
  for (int r = 1; r < cluster.world_size; ++r) {
    SendMessage(cluster.to_rank[static_cast<size_t>(r)].get(), r, message, cluster.timeout_s,
                phase);
  }
  return message;
}

void Barrier(Cluster& cluster, std::string_view phase) {
  GatherToRoot(cluster, "", phase);
  BroadcastFromRoot(cluster, "", phase);
}

int PeerLinks::fd(int peer) const {
  const auto it = links_.find(peer);
  if (it == links_.end()) {
    throw ProbeError(kExitInternal, StrPrintf("no connection to rank %d (group setup)", peer));
  }
  return it->second.get();
}

namespace {

std::vector<int> ExchangePorts(Cluster& cluster, int my_port) {
  WireWriter mine;
  mine.U32(static_cast<uint32_t>(my_port));
  WireWriter table;
  if (cluster.rank == 0) {
    for (const std::string& port : GatherToRoot(cluster, mine.data(), "group setup")) {
      table.U32(WireReader(port).U32());
    }
  } else {
    GatherToRoot(cluster, mine.data(), "group setup");
  }
  WireReader all(BroadcastFromRoot(cluster, table.data(), "group setup"));
  std::vector<int> ports;
  for (int r = 0; r < cluster.world_size; ++r) ports.push_back(static_cast<int>(all.U32()));
  return ports;
}

}  // namespace

PeerLinks ConnectPeers(Cluster& cluster, const std::vector<int>& peers) {
  PeerLinks links;
  if (cluster.world_size == 1) return links;
  std::vector<int> lower;
  for (const int peer : peers) {
    if (peer < cluster.rank) lower.push_back(peer);
  }
  const Fd listener = Listen(0, static_cast<int>(lower.size()) + 8, "group setup");
  const std::vector<int> ports = ExchangePorts(cluster, LocalPort(listener.get()));
  for (const int peer : peers) {
    if (peer < cluster.rank) continue;
    const PeerInfo& info = cluster.peers[static_cast<size_t>(peer)];
    Fd fd = ConnectWithRetry(info.address, ports[static_cast<size_t>(peer)], cluster.timeout_s,
                             StrPrintf("group setup: rank %d", peer));
    WireWriter hello;
    hello.U32(kHelloMagic);
    hello.U32(static_cast<uint32_t>(cluster.rank));
    SendMessage(fd.get(), peer, hello.data(), cluster.timeout_s, "group setup");
    links.Add(peer, std::move(fd));
  }
  const auto deadline = DeadlineAfter(cluster.timeout_s);
  size_t accepted = 0;
  while (accepted < lower.size()) {
    Fd conn = AcceptUntil(listener.get(), deadline);
    if (!conn.valid()) throw TimeoutError(cluster.timeout_s, lower[accepted], "group setup");
    WireReader r(RecvMessage(conn.get(), -1, cluster.timeout_s, "group setup"));
    const uint32_t magic = r.U32();
    const int from = static_cast<int>(r.U32());
    if (magic != kHelloMagic || std::find(lower.begin(), lower.end(), from) == lower.end() ||
        links.has(from)) {
      LogWarning(StrPrintf("group setup: ignoring a connection from %s (claims rank %d)",
                           PeerAddress(conn.get()).c_str(), from));
      continue;
    }
    links.Add(from, std::move(conn));
    ++accepted;
  }
  return links;
}

}  // namespace bridge::probe
