// SPDX-License-Identifier: Apache-2.0
// The client's one test-hook seam: datagram fault injection (drop / duplicate / reorder, and a
// receive blackout), decided per datagram from a seeded PRNG so runs are reproducible.
// Compiled only in test builds (CONFLUX_TEST_HOOKS, top-level CMakeLists.txt); in a package
// build arm_faults does nothing and FaultInjector always passes, so the channels' fault branches
// fold away and no fault setting exists. Progress thread only.
#pragma once

#include <cstdint>
#include <string>

#include "conflux/client/config.h"

namespace conflux::client {

enum class FaultAction : uint8_t { kPass, kDrop, kDuplicate, kReorder };

#ifdef CONFLUX_TEST_HOOKS

// Arms a channel (UdpChannel::set_faults) with the engine's ClientConfig::faults, or for a
// multicast group's socket with only the multicast share. Templates, so this seam needs no
// channel header.
template <typename Channel>
void arm_faults(Channel& ch, const ClientConfig& c) {
  ch.set_faults(c.faults, c.rank);
}

template <typename Channel>
void arm_group_faults(Channel& ch, const ClientConfig& c) {
  FaultInjection f;  // a rank that hears the groups badly or not at all
  f.drop = c.faults.multicast_drop;
  f.seed = c.faults.seed;
  ch.set_faults(f, c.rank);
}

// validate()'s part: what is wrong with c.faults, if anything.
inline Status check_faults(const ClientConfig& c) {
  const FaultInjection& f = c.faults;
  for (double p : {f.drop, f.dup, f.reorder, f.multicast_drop}) {
    if (!(p >= 0 && p <= 1)) {
      return invalid_argument("fault probabilities must be in [0, 1]");
    }
  }
  if (f.drop + f.dup + f.reorder > 1) {
    return invalid_argument("fault probabilities must sum to <= 1");
  }
  return {};
}

class FaultInjector {
 public:
  FaultInjector() : FaultInjector(FaultInjection{}, 0) {}
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

  // Counts one received datagram; true once more than rx_blackout_after have been seen.
  bool blackout() { return f_.rx_blackout_after > 0 && ++seen_ > f_.rx_blackout_after; }

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
  uint64_t seen_ = 0;
};

#else  // package build: no fault injection

template <typename Channel>
void arm_faults(Channel&, const ClientConfig&) {}
template <typename Channel>
void arm_group_faults(Channel&, const ClientConfig&) {}
inline Status check_faults(const ClientConfig&) { return {}; }

class FaultInjector {
 public:
  static constexpr bool enabled() { return false; }
  static constexpr FaultAction next() { return FaultAction::kPass; }
  static constexpr bool blackout() { return false; }
};

#endif

}  // namespace conflux::client
