// SPDX-License-Identifier: Apache-2.0
// Kernel-UDP dataplane, setup half: sockets, buffers, threads.
#include "aggregator/dataplane/udp/udp_dataplane.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "aggregator/dataplane/udp/udp_queue.h"
#include "aggregator/util/random.h"
#include "conflux/common/thread_name.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

// Large socket buffers absorb bursts from many workers. SO_*BUFFORCE ignores the sysctl
// limits when we have CAP_NET_ADMIN; otherwise the kernel caps the plain option.
void set_buffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

int open_socket(const Config& cfg, uint16_t port, uint16_t* bound, std::string* err) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = fmt::format("udp socket: {}", std::strerror(errno));
    return -1;
  }
  const int bytes = static_cast<int>(cfg.socket_buffer_bytes);
  set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes);
  set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, cfg.listen.c_str(), &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    *err = fmt::format("udp bind {}:{}: {}", cfg.listen, port, std::strerror(errno));
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = ntohs(a.sin_port);
  int rcv = 0;
  len = sizeof(rcv);
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);  // the kernel reports twice the usable size
  spdlog::debug("udp port {}: SO_RCVBUF {} bytes", *bound, rcv);
  return fd;
}

// Multicast sends (SPEC §8): the interface the groups leave by, their TTL, and loopback so
// that workers on this host get them too. Ok, or system_error naming the key.
Status set_multicast(int fd, const Config& cfg) {
  const std::string& ifaddr =
      cfg.multicast_interface.empty() ? cfg.listen : cfg.multicast_interface;
  in_addr a{};
  inet_pton(AF_INET, ifaddr.c_str(), &a);  // both were checked at load
  if (a.s_addr != INADDR_ANY && setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof(a)) != 0) {
    return system_error(
        fmt::format("multicast_interface {}: IP_MULTICAST_IF: {}", ifaddr, std::strerror(errno)));
  }
  const int ttl = static_cast<int>(cfg.multicast_ttl);
  const int loop = 1;
  if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
      setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop)) != 0) {
    return system_error(fmt::format("multicast_ttl: {}", std::strerror(errno)));
  }
  return {};
}

}  // namespace

bool UdpDataplane::send_datagram(const sockaddr_in& to, std::span<const uint8_t> bytes) const {
  // The kernel serializes sends on one socket, so the control thread may use queue 0's.
  return !queues_.empty() && sendto(queues_[0]->fd(), bytes.data(), bytes.size(), MSG_DONTWAIT,
                                    reinterpret_cast<const sockaddr*>(&to),
                                    sizeof(to)) == static_cast<ssize_t>(bytes.size());
}

std::unique_ptr<UdpDataplane> UdpDataplane::create(const Config& cfg, JobTable& jobs,
                                                   std::string* err) {
  std::unique_ptr<UdpDataplane> dp(new UdpDataplane());
  dp->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (dp->stop_fd_ < 0) {
    *err = fmt::format("eventfd: {}", std::strerror(errno));
    return nullptr;
  }
  dp->egress_cap_.set(cfg.max_mbps);
  const auto n = static_cast<unsigned>(cfg.threads);
  for (unsigned q = 0; q < n; ++q) {
    const uint16_t want = cfg.data_port == 0 ? 0 : static_cast<uint16_t>(cfg.data_port + q);
    uint16_t port = 0;
    const int fd = open_socket(cfg, want, &port, err);
    if (fd < 0) return nullptr;
    if (!cfg.multicast_range.empty()) {
      if (Status st = set_multicast(fd, cfg); !st.ok()) {
        *err = st.message();
        close(fd);
        return nullptr;
      }
      dp->multicast_ = true;
    }
    dp->queues_.push_back(
        std::make_unique<UdpQueue>(fd, port, q, n, jobs, cfg, dp->egress_cap_, dp->stop_fd_));
  }
  spdlog::info("udp dataplane: {} queue(s) on {}:{} (batch {})", n, cfg.listen,
               fmt::join(dp->ports(), ","), cfg.batch);
  return dp;
}

UdpDataplane::~UdpDataplane() {
  stop();
  queues_.clear();
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status UdpDataplane::start() {
  for (auto& q : queues_) {
    UdpQueue* queue = q.get();
    threads_.emplace_back([this, queue, i = threads_.size()] {
      name_this_thread("cfx-udp" + std::to_string(i));
      queue->run(stopping_);
    });
  }
  return {};
}

void UdpDataplane::stop() {
  if (threads_.empty()) return;
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::vector<uint16_t> UdpDataplane::ports() const {
  std::vector<uint16_t> out;
  for (const auto& q : queues_) out.push_back(q->port());
  return out;
}

const QueueCounters& UdpDataplane::counters(unsigned q) const { return queues_[q]->counters(); }

}  // namespace conflux::agg
