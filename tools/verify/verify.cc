// SPDX-License-Identifier: Apache-2.0
#include "verify/verify.h"

#include <cstring>

#include "conflux/common/reduce.h"

namespace conflux::verify {

namespace {

template <class T>
void put(uint8_t* p, T x) {
  std::memcpy(p, &x, sizeof x);
}

template <class T>
T get(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

}  // namespace

void store_value(DType t, double v, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  if (!dtype_is_float(t)) {  // the low bytes (little-endian host) of a value within the type
    const auto x = static_cast<int64_t>(v);
    std::memcpy(p, &x, dtype_size(t));
    return;
  }
  const auto f = static_cast<float>(v);
  switch (t) {
    case DType::kFloat16:
      return put(p, reduce::float_to_half(f));
    case DType::kFloat32:
      return put(p, f);
    case DType::kFloat64:
      return put(p, v);
    case DType::kBfloat16:
      return put(p, reduce::float_to_bf16(f));
    case DType::kFloat8e4m3:
      return put(p, reduce::float_to_fp8e4m3(f));
    case DType::kFloat8e5m2:
      return put(p, reduce::float_to_fp8e5m2(f));
    default:
      return;
  }
}

double load_value(DType t, const void* in) {
  const auto* p = static_cast<const uint8_t*>(in);
  switch (t) {
    case DType::kFloat16:
      return reduce::half_to_float(get<uint16_t>(p));
    case DType::kFloat32:
      return get<float>(p);
    case DType::kFloat64:
      return get<double>(p);
    case DType::kBfloat16:
      return reduce::bf16_to_float(get<uint16_t>(p));
    case DType::kFloat8e4m3:
      return reduce::fp8e4m3_to_float(*p);
    case DType::kFloat8e5m2:
      return reduce::fp8e5m2_to_float(*p);
    default:
      return 0;
  }
}

void rank_order_reference(DType t, Op op, const void* const* srcs, size_t n_ranks, size_t n,
                          const std::vector<uint32_t>& leaves, void* want, void* scratch) {
  if (leaves.empty()) {
    reduce::reduce_n(t, op, want, srcs, n_ranks, n, scratch);
    return;
  }
  const size_t es = dtype_size(t);
  std::vector<std::vector<uint8_t>> partial(leaves.size(), std::vector<uint8_t>(n * es));
  std::vector<const void*> parts;
  size_t first = 0;
  for (size_t l = 0; l < leaves.size(); ++l) {
    reduce::reduce_n(t, op, partial[l].data(), srcs + first, leaves[l], n, scratch);
    parts.push_back(partial[l].data());
    first += leaves[l];
  }
  reduce::reduce_n(t, op, want, parts.data(), parts.size(), n, scratch);
}

}  // namespace conflux::verify
