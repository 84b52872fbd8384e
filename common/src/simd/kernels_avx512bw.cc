// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F, CD, DQ, BW, VL) + F16C kernel table (compiled with those -m flags, used
// only when the CPU and OS support them; see isa.cc).
#include "kernels.h"

CONFLUX_DEFINE_KERNEL_TABLE(avx512bw_table, xsimd::avx512bw, Isa::kAvx512bw)
