// SPDX-License-Identifier: Apache-2.0
// Scalar element operators with the documented semantics (reduce.h); used by the
// reference implementation and by the tools that verify results (tools/verify). Integers wrap
// (computed in unsigned, no UB); float min/max return the first operand when it is NaN or wins,
// else the second, which propagates NaN and is exactly what the vector kernels compute with a
// select.
#pragma once

#include <type_traits>

#include "conflux/common/dtype.h"

namespace conflux::reduce {

template <class T>
T apply_op(Op op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Op::kSum:
        return a + b;
      case Op::kProd:
        return a * b;
      case Op::kMax:
        return (a > b || a != a) ? a : b;
      case Op::kMin:
        return (a < b || a != a) ? a : b;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case Op::kSum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case Op::kProd:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case Op::kMax:
        return a > b ? a : b;
      case Op::kMin:
        return a < b ? a : b;
    }
  }
  return a;
}

}  // namespace conflux::reduce
