// SPDX-License-Identifier: Apache-2.0
// Whether, and when, the join tries a control connection to an aggregator again (join.cc). An
// aggregator that closes or resets the connection before it answers has shed it (out of
// descriptors, or its connection limits made room for a newer one: aggregator/DESIGN.md
// "Connection limits and eviction"); one that refuses the connect is not listening (yet:
// starting or restarting). Both are tried again after a backoff, 10 ms doubling to 500 ms, each
// wait drawn from [d/2, d] so that the ranks of a job do not come back in step; dropped
// connections until the join deadline, refused ones for a shorter budget (connect_timeout), so
// that an aggregator that is down costs no more than one that does not answer. An answer that
// says no (Error, a JoinAck that is not ok, a version mismatch, a malformed frame) is final.
// No clock, no I/O, no threads: tested on its own.
#pragma once

#include <algorithm>
#include <cstdint>

namespace conflux::client {

enum class ConnectFailure : uint8_t {
  kRefused,  // connect(): ECONNREFUSED, nothing listens
  kDropped,  // closed or reset before an answer (the ServerHello; after a Join, the JoinAck)
  kFinal,    // anything else: timeout, unresolvable name, an answer that says no
};

class ConnectBackoff {
 public:
  static constexpr int64_t kFirstWaitNs = 10'000'000;  // 10 ms
  static constexpr int64_t kMaxWaitNs = 500'000'000;   // 500 ms

  // No attempt starts after deadline_ns; refused connects are tried again only until
  // start_ns + refused_budget_ns. seed: the jitter's (any value).
  ConnectBackoff(int64_t start_ns, int64_t deadline_ns, int64_t refused_budget_ns, uint64_t seed)
      : deadline_ns_(deadline_ns),
        refused_until_ns_(std::min(deadline_ns, start_ns + refused_budget_ns)),
        rng_(seed | 1) {}

  // After the attempt that failed with `f` at now_ns: when to try again, or -1 for never.
  int64_t next_attempt(ConnectFailure f, int64_t now_ns) {
    ++failures_;
    if (f == ConnectFailure::kFinal) return -1;
    const int64_t until = f == ConnectFailure::kRefused ? refused_until_ns_ : deadline_ns_;
    const int64_t base = std::min(kMaxWaitNs, kFirstWaitNs << std::min(retries_, 6));
    const int64_t half = base / 2;
    const int64_t wait =
        half + static_cast<int64_t>(next_random() % static_cast<uint64_t>(half + 1));
    const int64_t at = now_ns + wait;
    if (at >= until) return -1;
    ++retries_;
    return at;
  }

  int failures() const { return failures_; }  // failed attempts so far
  int retries() const { return retries_; }    // attempts granted after a failure

 private:
  uint64_t next_random() {  // xorshift64*
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1Dull;
  }

  int64_t deadline_ns_;
  int64_t refused_until_ns_;
  uint64_t rng_;
  int failures_ = 0;
  int retries_ = 0;
};

}  // namespace conflux::client
