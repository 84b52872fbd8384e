// SPDX-License-Identifier: Apache-2.0
// AggregatorPath: the aggregator shares of a CollNet communicator's requests. It owns the
// client engine that carries them, hands each share to it and waits for it, and re-joins the
// surviving aggregators after a failover (CollComm decides when; Failover agrees with the
// other ranks). The measured split samples its counters (sample()).
//
// Engines: the first one (from connect) carries the aggregator shares from request 0 on.
// When the aggregators fail, fail_over() stops the path. After the failover's hand-overs,
// restripe_due() says whether some aggregators survive, rejoin() joins a new job on them
// (epoch 1, 2, ...), and, once every rank joined, adopt() makes it carry the aggregator shares
// of requests from `from` on (re-striping): the completer then hands it the queued requests
// itself, in order (feed()), since submit() no longer does.
//
// Returning: on rank 0 a ReturnProber asks the aggregators the path no longer uses (missing())
// whether they take jobs again; sample() carries what answered to the other ranks (the
// measured split's exchange). Once the ranks agreed to return (coll_comm.h), return_due()
// names the aggregators to join, and rejoin()/adopt() carry on as for a re-stripe.
//
// Threads: submit() is called by NCCL's proxy thread, sample() by the ring thread (the
// measured split), everything else by the completer (whoever holds CollComm's complete_mu_:
// its completion thread, or test() for one try; see coll_comm.h, "Inline completion"). mu_
// guards the engine's swaps and fail_over() against submit() and sample(); the completer
// reads the engine without it, since only the completer swaps it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collnet/coll_request.h"
#include "collnet/result_tails.h"
#include "collnet/return_prober.h"
#include "conflux/client/engine.h"
#include "conflux/common/dtype.h"
#include "conflux/common/status.h"

namespace conflux::collnet {

// The aggregator path's counters, as the measured split samples them.
struct AggregatorSample {
  const void* engine = nullptr;  // the engine of the moment (counters restart with a new one)
  uint64_t bytes_sent = 0;
  uint64_t busy_ns = 0;
  uint64_t window_full_ns = 0;
  double grant_mbps = 0;
  uint32_t epoch = 0;        // re-stripes so far
  uint32_t aggregators = 0;  // aggregators of that epoch's engine
  uint64_t answered = 0;     // with a ReturnProber: missing aggregators that answer again
  uint64_t asked = 0;        // and those it asks about
};

class AggregatorPath {
 public:
  // Joins a new job on the aggregators of the original list at `survivors` (indices into it);
  // `epoch` (1, 2, ...) makes the job distinct from the earlier ones. Blocks up to the join
  // timeout. *out: the engine, set when the join worked.
  using Rejoin = std::function<Status(const std::vector<size_t>& survivors, uint32_t epoch,
                                      std::unique_ptr<client::Engine>* out)>;

  // `engine` may be null (ring only). `tails`: where the failover keeps result ends (the
  // engine writes each AllReduce's end there as it arrives). `rejoin` empty: a failover never
  // re-stripes. `probe` (used on rank 0, or on every rank with `probe_on_every_rank`, with
  // `rejoin`): whether a missing aggregator takes jobs again; empty: the job never returns to
  // one.
  AggregatorPath(int rank, std::unique_ptr<client::Engine> engine, const ResultTails& tails,
                 Rejoin rejoin, ReturnProber::Probe probe = {}, bool probe_on_every_rank = false);
  AggregatorPath(const AggregatorPath&) = delete;
  AggregatorPath& operator=(const AggregatorPath&) = delete;

  // Whether the first engine reduces (dtype, op). The split of a request must not depend on
  // the engine of the moment (it may be replaced on one rank before another): what the first
  // engine reduces decides it.
  bool reduces(DType dtype, Op op) const;

  // Proxy thread: hands r's aggregator share [0, agg_count) to the engine (an in-place
  // request's input is copied first: the engine and a redo read it). False once a failover
  // stopped the path: after a failover the completer feeds the engine, if any.
  bool submit(CollRequest& r);

  // Ring thread: the counters the measured split samples.
  AggregatorSample sample() const;

  // The completer, from here on.
  // An engine carries the aggregator shares (none since a failover, until a re-join).
  bool live() const { return live_; }
  // Whether request seq's aggregator share is the engine's (else it is redone over the
  // failover ring).
  bool carries(uint32_t seq) const { return live_ && seq >= from_; }
  uint32_t epoch() const { return epoch_; }  // re-joins so far
  // Ok while the engine works; else why it failed (or that there is none).
  Status health() const;
  // Aborts the engine, if any (also from the destructor of CollComm, whose completion thread
  // may still swap the engine then).
  void abort(std::string_view why);
  // Hands r to the re-joined engine unless it has had it (requests from adopt()'s `from` on,
  // each once, in the order they are fed).
  void feed(CollRequest& r);
  // Waits for r's engine requests, sleeping in the engine for one slice at most: *done once
  // all are done, an error if one failed, ok and not *done when the slice ran out.
  Status wait(CollRequest& r, bool* done);
  // Inline completion: whether r's one request on the first engine is done; kPending also
  // when r is not carried that way.
  client::RequestState poll_inline(const CollRequest& r);

  // Failover. Stops the path: submit() hands nothing more, and the engine is aborted (no
  // engine thread may write into a request's buffer once hand-overs start). Returns the
  // original index (as a bit) of the aggregator the engine saw fail, 0 if none.
  uint64_t fail_over();
  // After the agreement (`dead`: the aggregators some rank saw fail): whether some rank named
  // a failed aggregator of this engine and others are left, and which (*survivors). Uses
  // agreed values only, so every rank takes the same branch.
  bool restripe_due(uint64_t dead, std::vector<size_t>* survivors);
  // Leaves the old job (which frees its slots on the survivors) and joins a new one on
  // `survivors` (*fresh), or says why this rank could not.
  Status rejoin(const std::vector<size_t>& survivors, std::unique_ptr<client::Engine>* fresh);
  // Every rank joined: `fresh` carries the aggregator shares of requests from `from` on.
  void adopt(std::unique_ptr<client::Engine> fresh, std::vector<size_t> survivors, uint32_t from);

  // Returning. The aggregators of the connect's list that carry nothing now (bit i: index i;
  // every one while the path is not live). Agreed state: the same on every rank.
  uint64_t missing() const;
  // The aggregators the engine uses (indices), empty when not live.
  std::vector<size_t> members() const { return live_ ? aggs_ : std::vector<size_t>{}; }
  // After an agreement to return (`back`: what answered rank 0's probes; `dead`: what some
  // rank saw fail): forgets `back` as dead (but what failed again) and names every aggregator
  // not dead (*target). False when there is nothing to join (or no re-join).
  bool return_due(uint64_t dead, uint64_t back, std::vector<size_t>* target);
  // A return some rank could not join: `back` counts as dead again (probed again later).
  void still_dead(uint64_t back) { dead_mask_ |= back; }
  // Rank 0: probes what missing() names from now on (after every failover and return).
  void watch_missing();

  // At close, the threads gone: the engine's totals, logged at INFO.
  void log_totals() const;

 private:
  // Submits r's aggregator share to engine_ (the caller holds mu_, or is the completer after
  // a re-join).
  void hand(CollRequest& r);

  const int rank_;
  const ResultTails& tails_;
  const Rejoin rejoin_;
  uint64_t support_mask_ = 0;  // bit dtype * kNumOps + op: the first engine reduces it

  mutable std::mutex mu_;  // engine_ swaps and stopped_ against submit() and sample()
  std::unique_ptr<client::Engine> engine_;
  bool stopped_ = false;  // mu_: a failover stopped submit() handing requests to engine_
  // mu_: the epoch and the aggregators of engine_ as sample() reports them (set when every
  // rank joined; the measured split re-splits).
  uint32_t sampled_epoch_ = 0;
  uint32_t sampled_aggregators_ = 0;

  // The completer only. The engine carries the aggregator shares of requests from from_ on
  // while live_; epoch_ counts re-joins. After a re-join the completer submits (restripe_next_:
  // the next request to hand it). aggs_: original indices of engine_'s aggregators;
  // dead_mask_: original indices seen failing so far.
  bool live_ = false;
  uint32_t from_ = 0;
  uint32_t epoch_ = 0;
  uint32_t restripe_next_ = 0;
  std::vector<size_t> aggs_;
  uint64_t dead_mask_ = 0;
  size_t original_ = 0;  // aggregators of the first engine (the connect's list)

  std::unique_ptr<ReturnProber> prober_;  // the asking ranks with a probe, else null
};

}  // namespace conflux::collnet
