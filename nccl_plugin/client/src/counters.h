// SPDX-License-Identifier: Apache-2.0
// Engine counters: written by the progress thread only (single writer, so a relaxed
// load + store is enough and avoids locked instructions), read by any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "conflux/client/engine.h"

namespace conflux::client {

// Time in one state (a request in progress; contributions waiting for the window): closed
// stretches plus the open one. One writer (the progress thread); any thread reads total().
struct Stretches {
  std::atomic<uint64_t> closed_ns{0};
  std::atomic<uint64_t> since_ns{0};  // start of the open stretch (steady clock), 0: none

  void begin(uint64_t now) {
    if (since_ns.load(std::memory_order_relaxed) == 0) {
      since_ns.store(now, std::memory_order_seq_cst);
    }
  }
  void end(uint64_t now) {
    const uint64_t since = since_ns.load(std::memory_order_relaxed);
    if (since == 0) return;
    closed_ns.store(closed_ns.load(std::memory_order_relaxed) + (now > since ? now - since : 0),
                    std::memory_order_seq_cst);
    since_ns.store(0, std::memory_order_seq_cst);
  }
  // The open stretch too; retried when the writer closes or opens one meanwhile.
  uint64_t total() const {
    for (;;) {
      const uint64_t since = since_ns.load(std::memory_order_seq_cst);
      const uint64_t closed = closed_ns.load(std::memory_order_seq_cst);
      if (since_ns.load(std::memory_order_seq_cst) != since) continue;
      const auto now =
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
      return closed + (since != 0 && now > since ? now - since : 0);
    }
  }
};

struct Counters {
  using C = std::atomic<uint64_t>;
  C packets_sent{0}, packets_received{0}, bytes_sent{0}, bytes_received{0};
  C retransmits{0}, fast_retransmits{0}, results_accepted{0}, send_errors{0};
  C fault_dropped{0}, fault_duplicated{0}, fault_reordered{0};
  C requests_completed{0}, requests_failed{0};
  C spurious_retransmits{0}, cwnd_decreases{0};
  C gso_sends{0}, gso_fallbacks{0}, gro_receives{0}, multicast_results{0};
  C caller_steps{0};
  C progress_sleeps{0}, bulk_pauses{0}, dozes{0};
  C congestion_window{0};  // gauge: sum over aggregators of the current window (packets)
  Stretches busy;          // time with a request in progress
  Stretches window_full;   // time with contributions waiting for a window slot
  C grant_mbps{0};         // gauge: sum of the aggregators' current grants
  C grant_updates{0};      // Capacity updates received while running
  std::array<C, proto::kNumDropReasons> drops{};

  static void add(C& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void drop(proto::DropReason r) { add(drops[static_cast<size_t>(r)]); }

  EngineStats snapshot() const {
    auto g = [](const C& c) { return c.load(std::memory_order_relaxed); };
    EngineStats s;
    s.packets_sent = g(packets_sent);
    s.packets_received = g(packets_received);
    s.bytes_sent = g(bytes_sent);
    s.bytes_received = g(bytes_received);
    s.retransmits = g(retransmits);
    s.fast_retransmits = g(fast_retransmits);
    s.results_accepted = g(results_accepted);
    s.send_errors = g(send_errors);
    s.fault_dropped = g(fault_dropped);
    s.fault_duplicated = g(fault_duplicated);
    s.fault_reordered = g(fault_reordered);
    s.requests_completed = g(requests_completed);
    s.requests_failed = g(requests_failed);
    s.spurious_retransmits = g(spurious_retransmits);
    s.cwnd_decreases = g(cwnd_decreases);
    s.congestion_window = g(congestion_window);
    s.gso_sends = g(gso_sends);
    s.gso_fallbacks = g(gso_fallbacks);
    s.gro_receives = g(gro_receives);
    s.busy_ns = busy.total();
    s.window_full_ns = window_full.total();
    s.multicast_results = g(multicast_results);
    s.caller_steps = g(caller_steps);
    s.progress_sleeps = g(progress_sleeps);
    s.bulk_pauses = g(bulk_pauses);
    s.dozes = g(dozes);
    s.grant_mbps = g(grant_mbps);
    s.grant_updates = g(grant_updates);
    for (size_t i = 0; i < drops.size(); ++i) {
      s.drops[i] = g(drops[i]);
    }
    s.results_duplicated = s.drops[static_cast<size_t>(proto::DropReason::kDuplicate)];
    return s;
  }
};

}  // namespace conflux::client
