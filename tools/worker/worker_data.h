// SPDX-License-Identifier: Apache-2.0
// Inputs and verification for conflux-allreduce-worker. Every rank can generate the
// input of every rank (a pure function of seed, rank and element index), so each rank
// computes the expected result itself: conflux::reduce::reduce_n over the ranks' inputs in
// rank order (narrow floats accumulated in fp32, rounded once), i.e. exactly what the
// aggregator computes in deterministic mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "conflux/common/dtype.h"

namespace conflux::tools {

enum class InputKind : uint8_t {
  kExact,   // small integers / powers of two: every summation order gives the same bits
  kRandom,  // uniform floats: bitwise only in deterministic mode, else within a tolerance
};

struct DataSpec {
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  InputKind inputs = InputKind::kExact;
  uint64_t seed = 1;
  uint32_t n_ranks = 1;
  bool bitwise = true;  // compare bits (else tolerance; only for floats with kRandom)
  // Reduction tree: ranks per leaf in rank order (empty: one level). The reference is then
  // each leaf's rank-order reduction, rounded to the dtype, reduced in leaf order.
  std::vector<uint32_t> leaves;
};

// Writes elements [first, first + n) of `rank`'s input into out (n * dtype_size bytes).
void generate(const DataSpec& s, uint32_t rank, size_t first, size_t n, void* out);

// Compares `got` (count elements) with the expected result. Returns the number of wrong
// elements; *first_wrong gets a description of the first one (if any).
size_t verify(const DataSpec& s, const void* got, size_t count, std::string* first_wrong);

// Fills a buffer with a byte pattern that is no valid result of the exact inputs, so an
// element the engine never wrote is caught.
void poison(void* buf, size_t bytes);
// Bytes of `buf` that no longer hold poison()'s pattern.
size_t poisoned_mismatches(const void* buf, size_t bytes);

}  // namespace conflux::tools
