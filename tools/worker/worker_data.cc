// SPDX-License-Identifier: Apache-2.0
#include "worker/worker_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "verify/verify.h"

namespace conflux::tools {
namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool is_signed_int(DType t) {
  return t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64;
}

// The value of one input element, before conversion to the dtype.
double value(const DataSpec& s, uint64_t h) {
  const bool fl = dtype_is_float(s.dtype);
  if (fl && s.inputs == InputKind::kRandom) {
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
    if (s.op == Op::kProd) {
      return ((h & 1) ? -1.0 : 1.0) * (0.5 + u);
    }
    return 2.0 * u - 1.0;
  }
  const bool sgn = fl || is_signed_int(s.dtype);
  switch (s.op) {
    case Op::kSum:
      return sgn ? static_cast<double>(h % 9) - 4.0 : static_cast<double>(h % 9);
    case Op::kProd: {
      if (fl) {
        static constexpr double kF[] = {1.0, 2.0, 0.5, -1.0, -2.0, -0.5};
        return kF[h % 6];
      }
      static constexpr double kI[] = {1.0, 2.0, -1.0, 3.0};
      return sgn ? kI[h % 4] : static_cast<double>(1 + h % 3);
    }
    case Op::kMax:
    case Op::kMin:
      if (fl) {
        return (static_cast<double>(h % 2001) - 1000.0) / 8.0;
      }
      return sgn ? static_cast<double>(h % 201) - 100.0 : static_cast<double>(h % 201);
  }
  return 0;
}

// Mantissa bits and smallest subnormal of the floats, for the rounding tolerance.
void float_params(DType t, int* mant, double* tiny) {
  switch (t) {
    case DType::kFloat16:
      *mant = 10;
      *tiny = 0x1.0p-24;
      return;
    case DType::kBfloat16:
      *mant = 7;
      *tiny = 0x1.0p-133;
      return;
    case DType::kFloat8e4m3:
      *mant = 3;
      *tiny = 0x1.0p-9;
      return;
    case DType::kFloat8e5m2:
      *mant = 2;
      *tiny = 0x1.0p-16;
      return;
    case DType::kFloat64:
      *mant = 52;
      *tiny = 0x1.0p-1074;
      return;
    default:
      *mant = 23;
      *tiny = 0x1.0p-149;
      return;
  }
}

std::string describe(const DataSpec& s, size_t i, const uint8_t* got, const uint8_t* want) {
  const size_t es = dtype_size(s.dtype);
  auto hex = [&](const uint8_t* p) {
    static const char* d = "0123456789abcdef";
    std::string out = "0x";
    for (size_t b = es; b-- > 0;) {
      out += d[p[b] >> 4];
      out += d[p[b] & 15];
    }
    return out;
  };
  std::string msg = "element " + std::to_string(i) + ": got " + hex(got) + " want " + hex(want);
  if (dtype_is_float(s.dtype)) {
    msg += " (" + std::to_string(verify::load_value(s.dtype, got)) + " vs " +
           std::to_string(verify::load_value(s.dtype, want)) + ")";
  }
  return msg;
}

}  // namespace

void generate(const DataSpec& s, uint32_t rank, size_t first, size_t n, void* out) {
  const size_t es = dtype_size(s.dtype);
  auto* p = static_cast<uint8_t*>(out);
  const uint64_t base = mix(s.seed * 0x9E3779B97F4A7C15ull + rank + 1);
  for (size_t i = 0; i < n; ++i) {
    verify::store_value(s.dtype, value(s, mix(base + first + i)), p + i * es);
  }
}

size_t verify(const DataSpec& s, const void* got_v, size_t count, std::string* first_wrong) {
  constexpr size_t kChunk = 1 << 16;
  const size_t es = dtype_size(s.dtype);
  const auto* got = static_cast<const uint8_t*>(got_v);
  std::vector<std::vector<uint8_t>> in(s.n_ranks, std::vector<uint8_t>(kChunk * es));
  std::vector<const void*> srcs(s.n_ranks);
  std::vector<uint8_t> want(kChunk * es), scratch(kChunk * 8);
  int mant = 23;
  double tiny = 0;
  float_params(s.dtype, &mant, &tiny);
  const double acc_eps = s.dtype == DType::kFloat64 ? 0x1.0p-53 : 0x1.0p-24;
  size_t wrong = 0;
  for (size_t first = 0; first < count; first += kChunk) {
    const size_t n = std::min(kChunk, count - first);
    for (uint32_t r = 0; r < s.n_ranks; ++r) {
      generate(s, r, first, n, in[r].data());
      srcs[r] = in[r].data();
    }
    verify::rank_order_reference(s.dtype, s.op, srcs.data(), s.n_ranks, n, s.leaves, want.data(),
                                 scratch.data());
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* g = got + (first + i) * es;
      const uint8_t* w = want.data() + i * es;
      if (std::memcmp(g, w, es) == 0) {
        continue;
      }
      bool ok = false;
      if (!s.bitwise && dtype_is_float(s.dtype)) {
        // Another summation order: fp32/fp64 accumulation error plus one rounding step.
        double mag = 0;
        for (uint32_t r = 0; r < s.n_ranks; ++r) {
          mag += std::fabs(verify::load_value(s.dtype, in[r].data() + i * es));
        }
        const double ref = verify::load_value(s.dtype, w);
        if (s.op == Op::kProd) {
          mag = std::fabs(ref);
        }
        const double tol = s.n_ranks * acc_eps * mag + std::ldexp(std::fabs(ref), -mant) + tiny;
        const double diff = std::fabs(verify::load_value(s.dtype, g) - ref);
        ok = diff <= tol;
      }
      if (!ok && wrong++ == 0 && first_wrong != nullptr) {
        *first_wrong = describe(s, first + i, g, w);
      }
    }
  }
  return wrong;
}

void poison(void* buf, size_t bytes) { std::memset(buf, 0xA5, bytes); }

size_t poisoned_mismatches(const void* buf, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(buf);
  return static_cast<size_t>(std::count_if(p, p + bytes, [](uint8_t b) { return b != 0xA5; }));
}

}  // namespace conflux::tools
