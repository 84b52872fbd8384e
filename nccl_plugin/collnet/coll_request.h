// SPDX-License-Identifier: Apache-2.0
// CollRequest: one CollNet collective as CollComm and its parts (MeasuredSplit,
// AggregatorPath, RingWorker, Failover) see it, and the windows of the CollNetDirect
// collectives (ReduceScatter, AllGather).
//
// Each request of `count` elements is split once, identically on every rank:
//   [0, agg_count)      through the aggregators (AggregatorPath's engine), striped over them;
//   [agg_count, count)  over the worker ring (RingWorker), at the same time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collnet/ring_allreduce.h"
#include "conflux/common/dtype.h"
#include "conflux/common/status.h"

namespace conflux::collnet {

// A window of a ReduceScatter / AllGather (CollNetDirect), in bytes.
struct CollWindow {
  size_t bytes_per_rank = 0;
  size_t offset = 0;
  size_t bytes = 0;
};

// One piece of a scatter/gather list (NCCL's ncclNetSGE_*, without the handle).
struct CollPart {
  uint8_t* address = nullptr;
  size_t size = 0;
};

enum class CollKind : uint8_t { kAllReduce, kReduceScatter, kAllGather };

// Element ranges, relative to the window, that each of `nranks` ranks owns; empty where a
// rank's block lies outside the window. Window bytes must be a multiple of esize.
std::vector<std::pair<size_t, size_t>> owned_ranges(const CollWindow& w, int nranks, size_t esize);
// The ranges clipped to [lo, hi) and made relative to lo; empty where nothing is left.
std::vector<std::pair<size_t, size_t>> clip_ranges(
    const std::vector<std::pair<size_t, size_t>>& ranges, size_t lo, size_t hi);

// Where the time of a communicator's small AllReduces goes, logged when it closes: from
// iallreduce to the result (the plugin's part: the aggregators' round trip and the hand-off to
// the completion thread), from the result until NCCL's test() saw it, and between consecutive
// iallreduce calls (in a back-to-back loop: the whole collective as NCCL and the GPU see it).
// Written by NCCL's proxy thread (iallreduce, test) only; read at close.
struct SmallAllReduceTimes {
  static constexpr size_t kMaxBytes = 64 << 10;  // "small": at most this many bytes
  using Clock = std::chrono::steady_clock;
  std::atomic<uint64_t> count{0}, to_result_ns{0}, to_test_ns{0};
  std::atomic<uint64_t> gaps{0}, gap_ns{0};
  std::atomic<uint64_t> inline_done{0};  // of count: completed inside test() (CollComm)
  Clock::time_point last_post{};

  static uint64_t ns(Clock::duration d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  void posted(Clock::time_point now);
  void tested(Clock::time_point posted, Clock::time_point finished, Clock::time_point now);
};

class CollComm;

// A request as NCCL sees it (void*). Completed and freed through CollComm::test.
struct CollRequest {
  static constexpr uint32_t kMagic = 0x43524551;
  uint32_t magic = kMagic;
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  std::string error;          // written before state becomes 2
  size_t bytes = 0;
  // A small AllReduce: its times go to *timed (posted by iallreduce, finished before state
  // becomes 1).
  SmallAllReduceTimes* timed = nullptr;
  SmallAllReduceTimes::Clock::time_point posted, finished;

  // A small AllReduce wholly through the aggregators, handed to the first engine: NCCL's proxy
  // thread may complete it inside test() (CollComm::complete_inline). Set by submit(); cleared
  // under CollComm's queue mutex when test() gives the request back to the completion thread.
  CollComm* comm = nullptr;
  bool inline_ok = false;

  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  uint32_t seq = 0;
  size_t agg_count = 0;
  bool split_exchange = false;  // ends a split period: the ring thread starts its exchange
  // Engine requests of the aggregator part (empty: not in the engine): one AllReduce, or for
  // a ReduceScatter one Reduce per owner; agg_waited of them have completed.
  std::vector<uint64_t> agg_handles;
  size_t agg_waited = 0;
  uint32_t agg_epoch = 0;        // the engine generation agg_handles belong to
  std::vector<uint8_t> staging;  // in-place requests: copy of the aggregator part's input
  // AllReduce: the end of the aggregator part's result, written by the engine as it arrives
  // and kept for a failover when the request completes (ResultTails::adopt).
  std::unique_ptr<uint8_t[]> result_end;

  // ReduceScatter / AllGather: `recv` is `work` (or the only receive part); per-rank owned
  // element ranges; where the result goes when the request completes.
  CollKind kind = CollKind::kAllReduce;
  std::vector<uint8_t> work;
  std::vector<std::pair<size_t, size_t>> owned;
  uint8_t* own_out = nullptr;       // ReduceScatter: this rank's part of the result
  std::vector<CollPart> out_parts;  // AllGather with several receive parts: scattered at end

  // Ring share outcome, set by the ring thread: 0 pending, 1 done, 2 failed (ring_error).
  std::atomic<int> ring_state{0};
  Status ring_error;
  // Failover: 0 not resolved by a hand-over, 1 resolved, 2 failed (resolve_error).
  int resolved = 0;
  Status resolve_error;

  // The ring plan for elements [lo, hi): AllReduce, or the phase the kind needs with the
  // owned ranges clipped to [lo, hi).
  RingPlan ring_plan(size_t lo, size_t hi) const;
  // The input the aggregators read: the staging copy when there is one.
  const uint8_t* agg_input() const { return staging.empty() ? send : staging.data(); }
};

// The tag of request seq's ring operation: phase 0 its ring share (main ring), phase 1 its
// aggregator share redone or handed over (failover ring).
inline int ring_tag(uint32_t seq, int phase) {
  return static_cast<int>(((seq << 1) | static_cast<uint32_t>(phase)) & 0x3fffffff);
}

}  // namespace conflux::collnet
