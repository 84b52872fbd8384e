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

#include "collnet/coll_request.h"
#include "collnet/ring_allreduce.h"

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

  // Advances the operation; true once it ended (*ok says how, *error why not). `closing`:
  // the communicator is being closed, which ends the run with an error.
  bool step(bool closing, bool* ok, std::string* error);
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
// nothing to do; one rank copies send[lo, hi) instead. False on error (*error says why).
bool run_ring_to_end(CollRequest& r, const RingLinks& links, const uint8_t* send, size_t lo,
                     size_t hi, int tag, uint8_t* scratch, const RingSettings& s,
                     const std::atomic<bool>& closing, const char* what, std::string* error);

// Between polls that found nothing to do: yield a few times, then sleep a little (the
// transport's helper threads move the bytes, so a poller only needs to be timely).
void idle_pause(bool progressed, int* idle_polls);

}  // namespace conflux::collnet
