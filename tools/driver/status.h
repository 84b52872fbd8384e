// SPDX-License-Identifier: Apache-2.0
// Error values and the run deadline shared by every part of the driver.
//
// A Status is either ok or carries one human-readable line saying what failed, where and on
// which rank; it is passed up to main(), which prints it and exits non-zero. Nothing in the
// driver throws across a plugin call.
#pragma once

#include <chrono>
#include <string>
#include <utility>

namespace conflux::driver {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string msg) {
    Status s;
    s.msg_ = msg.empty() ? std::string("unknown error") : std::move(msg);
    return s;
  }
  bool ok() const { return msg_.empty(); }
  const std::string& message() const { return msg_; }

 private:
  std::string msg_;
};

#define DRV_TRY(expr)                               \
  do {                                              \
    ::conflux::driver::Status drv_status_ = (expr); \
    if (!drv_status_.ok()) return drv_status_;      \
  } while (0)

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
