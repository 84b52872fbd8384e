// SPDX-License-Identifier: Apache-2.0
// Names and parsers for DType / Op (see dtype.h). Canonical names are the ones
// nccl-tests prints; the parsers also accept the usual aliases, case-insensitively.
#include "conflux/common/dtype.h"

#include <array>
#include <cstddef>

namespace conflux {
namespace {

constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {
    "int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
    "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};

constexpr std::array<std::string_view, kNumOps> kOpNames = {"sum", "prod", "max", "min"};

struct Alias {
  std::string_view name;
  uint8_t value;
};

// Every accepted spelling (canonical names are matched first, through kDTypeNames).
constexpr Alias kDTypeAliases[] = {
    {"i8", 0},
    {"char", 0},
    {"ncclint8", 0},
    {"ncclchar", 0},
    {"u8", 1},
    {"ncclUint8", 1},
    {"i32", 2},
    {"int", 2},
    {"ncclint32", 2},
    {"ncclint", 2},
    {"u32", 3},
    {"ncclUint32", 3},
    {"i64", 4},
    {"ncclInt64", 4},
    {"u64", 5},
    {"ncclUint64", 5},
    {"float16", 6},
    {"fp16", 6},
    {"f16", 6},
    {"ncclFloat16", 6},
    {"ncclHalf", 6},
    {"float32", 7},
    {"fp32", 7},
    {"f32", 7},
    {"ncclFloat32", 7},
    {"ncclFloat", 7},
    {"float64", 8},
    {"fp64", 8},
    {"f64", 8},
    {"ncclFloat64", 8},
    {"ncclDouble", 8},
    {"bf16", 9},
    {"ncclBfloat16", 9},
    {"fp8_e4m3", 10},
    {"fp8e4m3", 10},
    {"e4m3", 10},
    {"float8_e4m3", 10},
    {"ncclFloat8e4m3", 10},
    {"fp8_e5m2", 11},
    {"fp8e5m2", 11},
    {"e5m2", 11},
    {"float8_e5m2", 11},
    {"ncclFloat8e5m2", 11},
};

constexpr Alias kOpAliases[] = {
    {"product", 1}, {"ncclSum", 0}, {"ncclProd", 1}, {"ncclMax", 2}, {"ncclMin", 3},
};

constexpr char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view dtype_name(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < kDTypeNames.size() ? kDTypeNames[i] : std::string_view("invalid");
}

std::string_view op_name(Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : std::string_view("invalid");
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i) {
    if (iequal(s, kDTypeNames[i])) {
      return static_cast<DType>(i);
    }
  }
  for (const Alias& a : kDTypeAliases) {
    if (iequal(s, a.name)) {
      return static_cast<DType>(a.value);
    }
  }
  return std::nullopt;
}

std::optional<Op> parse_op(std::string_view s) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (iequal(s, kOpNames[i])) {
      return static_cast<Op>(i);
    }
  }
  for (const Alias& a : kOpAliases) {
    if (iequal(s, a.name)) {
      return static_cast<Op>(a.value);
    }
  }
  return std::nullopt;
}

}  // namespace conflux
