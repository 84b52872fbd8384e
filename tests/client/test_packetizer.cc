// SPDX-License-Identifier: Apache-2.0
// Packet cutting, striping and slot/generation arithmetic (SPEC.md §4).
#include <gtest/gtest.h>

#include <set>

#include "packetizer.h"

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

TEST(Packetizer, StripingIsRoundRobinAndCountsAddUp) {
  for (uint32_t A : {1u, 2u, 3u, 5u}) {
    for (uint64_t n : {0ul, 1ul, 2ul, 7ul, 100ul}) {
      uint64_t total = 0;
      for (uint32_t a = 0; a < A; ++a) {
        const uint64_t m = packets_on_aggregator(n, A, a);
        total += m;
        for (uint64_t j = 0; j < m; ++j) {
          const uint64_t k = aggregator_packet(a, j, A);
          ASSERT_LT(k, n);
          ASSERT_EQ(packet_aggregator(k, A), a);
        }
        EXPECT_GE(aggregator_packet(a, m, A), n) << "A=" << A << " n=" << n << " a=" << a;
      }
      EXPECT_EQ(total, n);
    }
  }
  EXPECT_EQ(packet_aggregator(7, 3), 1u);
}

TEST(Packetizer, AStripeStartShiftsTheRoundRobin) {
  for (uint32_t A : {1u, 2u, 3u, 5u}) {
    for (uint32_t start : {0u, 1u, 4u, 7u}) {
      for (uint64_t n : {0ul, 1ul, 2ul, 7ul, 100ul}) {
        uint64_t total = 0;
        for (uint32_t a = 0; a < A; ++a) {
          const uint32_t pos = stripe_position(a, A, start);
          const uint64_t m = packets_on_aggregator(n, A, pos);
          total += m;
          for (uint64_t j = 0; j < m; ++j) {
            const uint64_t k = aggregator_packet(pos, j, A);
            ASSERT_LT(k, n);
            ASSERT_EQ(packet_aggregator(k, A, start), a) << "A=" << A << " start=" << start;
          }
        }
        EXPECT_EQ(total, n);
      }
    }
  }
  // Two requests of 3 and 2 packets over 2 aggregators, the second starting where the first
  // stopped: aggregators 0 1 0 | 1 0, as one request of 5 packets would be.
  EXPECT_EQ(packet_aggregator(0, 2, 3), 1u);
  EXPECT_EQ(packet_aggregator(1, 2, 3), 0u);
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
