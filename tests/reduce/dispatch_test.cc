// SPDX-License-Identifier: Apache-2.0
// Run-time ISA selection: what is usable, what is active, and complete tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "conflux/common/reduce.h"
#include "reduce_test_util.h"

namespace conflux::reduce::testing {
namespace {

TEST(Dispatch, ActiveIsTheBestUsableUnlessOverridden) {
  const auto usable = usable_isas();
  ASSERT_FALSE(usable.empty());
  EXPECT_EQ(usable.front(), Isa::kScalar);
  const char* env = std::getenv("CONFLUX_REDUCE_ISA");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(active_isa(), detail::isa_name(usable.back()));
  }
  EXPECT_EQ(active_isa(), detail::active_table().name);
  std::cout << "[ INFO     ] active ISA: " << active_isa() << "; usable:";
  for (Isa i : usable) {
    std::cout << ' ' << detail::isa_name(i);
  }
  std::cout << '\n';
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
TEST(Dispatch, DetectionAgreesWithCompilerRuntime) {
  __builtin_cpu_init();
  const auto usable = usable_isas();
  auto has = [&](Isa i) { return std::find(usable.begin(), usable.end(), i) != usable.end(); };
  EXPECT_TRUE(has(Isa::kSse2));
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  EXPECT_EQ(has(Isa::kAvx2), avx2);
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
  EXPECT_EQ(has(Isa::kAvx512bw), avx512);
  if (!avx512) std::cout << "[ INFO     ] no AVX-512 here: its kernels are built, not run\n";
}
#endif

#if defined(__aarch64__)
// Advanced SIMD is part of ARMv8-A: every AArch64 Linux CPU has it, and then the NEON table is
// compiled in, usable and chosen.
TEST(Dispatch, NeonIsTheActiveIsaOnAarch64) {
  ASSERT_NE(getauxval(AT_HWCAP) & HWCAP_ASIMD, 0u) << "no Advanced SIMD reported by the kernel";
  const auto usable = usable_isas();
  EXPECT_NE(std::find(usable.begin(), usable.end(), Isa::kNeon), usable.end());
  EXPECT_EQ(detail::table_for(Isa::kSse2), nullptr);
  const char* env = std::getenv("CONFLUX_REDUCE_ISA");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(active_isa(), "neon");
  }
}
#endif

TEST(Dispatch, EveryUsableTableIsComplete) {
  for (Isa isa : usable_isas()) {
    const KernelTable& k = table(isa);
    EXPECT_EQ(k.isa, isa);
    EXPECT_EQ(k.name, detail::isa_name(isa));
    for (int t = 0; t < kNumDTypes; ++t) {
      EXPECT_NE(k.init[t], nullptr);
      EXPECT_NE(k.finish[t], nullptr);
      for (int o = 0; o < kNumOps; ++o) {
        EXPECT_NE(k.accumulate[t][o], nullptr);
        EXPECT_NE(k.reduce_inplace[t][o], nullptr);
        EXPECT_NE(k.reduce_n[t][o], nullptr);
      }
    }
  }
}

}  // namespace
}  // namespace conflux::reduce::testing
