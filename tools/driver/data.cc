// SPDX-License-Identifier: Apache-2.0
// Input generation and verification (see data.h).
#include "driver/data.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "conflux/common/ref_ops.h"
#include "verify/verify.h"

namespace conflux::driver {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t rank_base(const InputSpec& s, int rank) {
  return mix(s.seed * 0x100000001B3ULL + static_cast<uint64_t>(rank) * 0xD6E8FEB86659FD93ULL +
             static_cast<uint64_t>(s.dtype) * 131 + static_cast<uint64_t>(s.op) * 7);
}

uint64_t rnd(uint64_t base, size_t i) {
  return mix(base ^ (static_cast<uint64_t>(i) * 0xA24BAED4963EE407ULL));
}

int64_t max_exact(DType t) {
  switch (t) {
    case DType::kFloat8e5m2:
      return 8;
    case DType::kFloat8e4m3:
      return 16;
    case DType::kBfloat16:
      return 256;
    case DType::kFloat16:
      return 2048;
    default:
      return int64_t{1} << 20;
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Exact-mode float input of `rank` at element i, as an integer.
int64_t exact_float_value(const InputSpec& s, uint64_t r, int rank, size_t i) {
  const int64_t n = s.nranks;
  const int64_t m = max_exact(s.dtype);
  const int64_t ri =
      static_cast<int64_t>((static_cast<uint64_t>(rank) + i) % static_cast<uint64_t>(n));
  switch (s.op) {
    case Op::kSum: {
      const int64_t stride = ceil_div(n, m);
      const int64_t actives = ceil_div(n, stride);
      const int64_t b = m / actives > 1 ? m / actives : 1;
      if (ri % stride != 0) return 0;
      return static_cast<int64_t>(r % static_cast<uint64_t>(2 * b + 1)) - b;
    }
    case Op::kProd: {
      const int64_t stride = ceil_div(n, 8);  // at most 8 factors of two per element
      if (static_cast<size_t>(rank) == i % static_cast<size_t>(n) && ((r >> 8) & 15) == 0) return 0;
      int64_t mag = (ri % stride == 0 && ((r >> 1) & 1)) ? 2 : 1;
      return (r & 1) ? -mag : mag;
    }
    case Op::kMax:
    case Op::kMin:
      return static_cast<int64_t>(r % static_cast<uint64_t>(2 * m + 1)) - m;
  }
  return 0;
}

double random_float_value(uint64_t r) {
  return static_cast<double>(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

bool is_signed_int(DType t) {
  return t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64;
}

uint64_t normalize_int(DType t, uint64_t v) {
  const size_t bits = dtype_size(t) * 8;
  if (bits == 64) return v;
  v &= (uint64_t{1} << bits) - 1;
  if (is_signed_int(t) && (v >> (bits - 1)) != 0) v |= ~((uint64_t{1} << bits) - 1);
  return v;
}

// Integer element as 64 bits: truncated to the type's width, sign-extended for signed types.
uint64_t load_int(DType t, const void* base, size_t i) {
  const size_t w = dtype_size(t);
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + w * i, w);  // little-endian host
  return normalize_int(t, v);
}

uint64_t int_op(DType t, Op op, uint64_t a, uint64_t b) {
  switch (op) {
    case Op::kSum:
      return normalize_int(t, a + b);
    case Op::kProd:
      return normalize_int(t, a * b);
    case Op::kMax:
      if (is_signed_int(t)) return static_cast<int64_t>(a) > static_cast<int64_t>(b) ? a : b;
      return a > b ? a : b;
    case Op::kMin:
      if (is_signed_int(t)) return static_cast<int64_t>(a) < static_cast<int64_t>(b) ? a : b;
      return a < b ? a : b;
  }
  return a;
}

uint64_t count_wrong_bitwise(const InputSpec& s, const unsigned char* res, size_t count,
                             size_t at) {
  constexpr size_t kBlock = 4096;
  const size_t es = dtype_size(s.dtype);
  std::vector<unsigned char> inputs(static_cast<size_t>(s.nranks) * kBlock * es);
  std::vector<unsigned char> ref(kBlock * es);
  std::vector<unsigned char> scratch(kBlock * accum_size(s.dtype));
  std::vector<const void*> srcs(s.nranks);
  uint64_t wrong = 0;
  for (size_t first = 0; first < count; first += kBlock) {
    size_t n = count - first < kBlock ? count - first : kBlock;
    for (int r = 0; r < s.nranks; ++r) {
      srcs[r] = inputs.data() + static_cast<size_t>(r) * kBlock * es;
      fill_input(s, r, at + first, n, const_cast<void*>(srcs[r]));
    }
    verify::rank_order_reference(s.dtype, s.op, srcs.data(), s.nranks, n, s.leaves, ref.data(),
                                 scratch.data());
    for (size_t i = 0; i < n; ++i) {
      if (std::memcmp(ref.data() + i * es, res + (first + i) * es, es) != 0) ++wrong;
    }
  }
  return wrong;
}
}  // namespace

void fill_input(const InputSpec& s, int rank, size_t first, size_t n, void* dst) {
  const uint64_t base = rank_base(s, rank);
  if (!dtype_is_float(s.dtype)) {
    const size_t w = dtype_size(s.dtype);
    auto* b = static_cast<unsigned char*>(dst);
    for (size_t k = 0; k < n; ++k) {
      uint64_t v = rnd(base, first + k);
      std::memcpy(b + w * k, &v, w);  // little-endian host: the low bytes
    }
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    uint64_t r = rnd(base, first + k);
    double v = s.kind == InputKind::kRandom
                   ? random_float_value(r)
                   : static_cast<double>(exact_float_value(s, r, rank, first + k));
    verify::store_value(s.dtype, v, static_cast<unsigned char*>(dst) + k * dtype_size(s.dtype));
  }
}

uint64_t count_wrong(const InputSpec& s, const void* result, size_t count, size_t at) {
  const auto* res = static_cast<const unsigned char*>(result);
  if (s.kind == InputKind::kRandom) return count_wrong_bitwise(s, res, count, at);
  std::vector<uint64_t> bases(s.nranks);
  for (int r = 0; r < s.nranks; ++r) bases[r] = rank_base(s, r);
  uint64_t wrong = 0;
  if (!dtype_is_float(s.dtype)) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t acc = normalize_int(s.dtype, rnd(bases[0], at + i));
      for (int r = 1; r < s.nranks; ++r)
        acc = int_op(s.dtype, s.op, acc, normalize_int(s.dtype, rnd(bases[r], at + i)));
      if (load_int(s.dtype, res, i) != acc) ++wrong;
    }
    return wrong;
  }
  for (size_t i = 0; i < count; ++i) {
    int64_t acc = exact_float_value(s, rnd(bases[0], at + i), 0, at + i);
    for (int r = 1; r < s.nranks; ++r)
      acc = reduce::apply_op<int64_t>(s.op, acc,
                                      exact_float_value(s, rnd(bases[r], at + i), r, at + i));
    if (!(verify::load_value(s.dtype, res + i * dtype_size(s.dtype)) == static_cast<double>(acc)))
      ++wrong;
  }
  return wrong;
}

uint64_t count_wrong_gather(const InputSpec& s, const void* result, size_t per_rank) {
  const size_t es = dtype_size(s.dtype);
  std::vector<unsigned char> expect(per_rank * es);
  const auto* res = static_cast<const unsigned char*>(result);
  uint64_t wrong = 0;
  for (int r = 0; r < s.nranks; ++r) {
    fill_input(s, r, 0, per_rank, expect.data());
    const unsigned char* got = res + static_cast<size_t>(r) * per_rank * es;
    for (size_t i = 0; i < per_rank; ++i) {
      if (std::memcmp(expect.data() + i * es, got + i * es, es) != 0) ++wrong;
    }
  }
  return wrong;
}

void poison(DType t, void* dst, size_t n) {
  if (!dtype_is_float(t)) {
    std::memset(dst, 0xA5, n * dtype_size(t));
    return;
  }
  // All-ones bytes are a NaN in every float format NCCL has (fp8 e4m3: 0x7F/0xFF is NaN).
  std::memset(dst, 0xFF, n * dtype_size(t));
}

}  // namespace conflux::driver
