// SPDX-License-Identifier: Apache-2.0
// Per-aggregator congestion window of the client engine: how many packets one worker may
// have outstanding on one aggregator, at most the granted window W (SPEC.md §4 bounds it
// by the slots; this bounds it by what the path carries without overflowing queues).
//
// Slow start, then AIMD in units of packets:
//  * every accepted result: +1 while cwnd < ssthresh (doubling per round trip), else
//    +1/cwnd (one packet per round trip of completions); never above W;
//  * a loss event (a retransmission timeout or a fast retransmit of packet `seq`):
//    cwnd = ssthresh = max(min_window, cwnd * decrease), but at most once per window of
//    packets: after a decrease, losses of packets sent before it (seq < the sequence
//    number that was next at the decrease) belong to the same congestion episode and are
//    ignored. So random loss costs at most one decrease per round trip, and a lossless
//    path grows back to W within a few round trips.
// Pure logic, no clock and no I/O: the caller passes sequence numbers. Owned by the
// progress thread (not thread-safe).
#pragma once

#include <algorithm>
#include <cstdint>

#include "conflux/client/config.h"

namespace conflux::client {

class CongestionWindow {
 public:
  // max_window = W granted by the aggregator (0 is treated as 1). Parameters outside
  // their documented ranges are clamped (validate() rejects them earlier).
  CongestionWindow(const CongestionConfig& p, uint32_t max_window)
      : enabled_(p.enabled),
        decrease_(p.decrease > 0 && p.decrease < 1 ? p.decrease : 0.5),
        granted_(static_cast<double>(std::max<uint32_t>(1, max_window))),
        floor_(static_cast<double>(p.min_window)),
        max_(granted_),
        min_(std::clamp(floor_, 1.0, max_)),
        cwnd_(enabled_ ? std::clamp(static_cast<double>(p.initial_window), min_, max_) : max_),
        ssthresh_(max_) {}

  // Bounds the window below W (at least 1): what the aggregator's pacing of the job drains in
  // time (grant_pacing.h); UINT32_MAX (or anything >= W) lifts the bound. The window and the
  // slow-start threshold shrink to it at once; a higher bound is grown into as usual. Part of
  // congestion control: disabled, the window stays W (CONFLUX_CONGESTION_CONTROL=0).
  void set_ceiling(uint32_t packets) {
    if (!enabled_) {
      return;
    }
    const double before = max_;
    max_ = std::clamp(static_cast<double>(packets), 1.0, granted_);
    min_ = std::clamp(floor_, 1.0, max_);
    // A threshold at the old bound was no loss's: slow start grows into a higher bound.
    ssthresh_ = ssthresh_ >= before ? max_ : std::min(ssthresh_, max_);
    cwnd_ = std::clamp(cwnd_, min_, max_);
  }
  uint32_t ceiling() const { return static_cast<uint32_t>(max_); }

  // The usable window in whole packets, 1..W (W when disabled).
  uint32_t window() const { return static_cast<uint32_t>(cwnd_); }
  // True when a worker with `outstanding` packets in flight may send one more.
  bool allows(uint32_t outstanding) const { return outstanding < window(); }

  // One result accepted (an answered packet, resent or not).
  void on_delivered() {
    if (!enabled_ || cwnd_ >= max_) {
      return;
    }
    cwnd_ = std::min(max_, cwnd_ + (cwnd_ < ssthresh_ ? 1.0 : 1.0 / cwnd_));
  }

  // Packet `seq` is deemed lost (timeout or fast retransmit); next_seq = the sequence
  // number the next new packet will get. Returns true when this caused a decrease.
  bool on_loss(uint64_t seq, uint64_t next_seq) {
    if (!enabled_ || (decreases_ > 0 && seq < recover_seq_)) {
      return false;
    }
    cwnd_ = std::max(min_, cwnd_ * decrease_);
    ssthresh_ = cwnd_;
    recover_seq_ = next_seq;
    ++decreases_;
    return true;
  }

  double cwnd() const { return cwnd_; }
  double ssthresh() const { return ssthresh_; }
  uint64_t decreases() const { return decreases_; }

 private:
  bool enabled_;
  double decrease_;
  double granted_;  // W
  double floor_;    // min_window as configured
  double max_;      // the bound: W, or less (set_ceiling)
  double min_;
  double cwnd_;
  double ssthresh_;
  uint64_t recover_seq_ = 0;  // losses of packets below this belong to the last episode
  uint64_t decreases_ = 0;
};

}  // namespace conflux::client
