// RingWorker: the ring shares of a CollNet communicator's requests, on the ring thread.
//
// Each request with a ring share ([agg_count, count)) runs a RingRun on one lane of the main
// ring (the i-th ring share uses lane i mod lanes on every rank, so every lane carries its
// requests in the same order everywhere), up to one per lane at a time, started in request
// order. A request without a ring share is done at once (one rank: its share is a copy).
// After the first ring share fails, every later one fails too.
//
// The measured split (CONFLUX_RING_FRACTION=auto, split_controller.h) lives here as well,
// because the ring thread runs its exchanges: split_for() gives each request its fraction
// and marks every request that ends a period (kSplitPeriod*); when the ring thread takes a
// marked request, this rank's sample of the period goes into an allgather around the split
// ring (its own connection, so it never waits behind a ring share), which the ring thread
// advances between ring steps; the decision applies from the mark + kSplitLag on. A request
// that would need a decision still pending is refused (NCCL retries), so every rank splits
// every request alike. The samples of the aggregator path come from `probe`.
//
// Threads: split_for() and enqueue() are called by one submitting thread (NCCL's proxy
// thread), wait_share() by one completing thread; none of them blocks on the rings.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collnet/aggregator_path.h"
#include "collnet/coll_request.h"
#include "collnet/ring_exchange.h"
#include "collnet/ring_run.h"
#include "collnet/split_controller.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"

namespace conflux::collnet {

// The connections a RingWorker owns (each: send to rank + 1, receive from rank - 1).
struct RingLanes {
  std::vector<std::unique_ptr<net::SendComm>> next;  // one per lane
  std::vector<std::unique_ptr<net::RecvComm>> prev;
  std::unique_ptr<net::SendComm> split_next;  // the measured split's exchanges; may be null
  std::unique_ptr<net::RecvComm> split_prev;
};

class RingWorker {
 public:
  // `controller`: the measured split (empty: every request gets `fraction`). Starts the
  // ring thread. `closing` (owned by the caller) ends every wait once set.
  RingWorker(int rank, int nranks, RingLanes lanes, const RingSettings& settings, double fraction,
             std::optional<SplitController> controller, std::function<AggregatorSample()> probe,
             const std::atomic<bool>& closing);
  ~RingWorker();  // stop()
  RingWorker(const RingWorker&) = delete;
  RingWorker& operator=(const RingWorker&) = delete;

  // The ring fraction of request `seq` (r: its bytes; agg_ok: it may use the aggregators), and
  // the measured split's smallest ring share (0 when not measured). False (request not
  // taken) while the measured split for `seq` is not decided yet.
  bool split_for(CollRequest& r, uint32_t seq, bool agg_ok, double* fraction,
                 size_t* min_ring_bytes);
  bool measured() const { return controller_.has_value(); }
  // Takes r (its split set) in submission order; completes its ring share later.
  void enqueue(CollRequest* r);
  // Waits (sleeping) until the ring share of r is done; false if it failed. r may be freed
  // once this returns.
  bool wait_share(CollRequest& r, std::string* error);
  // Ends the ring thread (running ring shares fail); idempotent.
  void stop();

 private:
  void run();
  // Takes the queue's front requests in order, as far as their lanes are free (sleeping
  // while nothing runs and nothing is queued), and starts their ring shares in `active`
  // (one per lane); *took: whether it took any. False once stopped.
  bool start_taken(std::vector<std::unique_ptr<RingRun>>& active, bool* took);
  void share_done(CollRequest* r, bool ok, const std::string& error);
  // Measured split, ring thread: the exchange of the period ending at `seq`; advancing it
  // (true if anything moved); publishing a decision; the ring path's busy time.
  void start_split_exchange(uint32_t seq);
  bool advance_split();
  // NCCL_DEBUG=TRACE, rank 0: every rank's sample of the period the split is decided from.
  void trace_samples(const PathSample* all) const;
  void publish_split(uint32_t seq, const SplitDecision& d);
  void track_ring_busy(bool running);

  const int rank_, nranks_;
  RingLanes lanes_;
  const RingSettings settings_;
  std::function<AggregatorSample()> probe_;
  const std::atomic<bool>& closing_;
  std::vector<std::vector<uint8_t>> scratch_;  // one per lane

  std::mutex mu_;
  std::condition_variable wake_;    // queue_ or stop_ changed: the ring thread
  std::deque<CollRequest*> queue_;  // submission order
  bool stop_ = false;
  std::mutex done_mu_;  // ring shares completing: CollRequest::ring_state
  std::condition_variable done_cv_;
  bool failed_ = false;   // ring thread: a ring share failed
  uint64_t started_ = 0;  // ring thread: ring operations started (next lane)

  // Measured split; split_mu_ guards what split_for() shares with the ring thread.
  std::mutex split_mu_;
  struct SplitChange {
    uint32_t from = 0;  // the first request it applies to
    double fraction = 0;
    size_t min_ring_bytes = 0;
  };
  double split_now_ = 0;                             // split_mu_
  size_t split_min_now_ = 0;                         // split_mu_
  std::deque<SplitChange> split_changes_;            // split_mu_
  std::deque<uint32_t> split_pending_;               // split_mu_: marks not decided
  uint64_t period_bytes_ = 0;                        // split_mu_
  uint32_t period_requests_ = 0;                     // split_mu_
  std::optional<SplitController> controller_;        // ring thread (set once)
  std::unique_ptr<AsyncRingAllgather> split_round_;  // ring thread
  bool split_running_ = false;                       // ring thread: a round in flight
  bool split_broken_ = false;  // ring thread: the split ring failed; the split stays
  uint32_t split_seq_ = 0;     // ring thread: the period end of the running round
  // Ring thread: the period's measurements, and the aggregator counters they start from.
  double ring_bytes_ = 0, ring_busy_s_ = 0, agg_sent_with_ring_ = 0;
  bool ring_running_ = false;
  std::chrono::steady_clock::time_point ring_since_;
  uint64_t sent_at_ring_start_ = 0;
  const void* sample_engine_ = nullptr;
  uint64_t sample_sent_ = 0, sample_busy_ns_ = 0, sample_full_ns_ = 0;

  std::thread thread_;  // last: started once everything above is set
};

}  // namespace conflux::collnet
