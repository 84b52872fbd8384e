// SPDX-License-Identifier: Apache-2.0
// Control plane, setup: listening sockets, epoll and the stop event.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "aggregator/control/control_ids.h"
#include "aggregator/control/control_plane.h"
#include "aggregator/control/fd_budget.h"
#include "aggregator/util/ipv4.h"
#include "aggregator/util/link_speed.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

int listen_tcp(const std::string& addr, uint16_t port, uint16_t* bound, std::string* err) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = fmt::format("tcp socket: {}", std::strerror(errno));
    return -1;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1024) != 0) {
    *err = fmt::format("tcp listen {}:{}: {}", addr, port, std::strerror(errno));
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = ntohs(a.sin_port);
  return fd;
}

void add_listener(int epfd, int fd, ConnId id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace

namespace {

std::unique_ptr<UplinkClient> make_uplink(const Config& cfg, const Dataplane& dp) {
  if (cfg.parent.empty()) return nullptr;
  UplinkConfig u;
  (void)parse_ipv4_endpoint(cfg.parent, &u.parent);  // checked by finalize_config()
  u.secret = cfg.secret;
  u.data_ports = dp.ports();
  u.silence = std::chrono::milliseconds(cfg.worker_timeout_ms);
  return std::make_unique<UplinkClient>(std::move(u));
}

}  // namespace

ControlPlane::ControlPlane(const Config& cfg, JobTable& jobs, const Dataplane& dp)
    : cfg_(cfg),
      jobs_(jobs),
      dataplane_(dp),
      uplink_(make_uplink(cfg, dp)),
      multicast_(cfg, dp, dp.ports(), counters_),
      manager_(cfg, jobs, dp, counters_, uplink_.get(), &multicast_) {
  const auto mbps = [](int64_t v) {
    return static_cast<uint32_t>(std::min<int64_t>(v, UINT32_MAX));
  };
  // A parent sends its children's results straight to their members' groups (SPEC.md §7) when
  // it can send multicast.
  manager_.set_direct_results(!cfg.multicast_range.empty() && cfg.multicast != "off" &&
                              dp.can_multicast());
  capacity_.line_mbps = mbps(advertised_line_mbps(cfg.line_mbps, cfg.listen));
  capacity_.max_mbps = mbps(cfg.max_mbps);
  // The bandwidth capacity the JobManager divides among the live jobs (each Capacity carries
  // its job's part); while several jobs are live, each job's results are paced to its part,
  // under the egress cap of apply_egress_cap().
  derive_share();
  capacity_.threads = static_cast<uint16_t>(dp.n_queues());
  manager_.set_capacity(capacity_.share_mbps);
  egress_cap_mbps_ = capacity_.max_mbps;  // the dataplane starts with cfg.max_mbps
  counters_.max_mbps.set(capacity_.max_mbps);
  counters_.config_generation.set(1);
  spdlog::info(
      "capacity advertised to workers: line {} Mbit/s{}, cap {} Mbit/s{}, {} dataplane "
      "thread(s)",
      capacity_.line_mbps, capacity_.line_mbps == 0 ? " (unknown)" : "", capacity_.max_mbps,
      capacity_.max_mbps == 0 ? " (none)" : "", capacity_.threads);
}

void ControlPlane::derive_share() {
  capacity_.share_mbps = capacity_.max_mbps == 0 ? capacity_.line_mbps
                         : capacity_.line_mbps == 0
                             ? capacity_.max_mbps
                             : std::min(capacity_.line_mbps, capacity_.max_mbps);
}

std::unique_ptr<ControlPlane> ControlPlane::create(const Config& cfg, JobTable& jobs,
                                                   const Dataplane& dataplane, std::string* err) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(cfg, jobs, dataplane));
  cp->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  cp->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (cp->epfd_ < 0 || cp->stop_fd_ < 0) {
    *err = fmt::format("epoll/eventfd: {}", std::strerror(errno));
    return nullptr;
  }
  cp->control_fd_ =
      listen_tcp(cfg.listen, static_cast<uint16_t>(cfg.control_port), &cp->control_port_, err);
  if (cp->control_fd_ < 0) return nullptr;
  if (cfg.metrics_port >= 0) {
    uint16_t port = 0;
    cp->metrics_fd_ = listen_tcp(cfg.listen, static_cast<uint16_t>(cfg.metrics_port), &port, err);
    if (cp->metrics_fd_ < 0) return nullptr;
    cp->metrics_port_ = port;
    add_listener(cp->epfd_, cp->metrics_fd_, kMetricsListener);
  }
  // Spare descriptor for shedding connections when the process runs out (control_loop.cc).
  cp->reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (cp->reserve_fd_ < 0) {
    *err = fmt::format("open /dev/null: {}", std::strerror(errno));
    return nullptr;
  }
  add_listener(cp->epfd_, cp->control_fd_, kControlListener);
  add_listener(cp->epfd_, cp->stop_fd_, kStopEvent);
  if (cp->uplink_ != nullptr) {
    if (Status st = cp->uplink_->start(); !st.ok()) {
      *err = "parent uplink: " + st.message();
      return nullptr;
    }
    add_listener(cp->epfd_, cp->uplink_->event_fd(), kUplinkEvent);
  }
  cp->limit_connections();
  return cp;
}

void ControlPlane::limit_connections() {
  // Every descriptor the daemon needs besides control connections is open by now (dataplane
  // sockets, listeners, logs) but for those of spare_fds(); the rest is the control plane's.
  const FdBudget b = read_fd_budget(spare_fds(cfg_));
  max_conns_ = control_connection_limit(cfg_.max_control_connections, b);
  if (max_conns_ < cfg_.max_control_connections) {
    spdlog::warn(
        "max_control_connections = {} is more than RLIMIT_NOFILE allows (soft limit {}, {} "
        "descriptors open, {} kept spare): at most {} control connections (raise the limit "
        "with ulimit -n or LimitNOFILE= for more)",
        cfg_.max_control_connections, b.soft_nofile, b.in_use, b.spare, max_conns_);
  }
  spdlog::info(
      "control connections: at most {}, {} per address (RLIMIT_NOFILE {}); at a limit the "
      "oldest connection without a Join makes room for a new one",
      max_conns_, cfg_.max_control_connections_per_addr,
      b.soft_nofile == 0 ? std::string("unlimited") : std::to_string(b.soft_nofile));
}

ControlPlane::~ControlPlane() {
  for (auto& [id, c] : conns_) close(c.fd);
  for (int fd : {control_fd_, metrics_fd_, stop_fd_, epfd_, reserve_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void ControlPlane::request_stop() {
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
}

}  // namespace conflux::agg
