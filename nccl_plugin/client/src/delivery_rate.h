// SPDX-License-Identifier: Apache-2.0
// DeliveryRate: how fast one aggregator's results come back, and the least time a new packet
// waits for its own, behind the bytes still outstanding on the same path.
//
// Why the retransmission timer needs it: a packet's round trip is its path's base round trip
// plus the time the bytes sent before it take to drain through the bottleneck (on a worker's
// own link, its tbf or NIC queue). The smoothed round trip lags that queue whenever it grows
// faster than the estimate follows: at the start of every collective after an idle gap, the
// first results come back through an empty queue and pull srtt down, while the packets sent as
// their slots free up queue behind a full window. On the fabric at 100 Mbit/s (4 workers, 64
// slots of 8 KiB: 42 ms of queue) srtt fell to 17 ms there and the timers of those packets fired
// at 23, 31 and 39 ms, every one of them needless: about 1.4 % of all packets. A packet sent
// behind B outstanding bytes cannot be answered before B / rate; the timer waits at least that.
//
// The rate is a windowed maximum of samples each taken over at least `interval` (a fraction of
// the round trip): a bulk transfer sets it, and sparse traffic or an idle gap only lets it decay
// (by kDecay per sample), so that a later burst is not taken for a queue seconds long. A
// maximum errs toward a shorter wait, that is, toward the plain RTO.
// Single-threaded: the engine's progress thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace conflux::client {

class DeliveryRate {
 public:
  static constexpr double kDecay = 0.9;

  // `bytes` of results arrived at `now` (ns); a sample is taken once `interval_ns` has passed
  // since the previous one.
  void on_delivered(uint64_t bytes, int64_t now, int64_t interval_ns) {
    if (t0_ == 0) {
      t0_ = now;  // the first result starts the first sample; its bytes are not in it
      return;
    }
    bytes_ += bytes;
    const int64_t span = now - t0_;
    if (span < interval_ns || span <= 0) return;
    const double sample = static_cast<double>(bytes_) / static_cast<double>(span);
    max_ = std::max(sample, max_ * kDecay);
    t0_ = now;
    bytes_ = 0;
  }

  // Bytes per nanosecond; 0 until a sample was taken.
  double bytes_per_ns() const { return max_; }

  // The least time, in microseconds, before a packet sent behind `ahead_bytes` outstanding
  // bytes is answered; 0 without a rate.
  double queue_us(uint64_t ahead_bytes) const {
    return max_ > 0 ? static_cast<double>(ahead_bytes) / max_ / 1000.0 : 0.0;
  }

 private:
  int64_t t0_ = 0;
  uint64_t bytes_ = 0;
  double max_ = 0;
};

}  // namespace conflux::client
