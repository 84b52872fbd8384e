// SPDX-License-Identifier: Apache-2.0
// Failover: the failover ring of a CollNet communicator, and the protocol the ranks run on it
// when the aggregators fail (CollComm decides when; this class moves and agrees).
//
// When its engine fails (aggregator dead, shut down, silent) a rank sends a notice around
// the failover ring; a rank that receives one fails over too, even if its own engine still
// looks healthy (it may be waiting for results that the first rank will never help
// complete). Every rank then runs one agreement (agree()): each says the first request
// whose aggregator share it has not completed (fi). With lo = min fi and hi = max fi:
//   requests in [lo, hi) were completed by some rank but not by all: the rank with fi = hi
//     (the holder) sends the end of each result it kept (ResultTails; only ends can be
//     missing) around the ring, and the ranks still waiting for it take it (or fail it, if
//     not kept) (hand_over()). For a ReduceScatter no rank holds another's shard, so every
//     rank reduce-scatters the end of its input (kept, or still queued) over the ring;
//   requests from hi on: their aggregator share is redone over the failover ring from the
//     aggregators' input (redo()), in request order on every rank.
// Each rank also says which aggregator its engine saw fail and how many requests it has been
// given, for CollComm's re-stripe, and which aggregators it fails over to return to (a
// planned failover: CollComm's "Returning"); whether every rank joined the survivors is agreed with
// all_say(). Nothing hangs: every wait is bounded by the ring timeout. Once any step fails,
// broken() stays true and every later request's aggregator share fails.
//
// Threads: one (CollComm's completion thread) calls everything.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collnet/coll_request.h"
#include "collnet/result_tails.h"
#include "collnet/ring_run.h"
#include "net/recv_comm.h"
#include "net/request.h"
#include "net/send_comm.h"

namespace conflux::collnet {

// What each rank says in the failover agreement.
struct FailoverVote {
  uint32_t first_incomplete = 0;
  uint32_t next_seq = 0;   // requests this rank has been given so far
  uint64_t dead_mask = 0;  // original aggregator indices this rank's engine saw fail
  uint64_t back = 0;       // original indices this rank fails over to return to (coll_comm.h)
};

// What the ranks agreed.
struct FailoverAgreement {
  uint32_t lo = 0, hi = 0;  // min and max first_incomplete
  int holder = 0;           // the (lowest) rank whose first_incomplete is hi
  uint32_t given = 0;       // most requests given to any rank
  uint64_t dead = 0;        // aggregators some rank saw fail
  uint64_t back = 0;        // aggregators some rank fails over to return to
};

class Failover {
 public:
  // `next`/`prev` may be null with one rank. `tail_window`: result bytes kept per request
  // end (result_tails.h). `closing` (owned by the caller) ends every wait once set.
  Failover(int rank, int nranks, std::unique_ptr<net::SendComm> next,
           std::unique_ptr<net::RecvComm> prev, const RingSettings& settings, size_t tail_window,
           const std::atomic<bool>& closing);

  // Posts the receive for the previous rank's next failover notice.
  void arm_notice();
  // True once the previous rank's notice has arrived, or its link failed (notice_closed():
  // at the end of a job ranks close their communicators one after the other).
  bool notice_arrived();
  bool notice_closed() const { return notice_closed_; }

  // The ends of completed aggregator shares, for a later hand-over.
  ResultTails& tails() { return tails_; }

  // Sends this rank's notice, waits for the previous rank's (re-arming it for the next
  // failover) and agrees on every rank's vote.
  Status agree(const FailoverVote& mine, FailoverAgreement* out);
  // Hands over the requests in [a.lo, a.hi) (see above); `queued` finds a request still
  // queued on this rank (nullptr: completed here, or never given).
  Status hand_over(const FailoverAgreement& a, const std::function<CollRequest*(uint32_t)>& queued);
  // Whether r was resolved by the last hand-over (its seq is below that agreement's hi).
  bool handed_over(const CollRequest& r) const { return agreed_ && r.seq < handover_end_; }
  // Redoes r's aggregator share [0, agg_count) over the failover ring.
  Status redo(CollRequest& r);
  // Allgathers one word from every rank; `what` names the step in errors.
  Status all_say(uint32_t mine, std::vector<uint32_t>* all, std::chrono::milliseconds timeout,
                 const char* what);

  bool broken() const { return broken_; }

 private:
  // Every step that fails breaks the failover ring: returns `error`, broken() from now on.
  Status fail(Status error);
  // ReduceScatter q's hand-over: every rank reduce-scatters its input end [offset, total).
  Status reduce_input_tails(uint32_t q, size_t total, size_t offset,
                            const std::function<CollRequest*(uint32_t)>& queued);
  RingLinks links() const { return {rank_, nranks_, next_.get(), prev_.get()}; }

  const int rank_, nranks_;
  std::unique_ptr<net::SendComm> next_;
  std::unique_ptr<net::RecvComm> prev_;
  const RingSettings settings_;
  const std::atomic<bool>& closing_;
  std::vector<uint8_t> scratch_;
  ResultTails tails_;

  uint64_t notice_buf_ = 0;
  net::Request* notice_req_ = nullptr;
  bool notice_done_ = false;
  bool notice_closed_ = false;  // the notice receive failed: the previous rank closed

  bool agreed_ = false;        // at least one agreement
  uint32_t handover_end_ = 0;  // the last agreement's hi
  bool broken_ = false;
};

}  // namespace conflux::collnet
