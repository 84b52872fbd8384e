// Control plane, socket half: epoll loop, accept, reads/writes, timeouts, shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "aggregator/control/control_ids.h"
#include "aggregator/control/control_plane.h"
#include "aggregator/util/random.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

constexpr auto kHttpTimeout = std::chrono::seconds(5);

void epoll_add(int epfd, int fd, ConnId id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace

void ControlPlane::run() {
  epoll_event evs[64];
  // A loop turn normally takes the 50 ms wait at most; a gap this long is the daemon's own.
  const auto stall = std::min<Clock::duration>(
      std::chrono::seconds(1), std::chrono::milliseconds(cfg_.worker_timeout_ms) / 2);
  Clock::time_point last_seen = Clock::now();
  // The time now, after forgiving any gap since the loop last looked (the daemon may be
  // stopped anywhere in a turn, so it looks before and after the handlers).
  const auto look = [&] {
    const Clock::time_point now = Clock::now();
    if (now - last_seen > stall) forgive_stall(now, now - last_seen);
    last_seen = now;
    return now;
  };
  while (!stopping_.load(std::memory_order_acquire)) {
    const int n = epoll_wait(epfd_, evs, 64, 50);
    look();
    if (n < 0) {
      // EINTR (SIGCONT after SIGSTOP, among others): wait again, so that input already
      // pending is read before any connection is judged silent.
      uint64_t suppressed = 0;
      if (errno != EINTR && loop_warn_limit_.allow(&suppressed)) {
        spdlog::warn("epoll_wait: {} ({} similar suppressed)", std::strerror(errno), suppressed);
      }
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const ConnId id = evs[i].data.u64;
      if (id == kStopEvent) continue;  // stopping_ is already set
      if (id == kControlListener) {
        accept_all(control_fd_, Connection::Kind::kControl);
        continue;
      }
      if (id == kMetricsListener) {
        accept_all(metrics_fd_, Connection::Kind::kMetrics);
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second.dead) continue;
      if (evs[i].events & EPOLLOUT) on_writable(it->second);
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) on_readable(it->second);
    }
    tick(look());
    reap();
  }
  shutdown_all();
}

void ControlPlane::accept_all(int listen_fd, Connection::Kind kind) {
  while (true) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    const int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("accept: {}", std::strerror(errno));
      }
      return;
    }
    const ConnId id = next_id_++;
    Connection& c = conns_[id];
    c.id = id;
    c.fd = fd;
    c.kind = kind;
    c.peer = peer;
    c.last_rx = Clock::now();
    epoll_add(epfd_, fd, id, EPOLLIN | EPOLLRDHUP);
    if (kind == Connection::Kind::kMetrics) continue;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    counters_.connections_total.inc();
    counters_.connections_open.inc();
    char addr[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof(addr));
    spdlog::debug("control connection {} from {}:{}", id, addr, ntohs(peer.sin_port));
    c.nonce = random_u64();
    proto::ServerHello hello;
    hello.nonce = c.nonce;
    hello.support_mask = (uint64_t{1} << (kNumDTypes * kNumOps)) - 1;  // every (dtype, op)
    hello.max_payload_bytes = static_cast<uint32_t>(cfg_.max_payload_bytes);
    hello.max_slots_per_job = static_cast<uint32_t>(cfg_.max_slots_per_job);
    hello.auth_required = cfg_.secret.empty() ? 0 : 1;
    send(c, hello);
  }
}

void ControlPlane::on_readable(Connection& c) {
  uint8_t buf[16384];
  while (!c.dead) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.last_rx = Clock::now();
      if (c.state == Connection::State::kClosing) continue;  // discard what follows our Error
      c.rbuf.insert(c.rbuf.end(), buf, buf + n);
      if (c.kind == Connection::Kind::kMetrics) {
        serve_http(c);
      } else {
        parse_frames(c);
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    close_later(c);  // orderly close or error
    return;
  }
}

void ControlPlane::on_writable(Connection& c) { flush(c); }

void ControlPlane::flush(Connection& c) {
  while (c.wpos < c.wbuf.size()) {
    const ssize_t n = ::send(c.fd, c.wbuf.data() + c.wpos, c.wbuf.size() - c.wpos, MSG_NOSIGNAL);
    if (n > 0) {
      c.wpos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch_write(c, true);
      return;
    }
    close_later(c);
    return;
  }
  c.wbuf.clear();
  c.wpos = 0;
  watch_write(c, false);
  if (c.state == Connection::State::kClosing && !c.write_shut) {
    // Lingering close: FIN after our last message, then wait for the peer's FIN (or the
    // deadline) while discarding input, so the peer is not reset before reading it.
    shutdown(c.fd, SHUT_WR);
    c.write_shut = true;
  }
}

void ControlPlane::watch_write(Connection& c, bool on) {
  if (c.epollout == on) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
  ev.data.u64 = c.id;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.epollout = on;
}

void ControlPlane::close_later(Connection& c) {
  forget_membership(c);
  c.state = Connection::State::kClosing;
  c.dead = true;
}

void ControlPlane::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    Connection& c = it->second;
    if (!c.dead) {
      ++it;
      continue;
    }
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    if (c.kind == Connection::Kind::kControl) {
      counters_.connections_open.set(counters_.connections_open.get() - 1);
    }
    it = conns_.erase(it);
  }
}

void ControlPlane::forgive_stall(Clock::time_point now, Clock::duration gap) {
  spdlog::warn(
      "control loop did not run for {} ms (daemon stopped or paused): restarting the "
      "silence timers of {} connection(s)",
      std::chrono::duration_cast<std::chrono::milliseconds>(gap).count(), conns_.size());
  for (auto& [id, c] : conns_) c.last_rx = now;
}

void ControlPlane::tick(Clock::time_point now) {
  manager_.on_tick(now, *this);
  const auto silence = std::chrono::milliseconds(cfg_.worker_timeout_ms);
  const auto heartbeat = std::chrono::milliseconds(cfg_.heartbeat_ms);
  for (auto& [id, c] : conns_) {
    if (c.dead) continue;
    using S = Connection::State;
    if (c.state == S::kClosing) {
      if (now >= c.close_deadline) c.dead = true;
    } else if (c.kind == Connection::Kind::kMetrics) {
      if (now - c.last_rx > kHttpTimeout) c.dead = true;
    } else if (c.state != S::kPending && now - c.last_rx > silence) {
      spdlog::warn("control connection {} (job {} rank {}) silent for {} ms: closing", id, c.job_id,
                   c.rank, cfg_.worker_timeout_ms);
      counters_.worker_timeouts.inc();
      close_later(c);
    } else if (c.state == S::kMember && cfg_.heartbeat_ms > 0 &&
               now - c.last_heartbeat >= heartbeat) {
      c.last_heartbeat = now;
      send(c, proto::Heartbeat{static_cast<uint64_t>(now.time_since_epoch().count())});
    }
  }
}

void ControlPlane::shutdown_all() {
  spdlog::info("control plane stopping: Shutdown to {} connection(s)", conns_.size());
  for (auto& [id, c] : conns_) {
    if (c.dead || c.kind != Connection::Kind::kControl) continue;
    const bool say = c.state != Connection::State::kClosing;
    c.state = Connection::State::kClosing;  // flush() half-closes once Shutdown is written
    if (say) {
      send(c, proto::Shutdown{0});
    } else {
      flush(c);
    }
  }
  // Give the kernel a moment to take what is still queued, then close everything.
  const auto deadline = Clock::now() + std::chrono::milliseconds(300);
  epoll_event evs[64];
  while (Clock::now() < deadline) {
    bool pending = false;
    for (auto& [id, c] : conns_) pending = pending || (!c.dead && !c.write_shut);
    if (!pending) break;
    const int n = epoll_wait(epfd_, evs, 64, 20);
    for (int i = 0; i < n; ++i) {
      auto it = conns_.find(evs[i].data.u64);
      if (it == conns_.end() || it->second.dead) continue;
      if (evs[i].events & EPOLLOUT) flush(it->second);
    }
  }
  uint8_t sink[4096];
  for (auto& [id, c] : conns_) {
    while (!c.dead && recv(c.fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      // unread input at close() would turn our FIN into a reset
    }
    c.dead = true;
  }
  reap();
}

}  // namespace conflux::agg
