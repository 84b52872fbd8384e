// SPDX-License-Identifier: Apache-2.0
// Run-time choice of the kernel table (reduce_dispatch.h).
//
// CPU detection is done here with CPUID + XGETBV rather than with
// xsimd::available_architectures(): xsimd 8.1 neither checks that the OS saves the
// AVX / AVX-512 register state nor reads the AVX bit from the right CPUID leaf, and we
// also need F16C, which it does not report. On AArch64 the kernel's HWCAP_ASIMD bit says
// whether Advanced SIMD is there (always, on the Linux systems we know of; but asked).
//
// SVE: xsimd 8.1 has no SVE support, and its later SVE backend fixes the vector length at
// compile time (-msve-vector-bits), which a run-time choice across CPUs cannot use; the
// DPUs this targets (BlueField-2: Cortex-A72, BlueField-3: Cortex-A78AE) have no SVE.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "reduce_dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#define CONFLUX_X86 1
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace conflux::reduce::detail {

#if !defined(CONFLUX_HAVE_X86_KERNELS)
const KernelTable* sse2_table() { return nullptr; }
const KernelTable* avx2_table() { return nullptr; }
const KernelTable* avx512bw_table() { return nullptr; }
#endif
#if !defined(CONFLUX_HAVE_NEON_KERNELS)
const KernelTable* neon64_table() { return nullptr; }
#endif

namespace {

struct CpuFeatures {
  bool sse2 = false;
  bool avx2 = false;      // with FMA, F16C and OS support for YMM state
  bool avx512bw = false;  // F, CD, DQ, BW, VL, F16C and OS support for ZMM state
  bool neon = false;      // AArch64 Advanced SIMD
};

#if defined(CONFLUX_X86)
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#if defined(CONFLUX_X86)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) {
    return f;
  }
  f.sse2 = (d >> 26) & 1;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1,
             f16c = (c >> 29) & 1;
  if (!osxsave || !avx) {
    return f;
  }
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xE6) == 0xE6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    return f;
  }
  const bool avx2 = (b >> 5) & 1;
  const bool avx512 =
      ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 28) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
  f.avx2 = avx2 && fma && f16c && ymm_os;
  f.avx512bw = f.avx2 && avx512 && zmm_os;
#elif defined(__aarch64__)
  f.neon = (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#endif
  return f;
}

struct IsaList {
  std::array<Isa, 5> items{};
  size_t size = 0;
};

IsaList compute_usable() {
  const CpuFeatures f = detect();
  IsaList l;
  l.items[l.size++] = Isa::kScalar;
  if (f.sse2 && sse2_table()) {
    l.items[l.size++] = Isa::kSse2;
  }
  if (f.avx2 && avx2_table()) {
    l.items[l.size++] = Isa::kAvx2;
  }
  if (f.avx512bw && avx512bw_table()) {
    l.items[l.size++] = Isa::kAvx512bw;
  }
  if (f.neon && neon64_table()) {
    l.items[l.size++] = Isa::kNeon;
  }
  return l;
}

const IsaList& usable() {
  static const IsaList list = compute_usable();
  return list;
}

const KernelTable* compiled_table(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return scalar_table();
    case Isa::kSse2:
      return sse2_table();
    case Isa::kAvx2:
      return avx2_table();
    case Isa::kAvx512bw:
      return avx512bw_table();
    case Isa::kNeon:
      return neon64_table();
  }
  return nullptr;
}

const KernelTable* choose() {
  const IsaList& l = usable();
  const KernelTable* best = compiled_table(l.items[l.size - 1]);
  // Read once, under the magic-static guard of active_table().
  const char* want = std::getenv("CONFLUX_REDUCE_ISA");  // NOLINT(concurrency-mt-unsafe)
  if (want == nullptr || *want == '\0') {
    return best;
  }
  for (size_t i = 0; i < l.size; ++i) {
    if (isa_name(l.items[i]) == std::string_view(want)) {
      return compiled_table(l.items[i]);
    }
  }
  return best;  // unknown or unusable: ignore (active_isa() shows what is used)
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kSse2:
      return "sse2";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512bw:
      return "avx512bw";
    case Isa::kNeon:
      return "neon";
  }
  return "unknown";
}

const KernelTable* table_for(Isa isa) {
  for (Isa u : usable_isas()) {
    if (u == isa) {
      return compiled_table(isa);
    }
  }
  return nullptr;
}

std::span<const Isa> usable_isas() {
  const IsaList& l = usable();
  return {l.items.data(), l.size};
}

const KernelTable& active_table() {
  static const KernelTable* const table = choose();
  return *table;
}

}  // namespace conflux::reduce::detail
