// SPDX-License-Identifier: Apache-2.0
// ResultTails: the ends of the most recent aggregator results this rank completed, kept so
// that a failover can hand them to ranks that did not receive them before the aggregators
// died (see coll_comm.h, "Failover").
//
// Why the ends suffice: a rank that lacks results of request q still had the oldest of them
// outstanding, and the window lets it contribute at most W packets past that one on each
// aggregator; no rank can complete anything further. So whatever another rank misses of a
// request this rank completed lies in that request's last A x W packets (A aggregators, W
// granted slots), and only requests within the last A x W packets of the result stream can
// be missing anywhere. With weighted striping an aggregator of weight w in a pattern of
// period P holds W packets of every ceil(W / w) x P, the most of which over the aggregators
// replaces A x W. `window_bytes` is that amount (with a safety factor).
//
// ReduceScatter requests send each rank only its own shard (owned results), so no rank holds
// the result another one misses; for them a rank keeps the end of its *input* instead, with
// what it takes to reduce it again: a failover reduce-scatters those ends over the ring.
//
// An AllReduce's end is not copied after the fact: CollComm gives the engine a buffer of
// end_bytes(total) (Engine::allreduce's ResultCopy), the engine fills it from each packet as
// it arrives, and adopt() keeps that buffer when the request completes.
//
// Threads: used by CollComm's completion thread only; window_bytes() and end_bytes() read
// only the constant window and may be called from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "conflux/common/dtype.h"

namespace conflux::collnet {

class ResultTails {
 public:
  struct Tail {
    uint32_t seq = 0;
    size_t total = 0;   // bytes of the whole aggregator result
    size_t offset = 0;  // where bytes() starts inside it
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
    std::span<const uint8_t> bytes() const { return {data.get(), size}; }
    // An input end (ReduceScatter): its element type, op and the owners' element ranges
    // (relative to the whole request) decide the reduction.
    bool input = false;
    DType dtype = DType::kFloat32;
    Op op = Op::kSum;
    std::vector<std::pair<size_t, size_t>> owned;
  };

  explicit ResultTails(size_t window_bytes) : window_(window_bytes) {}

  // How many bytes of the end of a `total`-byte result are kept: min(total, window).
  size_t end_bytes(size_t total) const { return std::min(total, window_); }
  // Keeps `end`, the last end_bytes(total) bytes of request seq's result (filled by the
  // engine); forgets tails that are older than the last `window` bytes of results.
  void adopt(uint32_t seq, size_t total, std::unique_ptr<uint8_t[]> end);
  // The same from a copy of the whole result.
  void keep(uint32_t seq, const uint8_t* result, size_t total);
  // Keeps the end of request seq's ReduceScatter input the same way.
  void keep_input(uint32_t seq, const uint8_t* input, size_t total, DType dtype, Op op,
                  const std::vector<std::pair<size_t, size_t>>& owned);
  const Tail* find(uint32_t seq) const;
  size_t window_bytes() const { return window_; }

 private:
  void add(uint32_t seq, const uint8_t* data, size_t total, Tail t);
  void push(Tail t);

  const size_t window_;
  std::deque<Tail> tails_;
  size_t newer_total_ = 0;  // sum of `total` over every tail but the oldest
};

}  // namespace conflux::collnet
