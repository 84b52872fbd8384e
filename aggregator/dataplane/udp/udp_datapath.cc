// SPDX-License-Identifier: Apache-2.0
// Kernel-UDP dataplane, datapath half: recvmmsg batch -> RxPipeline/SlotEngine -> sendmmsg.
// Runs on the queue's own thread; no locks, no virtual calls.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <tuple>

#include "aggregator/dataplane/dataplane.h"
#include "aggregator/dataplane/udp/udp_queue.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
UdpQueue::UdpQueue(int fd, uint16_t port, unsigned queue, unsigned n_queues, JobTable& jobs,
                   const Config& cfg, const EgressCap& cap, int stop_fd)
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
      rx_control_(batch_),
      rx_addr_(batch_),
      tx_msgs_(batch_),
      tx_iov_(batch_ * kMaxIovsPerMessage),
      tx_iovcnt_(batch_ * udp_offload::kMaxSegments),
      tx_control_(batch_),
      tx_jobs_(batch_),
      tx_segments_(batch_),
      busy_poll_ns_(static_cast<uint64_t>(cfg.busy_poll_us) * 1000),
      egress_(cap, n_queues) {
  for (size_t i = 0; i < batch_; ++i) {
    rx_iov_[i] = {rx_arena_.get() + i * kRxBufBytes, kRxBufBytes};
  }
  results_.lend_payloads();  // sendmmsg gathers each result from its slot (udp_queue.h)
  if (cfg.udp_offload) {
    gso_ = udp_offload::gso_supported(fd_);
    gro_ = udp_offload::enable_gro(fd_);
  }
  spdlog::debug("udp queue {}: GSO {}, GRO {}", queue_, gso_ ? "on" : "off", gro_ ? "on" : "off");
}

UdpQueue::~UdpQueue() { close(fd_); }

void UdpQueue::run(const std::atomic<bool>& stop) {
  jobs_.online(queue_);
  while (!stop.load(std::memory_order_acquire)) {
    const int n = receive();
    if (n > 0) {
      for (int i = 0; i < n; ++i) process(i);
    } else {
      pipeline_.flush(results_);  // idle: release a datagram held by fault injection
    }
    transmit();
    const uint64_t due_ns = deferred_.empty() ? 0 : drain_deferred();
    jobs_.quiescent(queue_);  // no Job pointer is held past this point
    if (n > 0) {
      if (busy_poll_ns_ != 0) last_rx_ns_ = steady_ns();
    } else if (busy_poll_ns_ != 0 && steady_ns() - last_rx_ns_ < busy_poll_ns_) {
      std::this_thread::yield();  // poll again soon, but let anything runnable have the core
    } else {
      wait_readable(due_ns);
    }
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
    if (gro_) {
      rx_msgs_[i].msg_hdr.msg_control = rx_control_[i].bytes;
      rx_msgs_[i].msg_hdr.msg_controllen = sizeof rx_control_[i].bytes;
    }
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

void UdpQueue::process(int i) {
  const uint8_t* data = rx_arena_.get() + size_t(i) * kRxBufBytes;
  const size_t len = rx_msgs_[i].msg_len;
  size_t segment = gro_ ? udp_offload::gro_segment(rx_msgs_[i].msg_hdr) : 0;
  if (segment == 0 || segment >= len) {
    segment = len;  // one datagram
  } else {
    counters_.gro_receives.inc();
  }
  const msghdr& m = rx_msgs_[i].msg_hdr;
  // Not IPv4 (cannot happen on this AF_INET socket): a source no contributor has. The kernel
  // coalesces only datagrams of one flow, so every GRO segment has this one source.
  const Source src = m.msg_namelen == sizeof(sockaddr_in) ? Source::of(rx_addr_[i]) : Source{};
  size_t at = 0;
  do {
    // A GRO batch yields a result per datagram: send what is pending before the batch fills.
    if (results_.room() < RxPipeline::kMaxResultsPerDatagram) transmit();
    const size_t n = std::min(segment, len - at);
    pipeline_.on_datagram({data + at, n}, src, results_);
    at += n;
  } while (at < len);
}

void UdpQueue::wait_readable(uint64_t due_ns) {
  counters_.sleeps.inc();
  pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  const uint64_t ns = due_ns != 0 ? std::min<uint64_t>(due_ns, 100'000'000) : 100'000'000;
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  (void)ppoll(fds, 2, &ts, nullptr);
}

void UdpQueue::transmit() {
  tx_order_.clear();
  for (size_t i = 0; i < results_.size(); ++i) {
    results_[i].for_each_destination([&](const sockaddr_in& to) {
      tx_order_.push_back({&to, static_cast<uint32_t>(i)});
    });
  }
  if (gso_) {
    // Each worker's results side by side (in their order), so they can share GSO sends.
    std::stable_sort(tx_order_.begin(), tx_order_.end(), [](const TxItem& a, const TxItem& b) {
      return std::tie(a.to->sin_addr.s_addr, a.to->sin_port) <
             std::tie(b.to->sin_addr.s_addr, b.to->sin_port);
    });
  }
  const auto len = [&](size_t k) { return size_t{results_[tx_order_[k].entry].len}; };
  for (size_t k = 0; k < tx_order_.size();) {
    const size_t n = gso_ ? udp_offload::run_length(k, tx_order_.size(), len,
                                                    [&](size_t j) {
                                                      return udp_offload::same_destination(
                                                          *tx_order_[j].to, *tx_order_[k].to);
                                                    })
                          : 1;
    queue_tx(k, n);
    k += n;
  }
  flush_tx();
  results_.clear();
}

void UdpQueue::queue_tx(size_t first, size_t n) {
  if (tx_n_ == batch_) flush_tx();
  iovec* iov = &tx_iov_[tx_n_ * kMaxIovsPerMessage];
  uint8_t* counts = &tx_iovcnt_[tx_n_ * udp_offload::kMaxSegments];
  size_t n_iov = 0;
  for (size_t k = 0; k < n; ++k) {
    const ResultBatch::Entry& e = results_[tx_order_[first + k].entry];
    const size_t before = n_iov;
    e.for_each_part([&](const uint8_t* p, size_t len) {
      iov[n_iov++] = {const_cast<uint8_t*>(p), len};
    });
    counts[k] = static_cast<uint8_t>(n_iov - before);
  }
  msghdr& h = tx_msgs_[tx_n_].msg_hdr;
  std::memset(&h, 0, sizeof(h));
  h.msg_name = const_cast<sockaddr_in*>(tx_order_[first].to);
  h.msg_namelen = sizeof(sockaddr_in);
  h.msg_iov = iov;
  h.msg_iovlen = n_iov;
  if (n > 1) {
    const uint32_t segment = results_[tx_order_[first].entry].len;
    udp_offload::set_segment(h, tx_control_[tx_n_].bytes, static_cast<uint16_t>(segment));
  }
  // Every entry of one transmit() belongs to jobs held until quiescent(); a GSO run goes to
  // one worker, so one job.
  tx_jobs_[tx_n_] = results_[tx_order_[first].entry].job;
  tx_segments_[tx_n_] = static_cast<uint32_t>(n);
  ++tx_n_;
}

void UdpQueue::flush_tx() {
  // A job held to its fair share (several jobs live under max_mbps) waits for its own bucket
  // too; a message goes to one worker, so one job. Deferred messages go first, per job.
  bool paced = egress().limited() || !deferred_.empty();
  for (size_t m = 0; m < tx_n_ && !paced; ++m) paced = tx_jobs_[m]->pace_mbps() != 0;
  if (paced) {
    flush_paced();
    tx_n_ = 0;
    return;
  }
  size_t done = 0;
  while (done < tx_n_) {
    const int n = sendmmsg(fd_, tx_msgs_.data() + done, static_cast<unsigned>(tx_n_ - done), 0);
    if (n > 0) {
      for (size_t m = done; m < done + static_cast<size_t>(n); ++m) account_sent(m, nullptr);
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    send_one(done++, nullptr);  // the error again, for send_one to handle (GSO refusal or count)
  }
  tx_n_ = 0;
}

void UdpQueue::flush_paced() {
  tx_waiting_.clear();
  for (size_t m = 0; m < tx_n_; ++m) tx_waiting_.push_back(static_cast<uint32_t>(m));
  while (!tx_waiting_.empty()) {
    wait_for_tokens(egress());
    // One pass in order: send each message whose job may send now; a job held (in debt, or
    // with deferred messages) keeps all its later messages too, the others go past it.
    deferred_.begin_pass();
    size_t kept = 0;
    for (const uint32_t m : tx_waiting_) {
      Job* job = tx_jobs_[m];
      TokenBucket* share = job->pacer(queue_);
      const uint64_t now = steady_ns();
      const uint64_t wait =
          std::max(share != nullptr ? share->delay_ns(now) : 0, egress().delay_ns(now));
      if (deferred_.hold(job->id(), wait)) {
        tx_waiting_[kept++] = m;
        continue;
      }
      send_one(m, share);
    }
    const bool sent_any = kept < tx_waiting_.size();
    tx_waiting_.resize(kept);
    if (!sent_any) {
      // Only jobs in debt are left (the queue's own bucket was just waited for): set their
      // messages aside and go back to receiving; drain_deferred() sends them in time.
      for (const uint32_t m : tx_waiting_) defer(m);
      tx_waiting_.clear();
    }
  }
}

void UdpQueue::defer(size_t m) {
  const msghdr& h = tx_msgs_[m].msg_hdr;
  Deferred d{*static_cast<const sockaddr_in*>(h.msg_name), {}, {}};
  // Its datagrams back to back (a lent payload is copied too: the bank is written again).
  size_t at = 0;
  for (size_t k = 0; k < tx_segments_[m]; ++k) {
    uint32_t len = 0;
    for (size_t i = 0; i < tx_iovcnt_[m * udp_offload::kMaxSegments + k]; ++i, ++at) {
      const auto* p = static_cast<const uint8_t*>(h.msg_iov[at].iov_base);
      d.bytes.insert(d.bytes.end(), p, p + h.msg_iov[at].iov_len);
      len += static_cast<uint32_t>(h.msg_iov[at].iov_len);
    }
    d.lens.push_back(len);
  }
  if (deferred_bytes_ + d.bytes.size() > kMaxDeferredBytes) {
    // Not reached while workers keep to their windows; if it is, the worker asks again and
    // the result is served from its COMPLETE bank.
    counters_.send_errors.add(tx_segments_[m]);
    uint64_t suppressed = 0;
    if (warn_limit_.allow(&suppressed)) {
      spdlog::warn(
          "udp queue {}: {} bytes of paced results waiting; result dropped ({} similar "
          "suppressed)",
          queue_, deferred_bytes_, suppressed);
    }
    return;
  }
  deferred_bytes_ += d.bytes.size();
  deferred_.push(tx_jobs_[m]->id(), std::move(d));
  counters_.deferred.inc();
}

uint64_t UdpQueue::drain_deferred() {
  const auto send = [&](Job& job, Deferred& d, TokenBucket* share, bool borrowed) {
    // Staged as tx message 0 (the batch is empty here) and sent like any other.
    iovec* iov = &tx_iov_[0];
    size_t at = 0;
    for (size_t k = 0; k < d.lens.size(); ++k) {
      iov[k] = {d.bytes.data() + at, d.lens[k]};
      at += d.lens[k];
    }
    msghdr& h = tx_msgs_[0].msg_hdr;
    std::memset(&h, 0, sizeof(h));
    h.msg_name = &d.to;
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = iov;
    h.msg_iovlen = d.lens.size();
    if (d.lens.size() > 1) {
      udp_offload::set_segment(h, tx_control_[0].bytes, static_cast<uint16_t>(d.lens[0]));
    }
    tx_jobs_[0] = &job;
    tx_segments_[0] = static_cast<uint32_t>(d.lens.size());
    for (size_t k = 0; k < d.lens.size(); ++k) tx_iovcnt_[k] = 1;
    send_one(0, share);
    if (borrowed) counters_.borrowed.inc();
    deferred_bytes_ -= d.bytes.size();
    return true;
  };
  return deferred_.drain(
      jobs_, queue_, [&](uint64_t now) { return egress().delay_ns(now); }, send,
      [&](Deferred& d) { deferred_bytes_ -= d.bytes.size(); });
}

void UdpQueue::send_one(size_t m, TokenBucket* share) {
  for (;;) {
    const int n = sendmmsg(fd_, tx_msgs_.data() + m, 1, 0);
    if (n == 1) {
      account_sent(m, share);
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (tx_segments_[m] > 1 && udp_offload::gso_refused(errno)) {
    // The route cannot take GSO sends: plain datagrams from now on.
    spdlog::warn("udp queue {}: GSO send refused ({}); sending plain datagrams", queue_,
                 std::strerror(errno));
    gso_ = false;
    send_plain(m);
    return;
  }
  // The message failed: count it, skip it (its worker will ask again).
  counters_.send_errors.add(tx_segments_[m]);
  uint64_t suppressed = 0;
  if (warn_limit_.allow(&suppressed)) {
    spdlog::warn("udp queue {}: sendmmsg: {} ({} similar suppressed)", queue_, std::strerror(errno),
                 suppressed);
  }
}

void UdpQueue::account_sent(size_t m, TokenBucket* share) {
  const msghdr& h = tx_msgs_[m].msg_hdr;
  uint64_t bytes = 0;
  for (size_t k = 0; k < h.msg_iovlen; ++k) bytes += h.msg_iov[k].iov_len;
  if (egress().limited()) egress().consume(steady_ns(), bytes);
  if (share != nullptr) share->consume(steady_ns(), bytes);
  counters_.packets_out.add(tx_segments_[m]);
  counters_.bytes_out.add(bytes);
  if (tx_segments_[m] > 1) counters_.gso_sends.inc();
  tx_jobs_[m]->counters(queue_).results_sent.add(tx_segments_[m]);
  tx_jobs_[m]->counters(queue_).result_bytes.add(bytes);
}

void UdpQueue::send_plain(size_t m) {
  msghdr h = tx_msgs_[m].msg_hdr;
  iovec* iov = h.msg_iov;
  h.msg_control = nullptr;
  h.msg_controllen = 0;
  TokenBucket* share = tx_jobs_[m]->pacer(queue_);
  size_t at = 0;
  for (size_t k = 0; k < tx_segments_[m]; ++k) {
    h.msg_iov = iov + at;
    h.msg_iovlen = tx_iovcnt_[m * udp_offload::kMaxSegments + k];
    at += h.msg_iovlen;
    size_t len = 0;
    for (size_t i = 0; i < h.msg_iovlen; ++i) len += h.msg_iov[i].iov_len;
    if (share != nullptr) wait_for_tokens(*share);
    wait_for_tokens(egress());
    if (sendmsg(fd_, &h, 0) >= 0) {
      egress().consume(steady_ns(), len);
      if (share != nullptr) share->consume(steady_ns(), len);
      counters_.packets_out.inc();
      counters_.bytes_out.add(len);
      tx_jobs_[m]->counters(queue_).results_sent.inc();
      tx_jobs_[m]->counters(queue_).result_bytes.add(len);
    } else {
      counters_.send_errors.inc();
    }
  }
}

}  // namespace conflux::agg
