// SPDX-License-Identifier: Apache-2.0
// ReturnProber: on rank 0 of a CollNet communicator that lost aggregators (failure, drain,
// restart), or on every rank where the ranks named different aggregators (a reduction tree:
// each rank asks its own leaf), asks each lost one in the background whether it takes jobs
// again: a probe job of one rank (connect, Join, leave), from a thread of its own, so that a
// dead host's connect timeout never holds up a collective. Between rounds in which none
// answered it waits 250 ms, doubling up to 4 s; after an answer, 4 s (the answer stands until
// the next watch()). What answered, and what it asks about, are read by the measured split's
// exchange (AggregatorPath::sample()), which is how every rank learns them and agrees on the
// request at which the job returns (coll_comm.h, "Returning": every asking rank must have its
// answer).
//
// Threads: watch() by the completer, answered() by any thread; the probes run on the prober's
// thread, started at the first watch() with something to probe and joined by the destructor
// (which waits for a probe under way: at most its connect and join timeouts).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "conflux/common/status.h"

namespace conflux::collnet {

class ReturnProber {
 public:
  // Whether the aggregator at `index` (of the list the job joined at connect) takes a job now:
  // ok, or why not.
  using Probe = std::function<Status(size_t index)>;

  explicit ReturnProber(Probe probe) : probe_(std::move(probe)) {}
  ~ReturnProber();
  ReturnProber(const ReturnProber&) = delete;
  ReturnProber& operator=(const ReturnProber&) = delete;

  // The aggregators to ask about (bit i: index i), from now on; 0 stops asking. answered()
  // is cleared (each return needs a fresh answer). A set that differs from the last one
  // restarts the backoff; the same set (a failed return) does not.
  void watch(uint64_t missing);
  // The missing aggregators that answered a probe (not asked again until watch()).
  uint64_t answered() const { return answered_.load(std::memory_order_acquire); }
  // The set of the last watch().
  uint64_t asking() const { return asking_.load(std::memory_order_acquire); }

  static constexpr std::chrono::milliseconds kFirstWait{250};
  static constexpr std::chrono::milliseconds kLongestWait{4000};

 private:
  void run();

  const Probe probe_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t missing_ = 0;  // mu_
  uint64_t watches_ = 0;  // mu_: watch() calls so far (a new one restarts the backoff)
  bool stop_ = false;     // mu_
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> asking_{0};  // missing_, for readers without mu_
  std::thread thread_;
};

}  // namespace conflux::collnet
