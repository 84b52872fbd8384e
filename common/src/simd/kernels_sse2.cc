// SPDX-License-Identifier: Apache-2.0
// SSE2 kernel table (x86-64 baseline; compiled without extra -m flags).
#include "kernels.h"

CONFLUX_DEFINE_KERNEL_TABLE(sse2_table, xsimd::sse2, Isa::kSse2)
