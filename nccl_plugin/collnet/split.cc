// SPDX-License-Identifier: Apache-2.0
#include "collnet/split.h"

#include <algorithm>

namespace conflux::collnet {

double aggregator_capacity_mbps(int nranks, double link_mbps, double agg_mbps,
                                const std::vector<AggregatorShare>& aggs) {
  double capacity = 0, weighted = 0;
  uint64_t period = 0;
  for (const AggregatorShare& a : aggs) period += a.weight;
  for (const AggregatorShare& a : aggs) {
    const double granted =
        a.requested_slots == 0
            ? 1.0
            : std::min(1.0, static_cast<double>(a.granted_slots) / a.requested_slots);
    const double rate = agg_mbps > 0            ? agg_mbps
                        : a.advertised_mbps > 0 ? a.advertised_mbps
                                                : nranks * link_mbps;
    capacity += rate * granted;
    if (a.weight > 0) {
      const double paced = rate * granted * static_cast<double>(period) / a.weight;
      weighted = weighted == 0 ? paced : std::min(weighted, paced);
    }
  }
  return period > 0 ? weighted : capacity;
}

double link_prior_mbps(double configured, double nominal, double measured) {
  if (configured > 0) return configured;
  if (measured > 0 && measured < 0.5 * nominal) return measured;
  return nominal;
}

double ring_bytes_per_byte(int nranks) { return 2.0 * (nranks - 1) / nranks; }

double auto_ring_fraction(int nranks, double link_mbps, double capacity_mbps) {
  if (nranks < 2 || link_mbps <= 0) return 0.0;
  if (capacity_mbps <= 0) return 1.0;
  const double n = nranks;
  const double c = ring_bytes_per_byte(nranks);
  const double agg_share = std::min(1.0, c / (n * link_mbps / capacity_mbps - 1.0 + c));
  return std::clamp(1.0 - agg_share, 0.0, 1.0);
}

size_t aggregator_elements(size_t count, size_t esize, double ring_fraction,
                           size_t min_ring_bytes) {
  const auto agg = static_cast<size_t>(static_cast<double>(count) * (1.0 - ring_fraction));
  if (ring_fraction < 1.0 && (count - agg) * esize < min_ring_bytes) return count;
  return agg;
}

}  // namespace conflux::collnet
