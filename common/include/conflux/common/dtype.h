// SPDX-License-Identifier: Apache-2.0
// Datatypes and reduction operators, numbered exactly as NCCL numbers them
// (ncclDataType_t / ncclRedOp_t as seen by a CollNet plugin), so values cross the
// plugin boundary and the wire unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace conflux {

enum class DType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
};
inline constexpr int kNumDTypes = 12;

enum class Op : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };
inline constexpr int kNumOps = 4;

constexpr bool valid_dtype(uint32_t v) { return v < kNumDTypes; }
constexpr bool valid_op(uint32_t v) { return v < kNumOps; }

// Size in bytes of one element on the wire and in user buffers.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
    case DType::kFloat8e4m3:
    case DType::kFloat8e5m2:
      return 1;
    case DType::kFloat16:
    case DType::kBfloat16:
      return 2;
    case DType::kInt32:
    case DType::kUint32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUint64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

// Narrow floats (fp16, bf16, fp8) accumulate in fp32 and are rounded once at the end.
constexpr bool dtype_is_narrow_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBfloat16 || t == DType::kFloat8e4m3 ||
         t == DType::kFloat8e5m2;
}
constexpr bool dtype_is_float(DType t) {
  return dtype_is_narrow_float(t) || t == DType::kFloat32 || t == DType::kFloat64;
}

// Size in bytes of one accumulator element: 4 for narrow floats, else dtype_size.
constexpr size_t accum_size(DType t) { return dtype_is_narrow_float(t) ? 4 : dtype_size(t); }

std::string_view dtype_name(DType t);  // "float", "half", "bfloat16", ... (nccl-tests spelling)
std::string_view op_name(Op op);       // "sum", "prod", "max", "min"
std::optional<DType> parse_dtype(std::string_view s);  // accepts names and NCCL short forms
std::optional<Op> parse_op(std::string_view s);

}  // namespace conflux
