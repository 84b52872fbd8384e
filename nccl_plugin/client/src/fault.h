// Test-time fault injection for datagrams (drop / duplicate / reorder), decided per
// datagram from a seeded PRNG so runs are reproducible. Progress thread only.
#pragma once

#include <cstdint>

#include "conflux/client/config.h"

namespace conflux::client {

enum class FaultAction : uint8_t { kPass, kDrop, kDuplicate, kReorder };

class FaultInjector {
 public:
  FaultInjector(const FaultInjection& f, uint64_t stream)
      : f_(f), state_(f.seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + 1) {}

  bool enabled() const { return f_.enabled(); }

  FaultAction next() {
    if (!f_.enabled()) {
      return FaultAction::kPass;
    }
    const double u = uniform();
    if (u < f_.drop) {
      return FaultAction::kDrop;
    }
    if (u < f_.drop + f_.dup) {
      return FaultAction::kDuplicate;
    }
    if (u < f_.drop + f_.dup + f_.reorder) {
      return FaultAction::kReorder;
    }
    return FaultAction::kPass;
  }

 private:
  // splitmix64: small, fast, good enough for test decisions.
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  FaultInjection f_;
  uint64_t state_;
};

}  // namespace conflux::client
