// SPDX-License-Identifier: Apache-2.0
// What a backend calls for every received datagram: fault injection (test builds,
// CONFLUX_TEST_HOOKS, when configured) in front of the SlotEngine. The daemon's one test-hook
// seam with dataplane.cc's make_fault_injector. One per dataplane thread; backend independent.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "aggregator/engine/fault_injector.h"
#include "aggregator/engine/slot_engine.h"

namespace conflux::agg {

class RxPipeline final {
 public:
  // Results one received datagram can produce at most: it, a duplicate and a released
  // delayed datagram are handled, each adding up to SlotEngine::kMaxResultsPerContrib.
  static constexpr size_t kMaxResultsPerDatagram = 3 * SlotEngine::kMaxResultsPerContrib;

  // `faults` may be null (no injection).
  RxPipeline(SlotEngine& engine, std::unique_ptr<FaultInjector> faults)
      : engine_(engine), faults_(std::move(faults)) {
    if (faults_ != nullptr && !faults_->enabled()) faults_.reset();
  }

  void on_datagram(std::span<const uint8_t> d, Source src, ResultBatch& out) {
#ifdef CONFLUX_TEST_HOOKS
    if (faults_ != nullptr) {
      on_datagram_with_faults(d, src, out);
      return;
    }
#endif
    engine_.on_datagram(d, src, out);
  }

  // Releases a delayed datagram, if any (call when the queue goes idle).
  void flush(ResultBatch& out) {
    if (held_len_ == 0) return;
    engine_.on_datagram({held_.data(), held_len_}, held_src_, out);
    held_len_ = 0;
  }

 private:
#ifdef CONFLUX_TEST_HOOKS
  void on_datagram_with_faults(std::span<const uint8_t> d, Source src, ResultBatch& out) {
    QueueCounters& c = engine_.counters();
    switch (faults_->decide()) {
      case FaultInjector::Action::kDrop:
        c.faults[static_cast<int>(FaultKind::kDrop)].inc();
        return;
      case FaultInjector::Action::kDelay:
        if (held_len_ == 0 && !d.empty()) {  // hold it until the next datagram is handled
          held_.assign(d.begin(), d.end());
          held_len_ = d.size();
          held_src_ = src;
          c.faults[static_cast<int>(FaultKind::kReorder)].inc();
          return;
        }
        break;
      case FaultInjector::Action::kDup:
        c.faults[static_cast<int>(FaultKind::kDup)].inc();
        engine_.on_datagram(d, src, out);
        break;
      case FaultInjector::Action::kPass:
        break;
    }
    engine_.on_datagram(d, src, out);
    flush(out);
  }
#endif

  SlotEngine& engine_;
  std::unique_ptr<FaultInjector> faults_;
  std::vector<uint8_t> held_;
  size_t held_len_ = 0;
  Source held_src_;
};

}  // namespace conflux::agg
