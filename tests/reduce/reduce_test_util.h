// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the reduction tests: the ISAs to run, deterministic random data
// with edge values for every dtype, and value comparison with the documented NaN rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "conflux/common/dtype.h"
#include "reduce_dispatch.h"

namespace conflux::reduce::testing {

using detail::Isa;
using detail::KernelTable;
using Bytes = std::vector<uint8_t>;

// Every ISA usable on this machine (scalar first).
std::vector<Isa> usable_isas();
// Every ISA the library knows, usable here or not (tests skip the unusable ones loudly).
std::vector<Isa> all_isas();
const KernelTable& table(Isa isa);  // requires table_for(isa) != nullptr

std::vector<DType> all_dtypes();
std::vector<Op> all_ops();

// `n` source elements of type t: random bit patterns mixed with edge values
// (NaN, ±Inf, ±0, denormals, extremes, integer limits).
Bytes random_src(DType t, size_t n, std::mt19937_64& rng);
// `n` accumulator elements (accum_size(t) each): for narrow floats, fp32 values that
// hit the rounding cases of t (ties, ±1 ulp, overflow boundaries) plus edge values.
Bytes random_acc(DType t, size_t n, std::mt19937_64& rng);

bool is_nan(DType t, const uint8_t* p);        // one element of type t
bool is_nan_accum(DType t, const uint8_t* p);  // one accumulator element
// Index of the first element that differs, or -1. Elements of floating types that are
// NaN in both buffers count as equal when `nan_payload_free` (sum/prod: the payload is
// unspecified); otherwise comparison is bit for bit.
long first_mismatch(DType t, bool accum, const uint8_t* a, const uint8_t* b, size_t n,
                    bool nan_payload_free);
std::string describe(DType t, bool accum, const uint8_t* p);  // hex of one element

// A buffer with `offset` leading bytes (to misalign the data) and 64 trailing canary
// bytes; `data()` points past the offset.
class Guarded {
 public:
  Guarded(const Bytes& content, size_t offset);
  uint8_t* data() { return buf_.data() + offset_; }
  Bytes content() const;
  bool canaries_intact() const;

 private:
  Bytes buf_;
  size_t offset_;
  size_t size_;
};

}  // namespace conflux::reduce::testing
