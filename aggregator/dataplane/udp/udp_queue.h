// One queue of the kernel-UDP dataplane: a UDP socket and the thread state that serves it.
// Setup lives in udp_dataplane.cc, the per-packet loop (run) in udp_datapath.cc.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/engine/rx_pipeline.h"
#include "aggregator/engine/slot_engine.h"
#include "aggregator/util/rate_limit.h"

namespace conflux::agg {

class UdpQueue final {
 public:
  // Takes ownership of `fd` (bound UDP socket). `stop_fd` becomes readable at stop.
  UdpQueue(int fd, uint16_t port, unsigned queue, unsigned n_queues, JobTable& jobs,
           const Config& cfg, int stop_fd);
  ~UdpQueue();
  UdpQueue(const UdpQueue&) = delete;
  UdpQueue& operator=(const UdpQueue&) = delete;

  // Thread body: receive, aggregate, transmit until `stop` is set. Dataplane thread only.
  void run(const std::atomic<bool>& stop);

  uint16_t port() const { return port_; }
  const QueueCounters& counters() const { return counters_; }

 private:
  static constexpr size_t kRxBufBytes = 65536;  // > any UDP datagram

  int receive();    // one recvmmsg; returns datagrams received (0 if none)
  void transmit();  // sends and clears results_
  void queue_tx(const uint8_t* data, uint32_t len, const sockaddr_in* to, Job* job);
  void flush_tx();
  void wait_readable();  // poll on fd and stop_fd, 100 ms at most

  int fd_;
  uint16_t port_;
  unsigned queue_;
  int stop_fd_;
  JobTable& jobs_;
  size_t batch_;
  QueueCounters counters_;
  SlotEngine engine_;
  RxPipeline pipeline_;
  ResultBatch results_;
  std::unique_ptr<uint8_t[]> rx_arena_;
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  std::vector<sockaddr_in> rx_addr_;  // source of each received datagram
  std::vector<mmsghdr> tx_msgs_;
  std::vector<iovec> tx_iov_;
  std::vector<Job*> tx_jobs_;
  size_t tx_n_ = 0;
  RateLimiter warn_limit_;
};

}  // namespace conflux::agg
