// SPDX-License-Identifier: Apache-2.0
// Packet cutting, weighted striping and slot/generation arithmetic (SPEC.md §4).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "packetizer.h"
#include "striping.h"

namespace conflux::client {
namespace {

TEST(Packetizer, CutsIntoFullPacketsAndAShortLastOne) {
  const PacketPlan p = plan_packets(1023, DType::kFloat32, 8192);
  EXPECT_EQ(p.elems_per_packet, 2048u);
  EXPECT_EQ(p.n_packets, 1u);
  EXPECT_EQ(packet_count(p, 0), 1023u);

  const PacketPlan q = plan_packets(5000, DType::kFloat32, 8192);
  ASSERT_EQ(q.n_packets, 3u);
  EXPECT_EQ(packet_offset(q, 0), 0u);
  EXPECT_EQ(packet_offset(q, 2), 4096u);
  EXPECT_EQ(packet_count(q, 0), 2048u);
  EXPECT_EQ(packet_count(q, 1), 2048u);
  EXPECT_EQ(packet_count(q, 2), 904u);
}

TEST(Packetizer, ElementsPerPacketFollowsTheDtypeSize) {
  EXPECT_EQ(plan_packets(10, DType::kInt8, 8192).elems_per_packet, 8192u);
  EXPECT_EQ(plan_packets(10, DType::kBfloat16, 8192).elems_per_packet, 4096u);
  EXPECT_EQ(plan_packets(10, DType::kFloat64, 8192).elems_per_packet, 1024u);
  // A payload that is not a multiple of the element size rounds down.
  EXPECT_EQ(plan_packets(10, DType::kFloat64, 8191).elems_per_packet, 1023u);
  // Payload smaller than one element: no plan.
  const PacketPlan p = plan_packets(10, DType::kFloat64, 7);
  EXPECT_EQ(p.elems_per_packet, 0u);
  EXPECT_EQ(p.n_packets, 0u);
}

TEST(Packetizer, ExactMultipleAndEmpty) {
  EXPECT_EQ(plan_packets(4096, DType::kFloat32, 8192).n_packets, 2u);
  EXPECT_EQ(packet_count(plan_packets(4096, DType::kFloat32, 8192), 1), 2048u);
  EXPECT_EQ(plan_packets(0, DType::kFloat32, 8192).n_packets, 0u);
  EXPECT_EQ(plan_packets(1, DType::kFloat32, 8192).n_packets, 1u);
}

TEST(Packetizer, PacketsCoverTheCollectiveExactlyOnce) {
  for (size_t count : {1ul, 7ul, 1023ul, 4096ul, (1ul << 20) + 3}) {
    const PacketPlan p = plan_packets(count, DType::kFloat16, 1000);
    uint64_t next = 0;
    for (uint64_t k = 0; k < p.n_packets; ++k) {
      ASSERT_EQ(packet_offset(p, k), next);
      ASSERT_GE(packet_count(p, k), 1u);
      ASSERT_LE(packet_count(p, k), p.elems_per_packet);
      next += packet_count(p, k);
    }
    EXPECT_EQ(next, count);
  }
}

// Every packet of a request goes to exactly one aggregator, as that aggregator's j-th packet
// for one j, and packet() walks each aggregator's packets in order.
void expect_partition(const Striping& s, uint64_t n, uint32_t start) {
  std::vector<int> seen(n, 0);
  uint64_t total = 0;
  for (uint32_t a = 0; a < s.aggregators(); ++a) {
    const uint64_t m = s.packets_on(a, n, start);
    total += m;
    uint64_t prev = 0;
    for (uint64_t j = 0; j < m; ++j) {
      const uint64_t k = s.packet(a, j, start);
      ASSERT_LT(k, n) << "a=" << a << " j=" << j << " start=" << start;
      ASSERT_EQ(s.aggregator(k, start), a) << "k=" << k << " start=" << start;
      if (j > 0) {
        ASSERT_GT(k, prev);
      }
      prev = k;
      ++seen[k];
    }
    EXPECT_GE(s.packet(a, m, start), n) << "a=" << a << " n=" << n << " start=" << start;
  }
  EXPECT_EQ(total, n);
  for (uint64_t k = 0; k < n; ++k) ASSERT_EQ(seen[k], 1) << "packet " << k;
}

TEST(Striping, EqualWeightsAreRoundRobin) {
  for (uint32_t A : {1u, 2u, 3u, 5u}) {
    const Striping s(std::vector<uint32_t>(A, 1));
    EXPECT_EQ(s.period(), A);
    for (uint32_t start : {0u, 1u, 4u, 7u}) {
      for (uint64_t k = 0; k < 40; ++k) ASSERT_EQ(s.aggregator(k, start), (k + start) % A);
      for (uint64_t n : {0ul, 1ul, 2ul, 7ul, 100ul}) expect_partition(s, n, start);
    }
  }
  // Two requests of 3 and 2 packets over 2 aggregators, the second starting where the first
  // stopped: aggregators 0 1 0 | 1 0, as one request of 5 packets would be.
  const Striping two(std::vector<uint32_t>{1, 1});
  EXPECT_EQ(two.aggregator(0, 3), 1u);
  EXPECT_EQ(two.aggregator(1, 3), 0u);
}

TEST(Striping, WeightsAreEachAggregatorsShareOfEveryPeriod) {
  for (const std::vector<uint32_t>& w :
       {std::vector<uint32_t>{3, 1}, {1, 3}, {5, 2, 1}, {1, 1, 7}, {2, 3, 5, 7}, {997, 3}}) {
    const Striping s(w);
    uint32_t period = 0;
    for (uint32_t x : w) period += x;
    ASSERT_EQ(s.period(), period);
    for (uint32_t start : {0u, 1u, period - 1, period + 2}) {
      // Any run of P consecutive packets holds exactly w_a of aggregator a's.
      for (uint32_t a = 0; a < w.size(); ++a) {
        for (uint64_t from = 0; from < 2 * period; from += 3) {
          uint64_t in = 0;
          for (uint64_t k = from; k < from + period; ++k) in += s.aggregator(k, start) == a;
          ASSERT_EQ(in, w[a]) << "a=" << a << " from=" << from << " start=" << start;
        }
      }
      for (uint64_t n : {0ul, 1ul, 5ul, uint64_t{period}, uint64_t{3 * period + 1}}) {
        expect_partition(s, n, start);
      }
    }
  }
}

TEST(Striping, ThePatternInterleavesTheAggregators) {
  // 3 : 1 -> 0 0 1 0 or a rotation: never four of aggregator 0 in a row across periods.
  const Striping s(std::vector<uint32_t>{3, 1});
  int run = 0, longest = 0;
  for (uint64_t k = 0; k < 40; ++k) {
    run = s.aggregator(k, 0) == 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_EQ(longest, 3);
  // 2 : 2 : 1 spreads the heavier two apart rather than 0 0 1 1 2.
  const Striping t(std::vector<uint32_t>{2, 2, 1});
  for (uint64_t k = 0; k + 1 < 20; ++k) {
    ASSERT_FALSE(t.aggregator(k, 0) == t.aggregator(k + 1, 0) && t.aggregator(k, 0) != 2)
        << "k=" << k;
  }
}

TEST(Striping, AStartContinuesTheStreamAsOneRequest) {
  // Requests of 4, 7 and 5 packets, each starting where the previous stopped, stripe exactly as
  // one request of 16 packets.
  const Striping s(std::vector<uint32_t>{3, 1, 2});
  uint32_t start = 0;
  uint64_t k_all = 0;
  for (uint64_t n : {4u, 7u, 5u}) {
    for (uint64_t k = 0; k < n; ++k, ++k_all) {
      ASSERT_EQ(s.aggregator(k, start), s.aggregator(k_all, 0)) << "k=" << k_all;
    }
    start = static_cast<uint32_t>((start + n) % s.period());
  }
}

TEST(Packetizer, SlotAndGenerationOfSequenceNumbers) {
  EXPECT_EQ(slot_of(0, 64), 0u);
  EXPECT_EQ(generation_of(0, 64), 0u);
  EXPECT_EQ(slot_of(63, 64), 63u);
  EXPECT_EQ(generation_of(63, 64), 0u);
  EXPECT_EQ(slot_of(64, 64), 0u);
  EXPECT_EQ(generation_of(64, 64), 1u);
  EXPECT_EQ(slot_of(1000, 3), 1u);
  EXPECT_EQ(generation_of(1000, 3), 333u);
  // Generations wrap modulo 2^32.
  const uint64_t seq = (uint64_t{1} << 32) * 5 + 7;
  EXPECT_EQ(generation_of(seq, 5), static_cast<uint32_t>(seq / 5));
  EXPECT_EQ(generation_of(uint64_t{1} << 32, 1), 0u);
  EXPECT_EQ(generation_diff(0, 0xFFFFFFFFu), 1);
  EXPECT_EQ(generation_diff(0xFFFFFFFFu, 0), -1);
  EXPECT_EQ(generation_diff(5, 3), 2);
}

TEST(Packetizer, EveryWindowSlotIsReusedOnlyAfterWPackets) {
  const uint32_t W = 4;
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (uint64_t n = 0; n < 64; ++n) {
    EXPECT_TRUE(seen.insert({slot_of(n, W), generation_of(n, W)}).second);
    if (n >= W) {
      EXPECT_EQ(slot_of(n, W), slot_of(n - W, W));
      EXPECT_EQ(generation_of(n, W), generation_of(n - W, W) + 1);
    }
  }
}

}  // namespace
}  // namespace conflux::client
