// SPDX-License-Identifier: Apache-2.0
// Internal: the per-instruction-set kernel tables behind reduce.h, and the run-time
// choice among them. Not installed; used by reduce.cc, the tests (to run every ISA the
// CPU supports, not only the selected one) and bench_reduce (--isa).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "conflux/common/dtype.h"

namespace conflux::reduce::detail {

enum class Isa { kScalar, kSse2, kAvx2, kAvx512bw, kNeon };

// Kernel signatures; same contracts as the functions of the same name in reduce.h,
// with dtype and op already bound. `reduce_n` needs no scratch and requires k >= 1.
using InitFn = void (*)(void* acc, const void* src, size_t n);
using FinishFn = void (*)(void* dst, const void* acc, size_t n);
using BinaryFn = void (*)(void* acc_or_dst, const void* src, size_t n);
using ReduceNFn = void (*)(void* dst, const void* const* srcs, size_t k, size_t n);
using SumWordsFn = uint64_t (*)(const void* p, size_t n_words);

struct KernelTable {
  Isa isa;
  std::string_view name;
  InitFn init[kNumDTypes];
  FinishFn finish[kNumDTypes];
  BinaryFn accumulate[kNumDTypes][kNumOps];
  BinaryFn reduce_inplace[kNumDTypes][kNumOps];
  ReduceNFn reduce_n[kNumDTypes][kNumOps];
  SumWordsFn sum_u32_words;  // reduce.h's sum_u32_words (Internet checksums)
};

// Tables as compiled. Each returns nullptr when not built for this target (the x86 ones
// on AArch64, neon64 on x86); calling one on a CPU without the instruction set is
// undefined (illegal instruction).
const KernelTable* scalar_table();
const KernelTable* sse2_table();
const KernelTable* avx2_table();      // AVX2 + FMA + F16C
const KernelTable* avx512bw_table();  // AVX-512 F/CD/DQ/BW/VL + F16C
const KernelTable* neon64_table();    // AArch64 Advanced SIMD + fp16 conversions

std::string_view isa_name(Isa isa);

// The table for `isa` if it is compiled in and this CPU (and OS) supports it, else nullptr.
const KernelTable* table_for(Isa isa);

// Every usable ISA, weakest first (always starts with kScalar).
std::span<const Isa> usable_isas();

// The table used by reduce.h: the best usable ISA, or the one named by the
// environment variable CONFLUX_REDUCE_ISA ("scalar", "sse2", "avx2", "avx512bw", "neon") when
// it is set and usable. Chosen once, on first use; thread-safe.
const KernelTable& active_table();

}  // namespace conflux::reduce::detail
