// SPDX-License-Identifier: Apache-2.0
// Frame-level counters of one DPDK queue (below the SPEC §5 datagram drops, which stay in
// QueueCounters). Single writer (the queue's lcore), read by the control thread for /metrics.
#pragma once

#include "aggregator/dataplane/dpdk/frame.h"
#include "aggregator/engine/counters.h"

namespace conflux::agg::dpdk {

struct alignas(64) FrameCounters {
  Counter frames_in;                    // every frame taken from the RX ring
  Counter frame_drops[kNumFrameDrops];  // index = FrameDrop; [0] unused
  Counter arp_replies;                  // ARP replies sent for our address
  Counter arp_requests;                 // ARP requests sent (gratuitous, neighbour misses)
  Counter neighbor_misses;              // results not sent: the worker's MAC is not known yet
  Counter tx_dropped;                   // frames the port did not take (TX ring full)
  Counter rx_linearized;                // multi-segment frames copied to be parsed
  Counter busy_cycles;                  // TSC cycles of poll iterations that did work
  Counter busy_polls;                   // those iterations (frames per busy poll = the burst)
  // Software steering (rte_ring between queues): datagrams this queue received for a slot of
  // another queue and handed to it, those it took from its own ring, and those it dropped
  // because the owner's ring was full.
  Counter handoff_out;
  Counter handoff_in;
  Counter handoff_drops;

  void drop(FrameDrop d) { frame_drops[static_cast<int>(d)].inc(); }
};

}  // namespace conflux::agg::dpdk
