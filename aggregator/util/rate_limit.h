// SPDX-License-Identifier: Apache-2.0
// Lets through at most one event per interval (for log lines on the packet path).
// Single-threaded: one instance per thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace conflux::agg {

class RateLimiter {
 public:
  explicit RateLimiter(std::chrono::milliseconds interval = std::chrono::seconds(1))
      : interval_(interval) {}

  // True when the caller may log now; *suppressed receives how many events were held back.
  bool allow(uint64_t* suppressed) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < interval_) {
      ++suppressed_;
      return false;
    }
    last_ = now;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

}  // namespace conflux::agg
