// SPDX-License-Identifier: Apache-2.0
#include "collnet/ring_run.h"

#include <sched.h>

#include <cstring>
#include <thread>

#include "net/status.h"

namespace conflux::collnet {
namespace {

constexpr std::chrono::microseconds kRingIdleSleep{20};
constexpr int kRingIdlePolls = 16;

}  // namespace

RingRun::RingRun(CollRequest& r, const RingLinks& links, const uint8_t* send, size_t lo, size_t hi,
                 int tag, uint8_t* scratch, const RingSettings& s, const char* what)
    : r_(r),
      op_(links, send + lo * dtype_size(r.dtype), r.recv + lo * dtype_size(r.dtype), hi - lo,
          r.dtype, r.op, tag, s.block_bytes, s.inflight, scratch, r.ring_plan(lo, hi)),
      timeout_(s.timeout),
      what_(what),
      last_progress_(Clock::now()) {}

bool RingRun::step(bool closing, Status* result) {
  bool done = false;
  const net::Status st = op_.progress(&done);
  *result = Status();
  if (st != net::Status::kOk) {
    *result = ring_failure(what_, st);
    return true;
  }
  if (done) return true;
  if (closing) {
    *result = comm_closed();
    return true;
  }
  const auto now = Clock::now();
  progressed_ = op_.completed_blocks() != last_blocks_;
  if (progressed_) {
    last_blocks_ = op_.completed_blocks();
    last_progress_ = now;
  } else if (now - last_progress_ > timeout_) {
    *result = timed_out(std::string(what_) + " made no progress for " +
                        std::to_string(timeout_.count()) + " ms");
    return true;
  }
  return false;
}

Status run_ring_to_end(CollRequest& r, const RingLinks& links, const uint8_t* send, size_t lo,
                       size_t hi, int tag, uint8_t* scratch, const RingSettings& s,
                       const std::atomic<bool>& closing, const char* what) {
  if (hi <= lo) return Status();
  if (links.nranks == 1) {
    const size_t esize = dtype_size(r.dtype);
    if (send != r.recv) std::memmove(r.recv + lo * esize, send + lo * esize, (hi - lo) * esize);
    return Status();
  }
  RingRun run(r, links, send, lo, hi, tag, scratch, s, what);
  for (int idle = 0;;) {
    Status result;
    if (run.step(closing.load(std::memory_order_acquire), &result)) return result;
    idle_pause(run.progressed(), &idle);
  }
}

Status ring_failure(std::string_view what, net::Status st) {
  std::string message = std::string(what) + ": " + net::toString(st);
  if (st == net::Status::kSystemError) return system_error(std::move(message));
  return unavailable(std::move(message));
}

Status comm_closed() { return unavailable("communicator closed"); }

void idle_pause(bool progressed, int* idle_polls) {
  if (progressed) {
    *idle_polls = 0;
  } else if (++*idle_polls > kRingIdlePolls) {
    std::this_thread::sleep_for(kRingIdleSleep);
  } else {
    sched_yield();
  }
}

}  // namespace conflux::collnet
