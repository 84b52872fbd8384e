// SPDX-License-Identifier: Apache-2.0
// Scalar conversions between fp32 and the narrow float formats (reduce.h).
//
// Written for clarity, not speed: one generic integer rounding routine for every
// format, with no floating-point arithmetic on the narrowing side, so it is a
// reference that the vector kernels (which use different tricks) are tested against.
//
// NaN conventions (the vector paths match them bit for bit):
//   widen : fp16 / fp8 e5m2 NaNs become quiet fp32 NaNs keeping sign and payload
//           (as x86 F16C does); fp8 e4m3 NaN becomes ±0x7FC00000; bf16 is an exact
//           shift (a signalling NaN stays signalling until arithmetic quiets it).
//   narrow: fp16 / bf16 / e5m2 keep the sign and the top payload bits and set the
//           quiet bit; e4m3 NaN is 0x7F | sign.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "conflux/common/reduce.h"

namespace conflux::reduce {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds the finite, non-negative fp32 bit pattern `x` to nearest-even in a binary
// format with `mbits` stored mantissa bits and exponent bias `bias`, with gradual
// underflow. Returns the magnitude encoding; may exceed the largest finite encoding
// (the caller decides between Inf and saturation).
uint32_t round_magnitude(uint32_t x, int mbits, int bias) {
  if (x == 0) {
    return 0;
  }
  const int biased = static_cast<int>(x >> 23);
  uint32_t mant = x & 0x7FFFFFu;
  int exp = -126;  // unbiased exponent of the fp32 value; value = mant * 2^(exp-23)
  if (biased != 0) {
    exp = biased - 127;
    mant |= 0x800000u;
  }
  const int emin = 1 - bias;
  int shift = 23 - mbits;
  if (exp < emin) {
    shift += emin - exp;
  }
  if (shift > 24) {
    return 0;  // below half of the smallest denormal
  }
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) {
    ++q;
  }
  if (exp < emin) {
    return q;  // denormal (a carry makes it the smallest normal)
  }
  return (static_cast<uint32_t>(exp - emin) << mbits) + q;  // q carries the hidden bit
}

struct Format {
  int ebits;
  int mbits;
  bool has_inf;  // IEEE-style Inf/NaN (else e4m3: no Inf, one NaN pattern, saturate)
};

constexpr Format kHalf{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kE4m3{4, 3, false};
constexpr Format kE5m2{5, 2, true};

uint32_t narrow(float f, Format fmt) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 31) << (fmt.ebits + fmt.mbits);
  const uint32_t x = u & 0x7FFFFFFFu;
  const uint32_t emask = (1u << fmt.ebits) - 1u;
  const uint32_t mmask = (1u << fmt.mbits) - 1u;
  const uint32_t inf = emask << fmt.mbits;
  if (x > 0x7F800000u) {  // NaN
    if (!fmt.has_inf) {
      return sign | inf | mmask;
    }
    const uint32_t payload = (x >> (23 - fmt.mbits)) & mmask;
    return sign | inf | payload | (1u << (fmt.mbits - 1));
  }
  const int bias = static_cast<int>(emask >> 1);
  const uint32_t max_finite = fmt.has_inf ? inf - 1u : inf | (mmask - 1u);
  if (x == 0x7F800000u) {
    return sign | (fmt.has_inf ? inf : max_finite);
  }
  const uint32_t m = round_magnitude(x, fmt.mbits, bias);
  if (m > max_finite) {
    return sign | (fmt.has_inf ? inf : max_finite);
  }
  return sign | m;
}

float widen(uint32_t v, Format fmt) {
  const uint32_t sign = (v >> (fmt.ebits + fmt.mbits)) << 31;
  const uint32_t emask = (1u << fmt.ebits) - 1u;
  const uint32_t mmask = (1u << fmt.mbits) - 1u;
  const uint32_t e = (v >> fmt.mbits) & emask;
  const uint32_t m = v & mmask;
  const int bias = static_cast<int>(emask >> 1);
  if (fmt.has_inf && e == emask) {
    if (m == 0) {
      return float_of(sign | 0x7F800000u);
    }
    return float_of(sign | 0x7FC00000u | (m << (23 - fmt.mbits)));
  }
  if (!fmt.has_inf && e == emask && m == mmask) {
    return float_of(sign | 0x7FC00000u);
  }
  if (e == 0) {
    const float mag = std::ldexp(static_cast<float>(m), 1 - bias - fmt.mbits);
    return sign ? -mag : mag;
  }
  const uint32_t fe = e - static_cast<uint32_t>(bias) + 127u;
  return float_of(sign | (fe << 23) | (m << (23 - fmt.mbits)));
}

}  // namespace

float half_to_float(uint16_t h) { return widen(h, kHalf); }
uint16_t float_to_half(float f) { return static_cast<uint16_t>(narrow(f, kHalf)); }
float bf16_to_float(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }
uint16_t float_to_bf16(float f) { return static_cast<uint16_t>(narrow(f, kBf16)); }
float fp8e4m3_to_float(uint8_t v) { return widen(v, kE4m3); }
uint8_t float_to_fp8e4m3(float f) { return static_cast<uint8_t>(narrow(f, kE4m3)); }
float fp8e5m2_to_float(uint8_t v) { return widen(v, kE5m2); }
uint8_t float_to_fp8e5m2(float f) { return static_cast<uint8_t>(narrow(f, kE5m2)); }

}  // namespace conflux::reduce
