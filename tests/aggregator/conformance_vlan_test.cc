// SPDX-License-Identifier: Apache-2.0
// Conformance: 802.1Q-tagged frames on the wire. Backend-specific by nature: the dpdk backend
// builds and filters the Ethernet layer itself (config dpdk_vlan), so it must accept tagged
// contributions of its VLAN, answer ARP tagged and tag its results. The udp backend never sees
// a tag (the kernel's VLAN subinterfaces hand its sockets plain datagrams), so its
// instantiation skips. Frames of another VLAN or untagged are dropped as `foreign`; that
// filter is unit-tested on frames in tests/dpdk/frame_test.cc.
#include <arpa/inet.h>

#include "conformance.h"

namespace conflux::agg::testing {
namespace {

using DataplaneVlan = DaemonTest;

std::string ip_text(uint32_t ip) {
  in_addr a{htonl(ip)};
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, buf, sizeof(buf));
}

TEST_P(DataplaneVlan, TaggedFramesBothWays) {
  if (GetParam() != "dpdk") {
    GTEST_SKIP() << "VLAN tags are the kernel's business with the " << GetParam() << " backend";
  }
  constexpr int kVlan = 78;
  VethTopology& w = *wire();
  // VLAN 78 carries 10.79.<n>.0/24 (the pair's own subnet + 1 in the second byte): the daemon's
  // data address (dpdk_ipv4) and wrk0.78 in the workers' namespace. Control stays untagged.
  const uint32_t vlan_agg = w.agg_ip() + (1u << 16), vlan_wrk = w.worker_ip() + (1u << 16);
  const std::string link = std::string(VethTopology::kWorkerIface) + "." + std::to_string(kVlan);
  if (!w.run_in_worker("ip link add link " + std::string(VethTopology::kWorkerIface) + " name " +
                       link + " type vlan id " + std::to_string(kVlan))) {
    // e.g. a kernel without 802.1Q support (CONFIG_VLAN_8021Q: `ip link add ... type vlan`
    // says "Unknown device type"), as on the machine this test was written on.
    GTEST_SKIP() << "this kernel cannot create a VLAN interface (802.1Q support missing?)";
  }
  struct DelLink {  // the dpdk wire outlives the test
    VethTopology& w;
    std::string link;
    ~DelLink() { w.run_in_worker("ip link del " + link); }
  } del_link{w, link};
  ASSERT_TRUE(w.run_in_worker("ip addr add " + ip_text(vlan_wrk) + "/24 dev " + link));
  ASSERT_TRUE(w.run_in_worker("ethtool -K " + link + " tx off"));
  ASSERT_TRUE(w.run_in_worker("ip link set " + link + " up"));

  Config cfg = base_config();
  cfg.dpdk_vlan = kVlan;
  cfg.dpdk_ipv4 = ip_text(vlan_agg);
  start(cfg);
  set_endpoints(w.agg_ip(), w.worker_ip(), vlan_agg, vlan_wrk);

  JoinSpec spec;
  spec.job_key = 78;
  spec.payload_bytes = 512;
  auto workers = join_job(spec, 2);
  auto ws = ptrs(workers);
  std::mt19937_64 rng(78);
  uint64_t seq = 0, retransmits = 0;
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat8e4m3}) {
    for (Op op : {Op::kSum, Op::kMin}) {
      const size_t count = 2000;
      std::vector<std::vector<uint8_t>> in;
      for (int r = 0; r < 2; ++r) in.push_back(exact_values(dt, count, rng));
      std::vector<std::vector<uint8_t>> out;
      ASSERT_TRUE(run_allreduce(ws, dt, op, count, in, &seq, &out, &retransmits))
          << dtype_name(dt) << " " << op_name(op);
      const auto expect = reference(dt, op, in, count);
      for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r], expect) << dtype_name(dt) << " " << op_name(op);
    }
  }
  const std::string m = metrics();
  // Results reached sockets bound to the VLAN address: the daemon tagged them. The workers'
  // kernel resolved the VLAN address through the daemon: the aggregator's kernel has no
  // VLAN 78 interface, so only the PMD's tagged ARP reply could answer.
  EXPECT_GE(metric_sum(m, "conflux_dpdk_arp_replies_total"), 1u);
  EXPECT_GT(metric_sum(m, "conflux_dataplane_slots_completed_total"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplaneVlan, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
