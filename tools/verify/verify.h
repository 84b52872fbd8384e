// SPDX-License-Identifier: Apache-2.0
// What the tools share to check a reduction's results (conflux_tools_verify): one element of
// any dtype as a double and back, and the reference result in rank order, which is what the
// aggregators compute in deterministic mode. The inputs themselves are a pure function of
// (seed, rank, index) in each tool (driver/data.h, worker/worker_data.h), so every rank can
// compute the expected result on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conflux/common/dtype.h"

namespace conflux::verify {

// Stores v, converted to t, at p: integers truncated toward zero (v must lie within the type),
// narrow floats through float, rounded to nearest even.
void store_value(DType t, double v, void* p);
// The float element at p as a double; 0 for the integer types (compared bitwise instead).
double load_value(DType t, const void* p);

// want[0, n) = the reduction of srcs[0..n_ranks) in rank order (narrow floats accumulated in
// fp32, rounded once). With `leaves` (ranks per leaf of a reduction tree, in rank order, summing
// to n_ranks): each leaf's rank-order result, rounded to t, reduced in leaf order. `scratch`
// holds n * accum_size(t) bytes.
void rank_order_reference(DType t, Op op, const void* const* srcs, size_t n_ranks, size_t n,
                          const std::vector<uint32_t>& leaves, void* want, void* scratch);

}  // namespace conflux::verify
