// SPDX-License-Identifier: Apache-2.0
// Multicast groups of the aggregator (protocol/SPEC.md §8): the allocator that grants each job
// its own group from the configured range (parsed by util/ipv4.h). Control thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "aggregator/util/ipv4.h"

namespace conflux::agg {

// Grants groups from a range, one per live job. Next-fit: the search starts after the last
// group granted, so a released group is reused as late as possible (late packets of an old
// job then meet no new job; they would fail its job_id/job_token check anyway).
class MulticastGroups {
 public:
  explicit MulticastGroups(MulticastRange range);
  // A free group (host order), or nothing when all are held.
  std::optional<uint32_t> acquire();
  // Gives back a group from acquire(); any other value is ignored.
  void release(uint32_t group);
  size_t in_use() const { return in_use_; }

 private:
  MulticastRange range_;
  std::vector<bool> used_;
  uint32_t next_ = 0;  // index to try first
  size_t in_use_ = 0;
};

}  // namespace conflux::agg
