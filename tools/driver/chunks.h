// SPDX-License-Identifier: Apache-2.0
// How the driver cuts one AllReduce of `count` elements into requests: every request `big`
// elements, or (small > 0, --mixed-chunks) requests 2k of `small` and 2k+1 of `big`, the last
// one cut short. The requests cover [0, count) in order, with neither gap nor overlap.
#pragma once

#include <algorithm>
#include <cstddef>

namespace conflux::driver {

struct ChunkPlan {
  size_t count = 0;
  size_t big = 1;    // > 0
  size_t small = 0;  // 0: uniform

  size_t period() const { return small + big; }
  // Index of the first element of request i.
  size_t first(size_t i) const {
    return small == 0 ? i * big : (i / 2) * period() + (i % 2) * small;
  }
  size_t elems(size_t i) const {
    const size_t want = (small > 0 && i % 2 == 0) ? small : big;
    return std::min(want, count - first(i));
  }
  size_t requests() const {
    if (small == 0) return (count + big - 1) / big;
    const size_t rest = count % period();
    return 2 * (count / period()) + (rest == 0 ? 0 : rest <= small ? 1 : 2);
  }
};

}  // namespace conflux::driver
