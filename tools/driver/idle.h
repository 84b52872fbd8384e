// What a rank's polling loops do when a pass made no progress. Default: sched_yield() and poll
// again, like NCCL's proxy thread. --idle-sleep-us N sleeps N us instead, which helps when
// more rank processes than cores share one machine (the plugin's own threads need the CPU).
#pragma once

#include <sched.h>
#include <unistd.h>

#include <atomic>

namespace conflux::driver {

inline std::atomic<int>& idle_sleep_us() {
  static std::atomic<int> us{0};
  return us;
}

inline void idle_pause() {
  int us = idle_sleep_us().load(std::memory_order_relaxed);
  if (us > 0)
    usleep(static_cast<useconds_t>(us));
  else
    sched_yield();
}

}  // namespace conflux::driver
