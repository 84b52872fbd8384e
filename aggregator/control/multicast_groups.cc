// SPDX-License-Identifier: Apache-2.0
#include "aggregator/control/multicast_groups.h"

namespace conflux::agg {

MulticastGroups::MulticastGroups(MulticastRange range) : range_(range), used_(range.size) {}

std::optional<uint32_t> MulticastGroups::acquire() {
  for (uint32_t k = 0; k < range_.size; ++k) {
    const uint32_t i = (next_ + k) % range_.size;
    if (used_[i]) continue;
    used_[i] = true;
    next_ = (i + 1) % range_.size;
    ++in_use_;
    return range_.base + i;
  }
  return std::nullopt;
}

void MulticastGroups::release(uint32_t group) {
  const uint32_t i = group - range_.base;
  if (group < range_.base || i >= range_.size || !used_[i]) return;
  used_[i] = false;
  --in_use_;
}

}  // namespace conflux::agg
