// SPDX-License-Identifier: Apache-2.0
// CollComm: one CollNet communicator on one rank. It splits every request between the
// aggregators and the worker ring (coll_request.h) as its MeasuredSplit says
// (measured_split.h), hands the aggregator share to its AggregatorPath (aggregator_path.h: the
// client engine) and the ring share to its RingWorker (ring_worker.h), in that order, and
// completes the requests in order on its completion thread. When the
// aggregators fail it runs the failover protocol of its Failover (failover.h) with the other ranks,
// then re-stripes over the survivors if there are any.
//
// agg_count = count * (1 - ring_fraction), rounded down; requests with an (dtype, op) the
// aggregators do not take, or issued after the aggregators failed, put everything on the ring.
//
// Re-striping: in the failover agreement each rank also says which aggregator its engine saw
// fail and how many requests it has been given. If the engine had several aggregators and
// some were seen by no rank to fail, every rank joins a new job on those survivors; once all
// joined, requests from S = max(hi, most requests given to any rank) on send their
// aggregator share there (requests in [hi, S) are redone over the failover ring). A later
// failure of the new engine fails over the same way.
//
// Returning: a job that lost aggregators (failure, drain, restart) comes back to them. Rank
// 0's ReturnProber (return_prober.h) asks the missing ones in the background whether they take
// jobs again (every rank asks its own where the ranks named different aggregators: a tree's
// leaves); what answered travels with the measured split's next exchange, whose decision
// gives every rank the same request R to return at, once every asking rank has its answer
// (MeasuredSplit::returning_at(): the first request from the decision's start on that may use
// the aggregators). At R every rank fails over on purpose with the returning aggregators in
// its vote: the failover's hand-overs and redo keep every result exact, then the ranks join a
// new job on every aggregator not seen dead and carry on from S as after a re-stripe. If some
// rank cannot join, the job goes back to the aggregators it had (or the ring) and the probers
// ask again. Without the measured split (CONFLUX_RING_FRACTION a number) there is no exchange,
// and no return.
//
// ReduceScatter and AllGather (CollNetDirect) work on a window [offset, offset + bytes) of
// the nranks * bytes_per_rank buffer; rank k owns the part of the window inside
// [k * bytes_per_rank, (k + 1) * bytes_per_rank). ReduceScatter splits the window as above;
// its aggregator share goes to the engine as one Reduce per owner (the aggregators send
// each rank only its own shard and acknowledgements for the rest), its ring share runs the
// reduce-scatter phase only. AllGather runs over the ring.
//
// Threads: iallreduce() and test() are called by NCCL's proxy thread and never block. The
// RingWorker's thread runs the ring shares; the completion thread waits for the aggregator
// shares (and runs failover), waits for the ring share, delivers and completes each request
// in order. Destruction joins both.
//
// Inline completion (with caller progress): a small AllReduce that goes wholly through the
// first engine is not handed to the completion thread. NCCL's proxy thread, polling test(),
// reads its result through the engine and completes it there, as NCCL's own transports do
// their I/O inside test(): no thread hand-off, and no second thread polling for it (at N = 2
// on two cores, five polling threads made a 4 B AllReduce's p90 50-120 us). Whoever
// completes requests holds complete_mu_: the completion thread while it works (test() then
// leaves the request to it), or test() for one try. Anything but success (an engine error, a
// failover) is left to the completion thread, which also takes such a request when it wakes
// (at least every 20 ms) and finds it still queued.
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
#include <vector>

#include "collnet/aggregator_path.h"
#include "collnet/coll_request.h"
#include "collnet/failover.h"
#include "collnet/measured_split.h"
#include "collnet/ring_run.h"
#include "collnet/ring_worker.h"
#include "collnet/split_controller.h"
#include "collnet/staging.h"
#include "conflux/client/engine.h"
#include "conflux/common/dtype.h"
#include "conflux/common/status.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

struct CollOptions {
  double ring_fraction = 0.0;  // share of every AllReduce that goes over the ring, 0..1
  // CONFLUX_RING_FRACTION=auto: the ranks measure both paths and move the split while the job
  // runs (split_controller.h; ring_fraction is then its starting point). Empty: it stays.
  std::optional<SplitController> controller;
  size_t ring_min_bytes = 0;  // a smaller ring share goes through the aggregators (split.h)
  RingSettings ring;          // block size, blocks in flight, no-progress timeout (ring_run.h)
#ifdef CONFLUX_TEST_HOOKS
  uint32_t fault_abort_at = 0;  // > 0: abort the engine at this request (test_hooks.h)
#endif
  // After it completed a request and found no other, the completion thread polls this long for
  // the next before it sleeps (CONFLUX_BUSY_POLL_US, with caller progress): a job of small
  // AllReduces back to back then never waits for the thread to wake (0 = sleep at once).
  std::chrono::microseconds idle_poll{0};
  // NCCL's proxy thread completes small AllReduces that go wholly through the aggregators
  // inside test() (see "Inline completion"; CONFLUX_CALLER_PROGRESS).
  bool inline_completion = false;
  // Joins a new job on the surviving aggregators (AggregatorPath::Rejoin). Empty: a failover
  // never re-stripes.
  AggregatorPath::Rejoin rejoin;
  // Whether an aggregator the job lost takes jobs again (rank 0 asks; "Returning"). Empty: a
  // job never returns to one.
  ReturnProber::Probe probe;
  // Every rank asks (the ranks named different aggregators, as under a tree's leaves: rank 0's
  // answer says nothing of the others').
  bool probe_on_every_rank = false;
  // How NCCL's requests are cut and device memory is staged (staging.h).
  StagingOptions staging;
};

// The rings a CollComm owns (each: send to rank + 1, receive from rank - 1): the main ring,
// one connection per lane (ring shares of consecutive requests run at the same time, one per
// lane; 1 lane = one at a time), for its RingWorker; the split ring, for its MeasuredSplit;
// the failover ring, for its Failover.
struct CollRings {
  std::vector<std::unique_ptr<net::SendComm>> next;
  std::vector<std::unique_ptr<net::RecvComm>> prev;
  std::unique_ptr<net::SendComm> failover_next;
  std::unique_ptr<net::RecvComm> failover_prev;
  // The measured split's exchanges (driven by the ring thread), so they never wait behind
  // ring shares.
  std::unique_ptr<net::SendComm> split_next;
  std::unique_ptr<net::RecvComm> split_prev;
};

class CollComm {
 public:
  // Takes ownership of the rings and the engine (engine may be null: ring only).
  CollComm(int rank, int nranks, CollRings rings, std::unique_ptr<client::Engine> engine,
           const CollOptions& opts);
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  // Starts an AllReduce; never blocks. *out gets the request.
  net::Status iallreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                         CollRequest** out);
  // CollNetDirect collectives on a window (see above); never block. The parts' sizes must
  // add up to the window's bytes (checked by the caller).
  net::Status ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                             const CollWindow& w, DType dtype, Op op, CollRequest** out);
  net::Status iallgather(const void* send, const std::vector<CollPart>& recv_parts,
                         const CollWindow& w, CollRequest** out);
  // Non-blocking. On done (or error) the request is released.
  static net::Status test(CollRequest* req, bool* done, size_t* bytes);

  // NCCL's calls go through here (staging.h), which calls the collectives above.
  Staging& staging() { return *staging_; }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Connect, after its probes and before any other request (MeasuredSplit::take_connect_probe):
  // the measured split starts from what the aggregators delivered in the bulk probe when that
  // is under half of the capacity it assumed. True if it did; *fraction: the split from here.
  bool take_connect_probe(double delivered_bps, double* fraction) {
    return split_.take_connect_probe(delivered_bps, fraction);
  }

  static constexpr uint32_t kMagic = 0x43434f4d;
  bool valid() const { return magic_ == kMagic; }

 private:
  void run_completion();
  // The completion thread's idle poll (CollOptions::idle_poll): true once a request was queued
  // after the `seen`-th, false when the time is up or the comm is closing.
  bool poll_for_request(uint64_t seen);
  // With mu_ held: whether the oldest request is the completion thread's to complete now (see
  // "Inline completion": one that test() completes only once it has waited long).
  bool has_work_locked() const;
  // Sets r's split (split_), hands the aggregator share to aggs_ and the ring share to ring_,
  // then queues r. False (r not taken) while the measured split for r's sequence number is
  // not decided yet.
  bool submit(CollRequest* r, bool agg_capable);
  // The INFO line on small AllReduces' times (SmallAllReduceTimes), at close.
  void log_small_times() const;
  // ReduceScatter / AllGather: moves the result where NCCL wants it.
  void deliver(CollRequest& r) const;
  // Waits for the request's aggregator part; an error if it failed.
  Status wait_aggregators(CollRequest& r);
  // The aggregator share of r, on the completion thread: engine, hand-over or redo.
  Status aggregator_share(CollRequest& r);
  // Fails over (failover.h) with `first_incomplete` as this rank's fi, then re-stripes;
  // `cause`: why (logged). An error if the failover ring failed (every later aggregator share
  // then fails). With `back`, a planned failover to return to those aggregators ("Returning").
  Status fail_over(uint32_t first_incomplete, const Status& cause, uint64_t back = 0);
  // Before r's aggregator share: fails over to return if the ranks agreed to at r.
  void return_if_agreed(const CollRequest& r);
  // After a returning failover's hand-overs: joins every aggregator not seen dead; if some rank
  // cannot, the ones of `before` not seen dead (none: the ring). An error if the ring failed.
  Status return_to(const FailoverAgreement& a, const std::vector<size_t>& before, uint32_t from);
  // Every rank joins a new job on `target` (indices of the connect's list) and, if all did,
  // carries aggregator shares from `from` on through it (*joined). `what` and `noun` name
  // the step in the log. An error if the failover ring failed.
  Status join_everywhere(std::vector<size_t> target, uint32_t from, const char* what,
                         const char* noun, bool* joined);
  // After a failover's hand-overs: joins a new job on the aggregators no rank saw fail, if
  // any are left, and (when every rank joined) carries aggregator shares from request
  // `from` on through it. An error if the failover ring failed.
  Status rejoin_survivors(uint64_t dead_mask, uint32_t from);
  // Hands the queued requests the re-joined engine has not had to it, in order.
  void feed_engine();
  // Idle (no request queued): whether to fail over now, on a notice or a failed engine.
  bool idle_failover_due();
  // Fails over with no request queued (idle_failover_due()); a failure is logged.
  void fail_over_idle();
  // The queued request with this sequence number, or nullptr (completed here, or none).
  CollRequest* queued(uint32_t seq);
  void finish(CollRequest& r, const Status& result);
  // test() on NCCL's proxy thread: completes r if it is the oldest request, its one engine
  // request is done, and no other thread is completing requests (see above).
  void complete_inline(CollRequest* r);
  bool stopped() const { return stopping_.load(std::memory_order_acquire); }

  uint32_t magic_ = kMagic;
  const int rank_, nranks_;
  const CollOptions opts_;
  // First, so destroyed last: its pinned slots outlive the engine and the threads that may
  // still write into them until the destructor has stopped them.
  std::unique_ptr<Staging> staging_;
  std::atomic<bool> stopping_{false};  // set by the destructor; ends waits on the rings

  std::mutex mu_;
  std::condition_variable cv_;       // queue_ or stop_ changed: the completion thread
  std::deque<CollRequest*> queue_;   // submission order; popped by the completion thread
  std::atomic<uint64_t> queued_{0};  // requests ever pushed to queue_ (the idle poll watches it)
  bool stop_ = false;
  std::atomic<uint32_t> next_seq_{0};  // written by the proxy thread only

  // Held by whichever thread completes requests (see "Inline completion"); next_unfinished_,
  // failover_ and aggs_ (but for submit() and sample()) belong to its holder.
  std::mutex complete_mu_;
  uint32_t next_unfinished_ = 0;  // seq of the oldest request not yet completed here

  SmallAllReduceTimes small_times_;  // proxy thread; logged at close

  // Before aggs_, which sizes the result ends it gives the engine by failover_'s tails (and
  // so destroyed after the engine).
  std::unique_ptr<Failover> failover_;
  AggregatorPath aggs_;
  MeasuredSplit split_;               // samples aggs_
  std::unique_ptr<RingWorker> ring_;  // after the split it drives
  std::thread thread_;
};

}  // namespace conflux::collnet
