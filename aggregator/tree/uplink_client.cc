// SPDX-License-Identifier: Apache-2.0
#include "aggregator/tree/uplink_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "conflux/common/thread_name.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

using Clock = std::chrono::steady_clock;
using Kind = UplinkEvent::Kind;

namespace {

constexpr int kPollMs = 100;
constexpr auto kHeartbeat = std::chrono::milliseconds(1000);

void signal_fd(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

void drain_fd(int fd) {
  uint64_t v = 0;
  (void)!read(fd, &v, sizeof v);
}

}  // namespace

struct UplinkClient::Link {
  enum class State : uint8_t { kConnecting, kHello, kJoining, kMember };
  proto::Join join;
  int fd = -1;
  State state = State::kConnecting;
  std::vector<uint8_t> rbuf;
  Clock::time_point deadline{};  // connect + hello, then the parent's rendezvous
  Clock::time_point last_rx{};
  Clock::time_point last_heartbeat{};
  bool done = false;

  ~Link() {
    if (fd >= 0) close(fd);
  }
  // Small frames on a fresh connection: the socket buffer takes them whole, or the link is
  // no use anyway.
  bool send(const proto::ControlMsg& m) {
    std::vector<uint8_t> out;
    proto::encode_control(m, out);
    return ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
           static_cast<ssize_t>(out.size());
  }
};

UplinkClient::UplinkClient(UplinkConfig cfg) : cfg_(std::move(cfg)) {}

UplinkClient::~UplinkClient() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  if (wake_fd_ >= 0) signal_fd(wake_fd_);
  if (thread_.joinable()) thread_.join();
  for (int fd : {event_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

Status UplinkClient::start() {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0 || wake_fd_ < 0) {
    return system_error(fmt::format("eventfd: {}", std::strerror(errno)));
  }
  thread_ = std::thread([this] {
    name_this_thread("cfx-uplink");
    run();
  });
  return {};
}

void UplinkClient::join(const proto::Join& join) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    requests_.push_back({Request::Kind::kJoin, join});
  }
  signal_fd(wake_fd_);
}

void UplinkClient::direct_down(uint64_t job_key, const proto::DirectDown& d) {
  proto::Join j;
  j.job_key = job_key;
  {
    std::lock_guard<std::mutex> lk(mu_);
    requests_.push_back({Request::Kind::kDirectDown, j, d});
  }
  signal_fd(wake_fd_);
}

void UplinkClient::leave(uint64_t job_key) {
  proto::Join j;
  j.job_key = job_key;
  {
    std::lock_guard<std::mutex> lk(mu_);
    requests_.push_back({Request::Kind::kLeave, j});
  }
  signal_fd(wake_fd_);
}

std::vector<UplinkEvent> UplinkClient::take_events() {
  drain_fd(event_fd_);
  std::lock_guard<std::mutex> lk(mu_);
  return std::move(events_);
}

void UplinkClient::post(UplinkEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  signal_fd(event_fd_);
}

void UplinkClient::finish(Link& l, Kind kind, proto::Status s, std::string why) {
  if (l.done) return;
  l.done = true;
  UplinkEvent e;
  e.kind = l.state == Link::State::kMember && kind == Kind::kFailed ? Kind::kLost : kind;
  e.job_key = l.join.job_key;
  e.status = s;
  e.why = std::move(why);
  post(std::move(e));
}

void UplinkClient::take_requests(std::vector<std::unique_ptr<Link>>& links) {
  std::vector<Request> reqs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    reqs.swap(requests_);
  }
  drain_fd(wake_fd_);
  const auto now = Clock::now();
  for (Request& r : reqs) {
    if (r.kind == Request::Kind::kDirectDown) {
      for (auto& l : links) {
        if (l->join.job_key == r.msg.job_key && !l->done && l->state == Link::State::kMember) {
          (void)l->send(r.direct);  // lost with the link: the results then come through here
        }
      }
      continue;
    }
    if (r.kind == Request::Kind::kLeave) {
      for (auto& l : links) {
        if (l->join.job_key != r.msg.job_key || l->done) continue;
        if (l->state == Link::State::kMember) (void)l->send(proto::Leave{});
        l->done = true;  // asked for: no event
      }
      continue;
    }
    auto l = std::make_unique<Link>();
    l->join = r.msg;
    l->join.udp_addr = 0;  // the address this leaf reaches the parent from
    l->join.udp_port = cfg_.data_ports.front();
    l->join.data_ports = cfg_.data_ports;
    l->deadline = now + cfg_.connect_timeout;
    l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (l->fd >= 0) setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (l->fd < 0 ||
        (connect(l->fd, reinterpret_cast<const sockaddr*>(&cfg_.parent), sizeof cfg_.parent) != 0 &&
         errno != EINPROGRESS)) {
      finish(*l, Kind::kFailed, proto::Status::kInternal,
             fmt::format("cannot connect to the parent aggregator: {}", std::strerror(errno)));
    }
    links.push_back(std::move(l));
  }
}

bool UplinkClient::service(Link& l) {
  using S = Link::State;
  if (l.state == S::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(l.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      finish(l, Kind::kFailed, proto::Status::kInternal,
             fmt::format("cannot connect to the parent aggregator: {}", std::strerror(err)));
      return false;
    }
    l.state = S::kHello;
  }
  uint8_t buf[4096];
  bool eof = false;  // handled after the frames before it (an Error says why)
  for (;;) {
    const ssize_t n = recv(l.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      l.rbuf.insert(l.rbuf.end(), buf, buf + n);
      l.last_rx = Clock::now();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    eof = true;
    break;
  }
  size_t pos = 0;
  while (!l.done) {
    proto::ControlMsg m;
    size_t used = 0;
    const auto r = proto::parse_control(std::span(l.rbuf).subspan(pos), &m, &used);
    if (r == proto::ControlParse::kNeedMore) break;
    if (r != proto::ControlParse::kOk) {
      finish(l, Kind::kFailed, proto::Status::kBadMessage,
             fmt::format("malformed frame from the parent: {}", proto::control_parse_name(r)));
      return false;
    }
    pos += used;
    if (const auto* h = std::get_if<proto::ServerHello>(&m); h != nullptr && l.state == S::kHello) {
      if (h->auth_required != 0 && cfg_.secret.empty()) {
        finish(l, Kind::kFailed, proto::Status::kAuthFailed,
               "the parent aggregator requires a secret and this one has none");
        return false;
      }
      l.join.auth_mac = proto::join_mac(cfg_.secret, h->nonce, l.join);
      if (!l.send(l.join)) {
        finish(l, Kind::kFailed, proto::Status::kInternal, "sending Join to the parent failed");
        return false;
      }
      l.state = S::kJoining;
      l.deadline = Clock::now() + std::chrono::milliseconds(l.join.join_timeout_ms) +
                   std::chrono::seconds(1);
    } else if (const auto* a = std::get_if<proto::JoinAck>(&m);
               a != nullptr && l.state == S::kJoining) {
      if (a->status != proto::Status::kOk) {
        finish(l, Kind::kFailed, a->status,
               fmt::format("the parent aggregator answered {}", proto::status_name(a->status)));
        return false;
      }
      sockaddr_in peer{};
      socklen_t len = sizeof peer;
      getpeername(l.fd, reinterpret_cast<sockaddr*>(&peer), &len);
      l.state = S::kMember;
      l.last_heartbeat = Clock::now();
      UplinkEvent e;
      e.kind = Kind::kJoined;
      e.job_key = l.join.job_key;
      e.ack = *a;
      e.parent_ip = peer.sin_addr.s_addr;
      e.status = proto::Status::kOk;
      post(std::move(e));
    } else if (const auto* hb = std::get_if<proto::Heartbeat>(&m)) {
      (void)l.send(proto::HeartbeatAck{hb->time_ns});
    } else if (std::holds_alternative<proto::HeartbeatAck>(m)) {
      // last_rx already moved
    } else if (const auto* e = std::get_if<proto::Error>(&m)) {
      finish(l, Kind::kFailed, e->status,
             fmt::format("the parent aggregator sent Error {} ({})", proto::status_name(e->status),
                         e->text));
      return false;
    } else if (std::holds_alternative<proto::Shutdown>(m)) {
      finish(l, Kind::kFailed, proto::Status::kShuttingDown, "the parent aggregator shut down");
      return false;
    } else {
      finish(
          l, Kind::kFailed, proto::Status::kBadMessage,
          fmt::format("unexpected {} from the parent", proto::msg_type_name(proto::msg_type(m))));
      return false;
    }
  }
  l.rbuf.erase(l.rbuf.begin(), l.rbuf.begin() + static_cast<ptrdiff_t>(pos));
  if (eof) {
    finish(l, Kind::kFailed, proto::Status::kInternal,
           "the parent aggregator closed the connection");
  }
  return !l.done;
}

void UplinkClient::run() {
  std::vector<std::unique_ptr<Link>> links;
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
    }
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    for (auto& l : links) {
      const short ev = l->state == Link::State::kConnecting ? POLLOUT : POLLIN;
      fds.push_back({l->fd, ev, 0});
    }
    (void)poll(fds.data(), fds.size(), kPollMs);
    if (fds[0].revents != 0) take_requests(links);
    const auto now = Clock::now();
    for (size_t i = 0; i + 1 < fds.size() && i < links.size(); ++i) {
      Link& l = *links[i];
      if (l.done) continue;
      if (fds[i + 1].revents != 0 && !service(l)) continue;
      if (l.state == Link::State::kMember) {
        if (now - l.last_rx > cfg_.silence) {
          finish(l, Kind::kLost, proto::Status::kInternal, "the parent aggregator fell silent");
        } else if (now - l.last_heartbeat >= kHeartbeat) {
          l.last_heartbeat = now;
          (void)l.send(proto::Heartbeat{static_cast<uint64_t>(now.time_since_epoch().count())});
        }
      } else if (now > l.deadline) {
        finish(l, Kind::kFailed,
               l.state == Link::State::kJoining ? proto::Status::kJoinTimeout
                                                : proto::Status::kInternal,
               "the parent aggregator did not answer in time");
      }
    }
    std::erase_if(links, [](const std::unique_ptr<Link>& l) { return l->done; });
  }
}

}  // namespace conflux::agg
