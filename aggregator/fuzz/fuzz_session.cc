// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: control sessions against a live confluxd (in process, loopback, with a
// secret), driven through sequences of frames on up to three connections at once. The input is
// a program; any bytes are a valid one. Each record is [op, ...]: connection op % 3, and
// (op / 3) % 8 selects
//   0  connect (and read the ServerHello, whose nonce later Joins sign)
//   1  Join: job key, ranks, rank, flags, slots, payload, timeout and whether the MAC is right
//      from the following bytes (so rendezvous, duplicate ranks and shape conflicts happen)
//   2  Heartbeat        3  Leave
//   4  raw bytes: the next byte is the length, then the bytes
//   5  a valid frame of any type, cut short (the rest never comes)
//   6  close            7  read what the daemon sent: every frame must parse
// Invariants, each an abort when broken: the daemon never sends a malformed frame, and once
// every connection of the program is closed it returns to rest: no open connection, no job.
// A crash or a sanitizer report in the daemon's threads fails the target as well.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/daemon/daemon.h"
#include "aggregator/fuzz/fuzz_program.h"
#include "conflux/protocol/control.h"

namespace {

namespace proto = conflux::proto;
using conflux::agg::Config;
using conflux::agg::Daemon;

constexpr char kSecret[] = "fuzz-session-secret";
constexpr int kConnections = 3;

#define CHECK CONFLUX_FUZZ_CHECK

using Reader = conflux::fuzz::Program;

Daemon& daemon_under_test() {
  static std::unique_ptr<Daemon> d = [] {
    Config c;
    c.listen = "127.0.0.1";
    c.control_port = 0;
    c.data_port = 0;
    c.metrics_port = -1;
    c.threads = 1;
    c.secret = kSecret;
    c.log_level = "off";
    c.join_timeout_ms = 2000;
    conflux::agg::setup_logging(c.log_level);
    std::string err;
    auto daemon = Daemon::create(c, &err);
    CHECK(daemon != nullptr);
    CHECK(daemon->start().ok());
    return daemon;
  }();
  return *d;
}

class Session {
 public:
  ~Session() { close(); }

  bool open() { return fd_ >= 0; }
  void connect(uint16_t port) {
    close();
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd_ >= 0);
    const int one = 1;
    (void)setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    CHECK(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    // The daemon speaks first: ServerHello (it may refuse instead, which closes).
    for (int i = 0; i < 100 && nonce_ == 0 && fd_ >= 0; ++i) read_frames(10);
  }
  void send(const proto::ControlMsg& m, size_t cut = SIZE_MAX) {
    std::vector<uint8_t> b;
    proto::encode_control(m, b);
    write(b.data(), std::min(cut, b.size()));
  }
  void write(const uint8_t* p, size_t n) {
    if (fd_ < 0 || n == 0) return;
    // The daemon may have closed already: no SIGPIPE, and a refused write is no error.
    (void)::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // Reads and parses every frame that arrives within `wait_ms`; closes on EOF.
  void read_frames(int wait_ms) {
    if (fd_ < 0) return;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return;
    uint8_t buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close();
      return;
    }
    if (n > 0) rbuf_.insert(rbuf_.end(), buf, buf + n);
    size_t pos = 0;
    for (;;) {
      proto::ControlMsg m;
      size_t used = 0;
      const auto r = proto::parse_control(std::span(rbuf_).subspan(pos), &m, &used);
      if (r == proto::ControlParse::kNeedMore) break;
      CHECK(r == proto::ControlParse::kOk);  // the daemon never sends a malformed frame
      if (const auto* h = std::get_if<proto::ServerHello>(&m)) nonce_ = h->nonce;
      pos += used;
    }
    rbuf_.erase(rbuf_.begin(), rbuf_.begin() + static_cast<ptrdiff_t>(pos));
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    nonce_ = 0;
    rbuf_.clear();
  }
  uint64_t nonce() const { return nonce_; }

 private:
  int fd_ = -1;
  uint64_t nonce_ = 0;
  std::vector<uint8_t> rbuf_;
};

proto::Join make_join(Reader& in, uint64_t nonce) {
  proto::Join j;
  j.job_key = 0x10b0 + in.byte() % 4;  // few keys: ranks meet in one rendezvous
  j.n_workers = 1 + in.byte() % 4;
  j.rank = in.byte() % 5;  // sometimes out of range
  j.udp_addr = 0;
  j.udp_port = static_cast<uint16_t>(40000 + in.byte());
  const uint8_t bits = in.byte();
  j.flags = bits & 1;
  j.requested_slots = 1 + in.byte() % 64;
  j.payload_bytes = 1 + (uint32_t{in.byte()} << 8 | in.byte());
  j.join_timeout_ms = 100 + uint32_t{in.byte()} * 4;
  j.auth_mac = proto::join_mac(kSecret, nonce, j);
  if (bits & 2) j.auth_mac ^= 1;  // a forger without the secret
  return j;
}

proto::ControlMsg any_frame(Reader& in, uint64_t nonce) {
  switch (in.byte() % 4) {
    case 0:
      return make_join(in, nonce);
    case 1:
      return proto::Heartbeat{};
    case 2:
      return proto::Leave{};
    default:
      return proto::HeartbeatAck{};
  }
}

// Every connection closed: the daemon must come back to no connection and no job.
void check_at_rest(const Daemon& d) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto& c = d.control_counters();
  while (c.connections_open.get() != 0 || c.jobs_active.get() != 0) {
    CHECK(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Daemon& d = daemon_under_test();
  std::array<Session, kConnections> s;
  Reader in(data, size);
  while (in.more()) {
    const uint8_t op = in.byte();
    Session& c = s[op % kConnections];
    const int kind = (op / kConnections) % 8;
    if (kind != 0 && kind != 6 && !c.open()) c.connect(d.control_port());
    switch (kind) {
      case 0:
        c.connect(d.control_port());
        break;
      case 1:
        c.send(make_join(in, c.nonce()));
        break;
      case 2:
        c.send(proto::Heartbeat{});
        break;
      case 3:
        c.send(proto::Leave{});
        break;
      case 4: {
        const std::span<const uint8_t> b = in.bytes(in.byte());
        c.write(b.data(), b.size());
        break;
      }
      case 5: {
        const proto::ControlMsg m = any_frame(in, c.nonce());
        c.send(m, in.byte() % 16);
        break;
      }
      case 6:
        c.close();
        break;
      default:
        c.read_frames(1);
        break;
    }
  }
  for (Session& c : s) c.read_frames(0);
  for (Session& c : s) c.close();
  check_at_rest(d);
  return 0;
}
