// SPDX-License-Identifier: Apache-2.0
// Internal, per-ISA (see arch_prims.h): for each DType, the vector type its
// accumulator lives in and how to load a source / store a result; and the four
// operators on those vectors.
#pragma once

#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "arch_prims.h"
#include "conflux/common/dtype.h"
#include "convert_simd.h"

namespace {

using conflux::DType;
using conflux::Op;

template <DType T>
struct WideType;
template <>
struct WideType<DType::kInt8> {
  using type = int8_t;
};
template <>
struct WideType<DType::kUint8> {
  using type = uint8_t;
};
template <>
struct WideType<DType::kInt32> {
  using type = int32_t;
};
template <>
struct WideType<DType::kUint32> {
  using type = uint32_t;
};
template <>
struct WideType<DType::kInt64> {
  using type = int64_t;
};
template <>
struct WideType<DType::kUint64> {
  using type = uint64_t;
};
template <>
struct WideType<DType::kFloat32> {
  using type = float;
};
template <>
struct WideType<DType::kFloat64> {
  using type = double;
};

// Types that accumulate in themselves: loads and stores are plain.
template <class A, DType T, bool kNarrow = conflux::dtype_is_narrow_float(T)>
struct Traits {
  using E = typename WideType<T>::type;
  using V = xsimd::batch<E, A>;
  static V load_acc(const uint8_t* p) { return V::load_unaligned(reinterpret_cast<const E*>(p)); }
  static void store_acc(uint8_t* p, V v) { v.store_unaligned(reinterpret_cast<E*>(p)); }
  static V load_src(const uint8_t* p) { return load_acc(p); }
  static void store_dst(uint8_t* p, V v) { store_acc(p, v); }
};

// Narrow floats: fp32 accumulator, converted on load and store.
template <class A, DType T>
struct Traits<A, T, true> {
  using V = xsimd::batch<float, A>;
  using P = Prims<A>;
  using C = Conv<A>;
  static V load_acc(const uint8_t* p) {
    return V::load_unaligned(reinterpret_cast<const float*>(p));
  }
  static void store_acc(uint8_t* p, V v) { v.store_unaligned(reinterpret_cast<float*>(p)); }

  static V load_src(const uint8_t* p) {
    if constexpr (T == DType::kBfloat16) {
      return C::as_f(P::load_u16_hi(p));
    } else if constexpr (T == DType::kFloat16) {
      if constexpr (P::kF16C) {
        return P::load_half(p);
      } else {
        return C::half_to_float(P::load_u16(p));
      }
    } else if constexpr (T == DType::kFloat8e5m2) {
      if constexpr (P::kF16C) {
        return P::load_e5m2(p);
      } else {
        return C::half_to_float(P::load_u8(p) << 8);
      }
    } else {
      return C::e4m3_to_float(P::load_u8(p));
    }
  }

  static void store_dst(uint8_t* p, V v) {
    if constexpr (T == DType::kBfloat16) {
      P::store_u16(p, C::float_to_bf16(v));
    } else if constexpr (T == DType::kFloat16) {
      if constexpr (P::kF16C) {
        P::store_half(p, v);
      } else {
        P::store_u16(p, C::template narrow<5, 10, true>(v));
      }
    } else if constexpr (T == DType::kFloat8e5m2) {
      P::store_u8(p, C::template narrow<5, 2, true>(v));
    } else {
      P::store_u8(p, C::template narrow<4, 3, false>(v));
    }
  }
};

template <class A, Op O>
struct OpK {
  template <class E>
  static xsimd::batch<E, A> apply(xsimd::batch<E, A> a, xsimd::batch<E, A> b) {
    using V = xsimd::batch<E, A>;
    if constexpr (O == Op::kSum) {
      return a + b;  // integer lanes wrap (no UB in SIMD)
    } else if constexpr (O == Op::kProd) {
      if constexpr (std::is_floating_point_v<E>) {
        return a * b;
      } else if constexpr (sizeof(E) == 1) {
        return V(Prims<A>::mul8(a, b));
      } else if constexpr (sizeof(E) == 4) {
        return V(Prims<A>::mul32(a, b));
      } else {
        return V(Prims<A>::mul64(a, b));
      }
    } else if constexpr (std::is_floating_point_v<E>) {
      // a wins if it is NaN or compares better: propagates NaN, same as ref. (Not
      // `a != a`: xsimd 8.1 compiles != to an ordered compare on AVX, false for NaN.)
      const auto better = (O == Op::kMax) ? (a > b) : (a < b);
      return xsimd::select(better | xsimd::isnan(a), a, b);
    } else if constexpr (sizeof(E) == 8 && Prims<A>::kMinMax64) {
      return V(Prims<A>::template minmax64<std::is_signed_v<E>, O == Op::kMax>(a, b));
    } else if constexpr (O == Op::kMax) {
      return xsimd::max(a, b);
    } else {
      return xsimd::min(a, b);
    }
  }
};

}  // namespace
