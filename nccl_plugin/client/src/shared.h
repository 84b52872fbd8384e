// State shared between the API threads (allreduce/test/abort/stats callers) and the
// progress thread. Everything here is either atomic or guarded by `mu`, which both
// sides hold only for a few instructions (never across I/O).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "conflux/client/config.h"
#include "counters.h"
#include "request.h"

namespace conflux::client {

struct Shared {
  explicit Shared(const ClientConfig& c) : cfg(c) {}

  const ClientConfig cfg;
  Counters ctr;

  std::mutex mu;
  std::vector<std::shared_ptr<Request>> submitted;                  // guarded by mu
  std::unordered_map<uint64_t, std::shared_ptr<Request>> requests;  // guarded by mu
  uint64_t next_id = 1;                                             // guarded by mu
  std::string fail_reason;   // guarded by mu; the first error that failed the engine
  std::string abort_reason;  // guarded by mu; set by abort(), consumed by progress
  uint64_t abort_requested = 0, abort_done = 0;  // guarded by mu
  // Each aggregator's current grant (Capacity share_mbps, SPEC.md §3), Mbit/s, by index;
  // guarded by mu. Set at join, updated by the progress thread when a grant update comes.
  std::vector<uint32_t> grants;
  std::condition_variable abort_cv;
  // Engine::wait() callers sleep here; the progress thread notifies when it finishes a
  // request while `waiters` > 0.
  std::condition_variable done_cv;
  std::atomic<int> waiters{0};

  std::atomic<bool> has_submissions{false};
  std::atomic<bool> failed{false};
  std::atomic<int> failed_aggregator{-1};
  std::atomic<bool> stop{false};
  std::atomic<bool> sleeping{false};  // progress thread is (about to be) blocked in ppoll
  // Caller progress (ClientConfig::caller_progress). Whoever holds progress_mu owns the
  // Progress object: the progress thread, or a caller of Engine::test/wait/submit that
  // got it with try_lock. caller_poll_ns: now_ns() of a caller's latest poll, 0 = none;
  // while it is recent the progress thread dozes (`dozing`, woken only by wake()).
  std::mutex progress_mu;
  std::atomic<int64_t> caller_poll_ns{0};
  std::atomic<bool> dozing{false};
  int wake_fd = -1;  // eventfd that interrupts the progress thread's ppoll

  // Wakes the progress thread if it sleeps. Any thread; never blocks.
  void wake();

  // Logs through cfg.log if set. Any thread.
  void log(LogLevel level, const std::string& msg) const {
    if (cfg.log) {
      cfg.log(level, msg);
    }
  }
};

}  // namespace conflux::client
