// SPDX-License-Identifier: Apache-2.0
#include "aggregator/dataplane/dpdk/port_plan.h"

#include <algorithm>

namespace conflux::agg::dpdk {

PortPlan plan_port(const rte_eth_dev_info& info, uint32_t mtu, uint16_t nq) {
  PortPlan p;
  p.conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
  // Spread by flow hash where the port has RSS: without flow rules (software steering) the
  // queues would otherwise not share the load. With flow rules, the rules take precedence.
  const uint64_t rss = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
  if (nq > 1 && rss != 0) {
    p.conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    p.conf.rx_adv_conf.rss_conf.rss_hf = rss;
  }
  // Some PMDs (af_packet) only raise their limit through rte_eth_dev_set_mtu() later.
  const uint32_t limit =
      std::min<uint32_t>(info.max_mtu, info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
  p.conf.rxmode.mtu = std::min<uint32_t>(std::max<uint32_t>(mtu, RTE_ETHER_MTU), limit);
  const uint64_t rx = info.rx_offload_capa, tx = info.tx_offload_capa;
  p.conf.rxmode.offloads = rx & (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
  if (mtu > RTE_ETHER_MTU) p.conf.rxmode.offloads |= rx & RTE_ETH_RX_OFFLOAD_SCATTER;
  p.multi_seg = (tx & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  p.tx_ip_csum = (tx & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
  p.tx_udp_csum = (tx & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
  p.conf.txmode.offloads = (p.multi_seg ? RTE_ETH_TX_OFFLOAD_MULTI_SEGS : 0) |
                           (p.tx_ip_csum ? RTE_ETH_TX_OFFLOAD_IPV4_CKSUM : 0) |
                           (p.tx_udp_csum ? RTE_ETH_TX_OFFLOAD_UDP_CKSUM : 0);
  return p;
}

}  // namespace conflux::agg::dpdk
