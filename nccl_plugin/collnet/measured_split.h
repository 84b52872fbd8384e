// SPDX-License-Identifier: Apache-2.0
// MeasuredSplit: the ring fraction of every request of a CollNet communicator. A number in
// CONFLUX_RING_FRACTION fixes it; with auto the ranks measure it (split_controller.h) as
// follows.
//
// fraction_for() gives each request its fraction and marks every request that ends a period
// (kPeriod*); when the ring thread takes a marked request, it calls start_exchange(): this
// rank's sample of the period goes into an allgather around the split ring (its own
// connection, so it never waits behind a ring share), which the ring thread advances between
// ring steps (advance()); the decision applies from the mark + kLag on. A request that would
// need a decision still pending is refused (NCCL retries), so every rank splits every request
// alike. A sample holds the ring path's bytes and busy time, which the ring thread reports
// (ring_carried(), ring_busy()), and the aggregator path's counters (AggregatorPath::sample(),
// also read when a ring share starts and ends: the aggregator bytes sent beside the ring).
//
// The exchange also carries what rank 0's ReturnProber found answering again: the same
// decision tells every rank to return to those aggregators at the mark + kLag
// (returning_at()).
//
// Threads: fraction_for() is called by one submitting thread (NCCL's proxy thread),
// returning_at() by the completer, everything else by the ring thread (RingWorker); mu_
// guards what they share. Nothing here blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "collnet/aggregator_path.h"
#include "collnet/coll_request.h"
#include "collnet/ring_exchange.h"
#include "collnet/split_controller.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"

namespace conflux::collnet {

class MeasuredSplit {
 public:
  // `fraction`: the ring fraction of every request, or the measured split's start.
  // `controller`: the measured split (empty: every request gets `fraction`); it is used only
  // with several ranks, `aggregators` to sample and the split ring (`next`: to rank + 1,
  // `prev`: from rank - 1; may be null).
  MeasuredSplit(int rank, int nranks, double fraction, std::optional<SplitController> controller,
                const AggregatorPath* aggregators, std::unique_ptr<net::SendComm> next,
                std::unique_ptr<net::RecvComm> prev);
  MeasuredSplit(const MeasuredSplit&) = delete;
  MeasuredSplit& operator=(const MeasuredSplit&) = delete;

  bool measured() const { return controller_.has_value(); }

  // Submitting thread. The ring fraction of request `seq` (r: its bytes; agg_ok: it may use
  // the aggregators), and the measured split's smallest ring share (0 when not measured).
  // False (request not taken) while the measured split for `seq` is not decided yet. Marks r
  // (split_exchange) when it ends a period.
  bool fraction_for(CollRequest& r, uint32_t seq, bool agg_ok, double* fraction,
                    size_t* min_ring_bytes);

  // Submitting thread, at connect, before any period has ended (so no exchange has started
  // and the ring thread leaves the controller alone): what the aggregators delivered in the
  // connect's bulk probe (bytes/s, agreed by every rank), taken by the controller's rule
  // (SplitController::take_connect_probe); every later request gets the split that follows.
  // True if it replaced the capacity prior; *fraction: the ring fraction from now on.
  bool take_connect_probe(double delivered_bps, double* fraction);

  // Completer: the aggregators the ranks agreed to return to at or before request `seq` (bit
  // i: index i), each agreement given once; 0 when none. Every decision with a start at or
  // before `seq` is known once a request from `seq` on that may use the aggregators was
  // taken (fraction_for()), so the answer is the same on every rank for such requests.
  uint64_t returning_at(uint32_t seq);

  // Ring thread, from here on (measured only, but for ring_carried()).
  // A period's exchange is running (the next one starts only after it).
  bool exchanging() const { return running_; }
  // The ring thread took the request that ends the period at `seq`: starts its exchange.
  void start_exchange(uint32_t seq);
  // Advances a running exchange, publishing its decision at its end; true if anything moved.
  bool advance();
  // A ring share of `bytes` completed.
  void ring_carried(size_t bytes) { ring_bytes_ += static_cast<double>(bytes); }
  // Whether a ring share is running now (called between ring steps).
  void ring_busy(bool running);

 private:
  // NCCL_DEBUG=TRACE, rank 0: every rank's sample of the period the split is decided from.
  void trace_samples(const PathSample* all) const;
  void publish(uint32_t seq, const SplitDecision& d, uint64_t answered);

  const int rank_, nranks_;
  const AggregatorPath* aggregators_;
  std::unique_ptr<net::SendComm> next_;  // the split ring
  std::unique_ptr<net::RecvComm> prev_;

  // mu_ guards what fraction_for() shares with the ring thread.
  std::mutex mu_;
  struct Change {
    uint32_t from = 0;  // the first request it applies to
    double fraction = 0;
    size_t min_ring_bytes = 0;
  };
  double now_ = 0;                // mu_
  size_t min_now_ = 0;            // mu_
  std::deque<Change> changes_;    // mu_
  std::deque<uint32_t> pending_;  // mu_: marks not decided
  struct Return {
    uint32_t from = 0;
    uint64_t aggregators = 0;
  };
  std::deque<Return> returns_;    // mu_: agreed returns, by `from`
  uint64_t period_bytes_ = 0;     // mu_
  uint32_t period_requests_ = 0;  // mu_
  uint32_t periods_ended_ = 0;    // mu_: requests marked as a period's end so far

  std::optional<SplitController> controller_;  // ring thread (set once)
  std::unique_ptr<AsyncRingAllgather> round_;  // ring thread
  bool running_ = false;                       // ring thread: a round in flight
  bool broken_ = false;  // ring thread: the split ring failed; the split stays
  uint32_t seq_ = 0;     // ring thread: the period end of the running round
  // Ring thread: the period's measurements; the aggregator counters when the ring share that
  // is running started (ring_since_) and when the period started (baseline_).
  double ring_bytes_ = 0, ring_busy_s_ = 0, agg_sent_with_ring_ = 0;
  bool ring_running_ = false;
  std::chrono::steady_clock::time_point ring_since_;
  uint64_t sent_at_ring_start_ = 0;
  AggregatorSample baseline_;
};

}  // namespace conflux::collnet
