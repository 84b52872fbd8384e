// SPDX-License-Identifier: Apache-2.0
// How confluxd configures a DPDK port from what the port says it can do (rte_eth_dev_info):
// the offloads it turns on and, from them, what the datapath leaves to the NIC. Only what a
// port advertises is used: IPv4 and UDP checksums are computed in software otherwise (the UDP
// one by the reduction engine's SIMD, reduce::sum_u32_words), and results are fanned out by
// copy where the port cannot transmit chained mbufs. Pure: no EAL needed (unit-tested).
#pragma once

#include <rte_ethdev.h>

#include <cstdint>

namespace conflux::agg::dpdk {

struct PortPlan {
  rte_eth_conf conf{};
  bool multi_seg = false;    // header mbuf + indirect clone per worker (else a copy each)
  bool tx_ip_csum = false;   // the NIC fills the IPv4 header checksum
  bool tx_udp_csum = false;  // the NIC sums the UDP payload (we put the pseudo-header sum in)
};

// The port's configuration for frames of up to `mtu` IP bytes on `nq` queues.
PortPlan plan_port(const rte_eth_dev_info& info, uint32_t mtu, uint16_t nq);

}  // namespace conflux::agg::dpdk
