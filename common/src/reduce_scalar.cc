// SPDX-License-Identifier: Apache-2.0
// The scalar kernel table: the ref:: implementation behind the KernelTable interface.
// Used where no SIMD table is usable (non-x86 builds, CONFLUX_REDUCE_ISA=scalar).
#include <cstdint>
#include <cstring>

#include "conflux/common/reduce.h"
#include "reduce_dispatch.h"
#include "table_builder.h"

namespace conflux::reduce::detail {
namespace {

constexpr size_t kBlock = 256;  // elements per stack block (8 bytes each at most)

template <DType T, Op O>
struct ScalarKernels {
  static constexpr size_t kSrc = dtype_size(T);

  static void init(void* acc, const void* src, size_t n) { ref::init(T, acc, src, n); }
  static void finish(void* dst, const void* acc, size_t n) { ref::finish(T, dst, acc, n); }
  static void accumulate(void* acc, const void* src, size_t n) {
    ref::accumulate(T, O, acc, src, n);
  }

  static void reduce_inplace(void* dst, const void* src, size_t n) {
    alignas(8) unsigned char tmp[kBlock * 8];
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    for (size_t off = 0; off < n; off += kBlock) {
      const size_t m = n - off < kBlock ? n - off : kBlock;
      ref::init(T, tmp, d + off * kSrc, m);
      ref::accumulate(T, O, tmp, s + off * kSrc, m);
      ref::finish(T, d + off * kSrc, tmp, m);
    }
  }

  static uint64_t sum_u32_words(const void* p, size_t n_words) {
    const auto* b = static_cast<const unsigned char*>(p);
    uint64_t s = 0;
    for (size_t i = 0; i < n_words; ++i) {
      uint32_t w;
      std::memcpy(&w, b + 4 * i, 4);
      s += w;
    }
    return s;
  }

  static void reduce_n(void* dst, const void* const* srcs, size_t k, size_t n) {
    alignas(8) unsigned char tmp[kBlock * 8];
    auto* d = static_cast<unsigned char*>(dst);
    for (size_t off = 0; off < n; off += kBlock) {
      const size_t m = n - off < kBlock ? n - off : kBlock;
      ref::init(T, tmp, static_cast<const unsigned char*>(srcs[0]) + off * kSrc, m);
      for (size_t j = 1; j < k; ++j) {
        ref::accumulate(T, O, tmp, static_cast<const unsigned char*>(srcs[j]) + off * kSrc, m);
      }
      ref::finish(T, d + off * kSrc, tmp, m);
    }
  }
};

template <DType T, Op O>
struct K : ScalarKernels<T, O> {};

}  // namespace

const KernelTable* scalar_table() {
  static const KernelTable table = make_table<K>(Isa::kScalar);
  return &table;
}

}  // namespace conflux::reduce::detail
