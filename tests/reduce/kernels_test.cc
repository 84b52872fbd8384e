// SPDX-License-Identifier: Apache-2.0
// Every kernel of every ISA the CPU supports against the scalar reference (ref::),
// for every dtype x op, on random data with edge values, odd lengths and misaligned
// buffers; bit for bit (NaN payloads excepted for sum/prod, where they are unspecified).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "conflux/common/reduce.h"
#include "reduce_test_util.h"

namespace conflux::reduce::testing {
namespace {

constexpr size_t kLengths[] = {0, 1, 3, 15, 17, 64, 1023, 4099};
constexpr size_t kOffsets = 8;  // buffer offsets 0..7 bytes

uint64_t seed_of(Isa isa, DType t, Op op, size_t salt) {
  return (static_cast<uint64_t>(isa) << 40) ^ (static_cast<uint64_t>(t) << 32) ^
         (static_cast<uint64_t>(op) << 24) ^ salt;
}

// Expected result of reduce_inplace / reduce_n composed from the reference.
Bytes ref_reduce(DType t, Op op, const std::vector<Bytes>& srcs, size_t n) {
  Bytes acc(n * accum_size(t)), out(n * dtype_size(t));
  ref::init(t, acc.data(), srcs[0].data(), n);
  for (size_t j = 1; j < srcs.size(); ++j) {
    ref::accumulate(t, op, acc.data(), srcs[j].data(), n);
  }
  ref::finish(t, out.data(), acc.data(), n);
  return out;
}

using OpParam = std::tuple<Isa, DType, Op>;

class KernelVsRef : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override {
    std::tie(isa_, t_, op_) = GetParam();
    if (detail::table_for(isa_) == nullptr) {
      GTEST_SKIP() << "this CPU cannot run ISA " << detail::isa_name(isa_);
    }
  }
  bool nan_free() const { return op_ == Op::kSum || op_ == Op::kProd; }
  const KernelTable& k() const { return table(isa_); }
  size_t ti() const { return static_cast<size_t>(t_); }
  size_t oi() const { return static_cast<size_t>(op_); }

  Isa isa_{};
  DType t_{};
  Op op_{};
};

TEST_P(KernelVsRef, Accumulate) {
  std::mt19937_64 rng(seed_of(isa_, t_, op_, 1));
  for (size_t n : kLengths) {
    for (size_t off = 0; off < kOffsets; ++off) {
      const Bytes src = random_src(t_, n, rng);
      const Bytes acc0 = random_acc(t_, n, rng);
      Bytes want = acc0;
      ref::accumulate(t_, op_, want.data(), src.data(), n);
      Guarded acc(acc0, off), s(src, (off * 5 + 3) % kOffsets);
      k().accumulate[ti()][oi()](acc.data(), s.data(), n);
      const Bytes got = acc.content();
      const long bad = first_mismatch(t_, true, got.data(), want.data(), n, nan_free());
      ASSERT_EQ(bad, -1) << "n=" << n << " off=" << off
                         << " acc0=" << describe(t_, true, acc0.data() + bad * accum_size(t_))
                         << " src=" << describe(t_, false, src.data() + bad * dtype_size(t_))
                         << " got=" << describe(t_, true, got.data() + bad * accum_size(t_))
                         << " want=" << describe(t_, true, want.data() + bad * accum_size(t_));
      ASSERT_TRUE(acc.canaries_intact()) << "n=" << n << " off=" << off;
      ASSERT_TRUE(s.canaries_intact());
      ASSERT_EQ(s.content(), src) << "source modified";
    }
  }
}

TEST_P(KernelVsRef, ReduceInplace) {
  std::mt19937_64 rng(seed_of(isa_, t_, op_, 2));
  for (size_t n : kLengths) {
    for (size_t off = 0; off < kOffsets; ++off) {
      const Bytes dst0 = random_src(t_, n, rng);
      const Bytes src = random_src(t_, n, rng);
      const Bytes want = ref_reduce(t_, op_, {dst0, src}, n);
      Guarded d(dst0, off), s(src, (off * 3 + 1) % kOffsets);
      k().reduce_inplace[ti()][oi()](d.data(), s.data(), n);
      const Bytes got = d.content();
      const long bad = first_mismatch(t_, false, got.data(), want.data(), n, nan_free());
      ASSERT_EQ(bad, -1) << "n=" << n << " off=" << off
                         << " dst0=" << describe(t_, false, dst0.data() + bad * dtype_size(t_))
                         << " src=" << describe(t_, false, src.data() + bad * dtype_size(t_))
                         << " got=" << describe(t_, false, got.data() + bad * dtype_size(t_));
      ASSERT_TRUE(d.canaries_intact()) << "n=" << n << " off=" << off;
    }
  }
}

TEST_P(KernelVsRef, ReduceN) {
  std::mt19937_64 rng(seed_of(isa_, t_, op_, 3));
  for (size_t k : {1, 2, 3, 5, 8}) {
    for (size_t n : kLengths) {
      const size_t off = (n + k) % kOffsets;
      std::vector<Bytes> srcs;
      std::vector<Guarded> guarded;
      for (size_t j = 0; j < k; ++j) {
        srcs.push_back(random_src(t_, n, rng));
        guarded.emplace_back(srcs.back(), (off + j) % kOffsets);
      }
      std::vector<const void*> ptrs;
      for (auto& g : guarded) {
        ptrs.push_back(g.data());
      }
      const Bytes want = ref_reduce(t_, op_, srcs, n);
      Guarded d(Bytes(n * dtype_size(t_), 0x11), off);
      this->k().reduce_n[ti()][oi()](d.data(), ptrs.data(), k, n);
      const Bytes got = d.content();
      ASSERT_EQ(first_mismatch(t_, false, got.data(), want.data(), n, nan_free()), -1)
          << "k=" << k << " n=" << n;
      ASSERT_TRUE(d.canaries_intact()) << "k=" << k << " n=" << n;
      for (size_t j = 0; j < k; ++j) {
        ASSERT_EQ(guarded[j].content(), srcs[j]);
      }
    }
  }
}

std::string op_param_name(const ::testing::TestParamInfo<OpParam>& info) {
  const auto [isa, t, op] = info.param;
  return std::string(detail::isa_name(isa)) + "_" + std::string(dtype_name(t)) + "_" +
         std::string(op_name(op));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelVsRef,
                         ::testing::Combine(::testing::ValuesIn(all_isas()),
                                            ::testing::ValuesIn(all_dtypes()),
                                            ::testing::ValuesIn(all_ops())),
                         op_param_name);

using TypeParam = std::tuple<Isa, DType>;

class InitFinishVsRef : public ::testing::TestWithParam<TypeParam> {
 protected:
  void SetUp() override {
    std::tie(isa_, t_) = GetParam();
    if (detail::table_for(isa_) == nullptr) {
      GTEST_SKIP() << "this CPU cannot run ISA " << detail::isa_name(isa_);
    }
  }
  Isa isa_{};
  DType t_{};
};

TEST_P(InitFinishVsRef, InitAndFinish) {
  std::mt19937_64 rng(seed_of(isa_, t_, Op::kSum, 4));
  const KernelTable& k = table(isa_);
  const size_t ti = static_cast<size_t>(t_);
  for (size_t n : kLengths) {
    for (size_t off = 0; off < kOffsets; ++off) {
      const Bytes src = random_src(t_, n, rng);
      Bytes want_acc(n * accum_size(t_));
      ref::init(t_, want_acc.data(), src.data(), n);
      Guarded acc(Bytes(n * accum_size(t_), 0x22), off), s(src, (off + 1) % kOffsets);
      k.init[ti](acc.data(), s.data(), n);
      Bytes got = acc.content();
      ASSERT_EQ(first_mismatch(t_, true, got.data(), want_acc.data(), n, false), -1)
          << "init n=" << n << " off=" << off;
      ASSERT_TRUE(acc.canaries_intact());

      const Bytes acc_in = random_acc(t_, n, rng);
      Bytes want(n * dtype_size(t_));
      ref::finish(t_, want.data(), acc_in.data(), n);
      Guarded a(acc_in, (off + 2) % kOffsets), d(Bytes(n * dtype_size(t_), 0x33), off);
      k.finish[ti](d.data(), a.data(), n);
      got = d.content();
      const long bad = first_mismatch(t_, false, got.data(), want.data(), n, false);
      ASSERT_EQ(bad, -1) << "finish n=" << n << " off=" << off
                         << " acc=" << describe(t_, true, acc_in.data() + bad * accum_size(t_))
                         << " got=" << describe(t_, false, got.data() + bad * dtype_size(t_))
                         << " want=" << describe(t_, false, want.data() + bad * dtype_size(t_));
      ASSERT_TRUE(d.canaries_intact());
    }
  }
}

std::string type_param_name(const ::testing::TestParamInfo<TypeParam>& info) {
  return std::string(detail::isa_name(std::get<0>(info.param))) + "_" +
         std::string(dtype_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, InitFinishVsRef,
                         ::testing::Combine(::testing::ValuesIn(all_isas()),
                                            ::testing::ValuesIn(all_dtypes())),
                         type_param_name);

class SumWordsIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (detail::table_for(GetParam()) == nullptr) {
      GTEST_SKIP() << "this CPU cannot run ISA " << detail::isa_name(GetParam());
    }
  }
};

// Every length from 0 to 300 words (so every vector tail of every ISA) at every byte offset,
// and a jumbo frame's worth; words of all ones make any lost carry between lanes visible.
TEST_P(SumWordsIsa, MatchesAWordByWordSum) {
  std::mt19937_64 rng(seed_of(GetParam(), DType::kUint32, Op::kSum, 5));
  Bytes buf(9000 + kOffsets);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::fill(buf.begin() + 512, buf.begin() + 1024, uint8_t{0xff});
  const auto sum = table(GetParam()).sum_u32_words;
  auto want = [&](const uint8_t* p, size_t words) {
    uint64_t s = 0;
    for (size_t i = 0; i < words; ++i) {
      uint32_t w;
      std::memcpy(&w, p + 4 * i, 4);
      s += w;
    }
    return s;
  };
  for (size_t off = 0; off < kOffsets; ++off) {
    for (size_t words = 0; words <= 300; ++words) {
      ASSERT_EQ(sum(buf.data() + off, words), want(buf.data() + off, words))
          << "words=" << words << " off=" << off;
    }
    ASSERT_EQ(sum(buf.data() + off, 2250), want(buf.data() + off, 2250)) << "off=" << off;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, SumWordsIsa, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(detail::isa_name(info.param));
                         });

}  // namespace
}  // namespace conflux::reduce::testing
