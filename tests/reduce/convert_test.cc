// SPDX-License-Identifier: Apache-2.0
// Conversions: every fp16/bf16/fp8 bit pattern widened by every usable ISA equals the
// scalar reference (bit for bit, NaN included); narrowing agrees around every rounding
// point of every format; widen->narrow is the identity; and the scalar fp16 reference
// agrees with an independent implementation (the compiler's _Float16) where available.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "conflux/common/reduce.h"
#include "reduce_test_util.h"

namespace conflux::reduce::testing {
namespace {

constexpr DType kNarrow[] = {DType::kFloat16, DType::kBfloat16, DType::kFloat8e4m3,
                             DType::kFloat8e5m2};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

size_t patterns(DType t) { return dtype_size(t) == 2 ? 65536 : 256; }

Bytes all_patterns(DType t) {
  Bytes b(patterns(t) * dtype_size(t));
  for (size_t v = 0; v < patterns(t); ++v) {
    if (dtype_size(t) == 2) {
      const uint16_t h = static_cast<uint16_t>(v);
      std::memcpy(b.data() + 2 * v, &h, 2);
    } else {
      b[v] = static_cast<uint8_t>(v);
    }
  }
  return b;
}

// fp32 inputs around every rounding point of t: each value, the midpoints to its
// neighbours, one fp32 ulp either side of those, plus fp32 edge values and random bits.
std::vector<float> narrowing_inputs(DType t) {
  std::vector<float> wide(patterns(t));
  ref::init(t, wide.data(), all_patterns(t).data(), patterns(t));
  std::vector<float> out;
  for (size_t v = 0; v < wide.size(); ++v) {
    const float a = wide[v];
    if (std::isnan(a)) {
      continue;
    }
    out.push_back(a);
    out.push_back(std::nextafter(a, 0.0f));
    out.push_back(std::nextafter(a, a < 0 ? -INFINITY : INFINITY));
    if (std::isinf(a) || v + 1 >= wide.size() || std::isnan(wide[v + 1])) {
      continue;
    }
    const float b = wide[v + 1];
    if (std::isinf(b) || std::signbit(a) != std::signbit(b)) {
      continue;
    }
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    out.push_back(mid);
    out.push_back(std::nextafter(mid, 0.0f));
    out.push_back(std::nextafter(mid, INFINITY));
    out.push_back(std::nextafter(mid, -INFINITY));
    // Just past the largest finite value (towards overflow).
    out.push_back(b + (b - a) / 2);
    out.push_back(std::nextafter(b + (b - a) / 2, 0.0f));
  }
  std::mt19937_64 rng(0xC0FFEE + static_cast<int>(t));
  for (int i = 0; i < 200000; ++i) {
    out.push_back(from_bits(static_cast<uint32_t>(rng())));
  }
  for (uint32_t u :
       {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FBFFFFFu, 0x7FFFFFFFu,
        0x00000001u, 0x80000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu, 0u, 0x80000000u}) {
    out.push_back(from_bits(u));
  }
  return out;
}

class ConvertIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (detail::table_for(GetParam()) == nullptr) {
      GTEST_SKIP() << "this CPU cannot run ISA " << detail::isa_name(GetParam());
    }
  }
};

TEST_P(ConvertIsa, WidenEveryPatternMatchesReference) {
  const KernelTable& k = table(GetParam());
  for (DType t : kNarrow) {
    const Bytes src = all_patterns(t);
    std::vector<float> want(patterns(t)), got(patterns(t));
    ref::init(t, want.data(), src.data(), patterns(t));
    k.init[static_cast<size_t>(t)](got.data(), src.data(), patterns(t));
    for (size_t v = 0; v < patterns(t); ++v) {
      ASSERT_EQ(bits(got[v]), bits(want[v])) << dtype_name(t) << " pattern " << v;
    }
  }
}

TEST_P(ConvertIsa, NarrowMatchesReferenceAroundEveryRoundingPoint) {
  const KernelTable& k = table(GetParam());
  for (DType t : kNarrow) {
    const std::vector<float> in = narrowing_inputs(t);
    Bytes want(in.size() * dtype_size(t)), got(in.size() * dtype_size(t));
    ref::finish(t, want.data(), in.data(), in.size());
    k.finish[static_cast<size_t>(t)](got.data(), in.data(), in.size());
    const long bad = first_mismatch(t, false, got.data(), want.data(), in.size(), false);
    ASSERT_EQ(bad, -1) << dtype_name(t) << " input " << std::hex << bits(in[bad]) << " got "
                       << describe(t, false, got.data() + bad * dtype_size(t)) << " want "
                       << describe(t, false, want.data() + bad * dtype_size(t));
  }
}

TEST_P(ConvertIsa, RoundTripIsIdentityExceptSignallingNaN) {
  const KernelTable& k = table(GetParam());
  for (DType t : kNarrow) {
    const Bytes src = all_patterns(t);
    std::vector<float> wide(patterns(t));
    Bytes back(src.size());
    k.init[static_cast<size_t>(t)](wide.data(), src.data(), patterns(t));
    k.finish[static_cast<size_t>(t)](back.data(), wide.data(), patterns(t));
    for (size_t v = 0; v < patterns(t); ++v) {
      const uint8_t* p = src.data() + v * dtype_size(t);
      const uint8_t* q = back.data() + v * dtype_size(t);
      if (is_nan(t, p)) {
        ASSERT_TRUE(is_nan(t, q)) << dtype_name(t) << " NaN pattern " << v;
        // Quiet NaNs (and e4m3's single NaN) come back unchanged.
        const bool quiet = t == DType::kFloat8e4m3 || (t == DType::kFloat16 && (v & 0x200)) ||
                           (t == DType::kBfloat16 && (v & 0x40)) ||
                           (t == DType::kFloat8e5m2 && (v & 0x2));
        if (quiet) {
          ASSERT_EQ(std::memcmp(p, q, dtype_size(t)), 0) << "quiet NaN " << v;
        }
      } else {
        ASSERT_EQ(std::memcmp(p, q, dtype_size(t)), 0) << dtype_name(t) << " pattern " << v;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, ConvertIsa, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(detail::isa_name(i.param));
                         });

// Independent oracle for the fp16 reference: the compiler's half-precision conversions
// (_Float16; on AArch64, where GCC 12 has it only in C, the ACLE's __fp16).
#if defined(__aarch64__)
#define CONFLUX_HAVE_COMPILER_HALF 1
using CompilerHalf = __fp16;
#elif defined(__FLT16_MAX__)
#define CONFLUX_HAVE_COMPILER_HALF 1
using CompilerHalf = _Float16;
#endif

#if defined(CONFLUX_HAVE_COMPILER_HALF)
TEST(ConvertOracle, HalfReferenceMatchesCompilerFloat16) {
  for (uint32_t v = 0; v < 65536; ++v) {
    const uint16_t h = static_cast<uint16_t>(v);
    CompilerHalf x;
    std::memcpy(&x, &h, 2);
    const float want = static_cast<float>(x);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(half_to_float(h))) << v;
    } else {
      ASSERT_EQ(bits(half_to_float(h)), bits(want)) << v;
    }
  }
  for (float f : narrowing_inputs(DType::kFloat16)) {
    const CompilerHalf x = static_cast<CompilerHalf>(f);
    uint16_t want;
    std::memcpy(&want, &x, 2);
    if (std::isnan(f)) {
      ASSERT_EQ(float_to_half(f) & 0x7C00, 0x7C00);
      ASSERT_NE(float_to_half(f) & 0x3FF, 0);
    } else {
      ASSERT_EQ(float_to_half(f), want) << std::hex << bits(f);
    }
  }
}
#endif

// Exhaustive over all 2^32 fp32 inputs, every narrow format, best ISA vs reference.
// Takes minutes; run by hand with --gtest_also_run_disabled_tests.
TEST(ConvertExhaustive, DISABLED_EveryFloatNarrowsLikeReference) {
  const KernelTable& k = detail::active_table();
  constexpr size_t kChunk = 1 << 20;
  std::vector<float> in(kChunk);
  Bytes want(kChunk * 2), got(kChunk * 2);
  for (DType t : kNarrow) {
    for (uint64_t base = 0; base < (1ull << 32); base += kChunk) {
      for (size_t i = 0; i < kChunk; ++i) {
        in[i] = from_bits(static_cast<uint32_t>(base + i));
      }
      ref::finish(t, want.data(), in.data(), kChunk);
      k.finish[static_cast<size_t>(t)](got.data(), in.data(), kChunk);
      const long bad = first_mismatch(t, false, got.data(), want.data(), kChunk, false);
      ASSERT_EQ(bad, -1) << dtype_name(t) << " input " << std::hex << bits(in[bad]);
    }
  }
}

}  // namespace
}  // namespace conflux::reduce::testing
