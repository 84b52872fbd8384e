// SPDX-License-Identifier: Apache-2.0
// Packet cutting, striping and slot arithmetic (protocol/SPEC.md §4). Pure functions;
// every rank computes the same values from the same (count, dtype, payload, A, W).
#pragma once

#include <cstddef>
#include <cstdint>

#include "conflux/common/dtype.h"

namespace conflux::client {

// How one collective of `count` elements is cut into packets.
struct PacketPlan {
  uint32_t elems_per_packet = 0;  // P = payload_bytes / dtype_size; 0 = payload too small
  uint64_t n_packets = 0;         // ceil(count / P)
  size_t count = 0;
};

inline PacketPlan plan_packets(size_t count, DType t, uint32_t payload_bytes) {
  PacketPlan p;
  p.count = count;
  p.elems_per_packet = static_cast<uint32_t>(payload_bytes / dtype_size(t));
  if (p.elems_per_packet == 0) {
    return p;
  }
  p.n_packets = (count + p.elems_per_packet - 1) / p.elems_per_packet;
  return p;
}

// Element offset of packet k inside the collective.
inline uint64_t packet_offset(const PacketPlan& p, uint64_t k) { return k * p.elems_per_packet; }

// Elements in packet k (P, the last one possibly shorter).
inline uint32_t packet_count(const PacketPlan& p, uint64_t k) {
  const uint64_t off = packet_offset(p, k);
  const uint64_t left = p.count - off;
  return static_cast<uint32_t>(left < p.elems_per_packet ? left : p.elems_per_packet);
}

// Striping (which aggregator each packet goes to): striping.h.

// Sequence number n of the packets sent to one aggregator -> slot and generation (W slots).
inline uint32_t slot_of(uint64_t seq, uint32_t window) {
  return static_cast<uint32_t>(seq % window);
}
inline uint32_t generation_of(uint64_t seq, uint32_t window) {
  return static_cast<uint32_t>(seq / window);  // modulo 2^32 by truncation
}

// Signed distance a - b between two generations, modulo 2^32 (negative: a is older).
inline int32_t generation_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

}  // namespace conflux::client
