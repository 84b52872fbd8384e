// SPDX-License-Identifier: Apache-2.0
// Control plane, socket half: epoll loop, accept, reads/writes, timeouts, shutdown.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <thread>

#include "aggregator/control/control_ids.h"
#include "aggregator/control/control_plane.h"
#include "aggregator/util/random.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

constexpr auto kHttpTimeout = std::chrono::seconds(5);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr int kWaitMs = 50;  // longest epoll_wait of one turn of the control loop
constexpr auto kMinStall = std::chrono::milliseconds(250);

// True when the listener's accept queue holds a connection.
bool connection_waiting(int listen_fd) {
  pollfd p{listen_fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

void epoll_add(int epfd, int fd, ConnId id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace

void ControlPlane::run() {
  constexpr int kMaxEvents = 64;
  constexpr int kMaxDrainRounds = 16;  // bounds one turn under a flood, so ticks still run
  epoll_event evs[kMaxEvents];
  // A turn longer than this (beyond its wait) is a stall of this thread, not of the workers.
  // The floor keeps ordinary turns from counting when worker_timeout_ms is tiny.
  const Clock::duration stall =
      std::max<Clock::duration>(std::chrono::milliseconds(cfg_.worker_timeout_ms / 2), kMinStall);
  // Measured from one turn's `now` to the next, so that a stop anywhere in the loop counts,
  // also one that lands in tick() or reap() (a gap from the start of each wait missed those).
  Clock::time_point last = Clock::now();
  while (!stopping_.load(std::memory_order_acquire)) {
    int n = epoll_wait(epfd_, evs, kMaxEvents, kWaitMs);
    // EINTR: a signal, or a stop (SIGSTOP, a debugger) followed by SIGCONT, which interrupts
    // epoll_wait even without a handler (signal(7)). Either way: read what is waiting below.
    if (n < 0 && errno != EINTR) {
      if (uint64_t s = 0; may_log(LogKind::kLoop, &s)) {
        spdlog::error("control loop: epoll_wait: {} ({} similar suppressed)", std::strerror(errno),
                      s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // never spin on it
    }
    // Read all input that is already waiting before judging anyone's silence: more than one
    // batch of events, and whatever piled up while this thread did not run.
    for (int round = 0; round < kMaxDrainRounds && !stopping_.load(std::memory_order_acquire);
         ++round) {
      if (n > 0) handle_events(evs, n);
      if (round > 0 && n < kMaxEvents) break;
      n = epoll_wait(epfd_, evs, kMaxEvents, 0);
      if (n <= 0) break;
    }
    const Clock::time_point now = Clock::now();
    const Clock::duration gap = now - last - std::chrono::milliseconds(kWaitMs);
    last = now;
    if (gap >= stall) on_stall(gap, now);
    if (reload_requested_.exchange(false, std::memory_order_acq_rel)) reload();
    tick(now);
    reap();
  }
  shutdown_all();
}

void ControlPlane::handle_events(const epoll_event* evs, int n) {
  for (int i = 0; i < n; ++i) {
    const ConnId id = evs[i].data.u64;
    if (id == kStopEvent) continue;  // stopping_ is already set
    if (id == kUplinkEvent) {
      manager_.on_uplink_events(*this);
      continue;
    }
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
}

void ControlPlane::on_stall(Clock::duration gap, Clock::time_point now) {
  // This thread did not run (the process was stopped, a VM paused, the host starved it): the
  // silence was ours, not the workers'. Input that arrived meanwhile has been read; restart
  // every joined or joining worker's silence timer and the rendezvous deadlines. The Join
  // deadline of connections that never joined is not moved.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(gap).count();
  counters_.loop_stalls.inc();
  if (uint64_t s = 0; may_log(LogKind::kLoop, &s)) {
    spdlog::warn(
        "control loop did not run for {} ms (process stopped or starved; worker timeout {} ms): "
        "restarting the workers' silence timers ({} similar suppressed)",
        ms, cfg_.worker_timeout_ms, s);
  }
  for (auto& [id, c] : conns_) {
    if (!c.dead && c.kind == Connection::Kind::kControl) c.last_rx = std::max(c.last_rx, now);
  }
  manager_.postpone(gap);
}

bool ControlPlane::may_log(LogKind kind, uint64_t* suppressed) {
  return log_limits_[static_cast<size_t>(kind)].allow(suppressed);
}

void ControlPlane::accept_all(int listen_fd, Connection::Kind kind) {
  for (int i = 0; i < 1024; ++i) {  // bounded: a flood of connects cannot starve the loop
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    const int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // accept() takes a descriptor before it looks for a connection: out of descriptors, it
      // fails so with none waiting too. Then there is nothing to make room for.
      if ((err == EMFILE || err == ENFILE) && !connection_waiting(listen_fd)) return;
      // Out of descriptors: a control connection takes the place of the oldest one that has
      // not joined, closed now, and is accepted again. (A metrics request evicts nobody.)
      if ((err == EMFILE || err == ENFILE) && kind == Connection::Kind::kControl &&
          evict_oldest(RefuseReason::kNoFds, nullptr)) {
        continue;
      }
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        if (!out_of_fds(listen_fd, err)) return;
        continue;  // one waiting connection shed: the next may be waiting too
      }
      if (uint64_t s = 0; may_log(LogKind::kAccept, &s)) {
        spdlog::warn("accept: {} ({} similar suppressed)", std::strerror(err), s);
      }
      return;
    }
    if (kind == Connection::Kind::kControl && !make_room(peer)) {
      close(fd);  // refused before any byte: no ServerHello, no state
      continue;
    }
    const ConnId id = next_id_++;
    Connection& c = conns_[id];
    c.id = id;
    c.fd = fd;
    c.kind = kind;
    c.peer = peer;
    c.accepted = Clock::now();
    c.last_rx = c.accepted;
    epoll_add(epfd_, fd, id, EPOLLIN | EPOLLRDHUP);
    if (kind == Connection::Kind::kMetrics) continue;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    count_in(c);
    char addr[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof(addr));
    spdlog::debug("control connection {} from {}:{}", id, addr, ntohs(peer.sin_port));
    c.nonce = random_u64();
    proto::ServerHello hello;
    hello.nonce = c.nonce;
    hello.support_mask = (uint64_t{1} << (kNumDTypes * kNumOps)) - 1;  // every (dtype, op)
    hello.max_payload_bytes = static_cast<uint32_t>(cfg_.max_payload_bytes);
    hello.max_slots_per_job = static_cast<uint32_t>(cfg_.max_slots_per_job);
    hello.auth_required = cfg_.auth_required() ? 1 : 0;
    send(c, hello);
  }
}

bool ControlPlane::make_room(const sockaddr_in& peer) {
  // Oldest first: a rank's connection joins within a round trip of its ServerHello, so it
  // survives unless as many newer connections as the limit arrive first (the plugin then
  // connects again); a flood of connections opened before it is evicted, not the rank.
  const uint32_t addr = peer.sin_addr.s_addr;
  RefuseReason why = RefuseReason::kCount;
  uint64_t open = 0;
  if (auto it = conns_per_addr_.find(addr);
      it != conns_per_addr_.end() &&
      it->second.open >= static_cast<uint64_t>(cfg_.max_control_connections_per_addr)) {
    open = it->second.open;
    if (!evict_oldest(RefuseReason::kAddrLimit, &addr)) why = RefuseReason::kAddrLimit;
  }
  if (why == RefuseReason::kCount &&
      counters_.connections_open.get() >= static_cast<uint64_t>(max_conns_)) {
    open = counters_.connections_open.get();
    if (!evict_oldest(RefuseReason::kTotalLimit, nullptr)) why = RefuseReason::kTotalLimit;
  }
  if (why == RefuseReason::kCount) return true;
  counters_.refused[static_cast<int>(why)].inc();
  if (uint64_t s = 0; may_log(LogKind::kRefused, &s)) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
    spdlog::warn(
        "control connection from {} refused: {} open{}, every one joined ({} similar suppressed)",
        text, open,
        why == RefuseReason::kTotalLimit
            ? fmt::format(" (max_control_connections: {})", max_conns_)
            : fmt::format(" from it (max_control_connections_per_addr: {})",
                          cfg_.max_control_connections_per_addr),
        s);
  }
  return false;
}

bool ControlPlane::evict_oldest(RefuseReason why, const uint32_t* addr) {
  const std::set<ConnId>* from = &pre_join_;
  if (addr != nullptr) {
    auto a = conns_per_addr_.find(*addr);
    if (a == conns_per_addr_.end()) return false;
    from = &a->second.pre_join;
  }
  if (from->empty()) return false;
  auto it = conns_.find(*from->begin());
  if (it == conns_.end()) return false;  // cannot happen: destroy() keeps the sets in step
  const Connection& c = it->second;
  if (!c.dead) {  // a dead one was closing anyway: reaped early, not counted
    counters_.evicted[static_cast<int>(why)].inc();
    if (uint64_t s = 0; may_log(LogKind::kRefused, &s)) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &c.peer.sin_addr, text, sizeof(text));
      const auto age =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.accepted);
      spdlog::warn(
          "control connection {} from {} closed without a Join after {} ms to make room for a "
          "new one ({}) ({} similar suppressed)",
          c.id, text, age.count(),
          why == RefuseReason::kTotalLimit  ? fmt::format("max_control_connections: {}", max_conns_)
          : why == RefuseReason::kAddrLimit ? fmt::format("max_control_connections_per_addr: {}",
                                                          cfg_.max_control_connections_per_addr)
                                            : std::string("out of file descriptors"),
          s);
    }
  }
  destroy(it);
  return true;
}

void ControlPlane::count_in(const Connection& c) {
  counters_.connections_total.inc();
  counters_.connections_open.inc();
  AddrConns& a = conns_per_addr_[c.peer.sin_addr.s_addr];
  ++a.open;
  a.pre_join.insert(c.id);
  pre_join_.insert(c.id);
}

void ControlPlane::mark_joined(Connection& c) {
  c.joined = true;
  pre_join_.erase(c.id);
  if (auto a = conns_per_addr_.find(c.peer.sin_addr.s_addr); a != conns_per_addr_.end()) {
    a->second.pre_join.erase(c.id);
  }
}

bool ControlPlane::out_of_fds(int listen_fd, int err) {
  // The connection stays in the backlog and the listener stays readable: accepting again on
  // the next turn would spin. Give up the spare descriptor, accept the connection and close it
  // (the peer sees a close, not a hang), and take the spare back. If even that fails (say the
  // system-wide table is full), stop polling the listeners for a while.
  bool shed = false;
  if (reserve_fd_ >= 0) {
    close(reserve_fd_);
    reserve_fd_ = -1;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      shed = true;
      counters_.refused[static_cast<int>(RefuseReason::kNoFds)].inc();
    }
    reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (!shed) pause_listeners(true);
  if (uint64_t s = 0; may_log(LogKind::kAccept, &s)) {
    spdlog::warn("accept: {}: {} ({} similar suppressed)", std::strerror(err),
                 shed ? "connection closed at once" : "not accepting for 100 ms", s);
  }
  return shed;
}

void ControlPlane::pause_listeners(bool pause) {
  if (listeners_paused_ == pause) return;
  listeners_paused_ = pause;
  resume_listeners_ = Clock::now() + kAcceptPause;
  const std::pair<int, ConnId> listeners[] = {{control_fd_, kControlListener},
                                              {metrics_fd_, kMetricsListener}};
  for (const auto& [fd, id] : listeners) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = pause ? 0u : uint32_t{EPOLLIN};
    ev.data.u64 = id;
    epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
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
    auto next = std::next(it);
    if (it->second.dead) destroy(it);
    it = next;
  }
}

void ControlPlane::destroy(std::unordered_map<ConnId, Connection>::iterator it) {
  Connection& c = it->second;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
  close(c.fd);
  if (c.kind == Connection::Kind::kControl) {
    counters_.connections_open.set(counters_.connections_open.get() - 1);
    pre_join_.erase(c.id);
    auto per = conns_per_addr_.find(c.peer.sin_addr.s_addr);
    if (per != conns_per_addr_.end()) {
      per->second.pre_join.erase(c.id);
      if (--per->second.open == 0) conns_per_addr_.erase(per);
    }
  }
  conns_.erase(it);
}

void ControlPlane::tick(Clock::time_point now) {
  if (listeners_paused_ && now >= resume_listeners_) pause_listeners(false);
  if (reserve_fd_ < 0) reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);  // lost in a race
  manager_.on_tick(now, *this);
  multicast_.on_tick(now, *this);
  apply_egress_cap();
  const auto silence = std::chrono::milliseconds(cfg_.worker_timeout_ms);
  const auto heartbeat = std::chrono::milliseconds(cfg_.heartbeat_ms);
  const auto join_deadline = std::chrono::milliseconds(cfg_.control_join_timeout_ms);
  for (auto& [id, c] : conns_) {
    if (c.dead) continue;
    using S = Connection::State;
    if (c.state == S::kClosing) {
      if (now >= c.close_deadline) c.dead = true;
    } else if (c.kind == Connection::Kind::kMetrics) {
      if (now - c.last_rx > kHttpTimeout) c.dead = true;
    } else if (c.state == S::kHello && now - c.accepted > join_deadline) {
      counters_.join_deadline_closes.inc();
      if (uint64_t s = 0; may_log(LogKind::kNoJoin, &s)) {
        spdlog::warn(
            "control connection {}: no Join within {} ms (control_join_timeout_ms): closing ({} "
            "similar suppressed)",
            id, cfg_.control_join_timeout_ms, s);
      }
      close_later(c);
    } else if (c.state != S::kPending && now - c.last_rx > silence) {
      counters_.worker_timeouts.inc();
      if (uint64_t s = 0; may_log(LogKind::kSilent, &s)) {
        spdlog::warn(
            "control connection {} (job {} rank {}) silent for {} ms: closing ({} similar "
            "suppressed)",
            id, c.job_id, c.rank, cfg_.worker_timeout_ms, s);
      }
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
