// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA + F16C kernel table (compiled with -mavx2 -mfma -mf16c, used only when
// the CPU has them; see isa.cc).
#include "kernels.h"

CONFLUX_DEFINE_KERNEL_TABLE(avx2_table, xsimd::fma3<xsimd::avx2>, Isa::kAvx2)
