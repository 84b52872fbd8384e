// SPDX-License-Identifier: Apache-2.0
// reduce_n and reduce_inplace through the public API: source order, rounding once vs.
// per call, aliasing of dst with a source, k == 0.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "conflux/common/reduce.h"
#include "reduce_test_util.h"

namespace conflux::reduce::testing {
namespace {

// Sequential reference: init(s0), accumulate(s1..), finish — with the public API.
Bytes sequential(DType t, Op op, const std::vector<Bytes>& srcs, size_t n) {
  Bytes acc(n * accum_size(t)), out(n * dtype_size(t));
  init(t, acc.data(), srcs[0].data(), n);
  for (size_t j = 1; j < srcs.size(); ++j) {
    accumulate(t, op, acc.data(), srcs[j].data(), n);
  }
  finish(t, out.data(), acc.data(), n);
  return out;
}

TEST(ReduceN, EqualsSequentialAccumulateInSourceOrder) {
  std::mt19937_64 rng(42);
  for (DType t : all_dtypes()) {
    for (Op op : all_ops()) {
      for (size_t k : {1, 2, 4, 7, 8}) {
        const size_t n = 1000 + k;
        std::vector<Bytes> srcs;
        std::vector<const void*> ptrs;
        for (size_t j = 0; j < k; ++j) {
          srcs.push_back(random_src(t, n, rng));
        }
        for (auto& s : srcs) {
          ptrs.push_back(s.data());
        }
        const Bytes want = sequential(t, op, srcs, n);
        Bytes got(n * dtype_size(t));
        Bytes scratch(n * accum_size(t));
        reduce_n(t, op, got.data(), ptrs.data(), k, n, scratch.data());
        // Same ISA, same operation order: bit-identical, except which NaN payload wins
        // when two NaNs meet in sum/prod (the compiler may swap commutative operands).
        const bool nan_free = op == Op::kSum || op == Op::kProd;
        ASSERT_EQ(first_mismatch(t, false, got.data(), want.data(), n, nan_free), -1)
            << dtype_name(t) << " " << op_name(op) << " k=" << k;
      }
    }
  }
}

TEST(ReduceN, OrderIsSourceOrder) {
  // (1e8 + 1) - 1e8 == 0 in fp32, while (1e8 - 1e8) + 1 == 1.
  const float a[1] = {1e8f}, b[1] = {1.0f}, c[1] = {-1e8f};
  float out = -1;
  const void* order1[] = {a, b, c};
  reduce_n(DType::kFloat32, Op::kSum, &out, order1, 3, 1, nullptr);
  EXPECT_EQ(out, 0.0f);
  const void* order2[] = {a, c, b};
  reduce_n(DType::kFloat32, Op::kSum, &out, order2, 3, 1, nullptr);
  EXPECT_EQ(out, 1.0f);
}

TEST(ReduceN, NarrowFloatsRoundOnceAtTheEnd) {
  // fp16: 2048 + 1 + 1 = 2050 exactly in fp32; rounding after every step would give 2048.
  const size_t n = 33;
  std::vector<uint16_t> big(n, float_to_half(2048.0f)), one(n, float_to_half(1.0f)), out(n);
  const void* srcs[] = {big.data(), one.data(), one.data()};
  std::vector<float> scratch(n);
  reduce_n(DType::kFloat16, Op::kSum, out.data(), srcs, 3, n, scratch.data());
  for (uint16_t h : out) {
    ASSERT_EQ(h, float_to_half(2050.0f));
  }

  // reduce_inplace rounds on every call (the ring path): 2048 stays 2048.
  std::vector<uint16_t> dst = big;
  reduce_inplace(DType::kFloat16, Op::kSum, dst.data(), one.data(), n);
  reduce_inplace(DType::kFloat16, Op::kSum, dst.data(), one.data(), n);
  for (uint16_t h : dst) {
    ASSERT_EQ(h, float_to_half(2048.0f));
  }
}

TEST(ReduceN, DestinationMayBeOneOfTheSources) {
  std::mt19937_64 rng(7);
  for (DType t : all_dtypes()) {
    const size_t n = 517;
    std::vector<Bytes> srcs = {random_src(t, n, rng), random_src(t, n, rng), random_src(t, n, rng)};
    const Bytes want = sequential(t, Op::kMax, srcs, n);
    for (size_t which : {0, 2}) {
      std::vector<Bytes> copy = srcs;
      std::vector<const void*> ptrs = {copy[0].data(), copy[1].data(), copy[2].data()};
      reduce_n(t, Op::kMax, copy[which].data(), ptrs.data(), 3, n, nullptr);
      ASSERT_EQ(copy[which], want) << dtype_name(t) << " dst == srcs[" << which << "]";
    }
  }
}

TEST(ReduceN, ZeroSourcesOrElementsLeaveDstUntouched) {
  float dst[4] = {1, 2, 3, 4};
  const float src[4] = {9, 9, 9, 9};
  const void* srcs[1] = {src};
  reduce_n(DType::kFloat32, Op::kSum, dst, srcs, 0, 4, nullptr);
  reduce_n(DType::kFloat32, Op::kSum, dst, srcs, 1, 0, nullptr);
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_EQ(dst[3], 4.0f);
}

TEST(ReduceInplace, MatchesWidenOpRoundForEveryType) {
  std::mt19937_64 rng(11);
  for (DType t : all_dtypes()) {
    for (Op op : all_ops()) {
      const size_t n = 301;
      const Bytes d0 = random_src(t, n, rng), s = random_src(t, n, rng);
      Bytes got = d0;
      reduce_inplace(t, op, got.data(), s.data(), n);
      const Bytes want = sequential(t, op, {d0, s}, n);
      const bool nan_free = op == Op::kSum || op == Op::kProd;
      ASSERT_EQ(first_mismatch(t, false, got.data(), want.data(), n, nan_free), -1)
          << dtype_name(t) << " " << op_name(op);
    }
  }
}

}  // namespace
}  // namespace conflux::reduce::testing
