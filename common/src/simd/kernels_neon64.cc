// SPDX-License-Identifier: Apache-2.0
// AArch64 Advanced SIMD (NEON) kernel table: ARMv8-A's baseline, so built without extra
// flags and usable on every AArch64 CPU that Linux runs on (see isa.cc).
#include "kernels.h"

CONFLUX_DEFINE_KERNEL_TABLE(neon64_table, xsimd::neon64, Isa::kNeon)
