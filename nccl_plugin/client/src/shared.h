// SPDX-License-Identifier: Apache-2.0
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

// How long a caller's poll keeps the progress thread dozing. While more than spin_max_bytes
// are in flight, the results come at the link's pace and the caller may poll only now and
// then (the driver, and NCCL's proxy when busy elsewhere): the progress thread takes the
// packets between polls. While only small requests are in flight, the caller spins on them
// and is the one that must see each result: the progress thread's wake-ups to check the
// claim would only take a core from the spinners (4 B at 2 ranks on 2 cores: p90 40 us with
// a 200 us claim, 26 us with 1 ms).
constexpr int64_t kCallerClaimBulkNs = 200'000;
constexpr int64_t kCallerClaimNs = 1'000'000;

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
  // got it with try_lock. caller_claim_ns: until when (now_ns()) the latest caller's poll
  // claims the I/O, 0 = none; until then the progress thread dozes (`dozing`, woken only by
  // wake()). How long a poll claims depends on bulk_in_flight, which the owner of Progress
  // keeps: see kCallerClaimNs.
  std::mutex progress_mu;
  std::atomic<int64_t> caller_claim_ns{0};
  std::atomic<bool> bulk_in_flight{false};
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
