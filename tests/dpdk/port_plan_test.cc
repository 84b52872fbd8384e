// SPDX-License-Identifier: Apache-2.0
// Unit tests of how confluxd configures a DPDK port (aggregator/dataplane/dpdk/port_plan.h):
// an offload is used only when the port advertises it. No EAL, no root.
#include "aggregator/dataplane/dpdk/port_plan.h"

#include "gtest/gtest.h"

namespace conflux::agg::dpdk {
namespace {

rte_eth_dev_info port(uint64_t rx, uint64_t tx, uint64_t rss = 0) {
  rte_eth_dev_info info{};
  info.max_mtu = 9000;
  info.max_rx_pktlen = 9018;
  info.rx_offload_capa = rx;
  info.tx_offload_capa = tx;
  info.flow_type_rss_offloads = rss;
  return info;
}

TEST(PortPlan, ChecksumsInSoftwareOnAPortWithoutTxOffloads) {
  const PortPlan p = plan_port(port(0, 0), 8300, 1);  // a ring or af_packet port
  EXPECT_FALSE(p.tx_ip_csum);
  EXPECT_FALSE(p.tx_udp_csum);
  EXPECT_FALSE(p.multi_seg);
  EXPECT_EQ(p.conf.txmode.offloads, 0u);
  EXPECT_EQ(p.conf.rxmode.offloads, 0u);
}

TEST(PortPlan, EachChecksumOffloadOnlyWhereAdvertised) {
  const PortPlan udp_only = plan_port(port(0, RTE_ETH_TX_OFFLOAD_UDP_CKSUM), 8300, 1);
  EXPECT_TRUE(udp_only.tx_udp_csum);
  EXPECT_FALSE(udp_only.tx_ip_csum);
  EXPECT_EQ(udp_only.conf.txmode.offloads, RTE_ETH_TX_OFFLOAD_UDP_CKSUM);

  const uint64_t nic = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
                       RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO;
  const PortPlan full =
      plan_port(port(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM |
                         RTE_ETH_RX_OFFLOAD_SCATTER | RTE_ETH_RX_OFFLOAD_TCP_LRO,
                     nic),
                8300, 1);
  EXPECT_TRUE(full.tx_ip_csum && full.tx_udp_csum && full.multi_seg);
  // Only the offloads the datapath uses are turned on, not everything the port has (TSO).
  EXPECT_EQ(full.conf.txmode.offloads, RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
                                           RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
                                           RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
  // Jumbo frames: receive checksums and scatter; no LRO.
  EXPECT_EQ(full.conf.rxmode.offloads, RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
                                           RTE_ETH_RX_OFFLOAD_UDP_CKSUM |
                                           RTE_ETH_RX_OFFLOAD_SCATTER);
  // Standard frames need no scatter.
  EXPECT_EQ(plan_port(port(RTE_ETH_RX_OFFLOAD_SCATTER, 0), 1500, 1).conf.rxmode.offloads, 0u);
}

TEST(PortPlan, RssOnlyWithSeveralQueuesAndOnlyIpAndUdpHashes) {
  const uint64_t rss = RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP;
  EXPECT_EQ(plan_port(port(0, 0, rss), 8300, 1).conf.rxmode.mq_mode, RTE_ETH_MQ_RX_NONE);
  const PortPlan p = plan_port(port(0, 0, rss), 8300, 4);
  EXPECT_EQ(p.conf.rxmode.mq_mode, RTE_ETH_MQ_RX_RSS);
  EXPECT_EQ(p.conf.rx_adv_conf.rss_conf.rss_hf, RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
  EXPECT_EQ(plan_port(port(0, 0, 0), 8300, 4).conf.rxmode.mq_mode, RTE_ETH_MQ_RX_NONE);
}

TEST(PortPlan, MtuWithinWhatThePortTakes) {
  EXPECT_EQ(plan_port(port(0, 0), 8300, 1).conf.rxmode.mtu, 8300u);
  EXPECT_EQ(plan_port(port(0, 0), 12000, 1).conf.rxmode.mtu, 9000u);
  EXPECT_EQ(plan_port(port(0, 0), 576, 1).conf.rxmode.mtu, uint32_t{RTE_ETHER_MTU});
}

}  // namespace
}  // namespace conflux::agg::dpdk
