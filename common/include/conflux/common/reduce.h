// SPDX-License-Identifier: Apache-2.0
// The reduction engine: streaming element-wise reductions for all 12 NCCL datatypes
// and the four CollNet operators, vectorised with xsimd, instruction set picked at run
// time (SSE2 / AVX2 / AVX-512 where the CPU has them).
//
// Model: a reduction works on an *accumulator* buffer of `accum_size(dtype)` bytes per
// element. Narrow floats (fp16, bf16, fp8 e4m3/e5m2) accumulate in fp32 and are rounded
// once, round-to-nearest-even, by `finish`; every other type accumulates in itself
// (integers wrap like two's complement).
//
//   init(acc, first_contribution)     acc  = widen(src)
//   accumulate(acc, next_contribution) acc = op(acc, widen(src))
//   finish(dst, acc)                   dst  = narrow(acc)      (copy for wide types)
//
// NaN/Inf: sum/prod follow IEEE-754 (NaN propagates, Inf + -Inf = NaN). min/max
// propagate NaN: if either input is NaN the result is NaN (the payload is not
// specified). -0.0 and +0.0 compare equal; which one min/max return is unspecified.
// fp8 e4m3 has no Inf: finish() saturates out-of-range values to ±448 and keeps NaN;
// fp8 e5m2 and fp16/bf16 overflow to ±Inf as IEEE rounding does.
//
// All functions are thread-safe and stateless; buffers may be unaligned; n may be 0.
// Accumulator and source buffers must not overlap partially (acc == src is not allowed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "conflux/common/dtype.h"

namespace conflux::reduce {

void init(DType t, void* acc, const void* src, size_t n);
void accumulate(DType t, Op op, void* acc, const void* src, size_t n);
void finish(DType t, void* dst, const void* acc, size_t n);

// dst = op(dst, src) directly in the user type (narrow floats: widen both, apply op in
// fp32, round once). Used by the worker-side ring, where each hop rounds.
void reduce_inplace(DType t, Op op, void* dst, const void* src, size_t n);

// Reduce `k` sources into dst in source order: dst = op(...op(op(s0, s1), s2)..., sk-1),
// with narrow floats accumulated in fp32 and rounded once. `scratch` must hold
// n * accum_size(t) bytes (may be nullptr for wide types). Deterministic.
void reduce_n(DType t, Op op, void* dst, const void* const* srcs, size_t k, size_t n,
              void* scratch);

// The sum of `n_words` native-endian 32-bit words at p (any alignment), as a 64-bit integer:
// exact for fewer than 2^32 words. The bulk of an Internet checksum (RFC 1071 §2(B): a one's
// complement sum does not depend on byte order, so the caller folds it to 16 bits and swaps).
uint64_t sum_u32_words(const void* p, size_t n_words);

// Scalar reference implementations with exactly the documented semantics; the vector
// paths are tested against these. Not for the hot path.
namespace ref {
void init(DType t, void* acc, const void* src, size_t n);
void accumulate(DType t, Op op, void* acc, const void* src, size_t n);
void finish(DType t, void* dst, const void* acc, size_t n);
}  // namespace ref

// Scalar conversions (exposed for tests, the plugin and tools). The vector kernels
// convert bit-identically to these, NaN included. Widening fp16 / e5m2 quiets NaN
// keeping sign and payload (as x86 F16C does), e4m3 NaN widens to ±0x7FC00000, bf16
// widens by an exact shift; narrowing to fp16 / bf16 / e5m2 keeps sign and top payload
// bits and sets the quiet bit.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // RNE, overflow -> Inf
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);  // RNE, NaN stays NaN (quiet)
float fp8e4m3_to_float(uint8_t v);
uint8_t float_to_fp8e4m3(float f);  // RNE, saturates to ±448, NaN -> 0x7F|sign
float fp8e5m2_to_float(uint8_t v);
uint8_t float_to_fp8e5m2(float f);  // RNE, overflow -> Inf

// Name of the instruction set chosen at run time ("avx512bw", "avx2", "sse2", ...).
// The environment variable CONFLUX_REDUCE_ISA (read once) may force a weaker one.
std::string_view active_isa();

}  // namespace conflux::reduce
