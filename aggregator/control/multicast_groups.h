// Multicast groups of the aggregator (protocol/SPEC.md §8): the configured range, its checks,
// and the allocator that grants each job its own group. Control thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/config.h"

namespace conflux::agg {

// A range of IPv4 multicast groups, host order: [base, base + size).
struct MulticastRange {
  uint32_t base = 0;
  uint32_t size = 0;
};

// Parses "a.b.c.d/n" inside 224.0.0.0/4 and outside 224.0.0.0/24 (link-local control groups).
// Returns "" or what is wrong with it.
std::string parse_multicast_range(std::string_view text, MulticastRange* out);

// Checks the multicast_* keys together; "" or an error naming the key.
std::string check_multicast_config(const Config& cfg);

// "a.b.c.d" of a host-order IPv4 address.
std::string ipv4_text(uint32_t addr);

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
