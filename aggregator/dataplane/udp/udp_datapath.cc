// Kernel-UDP dataplane, datapath half: recvmmsg batch -> RxPipeline/SlotEngine -> sendmmsg.
// Runs on the queue's own thread; no locks, no virtual calls.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "aggregator/dataplane/dataplane.h"
#include "aggregator/dataplane/udp/udp_queue.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
UdpQueue::UdpQueue(int fd, uint16_t port, unsigned queue, unsigned n_queues, JobTable& jobs,
                   const Config& cfg, int stop_fd)
    : fd_(fd),
      port_(port),
      queue_(queue),
      stop_fd_(stop_fd),
      jobs_(jobs),
      batch_(static_cast<size_t>(cfg.batch)),
      engine_(jobs, queue, n_queues, static_cast<uint32_t>(cfg.max_payload_bytes), counters_),
      pipeline_(engine_, make_fault_injector(cfg, queue)),
      results_(batch_ * RxPipeline::kMaxResultsPerDatagram + 1,
               proto::kDataHeaderSize + static_cast<size_t>(cfg.max_payload_bytes)),
      rx_arena_(std::make_unique<uint8_t[]>(batch_ * kRxBufBytes)),
      rx_msgs_(batch_),
      rx_iov_(batch_),
      rx_addr_(batch_),
      tx_msgs_(batch_),
      tx_iov_(batch_),
      tx_jobs_(batch_) {
  for (size_t i = 0; i < batch_; ++i) {
    rx_iov_[i] = {rx_arena_.get() + i * kRxBufBytes, kRxBufBytes};
  }
}

UdpQueue::~UdpQueue() { close(fd_); }

void UdpQueue::run(const std::atomic<bool>& stop) {
  jobs_.online(queue_);
  while (!stop.load(std::memory_order_acquire)) {
    const int n = receive();
    if (n > 0) {
      for (int i = 0; i < n; ++i) {
        const msghdr& m = rx_msgs_[i].msg_hdr;
        // Not IPv4 (cannot happen on this AF_INET socket): a source no contributor has.
        const Source src =
            m.msg_namelen == sizeof(sockaddr_in) ? Source::of(rx_addr_[i]) : Source{};
        pipeline_.on_datagram({rx_arena_.get() + size_t(i) * kRxBufBytes, rx_msgs_[i].msg_len}, src,
                              results_);
      }
    } else {
      pipeline_.flush(results_);  // idle: release a datagram held by fault injection
    }
    transmit();
    jobs_.quiescent(queue_);  // no Job pointer is held past this point
    if (n == 0) wait_readable();
  }
  jobs_.offline(queue_);
}

int UdpQueue::receive() {
  for (size_t i = 0; i < batch_; ++i) {
    std::memset(&rx_msgs_[i].msg_hdr, 0, sizeof(msghdr));
    rx_msgs_[i].msg_hdr.msg_name = &rx_addr_[i];  // the sender: source binding (SPEC.md §4)
    rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  const int n =
      recvmmsg(fd_, rx_msgs_.data(), static_cast<unsigned>(batch_), MSG_DONTWAIT, nullptr);
  if (n >= 0) return n;
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    uint64_t suppressed = 0;
    if (warn_limit_.allow(&suppressed)) {
      spdlog::warn("udp queue {}: recvmmsg: {} ({} similar suppressed)", queue_,
                   std::strerror(errno), suppressed);
    }
  }
  return 0;
}

void UdpQueue::wait_readable() {
  pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  (void)poll(fds, 2, 100);
}

void UdpQueue::transmit() {
  for (size_t i = 0; i < results_.size(); ++i) {
    const ResultBatch::Entry& e = results_[i];
    e.for_each_destination([&](const sockaddr_in& to) { queue_tx(e.data, e.len, &to, e.job); });
  }
  flush_tx();
  results_.clear();
}

void UdpQueue::queue_tx(const uint8_t* data, uint32_t len, const sockaddr_in* to, Job* job) {
  if (tx_n_ == batch_) flush_tx();
  tx_iov_[tx_n_] = {const_cast<uint8_t*>(data), len};
  msghdr& h = tx_msgs_[tx_n_].msg_hdr;
  std::memset(&h, 0, sizeof(h));
  h.msg_name = const_cast<sockaddr_in*>(to);
  h.msg_namelen = sizeof(sockaddr_in);
  h.msg_iov = &tx_iov_[tx_n_];
  h.msg_iovlen = 1;
  tx_jobs_[tx_n_] = job;
  ++tx_n_;
}

void UdpQueue::flush_tx() {
  size_t done = 0;
  while (done < tx_n_) {
    const int n = sendmmsg(fd_, tx_msgs_.data() + done, static_cast<unsigned>(tx_n_ - done), 0);
    if (n > 0) {
      for (size_t i = done; i < done + static_cast<size_t>(n); ++i) {
        counters_.packets_out.inc();
        counters_.bytes_out.add(tx_iov_[i].iov_len);
        tx_jobs_[i]->counters(queue_).results_sent.inc();
      }
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // The datagram at `done` failed: count it, skip it (its worker will ask again).
    counters_.send_errors.inc();
    uint64_t suppressed = 0;
    if (warn_limit_.allow(&suppressed)) {
      spdlog::warn("udp queue {}: sendmmsg: {} ({} similar suppressed)", queue_,
                   std::strerror(errno), suppressed);
    }
    ++done;
  }
  tx_n_ = 0;
}

}  // namespace conflux::agg
