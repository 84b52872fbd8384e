// SPDX-License-Identifier: Apache-2.0
#include "reduce_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "conflux/common/reduce.h"

namespace conflux::reduce::testing {
namespace {

template <class T>
void put(Bytes& b, size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

float f_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double d_of(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

constexpr uint32_t kF32Edges[] = {
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FC12345, 0xFFA00000,  // NaNs (quiet, signalling)
    0x7F800000, 0xFF800000, 0x00000000, 0x80000000,              // ±Inf, ±0
    0x00000001, 0x007FFFFF, 0x80000001, 0x00800000, 0x80800000,  // denormals, min normal
    0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000,              // ±max, ±1
};
constexpr uint64_t kF64Edges[] = {
    0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF0000000000000,
    0xFFF0000000000000, 0x0000000000000000, 0x8000000000000000, 0x0000000000000001,
    0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,
    0x3FF0000000000000, 0xBFF0000000000000,
};
constexpr uint16_t kHalfEdges[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x0000, 0x8000,
                                   0x0001, 0x03FF, 0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x3C00};
constexpr uint16_t kBf16Edges[] = {0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0000, 0x8000,
                                   0x0001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80};

template <class T>
T int_edge(uint64_t r) {
  using L = std::numeric_limits<T>;
  const T edges[] = {T(0), T(1),  T(-1), L::min(), L::max(), T(L::min() + 1), T(L::max() - 1),
                     T(2), T(16), T(-2)};
  return edges[r % (sizeof edges / sizeof edges[0])];
}

template <class T>
void fill_int(Bytes& b, size_t n, std::mt19937_64& rng) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    put<T>(b, i, (r & 7) == 0 ? int_edge<T>(r >> 3) : static_cast<T>(r >> 8));
  }
}

// A "moderate" random float so that sums and products stay meaningful.
float moderate(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  return std::ldexp(d(rng), static_cast<int>(rng() % 20) - 10);
}

float widen_ref(DType t, uint32_t v) {
  switch (t) {
    case DType::kFloat16:
      return half_to_float(static_cast<uint16_t>(v));
    case DType::kBfloat16:
      return bf16_to_float(static_cast<uint16_t>(v));
    case DType::kFloat8e4m3:
      return fp8e4m3_to_float(static_cast<uint8_t>(v));
    default:
      return fp8e5m2_to_float(static_cast<uint8_t>(v));
  }
}

uint32_t max_finite_mag(DType t) {
  switch (t) {
    case DType::kFloat16:
      return 0x7BFF;
    case DType::kBfloat16:
      return 0x7F7F;
    case DType::kFloat8e4m3:
      return 0x7E;
    default:
      return 0x7B;
  }
}

// fp32 values around the rounding points of narrow type t.
float narrow_case(DType t, std::mt19937_64& rng) {
  const uint64_t r = rng();
  const uint32_t maxmag = max_finite_mag(t);
  const uint32_t mag = static_cast<uint32_t>((r >> 8) % (maxmag + 1));
  const double a = widen_ref(t, mag);
  const double b = mag < maxmag ? widen_ref(t, mag + 1) : a + (a - widen_ref(t, mag - 1));
  const float mid = static_cast<float>((a + b) / 2);  // exact: needs one more bit than t
  float v = static_cast<float>(a);
  switch (r % 5) {
    case 0:
      break;
    case 1:
      v = mid;
      break;
    case 2:
      v = std::nextafter(mid, 0.0f);
      break;
    case 3:
      v = std::nextafter(mid, 1e30f);
      break;
    case 4:
      v = static_cast<float>(b);
      break;
  }
  return (r >> 60) & 1 ? -v : v;
}

}  // namespace

std::vector<Isa> usable_isas() {
  const auto s = detail::usable_isas();
  return {s.begin(), s.end()};
}

std::vector<Isa> all_isas() {
  return {Isa::kScalar, Isa::kSse2, Isa::kAvx2, Isa::kAvx512bw, Isa::kNeon};
}

const KernelTable& table(Isa isa) {
  const KernelTable* t = detail::table_for(isa);
  if (t == nullptr) {
    throw std::logic_error("ISA not usable");
  }
  return *t;
}

std::vector<DType> all_dtypes() {
  std::vector<DType> v;
  for (int i = 0; i < kNumDTypes; ++i) {
    v.push_back(static_cast<DType>(i));
  }
  return v;
}

std::vector<Op> all_ops() { return {Op::kSum, Op::kProd, Op::kMax, Op::kMin}; }

Bytes random_src(DType t, size_t n, std::mt19937_64& rng) {
  Bytes b(n * dtype_size(t));
  switch (t) {
    case DType::kInt8:
      fill_int<int8_t>(b, n, rng);
      break;
    case DType::kUint8:
      fill_int<uint8_t>(b, n, rng);
      break;
    case DType::kInt32:
      fill_int<int32_t>(b, n, rng);
      break;
    case DType::kUint32:
      fill_int<uint32_t>(b, n, rng);
      break;
    case DType::kInt64:
      fill_int<int64_t>(b, n, rng);
      break;
    case DType::kUint64:
      fill_int<uint64_t>(b, n, rng);
      break;
    case DType::kFloat32:
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng();
        float v = moderate(rng);
        if (r % 10 < 2) {
          v = f_of(static_cast<uint32_t>(r >> 16));
        }
        if (r % 10 >= 7) {
          v = f_of(kF32Edges[(r >> 8) % std::size(kF32Edges)]);
        }
        put<float>(b, i, v);
      }
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng();
        double v = moderate(rng);
        if (r % 10 < 2) {
          v = d_of(rng());
        }
        if (r % 10 >= 7) {
          v = d_of(kF64Edges[(r >> 8) % std::size(kF64Edges)]);
        }
        put<double>(b, i, v);
      }
      break;
    case DType::kFloat16:
    case DType::kBfloat16:
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng();
        uint16_t v = static_cast<uint16_t>(r >> 16);
        if (r % 10 >= 6) {
          v = t == DType::kFloat16 ? kHalfEdges[(r >> 8) % std::size(kHalfEdges)]
                                   : kBf16Edges[(r >> 8) % std::size(kBf16Edges)];
        }
        put<uint16_t>(b, i, v);
      }
      break;
    case DType::kFloat8e4m3:
    case DType::kFloat8e5m2:
      for (size_t i = 0; i < n; ++i) {
        b[i] = static_cast<uint8_t>(rng() >> 24);
      }
      break;
  }
  return b;
}

Bytes random_acc(DType t, size_t n, std::mt19937_64& rng) {
  if (!dtype_is_narrow_float(t)) {
    return random_src(t, n, rng);
  }
  Bytes b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    float v;
    if (r % 10 == 0) {
      v = f_of(static_cast<uint32_t>(r >> 16));
    } else if (r % 10 == 1) {
      v = f_of(kF32Edges[(r >> 8) % std::size(kF32Edges)]);
    } else {
      v = narrow_case(t, rng);
    }
    put<float>(b, i, v);
  }
  return b;
}

bool is_nan(DType t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    case DType::kFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7FFF) > 0x7C00;
    case DType::kBfloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7FFF) > 0x7F80;
    case DType::kFloat8e4m3:
      return (p[0] & 0x7F) == 0x7F;
    case DType::kFloat8e5m2:
      return (p[0] & 0x7F) > 0x7C;
    default:
      return false;
  }
}

bool is_nan_accum(DType t, const uint8_t* p) {
  return is_nan(dtype_is_narrow_float(t) ? DType::kFloat32 : t, p);
}

long first_mismatch(DType t, bool accum, const uint8_t* a, const uint8_t* b, size_t n,
                    bool nan_payload_free) {
  const size_t es = accum ? accum_size(t) : dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* x = a + i * es;
    const uint8_t* y = b + i * es;
    if (std::memcmp(x, y, es) == 0) {
      continue;
    }
    if (nan_payload_free && dtype_is_float(t)) {
      const bool nx = accum ? is_nan_accum(t, x) : is_nan(t, x);
      const bool ny = accum ? is_nan_accum(t, y) : is_nan(t, y);
      if (nx && ny) {
        continue;
      }
    }
    return static_cast<long>(i);
  }
  return -1;
}

std::string describe(DType t, bool accum, const uint8_t* p) {
  const size_t es = accum ? accum_size(t) : dtype_size(t);
  static const char* hex = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = es; i-- > 0;) {
    s += hex[p[i] >> 4];
    s += hex[p[i] & 15];
  }
  return s;
}

Guarded::Guarded(const Bytes& content, size_t offset)
    : buf_(offset + content.size() + 64, 0xC3), offset_(offset), size_(content.size()) {
  if (!content.empty()) {
    std::memcpy(buf_.data() + offset, content.data(), content.size());
  }
}

Bytes Guarded::content() const {
  return Bytes(buf_.begin() + static_cast<long>(offset_),
               buf_.begin() + static_cast<long>(offset_ + size_));
}

bool Guarded::canaries_intact() const {
  for (size_t i = 0; i < offset_; ++i) {
    if (buf_[i] != 0xC3) {
      return false;
    }
  }
  for (size_t i = offset_ + size_; i < buf_.size(); ++i) {
    if (buf_[i] != 0xC3) {
      return false;
    }
  }
  return true;
}

}  // namespace conflux::reduce::testing
