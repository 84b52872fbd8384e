// SPDX-License-Identifier: Apache-2.0
#include "fake_aggregator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <deque>
#include <variant>
#include <vector>

#include "conflux/protocol/data.h"

namespace conflux::client::testing {
namespace {

constexpr uint32_t kJobId = 7;

// Binds 127.0.0.1:*port (0: ephemeral) and stores the port bound.
int bind_socket(int type, uint16_t* port) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (type == SOCK_STREAM) {  // a fixed port taken again (UDP: never, see SO_REUSEADDR)
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(*port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

struct Conn {
  int fd = -1;
  std::vector<uint8_t> rx;
  bool joined = false;
  uint32_t rank = 0;
  uint64_t nonce = 0;
};

struct Bank {
  bool used = false;
  bool complete = false;
  uint32_t gen = 0;
  uint64_t bitmap = 0;
  proto::DataHeader first;
  std::vector<uint8_t> acc;
};

void send_frame(int fd, const proto::ControlMsg& m) {
  std::vector<uint8_t> out;
  proto::encode_control(m, out);
  [[maybe_unused]] ssize_t r = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
}

}  // namespace

struct FakeAggregator::State {
  int listen_fd = -1;
  std::vector<int> udp_fds;
  std::vector<uint16_t> udp_ports;
  std::vector<Conn> conns;
  proto::Join job;  // the first Join
  uint32_t joined = 0;
  bool created = false;
  uint32_t granted = 0;
  std::vector<std::array<Bank, 2>> slots;
  std::vector<sockaddr_in> workers;
};

FakeAggregator::FakeAggregator(FakeOptions opt) : opt_(std::move(opt)), st_(new State) {
  control_port_ = opt_.control_port;
  st_->listen_fd = bind_socket(SOCK_STREAM, &control_port_);
  ::listen(st_->listen_fd, 64);
  for (uint32_t i = 0; i < opt_.n_ports; ++i) {
    uint16_t p = 0;
    st_->udp_fds.push_back(bind_socket(SOCK_DGRAM, &p));
    st_->udp_ports.push_back(p);
  }
  thread_ = std::thread([this] { run(); });
}

FakeAggregator::~FakeAggregator() {
  stop_ = true;
  thread_.join();
  for (Conn& c : st_->conns) {
    if (c.fd >= 0) {
      ::close(c.fd);
    }
  }
  for (int fd : st_->udp_fds) {
    ::close(fd);
  }
  ::close(st_->listen_fd);
}

void FakeAggregator::run() {
  State& s = *st_;
  // Distinct per instance, as a real daemon's random job token (job ids may coincide).
  const uint64_t token = 0xABCDEF0000000000ull ^ (uint64_t{control_port_} << 16);
  std::vector<uint8_t> buf(70000);
  // FakeOptions::result_bytes_per_s: results waiting for the bottleneck, and when the next
  // may leave.
  struct Queued {
    int fd;
    sockaddr_in to;
    std::vector<uint8_t> d;
  };
  std::deque<Queued> paced;
  auto next_ns = std::chrono::steady_clock::now();
  auto drain_paced = [&] {
    const auto now = std::chrono::steady_clock::now();
    while (!paced.empty() && next_ns <= now) {
      const Queued& q = paced.front();
      ::sendto(q.fd, q.d.data(), q.d.size(), 0, reinterpret_cast<const sockaddr*>(&q.to),
               sizeof q.to);
      next_ns = std::max(next_ns, now - std::chrono::milliseconds(1)) +
                std::chrono::nanoseconds(q.d.size() * 1'000'000'000 / opt_.result_bytes_per_s);
      paced.pop_front();
    }
  };
  auto send_result = [&](int fd, const Bank& b, uint32_t rank, bool resend) {
    const sockaddr_in& to = s.workers[rank];
    proto::DataHeader h = b.first;
    const bool ack = h.owned() && (opt_.owned == FakeOptions::Owned::kAckToAll ||
                                   (opt_.owned == FakeOptions::Owned::kSpec && h.owner != rank));
    h.type = proto::PacketType::kResult;
    h.flags = (resend ? proto::kFlagRetransmit : 0) | (ack ? proto::kFlagAck : 0);
    h.contributor = 0;
    h.owner = 0;
    std::vector<uint8_t> d(proto::kDataHeaderSize + (ack ? 0 : b.acc.size()));
    proto::encode_data_header(h, d.data());
    if (!ack) std::memcpy(d.data() + proto::kDataHeaderSize, b.acc.data(), b.acc.size());
    if (opt_.result_bytes_per_s != 0) {
      paced.push_back({fd, to, std::move(d)});
      return;
    }
    ::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  };
  uint32_t joins_seen = 0;
  auto on_control = [&](Conn& c, const proto::ControlMsg& m) {
    if (const auto* j = std::get_if<proto::Join>(&m)) {
      if (joins_seen++ < opt_.close_on_join) {
        ::close(c.fd);
        c.fd = -1;
        return;
      }
      if (opt_.auth_required && proto::join_mac(opt_.secret, c.nonce, *j) != j->auth_mac) {
        proto::JoinAck nak;
        nak.status = proto::Status::kAuthFailed;
        send_frame(c.fd, nak);
        return;
      }
      if ((opt_.predates_versions && (j->flags & proto::kJoinFlagVersions) != 0) ||
          (opt_.predates_multicast &&
           (j->flags & (proto::kJoinFlagMulticast | proto::kJoinFlagMulticastNoProbe |
                        proto::kJoinFlagVersions)) != 0)) {
        ++refused_joins_;
        send_frame(c.fd,
                   proto::Error{proto::Status::kBadMessage, "malformed control frame: bad_field"});
        ::shutdown(c.fd, SHUT_RDWR);
        return;
      }
      if (opt_.join_status != proto::Status::kOk) {
        proto::JoinAck nak;
        nak.status = opt_.join_status;
        send_frame(c.fd, nak);
        return;
      }
      if (s.joined == 0) {
        s.job = *j;
      }
      c.joined = true;
      c.rank = j->rank;
      if (s.workers.size() < j->n_workers) {
        s.workers.resize(j->n_workers);
      }
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = j->udp_addr != 0 ? htonl(j->udp_addr) : htonl(INADDR_LOOPBACK);
      a.sin_port = htons(j->udp_port);
      s.workers[j->rank] = a;
      if (++s.joined == s.job.n_workers) {
        s.created = true;
        s.granted = std::min(s.job.requested_slots, opt_.max_slots);
        s.slots.assign(s.granted, {});
        proto::JoinAck ack;
        ack.job_id = kJobId;
        ack.job_token = token;
        ack.granted_slots = s.granted;
        ack.payload_bytes = std::min(s.job.payload_bytes, opt_.max_payload);
        ack.flags = s.job.flags & proto::kJoinFlagDeterministic;
        ack.ports = s.udp_ports;
        for (Conn& o : s.conns) {
          if (o.joined && o.fd >= 0) {
            send_frame(o.fd, ack);
            if (s.job.flags & proto::kJoinFlagCapacity) send_frame(o.fd, opt_.capacity);
          }
        }
      }
    } else if (const auto* hb = std::get_if<proto::Heartbeat>(&m)) {
      send_frame(c.fd, proto::HeartbeatAck{hb->time_ns});
    } else if (std::holds_alternative<proto::Leave>(m)) {
      ++leaves_;
    }
  };
  auto on_data = [&](int fd, const uint8_t* d, size_t len) {
    proto::DataHeader h;
    const uint8_t* payload = nullptr;
    if (!s.created ||
        proto::parse_data({d, len}, opt_.max_payload, &h, &payload) != proto::DropReason::kOk) {
      return;
    }
    if (h.type != proto::PacketType::kContrib || h.job_id != kJobId || h.job_token != token ||
        h.slot >= s.granted || h.contributor >= s.job.n_workers) {
      return;
    }
    ++contributions_;
    if (h.flags & proto::kFlagRetransmit) {
      ++retransmitted_;
    }
    Bank& b = s.slots[h.slot][h.generation % 2];
    const uint64_t bit = uint64_t{1} << h.contributor;
    if (!b.used || (b.complete && h.generation == b.gen + 2)) {
      b = Bank{true, false, h.generation, 0, h, {}};
    }
    if (h.generation != b.gen) {
      return;  // stale or too far ahead
    }
    if (b.complete) {
      ++resent_;
      send_result(fd, b, h.contributor, true);
      return;
    }
    if (b.bitmap & bit) {
      ++duplicates_;
      return;
    }
    if (b.bitmap == 0) {
      b.acc.assign(payload, payload + h.payload_bytes());
    } else if (h.dtype == DType::kFloat32) {
      for (uint32_t i = 0; i < h.count; ++i) {
        float x, y;
        std::memcpy(&x, b.acc.data() + 4 * i, 4);
        std::memcpy(&y, payload + 4 * i, 4);
        x += y;
        std::memcpy(b.acc.data() + 4 * i, &x, 4);
      }
    } else {  // int32
      for (uint32_t i = 0; i < h.count; ++i) {
        uint32_t x, y;
        std::memcpy(&x, b.acc.data() + 4 * i, 4);
        std::memcpy(&y, payload + 4 * i, 4);
        x += y;
        std::memcpy(b.acc.data() + 4 * i, &x, 4);
      }
    }
    b.bitmap |= bit;
    if (static_cast<uint32_t>(std::popcount(b.bitmap)) == s.job.n_workers) {
      b.complete = true;
      for (uint32_t w = 0; w < s.workers.size(); ++w) {
        send_result(fd, b, w, false);
      }
    }
  };

  while (!stop_) {
    if (shutdown_.exchange(false)) {
      for (Conn& c : s.conns) {
        if (c.fd >= 0) {
          send_frame(c.fd, proto::Shutdown{0});
        }
      }
    }
    if (const uint64_t g = grant_.exchange(0); g != 0) {
      proto::Capacity c = opt_.capacity;
      c.share_mbps = static_cast<uint32_t>(g - 1);
      c.reason = grant_why_.load();
      for (Conn& conn : s.conns) {
        if (conn.fd >= 0 && (s.job.flags & proto::kJoinFlagCapacity)) send_frame(conn.fd, c);
      }
    }
    if (close_.exchange(false)) {
      for (Conn& c : s.conns) {
        if (c.fd >= 0) {
          ::close(c.fd);
        }
      }
      s.conns.clear();
    }
    std::vector<pollfd> fds;
    fds.push_back({s.listen_fd, POLLIN, 0});
    for (int fd : s.udp_fds) {
      fds.push_back({fd, POLLIN, 0});
    }
    std::vector<size_t> conn_of;  // fds index - (1 + udp) -> conns index
    for (size_t i = 0; i < s.conns.size(); ++i) {
      if (s.conns[i].fd < 0) {
        continue;
      }
      fds.push_back({s.conns[i].fd, POLLIN, 0});
      conn_of.push_back(i);
    }
    int wait_ms = 5;
    if (!paced.empty()) {
      const auto due = next_ns - std::chrono::steady_clock::now();
      wait_ms = static_cast<int>(
          std::clamp<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(due).count(), 0, 5));
    }
    ::poll(fds.data(), fds.size(), wait_ms);
    drain_paced();
    if (fds[0].revents & POLLIN) {
      Conn c;
      c.fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (connections_++ < opt_.close_before_hello) {
        ::close(c.fd);
        continue;
      }
      if (opt_.hello_error) {
        send_frame(c.fd, *opt_.hello_error);
        ::shutdown(c.fd, SHUT_WR);
        s.conns.push_back(std::move(c));  // closed once the worker closes
        continue;
      }
      c.nonce = 0x1122334455667788ull + s.conns.size();
      proto::ServerHello h;
      h.nonce = c.nonce;
      h.support_mask = opt_.support_mask;
      h.max_payload_bytes = opt_.max_payload;
      h.max_slots_per_job = opt_.max_slots;
      h.auth_required = opt_.auth_required ? 1 : 0;
      send_frame(c.fd, h);
      s.conns.push_back(std::move(c));
    }
    for (size_t i = 0; i < s.udp_fds.size(); ++i) {
      if (!(fds[1 + i].revents & POLLIN)) {
        continue;
      }
      for (;;) {
        const ssize_t n = ::recv(s.udp_fds[i], buf.data(), buf.size(), MSG_DONTWAIT);
        if (n < 0) {
          break;
        }
        if (!silent_) {
          on_data(s.udp_fds[i], buf.data(), static_cast<size_t>(n));
        }
      }
    }
    for (size_t k = 0; k < conn_of.size(); ++k) {
      Conn& c = s.conns[conn_of[k]];
      if (!(fds[1 + s.udp_fds.size() + k].revents & (POLLIN | POLLHUP))) {
        continue;
      }
      uint8_t tmp[4096];
      const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n == 0) {
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      if (n < 0) {
        continue;
      }
      if (silent_) {
        continue;
      }
      c.rx.insert(c.rx.end(), tmp, tmp + n);
      for (;;) {
        proto::ControlMsg m;
        size_t used = 0;
        if (proto::parse_control(c.rx, &m, &used) != proto::ControlParse::kOk) {
          break;
        }
        c.rx.erase(c.rx.begin(), c.rx.begin() + static_cast<ptrdiff_t>(used));
        on_control(c, m);
      }
    }
  }
}

}  // namespace conflux::client::testing
