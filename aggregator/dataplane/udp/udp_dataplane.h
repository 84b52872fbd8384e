// SPDX-License-Identifier: Apache-2.0
// Kernel-UDP dataplane: one socket and one thread per queue, queue i on port data_port + i.
// Works on any host, loopback included. Setup in udp_dataplane.cc, datapath in
// udp_datapath.cc.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "aggregator/dataplane/dataplane.h"

namespace conflux::agg {

class UdpQueue;

class UdpDataplane final : public Dataplane {
 public:
  // Opens and binds every socket (SO_RCVBUF/SO_SNDBUF = cfg.socket_buffer_bytes).
  static std::unique_ptr<UdpDataplane> create(const Config& cfg, JobTable& jobs, std::string* err);
  ~UdpDataplane() override;

  std::string_view name() const override { return "udp"; }
  Status start() override;
  void stop() override;
  std::vector<uint16_t> ports() const override;
  unsigned n_queues() const override { return static_cast<unsigned>(queues_.size()); }
  const QueueCounters& counters(unsigned q) const override;
  bool can_multicast() const override { return multicast_; }
  bool send_datagram(const sockaddr_in& to, std::span<const uint8_t> bytes) const override;

 private:
  UdpDataplane() = default;

  std::vector<std::unique_ptr<UdpQueue>> queues_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  int stop_fd_ = -1;
  bool multicast_ = false;  // sockets set up for multicast sends (multicast_range is set)
};

}  // namespace conflux::agg
