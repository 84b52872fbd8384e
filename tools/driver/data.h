// SPDX-License-Identifier: Apache-2.0
// Seeded AllReduce inputs and the verification of results.
//
// Every rank can generate every rank's input (a pure function of seed, rank and element
// index), so each rank checks its own output locally, element by element.
//
// kExact inputs make every result exact whatever the reduction order or per-hop rounding:
//   integers: any bit pattern (sum/prod wrap modulo 2^bits, exactly);
//   floats, sum:  small integers whose partial sums stay within the type's exact-integer range
//                 (fp8 e5m2: 8, e4m3: 16, bf16: 256, fp16: 2048, fp32/fp64: 2^20);
//   floats, prod: ±1 with a bounded number of ±2 factors (and some zeros);
//   floats, max/min: integers in the exact range.
// Results are compared by value (+0 == -0).
// kRandom inputs (used with --deterministic for CollNet modes): floats uniform in [-1, 1)
// rounded to the type; the result must equal, bit for bit, conflux::reduce::reduce_n over the
// ranks' inputs in rank order (fp32 accumulation for narrow floats, rounded once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conflux/common/dtype.h"

namespace conflux::driver {

enum class InputKind { kExact, kRandom };

struct InputSpec {
  DType dtype;
  Op op;
  int nranks;
  uint64_t seed;
  InputKind kind;
  // Ranks per leaf of a reduction tree, in rank order (empty: one level). Deterministic
  // results are then the two-level reference: each leaf in rank order, the leaves in order.
  std::vector<uint32_t> leaves = {};
};

// Writes elements [first, first + n) of `rank`'s input into dst (n elements).
void fill_input(const InputSpec& s, int rank, size_t first, size_t n, void* dst);

// Number of wrong elements in `result`, which holds elements [at, at + count) of the
// AllReduce of every rank's input (ReduceScatter: at = rank * count).
uint64_t count_wrong(const InputSpec& s, const void* result, size_t count, size_t at = 0);

// Number of wrong elements in an AllGather result: nranks blocks of per_rank elements,
// block r being rank r's input [0, per_rank), bit for bit.
uint64_t count_wrong_gather(const InputSpec& s, const void* result, size_t per_rank);

// Fills n elements with a recognisable pattern so that a missing write is detected: NaN for
// floats (never a correct result here), 0xA5 bytes for integers (rarely one).
void poison(DType t, void* dst, size_t n);

}  // namespace conflux::driver
