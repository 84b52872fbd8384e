// SPDX-License-Identifier: Apache-2.0
// One AllReduce request as the engine tracks it. Created by Engine::allreduce (caller's
// thread), handed to the progress thread through the submission queue, polled by
// Engine::test. Fields above the line are immutable after submission; progress-thread
// fields are touched by the progress thread only; `state` publishes the outcome
// (release store after `error` and the receive buffer are written).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "conflux/client/engine.h"
#include "packetizer.h"

namespace conflux::client {

struct Request {
  uint64_t id = 0;
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  // Reduce: the rank that receives the result (the others get acknowledgements and may have
  // no receive buffer); -1: every rank (AllReduce).
  int32_t root = -1;
  bool receives_result(uint32_t rank) const { return root < 0 || root == int32_t(rank); }
  uint64_t bytes() const { return plan.count * dtype_size(dtype); }
  uint32_t stripe_start = 0;  // packet k goes to aggregator (k + stripe_start) mod A
  ResultCopy tail;            // where the result's end also goes (Engine::allreduce)
  PacketPlan plan;
  std::string early_error;  // set at submission: the request fails at once with this

  // Progress thread only.
  std::vector<uint64_t> next_j;  // per aggregator: index j of its next packet to send
  uint64_t results_pending = 0;  // packets whose result has not arrived yet
  bool finished = false;
  bool counted_busy = false;  // taken into the engine's busy time (Progress)

  // Published to test().
  std::atomic<RequestState> state{RequestState::kPending};
  std::string error;  // written before state becomes kError
};

}  // namespace conflux::client
