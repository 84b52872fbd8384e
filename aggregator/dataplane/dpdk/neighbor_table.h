// SPDX-License-Identifier: Apache-2.0
// IPv4 -> MAC of the workers one DPDK queue sends results to, learnt from the source MAC of
// the frames it accepts (CONTRIB datagrams, ARP to us). A worker behind a router is learnt with
// the router's MAC, which is the right next hop for the reply. Owned by one queue thread: no
// locks. Fixed size, open addressing; when a probe run is full the home entry is replaced.
#pragma once

#include <array>
#include <cstdint>

#include "aggregator/dataplane/dpdk/frame.h"

namespace conflux::agg::dpdk {

class NeighborTable {
 public:
  static constexpr unsigned kBits = 12;
  static constexpr uint32_t kSize = 1u << kBits;
  static constexpr uint32_t kProbes = 8;

  void learn(uint32_t ip, const MacAddr& mac) {
    if (ip == 0) return;
    const uint32_t h = home(ip);
    for (uint32_t i = 0; i < kProbes; ++i) {
      Entry& e = e_[(h + i) & (kSize - 1)];
      if (e.ip == ip || e.ip == 0) {
        if (!(e.mac == mac) || e.ip == 0) {  // write only on change: no store per packet
          e.ip = ip;
          e.mac = mac;
        }
        return;
      }
    }
    e_[h] = {ip, mac};
  }

  bool lookup(uint32_t ip, MacAddr* mac) const {
    const uint32_t h = home(ip);
    for (uint32_t i = 0; i < kProbes; ++i) {
      const Entry& e = e_[(h + i) & (kSize - 1)];
      if (e.ip == ip && ip != 0) {
        *mac = e.mac;
        return true;
      }
      if (e.ip == 0) return false;
    }
    return false;
  }

 private:
  struct Entry {
    uint32_t ip = 0;
    MacAddr mac;
  };
  static uint32_t home(uint32_t ip) { return (ip * 2654435761u) >> (32 - kBits); }

  std::array<Entry, kSize> e_{};
};

}  // namespace conflux::agg::dpdk
