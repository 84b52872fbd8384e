// SPDX-License-Identifier: Apache-2.0
// Software steering of the DPDK dataplane: which queue owns a received data datagram.
// Used when the port cannot steer UDP ports to queues itself (no rte_flow: af_packet and
// af_xdp vdevs, NICs without flow rules) and spreads frames by RSS/flow hash instead: the
// queue that received a datagram for a slot it does not own hands the mbuf to the owner's
// ring (dpdk_datapath.cc). No DPDK types here, so the unit tests need no EAL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "conflux/protocol/data.h"

namespace conflux::agg::dpdk {

// Byte offset of the big-endian 32-bit slot field in the data header (protocol/SPEC.md;
// tests/dpdk/frame_test.cc checks it against proto::encode_data_header).
inline constexpr size_t kDataHeaderSlotOffset = 24;

// Queue that serves the datagram's slot (slot % n_queues, as SlotEngine requires), or `self`
// when the UDP payload is too short to hold a data header: the engine of the receiving queue
// then drops and counts it. Reads only payload[0, len).
inline unsigned owner_queue(const uint8_t* payload, uint32_t len, unsigned n_queues,
                            unsigned self) {
  if (n_queues <= 1 || len < proto::kDataHeaderSize) return self;
  const uint8_t* p = payload + kDataHeaderSlotOffset;
  const uint32_t slot =
      (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  return slot % n_queues;
}

}  // namespace conflux::agg::dpdk
