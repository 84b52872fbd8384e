// SPDX-License-Identifier: Apache-2.0
// Internal, per-ISA (see arch_prims.h): the streaming loops. Each processes 4 vectors
// per iteration, then single vectors, then the last partial vector through zeroed
// stack buffers, so every element goes through the same vector code (no scalar tail).
#pragma once

#include <cstdint>
#include <cstring>

#include "../reduce_dispatch.h"
#include "../table_builder.h"
#include "dtype_traits.h"

namespace {

template <class A, DType T, Op O>
struct SimdKernels {
  using Tr = Traits<A, T>;
  using V = typename Tr::V;
  static constexpr size_t L = V::size;
  static constexpr size_t kS = conflux::dtype_size(T);  // bytes per source element
  static constexpr size_t kA = conflux::accum_size(T);  // bytes per accumulator element
  static constexpr size_t kU = 4;                       // unroll

  static V op(V a, V b) { return OpK<A, O>::apply(a, b); }
  static const uint8_t* in(const void* p) { return static_cast<const uint8_t*>(p); }
  static uint8_t* out(void* p) { return static_cast<uint8_t*>(p); }

  static void init(void* acc, const void* src, size_t n) {
    if constexpr (kS == kA) {
      std::memcpy(acc, src, n * kS);
    } else {
      uint8_t* a = out(acc);
      const uint8_t* s = in(src);
      size_t i = 0;
      for (; i + L <= n; i += L) {
        Tr::store_acc(a + i * kA, Tr::load_src(s + i * kS));
      }
      if (i == n) {
        return;
      }
      alignas(64) uint8_t ts[L * kS] = {};
      alignas(64) uint8_t ta[L * kA];
      std::memcpy(ts, s + i * kS, (n - i) * kS);
      Tr::store_acc(ta, Tr::load_src(ts));
      std::memcpy(a + i * kA, ta, (n - i) * kA);
    }
  }

  static void finish(void* dst, const void* acc, size_t n) {
    if constexpr (kS == kA) {
      std::memcpy(dst, acc, n * kS);
    } else {
      uint8_t* d = out(dst);
      const uint8_t* a = in(acc);
      size_t i = 0;
      for (; i + L <= n; i += L) {
        Tr::store_dst(d + i * kS, Tr::load_acc(a + i * kA));
      }
      if (i == n) {
        return;
      }
      alignas(64) uint8_t ta[L * kA] = {};
      alignas(64) uint8_t td[L * kS];
      std::memcpy(ta, a + i * kA, (n - i) * kA);
      Tr::store_dst(td, Tr::load_acc(ta));
      std::memcpy(d + i * kS, td, (n - i) * kS);
    }
  }

  static void accumulate(void* acc, const void* src, size_t n) {
    uint8_t* a = out(acc);
    const uint8_t* s = in(src);
    size_t i = 0;
    for (; i + kU * L <= n; i += kU * L) {
      V x[kU], y[kU];
      for (size_t u = 0; u < kU; ++u) {
        x[u] = Tr::load_acc(a + (i + u * L) * kA);
      }
      for (size_t u = 0; u < kU; ++u) {
        y[u] = Tr::load_src(s + (i + u * L) * kS);
      }
      for (size_t u = 0; u < kU; ++u) {
        Tr::store_acc(a + (i + u * L) * kA, op(x[u], y[u]));
      }
    }
    for (; i + L <= n; i += L) {
      Tr::store_acc(a + i * kA, op(Tr::load_acc(a + i * kA), Tr::load_src(s + i * kS)));
    }
    if (i == n) {
      return;
    }
    alignas(64) uint8_t ta[L * kA] = {};
    alignas(64) uint8_t ts[L * kS] = {};
    std::memcpy(ta, a + i * kA, (n - i) * kA);
    std::memcpy(ts, s + i * kS, (n - i) * kS);
    Tr::store_acc(ta, op(Tr::load_acc(ta), Tr::load_src(ts)));
    std::memcpy(a + i * kA, ta, (n - i) * kA);
  }

  static void reduce_inplace(void* dst, const void* src, size_t n) {
    uint8_t* d = out(dst);
    const uint8_t* s = in(src);
    size_t i = 0;
    for (; i + kU * L <= n; i += kU * L) {
      V x[kU], y[kU];
      for (size_t u = 0; u < kU; ++u) {
        x[u] = Tr::load_src(d + (i + u * L) * kS);
      }
      for (size_t u = 0; u < kU; ++u) {
        y[u] = Tr::load_src(s + (i + u * L) * kS);
      }
      for (size_t u = 0; u < kU; ++u) {
        Tr::store_dst(d + (i + u * L) * kS, op(x[u], y[u]));
      }
    }
    for (; i + L <= n; i += L) {
      Tr::store_dst(d + i * kS, op(Tr::load_src(d + i * kS), Tr::load_src(s + i * kS)));
    }
    if (i == n) {
      return;
    }
    alignas(64) uint8_t td[L * kS] = {};
    alignas(64) uint8_t ts[L * kS] = {};
    std::memcpy(td, d + i * kS, (n - i) * kS);
    std::memcpy(ts, s + i * kS, (n - i) * kS);
    Tr::store_dst(td, op(Tr::load_src(td), Tr::load_src(ts)));
    std::memcpy(d + i * kS, td, (n - i) * kS);
  }

  // Register-resident: every source is read once, dst written once; k >= 1. dst may
  // be one of the sources (each block is fully read before it is written).
  // reduce.h's sum_u32_words: each 64-bit lane adds the low and the high 32-bit word of
  // every 8 bytes into two accumulators (no carries to handle below 2^32 words); two
  // independent pairs hide the add latency. The tail (under one vector) is added word by word.
  static uint64_t sum_u32_words(const void* p, size_t n_words) {
    using W = xsimd::batch<uint64_t, A>;
    constexpr size_t kStep = W::size * 8;  // bytes per vector
    const auto* b = static_cast<const uint8_t*>(p);
    const size_t n = n_words * 4;
    const W mask(uint64_t{0xffffffffu});
    W lo0(uint64_t{0}), hi0(uint64_t{0}), lo1(uint64_t{0}), hi1(uint64_t{0});
    size_t i = 0;
    for (; i + 2 * kStep <= n; i += 2 * kStep) {
      const W v0 = W::load_unaligned(reinterpret_cast<const uint64_t*>(b + i));
      const W v1 = W::load_unaligned(reinterpret_cast<const uint64_t*>(b + i + kStep));
      lo0 += v0 & mask;
      hi0 += v0 >> 32;
      lo1 += v1 & mask;
      hi1 += v1 >> 32;
    }
    for (; i + kStep <= n; i += kStep) {
      const W v = W::load_unaligned(reinterpret_cast<const uint64_t*>(b + i));
      lo0 += v & mask;
      hi0 += v >> 32;
    }
    alignas(64) uint64_t lanes[W::size];
    ((lo0 + hi0) + (lo1 + hi1)).store_aligned(lanes);
    uint64_t s = 0;
    for (uint64_t x : lanes) s += x;
    for (; i < n; i += 4) {
      uint32_t w;
      std::memcpy(&w, b + i, 4);
      s += w;
    }
    return s;
  }

  static void reduce_n(void* dst, const void* const* srcs, size_t k, size_t n) {
    if (k == 0) {
      return;
    }
    uint8_t* d = out(dst);
    size_t i = 0;
    for (; i + kU * L <= n; i += kU * L) {
      V x[kU];
      const uint8_t* s0 = in(srcs[0]);
      for (size_t u = 0; u < kU; ++u) {
        x[u] = Tr::load_src(s0 + (i + u * L) * kS);
      }
      for (size_t j = 1; j < k; ++j) {
        const uint8_t* sj = in(srcs[j]);
        for (size_t u = 0; u < kU; ++u) {
          x[u] = op(x[u], Tr::load_src(sj + (i + u * L) * kS));
        }
      }
      for (size_t u = 0; u < kU; ++u) {
        Tr::store_dst(d + (i + u * L) * kS, x[u]);
      }
    }
    for (; i + L <= n; i += L) {
      V x = Tr::load_src(in(srcs[0]) + i * kS);
      for (size_t j = 1; j < k; ++j) {
        x = op(x, Tr::load_src(in(srcs[j]) + i * kS));
      }
      Tr::store_dst(d + i * kS, x);
    }
    if (i == n) {
      return;
    }
    alignas(64) uint8_t ts[L * kS] = {};
    std::memcpy(ts, in(srcs[0]) + i * kS, (n - i) * kS);
    V x = Tr::load_src(ts);
    for (size_t j = 1; j < k; ++j) {
      std::memcpy(ts, in(srcs[j]) + i * kS, (n - i) * kS);
      x = op(x, Tr::load_src(ts));
    }
    Tr::store_dst(ts, x);
    std::memcpy(d + i * kS, ts, (n - i) * kS);
  }
};

}  // namespace

// Defines the table getter `Getter` for xsimd architecture `Arch` (one per TU).
#define CONFLUX_DEFINE_KERNEL_TABLE(Getter, Arch, IsaValue)             \
  namespace {                                                           \
  template <::conflux::DType T, ::conflux::Op O>                        \
  struct ArchKernels : SimdKernels<Arch, T, O> {};                      \
  }                                                                     \
  namespace conflux::reduce::detail {                                   \
  const KernelTable* Getter() {                                         \
    static const KernelTable table = make_table<ArchKernels>(IsaValue); \
    return &table;                                                      \
  }                                                                     \
  }
