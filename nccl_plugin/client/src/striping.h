// SPDX-License-Identifier: Apache-2.0
// Weighted striping (protocol/SPEC.md §4, "Striping"): which aggregator each packet of a
// collective goes to when the aggregators carry unequal shares.
//
// The aggregators' weights w_0..w_{A-1} fix a pattern of period P = sum(w): aggregator a holds
// w_a of its P positions, spread as evenly as the weights allow (smooth weighted round robin:
// each position goes to the aggregator furthest behind its share, the lowest index on a tie).
// Packet k of a request that starts at `start` goes to the aggregator at position
// (k + start) mod P. Equal weights give the pattern 0, 1, ..., A-1, so packet k goes to
// aggregator (k + start) mod A, the unweighted striping. Every rank builds the same pattern
// from the same weights (connect agrees on them), so every rank sends packet k to the same
// aggregator and each aggregator's sequence numbers cover the same packets on every rank.
//
// Pure arithmetic, no allocation after construction: the progress thread calls it per packet.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace conflux::client {

class Striping {
 public:
  // The largest period the pattern may have (sum of the weights).
  static constexpr uint32_t kMaxPeriod = 4096;

  Striping() : Striping(std::vector<uint32_t>{1}) {}
  // `weights`: one per aggregator, each >= 1, their sum <= kMaxPeriod (validate() checks).
  explicit Striping(const std::vector<uint32_t>& weights) : positions_(weights.size()) {
    uint32_t period = 0;
    for (uint32_t w : weights) period += w;
    std::vector<int64_t> behind(weights.size(), 0);
    for (uint32_t q = 0; q < period; ++q) {
      size_t pick = 0;
      for (size_t a = 0; a < weights.size(); ++a) {
        behind[a] += weights[a];
        if (behind[a] > behind[pick]) pick = a;
      }
      behind[pick] -= period;
      positions_[pick].push_back(q);
    }
    period_ = period;
  }

  uint32_t period() const { return period_; }
  uint32_t aggregators() const { return static_cast<uint32_t>(positions_.size()); }

  // The aggregator packet k goes to.
  uint32_t aggregator(uint64_t k, uint32_t start) const {
    const uint32_t q = static_cast<uint32_t>((k + start % period_) % period_);
    for (uint32_t a = 0; a < positions_.size(); ++a) {
      if (std::binary_search(positions_[a].begin(), positions_[a].end(), q)) return a;
    }
    return 0;  // unreachable: the positions cover 0..P-1
  }

  // How many of a request's n packets aggregator a receives.
  uint64_t packets_on(uint32_t a, uint64_t n, uint32_t start) const {
    const uint64_t s = start % period_;
    return below(a, n + s) - below(a, s);
  }

  // The request's packet index of the j-th packet aggregator a receives (j from 0); at or past
  // n when a receives fewer than j + 1 of n packets.
  uint64_t packet(uint32_t a, uint64_t j, uint32_t start) const {
    const uint64_t s = start % period_;
    const std::vector<uint32_t>& pos = positions_[a];
    const uint64_t i = j + below(a, s);
    const uint64_t v = (i / pos.size()) * period_ + pos[i % pos.size()];
    return v - s;
  }

 private:
  // Aggregator a's positions among the first v of the infinite pattern.
  uint64_t below(uint32_t a, uint64_t v) const {
    const std::vector<uint32_t>& pos = positions_[a];
    const auto rest = static_cast<uint32_t>(v % period_);
    return (v / period_) * pos.size() +
           static_cast<uint64_t>(std::lower_bound(pos.begin(), pos.end(), rest) - pos.begin());
  }

  uint32_t period_ = 1;
  std::vector<std::vector<uint32_t>> positions_;  // per aggregator, ascending
};

}  // namespace conflux::client
