// SPDX-License-Identifier: Apache-2.0
#include "collnet/coll_request.h"

#include <algorithm>

namespace conflux::collnet {

std::vector<std::pair<size_t, size_t>> owned_ranges(const CollWindow& w, int nranks, size_t esize) {
  std::vector<std::pair<size_t, size_t>> owned(static_cast<size_t>(nranks), {0, 0});
  const size_t win_end = w.offset + w.bytes;
  for (int k = 0; k < nranks; ++k) {
    const size_t lo = std::max(w.offset, static_cast<size_t>(k) * w.bytes_per_rank);
    const size_t hi = std::min(win_end, static_cast<size_t>(k + 1) * w.bytes_per_rank);
    if (lo < hi) owned[static_cast<size_t>(k)] = {(lo - w.offset) / esize, (hi - w.offset) / esize};
  }
  return owned;
}

std::vector<std::pair<size_t, size_t>> clip_ranges(
    const std::vector<std::pair<size_t, size_t>>& ranges, size_t lo, size_t hi) {
  std::vector<std::pair<size_t, size_t>> clipped(ranges.size(), {0, 0});
  for (size_t k = 0; k < ranges.size(); ++k) {
    const size_t a = std::max(ranges[k].first, lo), b = std::min(ranges[k].second, hi);
    if (a < b) clipped[k] = {a - lo, b - lo};
  }
  return clipped;
}

RingPlan CollRequest::ring_plan(size_t lo, size_t hi) const {
  if (kind == CollKind::kAllReduce) return {};
  const bool rs = kind == CollKind::kReduceScatter;
  return RingPlan::by_owner(clip_ranges(owned, lo, hi), /*reduce_scatter=*/rs,
                            /*all_gather=*/!rs);
}

void SmallAllReduceTimes::posted(Clock::time_point now) {
  if (last_post != Clock::time_point{}) {
    gaps.store(gaps.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    gap_ns.store(gap_ns.load(std::memory_order_relaxed) + ns(now - last_post),
                 std::memory_order_relaxed);
  }
  last_post = now;
}

void SmallAllReduceTimes::tested(Clock::time_point posted, Clock::time_point finished,
                                 Clock::time_point now) {
  count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  to_result_ns.store(to_result_ns.load(std::memory_order_relaxed) + ns(finished - posted),
                     std::memory_order_relaxed);
  to_test_ns.store(to_test_ns.load(std::memory_order_relaxed) + ns(now - finished),
                   std::memory_order_relaxed);
}

}  // namespace conflux::collnet
