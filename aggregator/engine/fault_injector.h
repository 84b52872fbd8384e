// SPDX-License-Identifier: Apache-2.0
// Fault injection on the receive path (test builds: CONFLUX_TEST_HOOKS): each received
// datagram is dropped, processed twice, or delayed behind the next datagram, with the
// configured probabilities. One instance per dataplane thread; deterministic for a seed.
#pragma once

#include <cstdint>

namespace conflux::agg {

class FaultInjector final {
 public:
  enum class Action : uint8_t { kPass, kDrop, kDup, kDelay };

  FaultInjector(double drop, double dup, double reorder, uint64_t seed)
      : drop_(drop), dup_(drop + dup), delay_(drop + dup + reorder), state_(seed | 1) {}

  bool enabled() const { return delay_ > 0.0; }

  Action decide() {
    const double u = next_unit();
    if (u < drop_) return Action::kDrop;
    if (u < dup_) return Action::kDup;
    if (u < delay_) return Action::kDelay;
    return Action::kPass;
  }

 private:
  // xorshift64*: plenty for choosing faults.
  double next_unit() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    const uint64_t r = state_ * 0x2545F4914F6CDD1DULL;
    return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
  }

  double drop_;
  double dup_;  // cumulative thresholds
  double delay_;
  uint64_t state_;
};

}  // namespace conflux::agg
