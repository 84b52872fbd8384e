// SPDX-License-Identifier: Apache-2.0
#include "collnet/return_prober.h"

#include <algorithm>

#include "conflux/common/thread_name.h"
#include "net/log.h"

namespace conflux::collnet {

ReturnProber::~ReturnProber() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReturnProber::watch(uint64_t missing) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A new set restarts the backoff. The same set again (a return that some rank could not
    // join) keeps it: the next probe comes after the longest wait, so an aggregator that
    // takes a probe but not the job costs at most one failed return per kLongestWait.
    if (missing != missing_) ++watches_;
    missing_ = missing;
    asking_.store(missing, std::memory_order_release);
    answered_.store(0, std::memory_order_release);  // asked again before the next return
    if (missing != 0 && !thread_.joinable()) {
      thread_ = std::thread([this] {
        name_this_thread("cfx-probe");
        run();
      });
    }
  }
  cv_.notify_all();
}

void ReturnProber::run() {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t seen = watches_;
  std::chrono::milliseconds wait = kFirstWait;
  for (;;) {
    // Sleep until the wait is over, a new watch() restarts the backoff, or the end.
    cv_.wait_for(lk, wait, [&] { return stop_ || watches_ != seen; });
    if (stop_) return;
    if (watches_ != seen) {
      seen = watches_;
      wait = kFirstWait;
      continue;
    }
    const uint64_t ask = missing_ & ~answered_.load(std::memory_order_acquire);
    bool any = false;
    lk.unlock();
    for (size_t i = 0; i < 64; ++i) {
      if (((ask >> i) & 1) == 0) continue;
      const Status why = probe_(i);
      if (why.ok()) {
        answered_.fetch_or(uint64_t{1} << i, std::memory_order_acq_rel);
        any = true;
        CFX_INFO(net::kLogColl, "CollNet: aggregator %zu of the job answers again", i);
      } else {
        CFX_TRACE(net::kLogColl, "CollNet: aggregator %zu still does not take jobs: %s", i,
                  why.message().c_str());
      }
    }
    lk.lock();
    // An answer is kept until the next watch(); until then there is nothing to ask soon.
    wait = any ? kLongestWait : std::min(2 * wait, kLongestWait);
  }
}

}  // namespace conflux::collnet
