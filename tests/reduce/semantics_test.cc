// SPDX-License-Identifier: Apache-2.0
// The documented numerics of reduce.h, asserted explicitly through the public API
// (whatever ISA was selected): NaN/Inf, signed zero, rounding ties, fp8 saturation
// and overflow, integer wrap-around.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "conflux/common/reduce.h"

namespace conflux::reduce {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Reduces two fp32 values through init/accumulate/finish of dtype t (the values must be
// representable in t) and returns the narrow result's bit pattern.
template <class S>
S narrow_pair(DType t, Op op, float a, float b) {
  // Go through the narrow type: a and b are converted by the reference.
  std::vector<float> wide = {a, b};
  S s[2];
  ref::finish(t, s, wide.data(), 2);
  // Use n = 19 (vector body plus tail) with the pair at every position.
  constexpr size_t n = 19;
  std::vector<S> x(n, s[0]), y(n, s[1]), out(n);
  std::vector<float> acc(n);
  init(t, acc.data(), x.data(), n);
  accumulate(t, op, acc.data(), y.data(), n);
  finish(t, out.data(), acc.data(), n);
  for (size_t i = 1; i < n; ++i) {
    EXPECT_EQ(out[i], out[0]);
  }
  return out[0];
}

template <class T>
T wide_pair(DType t, Op op, T a, T b) {
  constexpr size_t n = 37;
  std::vector<T> acc(n, a), src(n, b);
  accumulate(t, op, acc.data(), src.data(), n);
  for (size_t i = 1; i < n; ++i) {
    EXPECT_EQ(std::memcmp(&acc[i], &acc[0], sizeof(T)), 0);
  }
  return acc[0];
}

TEST(Semantics, MinMaxPropagateNaNEitherSide) {
  for (Op op : {Op::kMax, Op::kMin}) {
    EXPECT_TRUE(std::isnan(wide_pair<float>(DType::kFloat32, op, kNaN, 1.0f)));
    EXPECT_TRUE(std::isnan(wide_pair<float>(DType::kFloat32, op, 1.0f, kNaN)));
    EXPECT_TRUE(std::isnan(wide_pair<double>(DType::kFloat64, op, 1.0, std::nan(""))));
    EXPECT_TRUE(std::isnan(wide_pair<double>(DType::kFloat64, op, std::nan(""), -1.0)));
    EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, op, kNaN, 1.0f) & 0x7E00, 0x7E00);
    EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, op, 1.0f, kNaN) & 0x7E00, 0x7E00);
    EXPECT_EQ(narrow_pair<uint16_t>(DType::kBfloat16, op, 1.0f, kNaN) & 0x7FC0, 0x7FC0);
    EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e4m3, op, 1.0f, kNaN) & 0x7F, 0x7F);
    EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e5m2, op, kNaN, 1.0f) & 0x7E, 0x7E);
  }
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kMax, 1.0f, kInf), kInf);
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kMin, -kInf, 1.0f), -kInf);
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kMax, -2.0f, 3.0f), 3.0f);
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kMin, -2.0f, 3.0f), -2.0f);
}

TEST(Semantics, SumAndProdFollowIeee) {
  EXPECT_TRUE(std::isnan(wide_pair<float>(DType::kFloat32, Op::kSum, kInf, -kInf)));
  EXPECT_TRUE(std::isnan(wide_pair<float>(DType::kFloat32, Op::kSum, kNaN, 1.0f)));
  EXPECT_TRUE(std::isnan(wide_pair<float>(DType::kFloat32, Op::kProd, kInf, 0.0f)));
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kSum, kInf, 1.0f), kInf);
  EXPECT_TRUE(std::isnan(wide_pair<double>(DType::kFloat64, Op::kSum, INFINITY, -INFINITY)));
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, kInf, -kInf) & 0x7E00, 0x7E00);
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kBfloat16, Op::kSum, -kInf, kInf) & 0x7FC0, 0x7FC0);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e5m2, Op::kSum, kInf, -kInf) & 0x7E, 0x7E);
}

TEST(Semantics, SignedZeroAndDenormals) {
  const float nz = -0.0f;
  EXPECT_TRUE(std::signbit(wide_pair<float>(DType::kFloat32, Op::kSum, nz, nz)));
  EXPECT_FALSE(std::signbit(wide_pair<float>(DType::kFloat32, Op::kSum, nz, 0.0f)));
  const float dmin = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(wide_pair<float>(DType::kFloat32, Op::kSum, dmin, dmin), 2 * dmin);
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, nz, nz), 0x8000);
  // Smallest fp16 denormal (2^-24) twice is 2^-23: 0x0002.
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, 0x1p-24f, 0x1p-24f), 0x0002);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e4m3, Op::kSum, 0x1p-9f, 0x1p-9f), 0x02);
}

TEST(Semantics, Fp16RoundsToNearestEven) {
  // Around 2048 the fp16 spacing is 2: 2049 ties to 2048 (even), 2051 ties to 2052.
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, 2048.0f, 1.0f),
            float_to_half(2048.0f));
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, 2050.0f, 1.0f),
            float_to_half(2052.0f));
  EXPECT_EQ(float_to_half(2049.0f), 0x6800);
  EXPECT_EQ(float_to_half(2051.0f), 0x6802);
  EXPECT_EQ(float_to_half(std::nextafter(2049.0f, 3000.0f)), 0x6801);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // tie above max rounds to Inf
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kFloat16, Op::kSum, 65504.0f, 65504.0f), 0x7C00);
  EXPECT_EQ(float_to_half(-1e6f), 0xFC00);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);  // tie to even (0)
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(0x1.8p-24f), 0x0002);  // 1.5 ulp ties to 2
}

TEST(Semantics, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);      // tie down to even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);  // tie up to even
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  EXPECT_EQ(narrow_pair<uint16_t>(DType::kBfloat16, Op::kSum, 1.0f, 0x1p-8f), 0x3F80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // overflow -> Inf
  EXPECT_EQ(float_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16(kNaN) & 0x7FC0, 0x7FC0);
  uint32_t snan_bits = 0x7F800001;
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  EXPECT_EQ(float_to_bf16(snan), 0x7FC0);  // a NaN that would truncate to Inf stays NaN
}

TEST(Semantics, Fp8E4m3SaturatesAndKeepsNaN) {
  EXPECT_EQ(fp8e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8e4m3_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(fp8e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0xFF)));
  EXPECT_EQ(fp8e4m3_to_float(0x78), 256.0f);  // exponent 15 is finite in e4m3
  EXPECT_EQ(float_to_fp8e4m3(464.0f), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3(kInf), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3(-kInf), 0xFE);
  EXPECT_EQ(float_to_fp8e4m3(kNaN), 0x7F);
  EXPECT_EQ(float_to_fp8e4m3(-kNaN), 0xFF);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e4m3, Op::kSum, 448.0f, 448.0f), 0x7E);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e4m3, Op::kSum, -448.0f, -448.0f), 0xFE);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e4m3, Op::kProd, 448.0f, 448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8e4m3(1.0625f), 0x38);  // tie between 1 and 1.125 -> 1 (even)
  EXPECT_EQ(float_to_fp8e4m3(1.1875f), 0x3A);  // tie between 1.125 and 1.25 -> 1.25
}

TEST(Semantics, Fp8E5m2OverflowsToInf) {
  EXPECT_EQ(fp8e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(fp8e5m2_to_float(0x7C), kInf);
  EXPECT_EQ(fp8e5m2_to_float(0x01), 0x1p-16f);
  EXPECT_TRUE(std::isnan(fp8e5m2_to_float(0x7D)));
  EXPECT_EQ(float_to_fp8e5m2(61439.0f), 0x7B);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f), 0x7C);  // tie above max rounds to Inf
  EXPECT_EQ(float_to_fp8e5m2(-1e9f), 0xFC);
  EXPECT_EQ(narrow_pair<uint8_t>(DType::kFloat8e5m2, Op::kSum, 57344.0f, 57344.0f), 0x7C);
  EXPECT_EQ(float_to_fp8e5m2(kNaN) & 0x7E, 0x7E);
}

TEST(Semantics, IntegersWrapAround) {
  using I32 = std::numeric_limits<int32_t>;
  using I64 = std::numeric_limits<int64_t>;
  EXPECT_EQ(wide_pair<int32_t>(DType::kInt32, Op::kSum, I32::max(), 1), I32::min());
  EXPECT_EQ(wide_pair<uint32_t>(DType::kUint32, Op::kSum, 0xFFFFFFFFu, 2u), 1u);
  EXPECT_EQ(wide_pair<uint8_t>(DType::kUint8, Op::kSum, 255, 1), 0);
  EXPECT_EQ(wide_pair<int8_t>(DType::kInt8, Op::kSum, 127, 1), -128);
  EXPECT_EQ(wide_pair<int8_t>(DType::kInt8, Op::kProd, 16, 16), 0);
  EXPECT_EQ(wide_pair<int8_t>(DType::kInt8, Op::kProd, -128, -1), -128);
  EXPECT_EQ(wide_pair<uint8_t>(DType::kUint8, Op::kProd, 15, 17), 255);
  EXPECT_EQ(wide_pair<int32_t>(DType::kInt32, Op::kProd, 65536, 65536), 0);
  EXPECT_EQ(wide_pair<int64_t>(DType::kInt64, Op::kProd, I64::max(), 2), -2);
  EXPECT_EQ(wide_pair<uint64_t>(DType::kUint64, Op::kProd, 0x100000001ull, 0x100000001ull),
            0x200000001ull);
  EXPECT_EQ(wide_pair<int64_t>(DType::kInt64, Op::kMin, -1, 1), -1);
  EXPECT_EQ(wide_pair<uint64_t>(DType::kUint64, Op::kMax, ~0ull, 1ull), ~0ull);
  EXPECT_EQ(wide_pair<int8_t>(DType::kInt8, Op::kMax, -128, 127), 127);
  EXPECT_EQ(wide_pair<uint8_t>(DType::kUint8, Op::kMin, 200, 100), 100);
}

TEST(Semantics, InvalidArgumentsAreIgnored) {
  float acc[4] = {1, 2, 3, 4};
  const float src[4] = {1, 1, 1, 1};
  accumulate(static_cast<DType>(200), Op::kSum, acc, src, 4);
  accumulate(DType::kFloat32, static_cast<Op>(9), acc, src, 4);
  init(static_cast<DType>(12), acc, src, 4);
  finish(static_cast<DType>(12), acc, src, 4);
  reduce_inplace(static_cast<DType>(99), Op::kSum, acc, src, 4);
  const void* srcs[1] = {src};
  reduce_n(DType::kFloat32, static_cast<Op>(4), acc, srcs, 1, 4, nullptr);
  EXPECT_EQ(acc[3], 4.0f);
  accumulate(DType::kFloat32, Op::kSum, nullptr, nullptr, 0);  // n == 0: nothing touched
}

}  // namespace
}  // namespace conflux::reduce
