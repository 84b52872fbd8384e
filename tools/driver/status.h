// SPDX-License-Identifier: Apache-2.0
// Error values and the run deadline shared by every part of the driver.
//
// A Status is either ok or carries one human-readable line saying what failed, where and on
// which rank; it is passed up to main(), which prints it and exits non-zero. Nothing in the
// driver throws across a plugin call.
#pragma once

#include <chrono>
#include <string>

#include "conflux/common/status.h"

namespace conflux::driver {

// The driver's errors are conflux::Status (common/status.h): a code and one human-readable line
// saying what failed, where and on which rank.
using ::conflux::internal_error;
using ::conflux::invalid_argument;
using ::conflux::Status;
using ::conflux::system_error;
using ::conflux::timed_out;
using ::conflux::unavailable;

// The whole run must finish before this instant (--timeout). Every wait loop (bootstrap
// sockets, connect/accept polling, request polling) checks it, so no rank waits forever.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  Deadline() : end_(Clock::time_point::max()) {}
  explicit Deadline(double seconds)
      : end_(Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool passed() const { return Clock::now() >= end_; }
  // Milliseconds left, clamped to [0, cap_ms]; for poll() timeouts.
  int remaining_ms(int cap_ms) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }

 private:
  Clock::time_point end_;
};

}  // namespace conflux::driver
