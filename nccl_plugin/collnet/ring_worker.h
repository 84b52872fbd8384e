// SPDX-License-Identifier: Apache-2.0
// RingWorker: the ring shares of a CollNet communicator's requests, on the ring thread.
//
// Each request with a ring share ([agg_count, count)) runs a RingRun on one lane of the main
// ring (the i-th ring share uses lane i mod lanes on every rank, so every lane carries its
// requests in the same order everywhere), up to one per lane at a time, started in request
// order. A request without a ring share is done at once (one rank: its share is a copy).
// After the first ring share fails, every later one fails too.
//
// The ring thread also drives the measured split's exchanges (measured_split.h), since it is
// the thread that polls the rings: it starts a period's exchange when it takes the request
// that ends the period, advances it between ring steps, and tells the split when ring shares
// run and what they carried. The split's state is the split's own.
//
// Threads: enqueue() is called by one submitting thread (NCCL's proxy thread), wait_share()
// by one completing thread; neither blocks on the rings.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collnet/coll_request.h"
#include "collnet/measured_split.h"
#include "collnet/ring_run.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"

namespace conflux::collnet {

// The connections a RingWorker owns (each: send to rank + 1, receive from rank - 1).
struct RingLanes {
  std::vector<std::unique_ptr<net::SendComm>> next;  // one per lane
  std::vector<std::unique_ptr<net::RecvComm>> prev;
};

class RingWorker {
 public:
  // `split` (its exchanges are driven by the ring thread) and `closing` (which ends every
  // wait once set) are owned by the caller and outlive this. Starts the ring thread.
  RingWorker(int rank, int nranks, RingLanes lanes, const RingSettings& settings,
             MeasuredSplit& split, const std::atomic<bool>& closing);
  ~RingWorker();  // stop()
  RingWorker(const RingWorker&) = delete;
  RingWorker& operator=(const RingWorker&) = delete;

  // Takes r (its split set) in submission order; completes its ring share later.
  void enqueue(CollRequest* r);
  // Waits (sleeping) until the ring share of r is done, or failed. r may be freed once this
  // returns.
  Status wait_share(CollRequest& r);
  // Ends the ring thread (running ring shares fail); idempotent.
  void stop();

 private:
  void run();
  // Takes the queue's front requests in order, as far as their lanes are free (sleeping
  // while nothing runs and nothing is queued), and starts their ring shares in `active`
  // (one per lane); *took: whether it took any. False once stopped.
  bool start_taken(std::vector<std::unique_ptr<RingRun>>& active, bool* took);
  void share_done(CollRequest* r, Status result);

  const int rank_, nranks_;
  RingLanes lanes_;
  const RingSettings settings_;
  MeasuredSplit& split_;
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

  std::thread thread_;  // last: started once everything above is set
};

}  // namespace conflux::collnet
