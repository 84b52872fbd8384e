// SPDX-License-Identifier: Apache-2.0
// Internal, per-ISA (see arch_prims.h): branch-free vector conversions between fp32
// and the narrow float formats, on 32-bit lanes, with exactly the rounding and NaN
// conventions of the scalar reference (convert_ref.cc).
//
// Narrowing (fp16 without F16C, fp8): integer round-to-nearest-even for results in the
// normal range; results below it use the "magic add": adding a float whose ulp equals
// the target's denormal step makes the FPU round (RNE) at the right bit. Overflow is
// clamped to Inf (IEEE-style formats) or to the largest finite value (e4m3).
#pragma once

#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "arch_prims.h"

namespace {

template <class A>
struct Conv {
  using I = xsimd::batch<int32_t, A>;
  using F = xsimd::batch<float, A>;

  static F as_f(I x) { return xsimd::bitwise_cast<F>(x); }
  static I as_i(F x) { return xsimd::bitwise_cast<I>(x); }

  // fp16 bit patterns (zero-extended in each lane) -> fp32; NaN quieted like F16C.
  static F half_to_float(I h) {
    const I x = h & I(0x7FFF);
    const I sign = (h & I(0x8000)) << 16;
    const I norm = (x << 13) + I(112 << 23);
    const I quiet = xsimd::select(x > I(0x7C00), I(0x00400000), I(0));
    const I infnan = (x << 13) | I(0x7F800000) | quiet;
    const I den = as_i(xsimd::to_float(x) * F(0x1p-24f));
    I r = xsimd::select(x >= I(0x7C00), infnan, norm);
    r = xsimd::select(x < I(0x0400), den, r);
    return as_f(r | sign);
  }

  // fp8 e4m3 bit patterns -> fp32 (NaN -> ±0x7FC00000).
  static F e4m3_to_float(I u) {
    const I x = u & I(0x7F);
    const I sign = (u & I(0x80)) << 24;
    const I norm = (x << 20) + I(120 << 23);
    const I den = as_i(xsimd::to_float(x) * F(0x1p-9f));
    I r = xsimd::select(x < I(8), den, norm);
    r = xsimd::select(x == I(0x7F), I(0x7FC00000), r);
    return as_f(r | sign);
  }

  // fp32 -> format with E exponent and M mantissa bits; IEEE: Inf/NaN like fp16,
  // else e4m3 style (no Inf, saturate, NaN = all ones). Returns bit patterns.
  template <int E, int M, bool kIeee>
  static I narrow(F v) {
    constexpr int kBias = (1 << (E - 1)) - 1;
    constexpr int kShift = 23 - M;
    constexpr int32_t kRebias = (127 - kBias) << 23;
    constexpr int32_t kMinNormal = (127 - kBias + 1) << 23;
    constexpr int32_t kInf = ((1 << E) - 1) << M;
    constexpr int32_t kMMask = (1 << M) - 1;
    constexpr int32_t kMax = kIeee ? kInf : (kInf | (kMMask - 1));
    constexpr int32_t kMagic = (127 + 24 - kBias - M) << 23;  // ulp == denormal step
    const I b = as_i(v);
    const I x = b & I(0x7FFFFFFF);
    I norm = ((x - I(kRebias)) + I((1 << (kShift - 1)) - 1) + ((x >> kShift) & I(1))) >> kShift;
    norm = xsimd::min(norm, I(kMax));
    const I den = as_i(as_f(x) + as_f(I(kMagic))) - I(kMagic);
    I r = xsimd::select(x < I(kMinNormal), den, norm);
    I nan = I(kInf | kMMask);
    if constexpr (kIeee) {
      nan = I(kInf | (1 << (M - 1))) | ((x >> kShift) & I(kMMask));
    }
    r = xsimd::select(x > I(0x7F800000), nan, r);
    return r | ((b >> (31 - E - M)) & I(1 << (E + M)));
  }

  static I float_to_bf16(F v) {
    const I b = as_i(v);
    const I r = ((b + I(0x7FFF) + ((b >> 16) & I(1))) >> 16) & I(0xFFFF);
    const I nan = ((b >> 16) | I(0x40)) & I(0xFFFF);
    return xsimd::select((b & I(0x7FFFFFFF)) > I(0x7F800000), nan, r);
  }
};

}  // namespace
