// SPDX-License-Identifier: Apache-2.0
// Public entry points of the reduction engine (reduce.h): validate, then call the
// kernel of the table chosen at run time (reduce_dispatch.h).
#include "conflux/common/reduce.h"

#include <cstdint>

#include "reduce_dispatch.h"

namespace conflux::reduce {
namespace {

bool ok(DType t) { return valid_dtype(static_cast<uint32_t>(t)); }
bool ok(DType t, Op op) { return ok(t) && valid_op(static_cast<uint32_t>(op)); }
size_t ti(DType t) { return static_cast<size_t>(t); }
size_t oi(Op op) { return static_cast<size_t>(op); }

}  // namespace

void init(DType t, void* acc, const void* src, size_t n) {
  if (n == 0 || !ok(t)) {
    return;
  }
  detail::active_table().init[ti(t)](acc, src, n);
}

void accumulate(DType t, Op op, void* acc, const void* src, size_t n) {
  if (n == 0 || !ok(t, op)) {
    return;
  }
  detail::active_table().accumulate[ti(t)][oi(op)](acc, src, n);
}

void finish(DType t, void* dst, const void* acc, size_t n) {
  if (n == 0 || !ok(t)) {
    return;
  }
  detail::active_table().finish[ti(t)](dst, acc, n);
}

void reduce_inplace(DType t, Op op, void* dst, const void* src, size_t n) {
  if (n == 0 || !ok(t, op)) {
    return;
  }
  detail::active_table().reduce_inplace[ti(t)][oi(op)](dst, src, n);
}

// `scratch` is part of the contract so that callers size it, but the kernels reduce
// all k sources register by register in one pass and do not need it.
void reduce_n(DType t, Op op, void* dst, const void* const* srcs, size_t k, size_t n,
              void* /*scratch*/) {
  if (n == 0 || k == 0 || !ok(t, op)) {
    return;
  }
  detail::active_table().reduce_n[ti(t)][oi(op)](dst, srcs, k, n);
}

uint64_t sum_u32_words(const void* p, size_t n_words) {
  return n_words == 0 ? 0 : detail::active_table().sum_u32_words(p, n_words);
}

std::string_view active_isa() { return detail::active_table().name; }

}  // namespace conflux::reduce
