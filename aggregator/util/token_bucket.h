// SPDX-License-Identifier: Apache-2.0
// A token bucket that paces a dataplane queue's egress to a byte rate (confluxd `max_mbps`).
// The sender asks how long to wait before its next send (delay_ns), waits, sends, then
// charges what it sent (consume). The bucket may go into debt by one send, which the next
// delay pays back, so a send is never split; it refills at `bytes_per_s` up to `burst`.
// Time is passed in (nanoseconds of any monotonic clock), so tests drive it directly.
// Single-threaded: one bucket per dataplane thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace conflux::agg {

class TokenBucket {
 public:
  // bytes_per_s = 0: unlimited (delay_ns is always 0).
  TokenBucket(double bytes_per_s, double burst_bytes)
      : rate_(bytes_per_s), burst_(burst_bytes), tokens_(burst_bytes) {}

  bool limited() const { return rate_ > 0; }

  // Nanoseconds from now_ns until the bucket is out of debt (0: send now).
  uint64_t delay_ns(uint64_t now_ns) {
    if (!limited()) return 0;
    refill(now_ns);
    if (tokens_ >= 0) return 0;
    return static_cast<uint64_t>(-tokens_ / rate_ * 1e9) + 1;
  }

  // Charges `bytes` sent at now_ns.
  void consume(uint64_t now_ns, uint64_t bytes) {
    if (!limited()) return;
    refill(now_ns);
    tokens_ -= static_cast<double>(bytes);
  }

 private:
  void refill(uint64_t now_ns) {
    if (started_ && now_ns > last_ns_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_ns_) * 1e-9 * rate_);
    }
    if (!started_ || now_ns > last_ns_) last_ns_ = now_ns;
    started_ = true;
  }

  double rate_;
  double burst_;
  double tokens_;
  uint64_t last_ns_ = 0;
  bool started_ = false;
};

// The bucket of one of `queues` dataplane queues sharing a daemon cap of max_mbps (0 = off):
// an equal part of the rate each, and a burst of 1 ms of it, at least 64 KiB.
inline TokenBucket egress_bucket(int64_t max_mbps, unsigned queues) {
  const double rate = static_cast<double>(max_mbps) * 1e6 / 8 / std::max(1u, queues);
  return TokenBucket(rate, std::max(65536.0, rate * 1e-3));
}

// The daemon's cap on the result bytes it sends (max_mbps, 0 = none), which the operator may
// change while it runs (conflux throttle): the control thread stores it, and each dataplane
// queue rebuilds its bucket from it before its next send (QueueEgress).
class EgressCap {
 public:
  explicit EgressCap(int64_t mbps = 0) : mbps_(mbps) {}
  void set(int64_t mbps) { mbps_.store(mbps, std::memory_order_relaxed); }
  int64_t get() const { return mbps_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> mbps_;
};

// One dataplane queue's share of an EgressCap: its bucket, rebuilt when the cap changes.
// Single-threaded, like TokenBucket.
class QueueEgress {
 public:
  QueueEgress(const EgressCap& cap, unsigned queues)
      : cap_(&cap), queues_(queues), mbps_(cap.get()), bucket_(egress_bucket(mbps_, queues)) {}

  // The bucket for the sends about to happen, at the cap as it is now.
  TokenBucket& bucket() {
    const int64_t m = cap_->get();
    if (m != mbps_) {
      mbps_ = m;
      bucket_ = egress_bucket(m, queues_);
    }
    return bucket_;
  }

 private:
  const EgressCap* cap_;
  unsigned queues_;
  int64_t mbps_;
  TokenBucket bucket_;
};

// Nanoseconds of the steady clock, the time base of the dataplanes' buckets.
inline uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Sleeps until `bucket` allows a send (at once when it is unlimited or out of debt).
inline void wait_for_tokens(TokenBucket& bucket) {
  for (uint64_t wait = bucket.delay_ns(steady_ns()); wait > 0;
       wait = bucket.delay_ns(steady_ns())) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
  }
}

}  // namespace conflux::agg
