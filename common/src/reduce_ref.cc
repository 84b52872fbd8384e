// SPDX-License-Identifier: Apache-2.0
// ref:: — the scalar reference reductions (reduce.h). Element by element, through
// memcpy so buffers may be unaligned. Also the fallback kernels on CPUs without SIMD
// support (see reduce_scalar.cc).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "conflux/common/reduce.h"
#include "conflux/common/ref_ops.h"

namespace conflux::reduce::ref {
namespace {

template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

template <class T>
void accumulate_wide(Op op, void* acc, const void* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    store<T>(acc, i, apply_op(op, load<T>(acc, i), load<T>(src, i)));
  }
}

template <class S, float (*Widen)(S)>
void init_narrow(void* acc, const void* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    store<float>(acc, i, Widen(load<S>(src, i)));
  }
}

template <class S, float (*Widen)(S)>
void accumulate_narrow(Op op, void* acc, const void* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    store<float>(acc, i, apply_op(op, load<float>(acc, i), Widen(load<S>(src, i))));
  }
}

template <class S, S (*Narrow)(float)>
void finish_narrow(void* dst, const void* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    store<S>(dst, i, Narrow(load<float>(acc, i)));
  }
}

}  // namespace

void init(DType t, void* acc, const void* src, size_t n) {
  switch (t) {
    case DType::kFloat16:
      return init_narrow<uint16_t, half_to_float>(acc, src, n);
    case DType::kBfloat16:
      return init_narrow<uint16_t, bf16_to_float>(acc, src, n);
    case DType::kFloat8e4m3:
      return init_narrow<uint8_t, fp8e4m3_to_float>(acc, src, n);
    case DType::kFloat8e5m2:
      return init_narrow<uint8_t, fp8e5m2_to_float>(acc, src, n);
    default:
      if (valid_dtype(static_cast<uint32_t>(t)) && n != 0) {
        std::memcpy(acc, src, n * dtype_size(t));
      }
  }
}

void accumulate(DType t, Op op, void* acc, const void* src, size_t n) {
  if (!valid_op(static_cast<uint32_t>(op))) {
    return;
  }
  switch (t) {
    case DType::kInt8:
      return accumulate_wide<int8_t>(op, acc, src, n);
    case DType::kUint8:
      return accumulate_wide<uint8_t>(op, acc, src, n);
    case DType::kInt32:
      return accumulate_wide<int32_t>(op, acc, src, n);
    case DType::kUint32:
      return accumulate_wide<uint32_t>(op, acc, src, n);
    case DType::kInt64:
      return accumulate_wide<int64_t>(op, acc, src, n);
    case DType::kUint64:
      return accumulate_wide<uint64_t>(op, acc, src, n);
    case DType::kFloat32:
      return accumulate_wide<float>(op, acc, src, n);
    case DType::kFloat64:
      return accumulate_wide<double>(op, acc, src, n);
    case DType::kFloat16:
      return accumulate_narrow<uint16_t, half_to_float>(op, acc, src, n);
    case DType::kBfloat16:
      return accumulate_narrow<uint16_t, bf16_to_float>(op, acc, src, n);
    case DType::kFloat8e4m3:
      return accumulate_narrow<uint8_t, fp8e4m3_to_float>(op, acc, src, n);
    case DType::kFloat8e5m2:
      return accumulate_narrow<uint8_t, fp8e5m2_to_float>(op, acc, src, n);
  }
}

void finish(DType t, void* dst, const void* acc, size_t n) {
  switch (t) {
    case DType::kFloat16:
      return finish_narrow<uint16_t, float_to_half>(dst, acc, n);
    case DType::kBfloat16:
      return finish_narrow<uint16_t, float_to_bf16>(dst, acc, n);
    case DType::kFloat8e4m3:
      return finish_narrow<uint8_t, float_to_fp8e4m3>(dst, acc, n);
    case DType::kFloat8e5m2:
      return finish_narrow<uint8_t, float_to_fp8e5m2>(dst, acc, n);
    default:
      if (valid_dtype(static_cast<uint32_t>(t)) && n != 0) {
        std::memcpy(dst, acc, n * dtype_size(t));
      }
  }
}

}  // namespace conflux::reduce::ref
