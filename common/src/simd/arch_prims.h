// SPDX-License-Identifier: Apache-2.0
// Internal, included only by the per-ISA kernel translation units (kernels_*.cc),
// each compiled with its own -m flags. Everything here has internal linkage (anonymous
// namespace) so that code built for one ISA can never be merged into another's.
//
// Prims<A>: the few operations xsimd 8.1 lacks or does slowly, with raw intrinsics:
// zero-extending loads of 8/16-bit lanes into 32-bit lanes, the matching truncating
// stores, wrapping integer multiplication for 8/32/64-bit lanes, 64-bit min/max on
// AVX2, and hardware fp16 conversions (F16C on x86, FCVTL/FCVTN on AArch64).
#pragma once

#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace {

template <class A>
struct Prims;

#if defined(__x86_64__)

// ---------------------------------------------------------------- SSE2 (baseline)
template <>
struct Prims<xsimd::sse2> {
  using A = xsimd::sse2;
  using I = xsimd::batch<int32_t, A>;
  using F = xsimd::batch<float, A>;
  static constexpr bool kF16C = false;
  static constexpr bool kMinMax64 = false;

  static I load_u8(const uint8_t* p) {
    int32_t w;
    std::memcpy(&w, p, 4);
    const __m128i z = _mm_setzero_si128();
    return I(_mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(w), z), z));
  }
  static I load_u16(const uint8_t* p) {
    return I(_mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                _mm_setzero_si128()));
  }
  static I load_u16_hi(const uint8_t* p) {  // lane = u16 << 16
    return I(_mm_unpacklo_epi16(_mm_setzero_si128(),
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void store_u8(uint8_t* p, I v) {  // lanes in [0, 255]
    const __m128i w = _mm_packs_epi32(v, v);
    const int32_t b = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
    std::memcpy(p, &b, 4);
  }
  static void store_u16(uint8_t* p, I v) {  // lanes in [0, 65535]
    const __m128i s = _mm_srai_epi32(_mm_slli_epi32(v, 16), 16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(s, s));
  }
  static __m128i mul8(__m128i a, __m128i b) {
    const __m128i lo = _mm_and_si128(_mm_mullo_epi16(a, b), _mm_set1_epi16(0xFF));
    const __m128i hi =
        _mm_slli_epi16(_mm_mullo_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)), 8);
    return _mm_or_si128(lo, hi);
  }
  static __m128i mul32(__m128i a, __m128i b) {
    const __m128i even = _mm_mul_epu32(a, b);
    const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), _mm_srli_epi64(b, 32));
    return _mm_unpacklo_epi32(_mm_shuffle_epi32(even, 0x08), _mm_shuffle_epi32(odd, 0x08));
  }
  static __m128i mul64(__m128i a, __m128i b) {
    const __m128i lo = _mm_mul_epu32(a, b);
    const __m128i cross = _mm_add_epi64(_mm_mul_epu32(a, _mm_srli_epi64(b, 32)),
                                        _mm_mul_epu32(_mm_srli_epi64(a, 32), b));
    return _mm_add_epi64(lo, _mm_slli_epi64(cross, 32));
  }
};

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
// ---------------------------------------------------------------- AVX2 + FMA + F16C
template <>
struct Prims<xsimd::fma3<xsimd::avx2>> {
  using A = xsimd::fma3<xsimd::avx2>;
  using I = xsimd::batch<int32_t, A>;
  using F = xsimd::batch<float, A>;
  static constexpr bool kF16C = true;
  static constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

  static I load_u8(const uint8_t* p) {
    return I(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static I load_u16(const uint8_t* p) {
    return I(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static I load_u16_hi(const uint8_t* p) { return I(_mm256_slli_epi32(load_u16(p), 16)); }
  static void store_u8(uint8_t* p, I v) {
    const __m256i w = _mm256_packus_epi32(v, v);
    const __m256i b = _mm256_packus_epi16(w, w);  // dword 0 and dword 4 hold the bytes
    const __m256i g = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(g));
  }
  static void store_u16(uint8_t* p, I v) {
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(w));
  }
  static F load_half(const uint8_t* p) {
    return F(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store_half(uint8_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRound));
  }
  static F load_e5m2(const uint8_t* p) {  // e5m2 is the top byte of an fp16
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return F(_mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), b)));
  }
  static __m256i mul8(__m256i a, __m256i b) {
    const __m256i lo = _mm256_and_si256(_mm256_mullo_epi16(a, b), _mm256_set1_epi16(0xFF));
    const __m256i hi =
        _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)), 8);
    return _mm256_or_si256(lo, hi);
  }
  static __m256i mul32(__m256i a, __m256i b) { return _mm256_mullo_epi32(a, b); }
  // 64-bit min/max (xsimd 8.1 splits these into SSE halves on AVX2).
  static constexpr bool kMinMax64 = true;
  template <bool kSigned, bool kMax>
  static __m256i minmax64(__m256i a, __m256i b) {
    __m256i x = a, y = b;
    if constexpr (!kSigned) {
      const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
      x = _mm256_xor_si256(a, flip);
      y = _mm256_xor_si256(b, flip);
    }
    const __m256i a_gt_b = _mm256_cmpgt_epi64(x, y);
    return kMax ? _mm256_blendv_epi8(b, a, a_gt_b) : _mm256_blendv_epi8(a, b, a_gt_b);
  }
  static __m256i mul64(__m256i a, __m256i b) {
    const __m256i lo = _mm256_mul_epu32(a, b);
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)),
                                           _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
  }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__F16C__)
// ---------------------------------------------------------------- AVX-512 F/BW/DQ
template <>
struct Prims<xsimd::avx512bw> {
  using A = xsimd::avx512bw;
  using I = xsimd::batch<int32_t, A>;
  using F = xsimd::batch<float, A>;
  static constexpr bool kF16C = true;
  static constexpr bool kMinMax64 = false;  // xsimd uses native vpminsq/vpminuq
  static constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

  static I load_u8(const uint8_t* p) {
    return I(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static I load_u16(const uint8_t* p) {
    return I(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static I load_u16_hi(const uint8_t* p) { return I(_mm512_slli_epi32(load_u16(p), 16)); }
  static void store_u8(uint8_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
  static void store_u16(uint8_t* p, I v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
  static F load_half(const uint8_t* p) {
    return F(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static void store_half(uint8_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, kRound));
  }
  static F load_e5m2(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return F(_mm512_cvtph_ps(_mm256_slli_epi16(w, 8)));
  }
  static __m512i mul8(__m512i a, __m512i b) {
    const __m512i lo = _mm512_and_si512(_mm512_mullo_epi16(a, b), _mm512_set1_epi16(0xFF));
    const __m512i hi =
        _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8)), 8);
    return _mm512_or_si512(lo, hi);
  }
  static __m512i mul32(__m512i a, __m512i b) { return _mm512_mullo_epi32(a, b); }
  static __m512i mul64(__m512i a, __m512i b) { return _mm512_mullo_epi64(a, b); }
};
#endif
#endif  // __x86_64__

#if defined(__aarch64__)
// ---------------------------------------------------------------- AArch64 NEON (baseline)
// Advanced SIMD and the half-precision conversions (FCVTL/FCVTN) are part of ARMv8-A, so
// this needs no flags. The conversions round to nearest-even (FPCR's default, which Linux
// leaves alone), keep subnormals (FZ/FZ16 off) and quiet a NaN keeping its top payload
// bits: the same results as F16C and the reference.
template <>
struct Prims<xsimd::neon64> {
  using A = xsimd::neon64;
  using I = xsimd::batch<int32_t, A>;
  using F = xsimd::batch<float, A>;
  static constexpr bool kF16C = true;
  static constexpr bool kMinMax64 = false;  // xsimd compares 64-bit lanes natively (CMGT)

  static uint8x8_t load4_u8(const uint8_t* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return vreinterpret_u8_u32(vdup_n_u32(w));
  }
  static uint16x4_t load4_u16(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return vreinterpret_u16_u64(vdup_n_u64(w));
  }
  static void store8(uint8_t* p, uint64x1_t v) {
    const uint64_t w = vget_lane_u64(v, 0);
    std::memcpy(p, &w, 8);
  }

  static I load_u8(const uint8_t* p) {
    return I(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(load4_u8(p))))));
  }
  static I load_u16(const uint8_t* p) { return I(vreinterpretq_s32_u32(vmovl_u16(load4_u16(p)))); }
  static I load_u16_hi(const uint8_t* p) {  // lane = u16 << 16
    return I(vreinterpretq_s32_u32(vshll_n_u16(load4_u16(p), 16)));
  }
  static void store_u8(uint8_t* p, I v) {  // lanes in [0, 255]
    const uint16x4_t h = vmovn_u32(vreinterpretq_u32_s32(v));
    const uint8x8_t b = vmovn_u16(vcombine_u16(h, h));
    const uint32_t w = vget_lane_u32(vreinterpret_u32_u8(b), 0);
    std::memcpy(p, &w, 4);
  }
  static void store_u16(uint8_t* p, I v) {  // lanes in [0, 65535]
    store8(p, vreinterpret_u64_u16(vmovn_u32(vreinterpretq_u32_s32(v))));
  }
  static F load_half(const uint8_t* p) {
    return F(vcvt_f32_f16(vreinterpret_f16_u16(load4_u16(p))));
  }
  static void store_half(uint8_t* p, F v) { store8(p, vreinterpret_u64_f16(vcvt_f16_f32(v))); }
  static F load_e5m2(const uint8_t* p) {  // e5m2 is the top byte of an fp16
    const uint16x4_t h = vget_low_u16(vshll_n_u8(load4_u8(p), 8));
    return F(vcvt_f32_f16(vreinterpret_f16_u16(h)));
  }
  // Wrapping products: NEON multiplies 8- and 32-bit lanes natively (MUL); 64-bit lanes
  // from three 32x32->64 products (UMULL/UMLAL), as SSE2 does.
  template <class V>
  static V mul8(V a, V b) {
    using U = xsimd::batch<uint8_t, A>;
    const U r(vmulq_u8(xsimd::bitwise_cast<U>(a), xsimd::bitwise_cast<U>(b)));
    return xsimd::bitwise_cast<V>(r);
  }
  template <class V>
  static V mul32(V a, V b) {
    using U = xsimd::batch<uint32_t, A>;
    const U r(vmulq_u32(xsimd::bitwise_cast<U>(a), xsimd::bitwise_cast<U>(b)));
    return xsimd::bitwise_cast<V>(r);
  }
  template <class V>
  static V mul64(V a, V b) {
    using U = xsimd::batch<uint64_t, A>;
    const uint64x2_t x = xsimd::bitwise_cast<U>(a), y = xsimd::bitwise_cast<U>(b);
    const uint32x2_t xl = vmovn_u64(x), yl = vmovn_u64(y);
    const uint32x2_t xh = vshrn_n_u64(x, 32), yh = vshrn_n_u64(y, 32);
    const uint64x2_t cross = vmlal_u32(vmull_u32(xl, yh), xh, yl);
    const U r(vaddq_u64(vmull_u32(xl, yl), vshlq_n_u64(cross, 32)));
    return xsimd::bitwise_cast<V>(r);
  }
};
#endif  // __aarch64__

}  // namespace
