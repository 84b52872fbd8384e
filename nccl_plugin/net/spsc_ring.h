// SPDX-License-Identifier: Apache-2.0
// Bounded single-producer / single-consumer ring with head and tail on separate cache lines.
//
// Exactly one thread may call push() and exactly one (possibly other) thread may call pop()/
// empty() at a time. Capacity is rounded up to a power of two; push() fails when full.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace conflux::net {

template <typename T>
class SpscRing {
 public:
  explicit SpscRing(size_t capacity) {
    size_t cap = 1;
    while (cap < capacity) cap <<= 1;
    mask_ = cap - 1;
    slots_ = std::make_unique<T[]>(cap);
  }

  // Producer thread only.
  bool push(const T& v) {
    size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) > mask_) return false;
    slots_[t & mask_] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }

  // Consumer thread only.
  bool pop(T* out) {
    size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    *out = slots_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  // Consumer thread only: the next element without taking it (false: none).
  bool front(T* out) const {
    size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    *out = slots_[h & mask_];
    return true;
  }

  // Anyone (a hint; exact on the consumer's thread when the producer is idle).
  size_t size() const {
    return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
  }

  // Consumer thread (exact) or anyone (a hint).
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) size_t mask_ = 0;
  std::unique_ptr<T[]> slots_;
};

}  // namespace conflux::net
