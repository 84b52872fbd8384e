// SPDX-License-Identifier: Apache-2.0
// One queue of the kernel-UDP dataplane: a UDP socket and the thread state that serves it.
// Setup lives in udp_dataplane.cc, the per-packet loop (run) in udp_datapath.cc.
// With `udp_offload` (and a kernel that has them) received buffers may hold several
// coalesced datagrams (UDP GRO), cut apart here, and the results of one batch to one worker
// leave as GSO sends (one sendmmsg message for up to 64 same-size datagrams).
// Results are gathered: each datagram is its header (and MAC trailer) from the batch and its
// payload straight from the slot's bank (ResultBatch::lend_payloads), so the kernel's copy
// into the send buffer is the only copy of a result on this host.
// With `max_mbps` every send waits for this queue's token bucket (max_mbps / threads), and,
// while several jobs are live, for its job's bucket too (its fair share / threads, Job::pacer).
// A job in debt does not stop the thread: its results are copied aside (deferred_, the policy
// in aggregator/engine/set_aside.h) and sent, in order, as its bucket refills, while the
// thread goes on receiving and serving the others.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/engine/rx_pipeline.h"
#include "aggregator/engine/set_aside.h"
#include "aggregator/engine/slot_engine.h"
#include "aggregator/util/rate_limit.h"
#include "aggregator/util/token_bucket.h"
#include "conflux/common/udp_offload.h"

namespace conflux::agg {

class UdpQueue final {
 public:
  // Takes ownership of `fd` (bound UDP socket). `stop_fd` becomes readable at stop.
  UdpQueue(int fd, uint16_t port, unsigned queue, unsigned n_queues, JobTable& jobs,
           const Config& cfg, const EgressCap& cap, int stop_fd);
  ~UdpQueue();
  UdpQueue(const UdpQueue&) = delete;
  UdpQueue& operator=(const UdpQueue&) = delete;

  // Thread body: receive, aggregate, transmit until `stop` is set. Dataplane thread only.
  void run(const std::atomic<bool>& stop);

  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  const QueueCounters& counters() const { return counters_; }

 private:
  static constexpr size_t kRxBufBytes = 65536;  // > any UDP datagram

  // One result datagram to one worker, in transmit order.
  struct TxItem {
    const sockaddr_in* to;
    uint32_t entry;  // index into results_
  };

  int receive();        // one recvmmsg; returns buffers received (0 if none)
  void process(int i);  // feeds received buffer i (one datagram or a GRO batch) to the pipeline
  void transmit();      // sends and clears results_
  // Queues tx_order_[first, first + n) as one message (a GSO send when n > 1).
  void queue_tx(size_t first, size_t n);
  void flush_tx();
  // flush_tx when buckets pace the sends: one message per call, and a job whose bucket is in
  // debt does not hold up another job's messages.
  void flush_paced();
  // Sends message m alone (sendmmsg of one) and charges the buckets; a GSO refusal falls back
  // to send_plain, other errors are counted.
  void send_one(size_t m, TokenBucket* share);
  // Books message m, sent: counters, and the buckets when share/egress are given.
  void account_sent(size_t m, TokenBucket* share);
  void send_plain(size_t msg);  // the datagrams of one message one by one (GSO refused)
  // Poll on fd and stop_fd, 100 ms at most, or due_ns when not 0 (a deferred message is due).
  void wait_readable(uint64_t due_ns);

  // A message of a job whose bucket was in debt, copied out of the batch (whose buffers are
  // reused) to be sent when the bucket allows.
  struct Deferred {
    sockaddr_in to;
    std::vector<uint32_t> lens;  // its datagrams (a GSO send when more than one)
    std::vector<uint8_t> bytes;  // their bytes, back to back
  };
  // Copies tx message m to the end of deferred_ (dropped, with a warning, past the bound).
  void defer(size_t m);
  // Sends every deferred message whose job may send now, in order per job. Needs tx_n_ == 0.
  // Returns how long until the first one still waiting may go (0: none waits).
  uint64_t drain_deferred();

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
  std::vector<udp_offload::ControlBuffer> rx_control_;
  std::vector<sockaddr_in> rx_addr_;  // source of each received buffer (all its GRO segments)
  std::vector<TxItem> tx_order_;
  std::vector<mmsghdr> tx_msgs_;
  // Per message: up to kMaxSegments datagrams of up to 3 iovecs (header, lent payload, trailer).
  static constexpr size_t kMaxIovsPerMessage = 3 * udp_offload::kMaxSegments;
  std::vector<iovec> tx_iov_;       // kMaxIovsPerMessage per message
  std::vector<uint8_t> tx_iovcnt_;  // kMaxSegments per message: iovecs of each datagram
  std::vector<udp_offload::ControlBuffer> tx_control_;
  std::vector<Job*> tx_jobs_;
  std::vector<uint32_t> tx_segments_;
  std::vector<uint32_t> tx_waiting_;  // flush_paced: messages not sent yet, in order
  SetAside<Deferred> deferred_;
  size_t deferred_bytes_ = 0;
  static constexpr size_t kMaxDeferredBytes = size_t{64} << 20;
  size_t tx_n_ = 0;
  uint64_t busy_poll_ns_;    // busy_poll_us
  uint64_t last_rx_ns_ = 0;  // when the last datagram came
  bool gso_ = false;
  bool gro_ = false;
  RateLimiter warn_limit_;
  QueueEgress egress_;  // this queue's share of the daemon's max_mbps
  TokenBucket& egress() { return egress_.bucket(); }
};

}  // namespace conflux::agg
