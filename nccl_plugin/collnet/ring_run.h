// SPDX-License-Identifier: Apache-2.0
// RingRun: one ring operation on a request's elements [lo, hi), with its watchdog (no
// progress for `timeout` is an error). The ring thread (RingWorker) steps several at once,
// one per lane; a failover (Failover) runs one to its end on the completion thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "collnet/coll_request.h"
#include "collnet/ring_allreduce.h"
#include "conflux/common/status.h"
#include "net/status.h"

namespace conflux::collnet {

// How ring operations cut and pace their data.
struct RingSettings {
  size_t block_bytes = 1 << 20;
  int inflight = 8;
  std::chrono::milliseconds timeout{30000};  // no progress this long = error
  // Bytes of scratch one ring operation needs.
  size_t scratch_bytes() const { return block_bytes * static_cast<size_t>(inflight); }
};

class RingRun {
 public:
  // Reads send[lo, hi) and writes r.recv[lo, hi) (elements); `scratch` holds
  // s.scratch_bytes() and outlives the run. `what` names the ring in errors.
  RingRun(CollRequest& r, const RingLinks& links, const uint8_t* send, size_t lo, size_t hi,
          int tag, uint8_t* scratch, const RingSettings& s, const char* what);

  // Advances the operation; true once it ended (*result: ok, or why not). `closing`: the
  // communicator is being closed, which ends the run with an error.
  bool step(bool closing, Status* result);
  bool progressed() const { return progressed_; }  // by the last step
  CollRequest& request() const { return r_; }

 private:
  using Clock = std::chrono::steady_clock;
  CollRequest& r_;
  RingAllreduce op_;
  const std::chrono::milliseconds timeout_;
  const char* const what_;
  Clock::time_point last_progress_;
  uint64_t last_blocks_ = 0;
  bool progressed_ = false;
};

// Runs one ring operation to its end on the calling thread, pausing between polls that find
// nothing to do; one rank copies send[lo, hi) instead.
Status run_ring_to_end(CollRequest& r, const RingLinks& links, const uint8_t* send, size_t lo,
                       size_t hi, int tag, uint8_t* scratch, const RingSettings& s,
                       const std::atomic<bool>& closing, const char* what);

// A transfer over a worker ring that failed with `st`: "<what>: <st>", a system error when
// the failure was local, else the other rank is unavailable (it closed, died or sent garbage).
Status ring_failure(std::string_view what, net::Status st);
// The communicator is being closed: what every wait on a ring ends with then.
Status comm_closed();

// Between polls that found nothing to do: yield a few times, then sleep a little (the
// transport's helper threads move the bytes, so a poller only needs to be timely).
void idle_pause(bool progressed, int* idle_polls);

}  // namespace conflux::collnet
