// SPDX-License-Identifier: Apache-2.0
// Internal: fills a KernelTable from a class template K<DType, Op> that provides the
// static kernels `init`, `finish`, `accumulate`, `reduce_inplace` and `reduce_n`
// (init/finish are taken from K<t, Op::kSum>), and `sum_u32_words` (any K: it does not depend
// on the type or the operator). In an anonymous namespace: the per-ISA
// translation units each instantiate it, and their copies must never be merged.
#pragma once

#include <utility>

#include "reduce_dispatch.h"

namespace conflux::reduce::detail {
namespace {

template <template <DType, Op> class K, size_t... I>
void fill_table(KernelTable& t, std::index_sequence<I...>) {
  constexpr size_t kOps = static_cast<size_t>(kNumOps);
  ((t.accumulate[I / kOps][I % kOps] =
        &K<static_cast<DType>(I / kOps), static_cast<Op>(I % kOps)>::accumulate),
   ...);
  ((t.reduce_inplace[I / kOps][I % kOps] =
        &K<static_cast<DType>(I / kOps), static_cast<Op>(I % kOps)>::reduce_inplace),
   ...);
  ((t.reduce_n[I / kOps][I % kOps] =
        &K<static_cast<DType>(I / kOps), static_cast<Op>(I % kOps)>::reduce_n),
   ...);
  ((I % kOps == 0 ? (t.init[I / kOps] = &K<static_cast<DType>(I / kOps), Op::kSum>::init,
                     t.finish[I / kOps] = &K<static_cast<DType>(I / kOps), Op::kSum>::finish, 0)
                  : 0),
   ...);
}

template <template <DType, Op> class K>
KernelTable make_table(Isa isa) {
  KernelTable t{};
  t.isa = isa;
  t.name = isa_name(isa);
  fill_table<K>(t, std::make_index_sequence<static_cast<size_t>(kNumDTypes) * kNumOps>{});
  t.sum_u32_words = &K<DType::kFloat32, Op::kSum>::sum_u32_words;
  return t;
}

}  // namespace
}  // namespace conflux::reduce::detail
