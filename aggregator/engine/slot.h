// SPDX-License-Identifier: Apache-2.0
// Aggregator slot state (SPEC.md §4): two banks per slot, selected by generation mod 2.
// All of it is owned by one dataplane thread; buffers are allocated lazily by that thread on
// first use (so an idle job costs only its bitmaps) and freed with the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "conflux/common/dtype.h"

namespace conflux::agg {

// A byte buffer that grows on demand and keeps its contents' address until it grows.
class LazyBuffer {
 public:
  uint8_t* ensure(size_t n) {
    if (n > cap_) {
      data_ = std::make_unique_for_overwrite<uint8_t[]>(n);
      cap_ = n;
    }
    return data_.get();
  }
  uint8_t* data() const { return data_.get(); }
  size_t capacity() const { return cap_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t cap_ = 0;
};

// kForwarded: a leaf's bank whose partial result went up to the parent aggregator and that
// waits for the parent's result (SPEC.md §7).
enum class BankState : uint8_t { kEmpty, kCollecting, kForwarded, kComplete };

struct Bank {
  BankState state = BankState::kEmpty;
  uint32_t generation = 0;
  // Shape fixed by the generation's first contribution.
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  uint32_t count = 0;
  uint64_t offset = 0;
  int32_t owner = -1;    // the rank that gets the result (OWNED), or -1: every rank
  uint32_t arrived = 0;  // weight of the contributors added so far (SPEC.md §7)
  // Bit c = contributor c added (n_workers bits). FORWARDED (a tree leaf, SPEC.md §7): bit c =
  // member c asked for the result again since the partial last went up.
  std::vector<uint64_t> bitmap;
  LazyBuffer accum;   // accumulator (count * accum_size); deterministic mode: reduce_n scratch
  LazyBuffer result;  // rounded result when it differs from the accumulator
  LazyBuffer raw;     // deterministic mode: contribution of rank c at c * payload_bytes
  const uint8_t* result_data = nullptr;  // valid in kComplete: count * dtype_size bytes
  uint64_t first_ns = 0;                 // steady clock at the generation's first contribution
  // The ResultBatch::epoch() in which result_data was last lent to a batch (0: never): the
  // batch may still read it, so it is taken back before the bank is written again. Bookkeeping
  // of the queue's batch, not the bank's state, hence mutable (emitting reads a const Bank).
  mutable uint64_t lent_in = 0;

  bool has(uint32_t c) const { return (bitmap[c >> 6] >> (c & 63)) & 1u; }
  void set(uint32_t c) { bitmap[c >> 6] |= uint64_t{1} << (c & 63); }
  void clear_bits() {
    for (auto& w : bitmap) w = 0;
  }
  bool any_bit() const {
    for (uint64_t w : bitmap) {
      if (w != 0) return true;
    }
    return false;
  }
};

struct Slot {
  Bank banks[2];
};

}  // namespace conflux::agg
