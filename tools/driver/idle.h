// SPDX-License-Identifier: Apache-2.0
// What a rank's polling loops do when a pass made no progress. Default: sched_yield() and poll
// again, like NCCL's proxy thread. --idle-sleep-us N sleeps instead, which helps when more rank
// processes than cores share one machine (the plugin's own threads need the CPU).
//
// A sleeping loop paces itself (IdlePacer): it sleeps N us at first, and longer while nothing
// progresses, up to a quarter of the time it has already waited and an eighth of the recent
// gaps between progressing passes (a decaying maximum), never more than kMaxIdlePauseUs. A bulk
// transfer whose chunks complete every few milliseconds then costs a few dozen wake-ups per
// chunk instead of one every N us: on a 2-core VM, 4 ranks polling every 50 us took 20 % of a
// core, which NCCL's own proxy thread would have spent on a core of its own. A small
// request, whose completions come less than 8 N us apart, is polled every N us as before; so is
// one that completes sooner than its predecessors did, within a quarter of its wait.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "driver/status.h"

namespace conflux::driver {

inline std::atomic<int>& idle_sleep_us() {
  static std::atomic<int> us{0};
  return us;
}

// The longest sleep of a pacing loop.
inline constexpr int64_t kMaxIdlePauseUs = 1000;

// The sleep of a polling loop after `since_us` without progress, when the last two progressing
// passes were up to `gap_us` apart (0: unknown) and --idle-sleep-us is `base_us` (> 0).
inline int64_t idle_pause_us(int64_t base_us, int64_t since_us, int64_t gap_us) {
  const int64_t stretched = std::min(since_us / 4, gap_us / 8);
  return std::clamp(stretched, base_us, std::max(base_us, kMaxIdlePauseUs));
}

class IdlePacer {
 public:
  using Clock = std::chrono::steady_clock;

  // A pass made progress.
  void progressed() {
    const Clock::time_point now = Clock::now();
    // A decaying maximum: a chunk's completion and the post that follows it a moment later
    // are two progressing passes, and their short gap must not hide the long one before.
    if (have_last_) gap_us_ = std::max(us(now - last_), gap_us_ - gap_us_ / 4);
    last_ = now;
    have_last_ = true;
  }

  // A pass made none: yields or sleeps (see above).
  void pause() {
    const int base = idle_sleep_us().load(std::memory_order_relaxed);
    if (base <= 0) {
      sched_yield();
      return;
    }
    const int64_t since = have_last_ ? us(Clock::now() - last_) : 0;
    usleep(static_cast<useconds_t>(idle_pause_us(base, since, gap_us_)));
  }

 private:
  static int64_t us(Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  }
  Clock::time_point last_{};
  bool have_last_ = false;
  int64_t gap_us_ = 0;
};

// The end of one pass of a request-polling loop: on progress the pacer learns of it; otherwise
// the loop pauses, and every 1024th idle pass checks the deadline. True: give up (the caller
// reports what it was waiting for).
class PollPass {
 public:
  bool expired(bool progress, const Deadline& dl) {
    if (progress) {
      idle_ = 0;
      pacer_.progressed();
      return false;
    }
    if ((++idle_ & 1023) == 0 && dl.passed()) return true;
    pacer_.pause();
    return false;
  }

 private:
  uint64_t idle_ = 0;
  IdlePacer pacer_;
};

// One pause of a loop that does not pace itself (connection set-up).
inline void idle_pause() {
  const int us = idle_sleep_us().load(std::memory_order_relaxed);
  if (us > 0)
    usleep(static_cast<useconds_t>(us));
  else
    sched_yield();
}

}  // namespace conflux::driver
