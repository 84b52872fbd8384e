// SPDX-License-Identifier: Apache-2.0
// Dataplane and per-job counters. Each block is written by exactly one dataplane thread
// (relaxed load + store, no read-modify-write) and read by the control thread when it renders
// /metrics. Blocks are cache-line aligned so threads never share a line.
#pragma once

#include <atomic>
#include <cstdint>

#include "conflux/protocol/data.h"

namespace conflux::agg {

// Single-writer counter: cheap increment by its owner, consistent reads by anyone.
class Counter {
 public:
  void add(uint64_t n) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void inc() { add(1); }
  void set(uint64_t v) { v_.store(v, std::memory_order_relaxed); }  // gauges
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

enum class FaultKind : uint8_t { kDrop = 0, kDup = 1, kReorder = 2 };
inline constexpr int kNumFaultKinds = 3;

// Counters of one dataplane thread (queue).
struct alignas(64) QueueCounters {
  Counter packets_in;
  Counter bytes_in;
  Counter packets_out;
  Counter bytes_out;
  Counter retransmits_served;  // results re-sent from a COMPLETE bank
  Counter slots_completed;
  Counter gather_ns;            // first to last contribution, summed over completed generations
  Counter send_errors;          // datagrams the kernel refused to send
  Counter gso_sends;            // sends of several datagrams at once (UDP GSO)
  Counter gro_receives;         // received buffers of several datagrams (UDP GRO)
  Counter sleeps;               // udp: waits for a datagram (each ends in a wake-up)
  Counter uplink_resends;       // tree leaf: partial results sent up again
  Counter uplink_resends_held;  // tree leaf: resends answered by a request already sent up
  Counter direct_results;       // tree parent: results sent straight to a child's members' group
  Counter deferred;             // result messages set aside while their job's bucket was in debt
  Counter borrowed;             // of those, sent beyond the job's share while no other job waited
  Counter drops[proto::kNumDropReasons];  // index = DropReason; [0] unused
  Counter faults[kNumFaultKinds];         // injected faults (test builds)

  void drop(proto::DropReason r) { drops[static_cast<int>(r)].inc(); }
};

// Counters of one job on one dataplane thread.
struct alignas(64) JobQueueCounters {
  Counter packets_in;  // datagrams accepted for this job (valid id and token)
  Counter bytes_in;
  Counter slots_completed;
  Counter results_sent;     // RESULT datagrams sent (fan-out counts every worker)
  Counter drops;            // of packets_in: dropped by the slot state machine (any reason)
  Counter result_bytes;     // their bytes (a multicast send counts once)
  Counter unicast_resends;  // results re-sent to one rank from a COMPLETE bank
  // Over its completed slot generations: nanoseconds from the first contribution to the last
  // (how long the slowest rank kept the others waiting; per generation, gather_ns divided by
  // slots_completed).
  Counter gather_ns;
};

}  // namespace conflux::agg
