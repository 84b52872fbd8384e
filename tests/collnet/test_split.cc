// SPDX-License-Identifier: Apache-2.0
// CONFLUX_RING_FRACTION=auto: the split from the grants and line rates (collnet/split.h).
#include <gtest/gtest.h>

#include "collnet/split.h"

namespace conflux::collnet {
namespace {

double auto_ring_fraction(int n, double link, double agg, const std::vector<AggregatorShare>& a) {
  return collnet::auto_ring_fraction(n, link, aggregator_capacity_mbps(n, link, agg, a));
}

// The link prior: the operator's figure, else the interface's unless the link measured at
// connect delivers under half of it (a veth reporting 10 Gbit/s over a 1 Gbit/s fabric).
TEST(LinkPrior, AMeasureWellBelowTheReportedSpeedReplacesIt) {
  EXPECT_EQ(link_prior_mbps(0, 10000, 940), 940);
  EXPECT_EQ(link_prior_mbps(0, 10000, 4999), 4999);
  EXPECT_EQ(link_prior_mbps(0, 10000, 5000), 10000) << "half or more: no evidence of a bottleneck";
  EXPECT_EQ(link_prior_mbps(0, 10000, 25000), 10000) << "faster than reported: the NIC's claim";
  EXPECT_EQ(link_prior_mbps(0, 10000, 0), 10000) << "not measured";
  EXPECT_EQ(link_prior_mbps(1000, 10000, 300), 1000) << "CONFLUX_LINK_MBPS over both";
}

TEST(AutoSplit, AggregatorsThatKeepUpTakeEverything) {
  // Unknown aggregator rate and a full grant: no reason to use the ring.
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 100000, 0, {{64, 64}}), 0.0);
  // One aggregator with N x the workers' link (the "fat" topology).
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 1000, 4000, {{64, 64}}), 0.0);
  // Four aggregators at the workers' rate, striped.
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 1000, 1000, {{8, 8}, {8, 8}, {8, 8}, {8, 8}}), 0.0);
}

TEST(AutoSplit, WeightedStripesArePacedByTheAggregatorBehindItsShare) {
  // 3000 and 1000 Mbit/s weighted 3:1: each finishes its share together, R = 4000.
  EXPECT_DOUBLE_EQ(aggregator_capacity_mbps(4, 1000, 0, {{8, 8, 3000, 3}, {8, 8, 1000, 1}}), 4000);
  // The same aggregators weighted 1:1: the 1000 one carries half, R = 2000 (unweighted, the
  // sum 4000 is what each would do alone).
  EXPECT_DOUBLE_EQ(aggregator_capacity_mbps(4, 1000, 0, {{8, 8, 3000, 1}, {8, 8, 1000, 1}}), 2000);
  EXPECT_DOUBLE_EQ(aggregator_capacity_mbps(4, 1000, 0, {{8, 8, 3000}, {8, 8, 1000}}), 4000);
  // A halved grant halves that aggregator's rate: 3000 x 0.5 x 4/3 = 2000.
  EXPECT_DOUBLE_EQ(aggregator_capacity_mbps(4, 1000, 0, {{4, 8, 3000, 3}, {8, 8, 1000, 1}}), 2000);
}

TEST(AutoSplit, OneAggregatorAtLinkRateForFourWorkersTakesAThird) {
  // a/S = c / (n L/R - 1 + c) = 1.5 / (4 - 1 + 1.5) = 1/3.
  EXPECT_NEAR(auto_ring_fraction(4, 1000, 1000, {{64, 64}}), 2.0 / 3.0, 1e-12);
  // Two aggregators at the link rate: 1.5 / (2 - 1 + 1.5) = 0.6.
  EXPECT_NEAR(auto_ring_fraction(4, 1000, 1000, {{64, 64}, {64, 64}}), 0.4, 1e-12);
}

TEST(AutoSplit, ACutGrantMovesWorkToTheRing) {
  // Unknown rate (taken as n L), half the window granted: R = 2L, a/S = 1.5/2.5.
  EXPECT_NEAR(auto_ring_fraction(4, 1000, 0, {{32, 64}}), 0.4, 1e-12);
  // The fraction grows as the grant shrinks, and a grant above the request counts as full.
  EXPECT_GT(auto_ring_fraction(4, 1000, 0, {{8, 64}}), auto_ring_fraction(4, 1000, 0, {{32, 64}}));
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 1000, 0, {{128, 64}}), 0.0);
}

TEST(AutoSplit, DegenerateInputs) {
  EXPECT_DOUBLE_EQ(auto_ring_fraction(1, 1000, 1000, {{64, 64}}), 0.0);  // nobody to ring with
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 0, 1000, {{64, 64}}), 0.0);     // link unknown
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 1000, 1000, {}), 1.0);          // no capacity
  EXPECT_DOUBLE_EQ(auto_ring_fraction(4, 1000, 1000, {{0, 64}}), 1.0);   // nothing granted
}

TEST(Split, SmallRingSharesGoThroughTheAggregators) {
  // 1 MiB of float at fraction 0.3: 78 644 floats (307 KiB) on the ring, the rest not.
  EXPECT_EQ(aggregator_elements(262144, 4, 0.3, 64 << 10), 183500u);
  // 64 KiB of float at 0.3: a 19.2 KiB ring share is under 64 KiB, so none.
  EXPECT_EQ(aggregator_elements(16384, 4, 0.3, 64 << 10), 16384u);
  // The boundary: a ring share of exactly min_ring_bytes stays on the ring.
  EXPECT_EQ(aggregator_elements(32768, 4, 0.5, 64 << 10), 16384u);
  EXPECT_EQ(aggregator_elements(32766, 4, 0.5, 64 << 10), 32766u);
  // 0 always splits; fraction 0 never has a ring share; fraction 1 is everything on the ring.
  EXPECT_EQ(aggregator_elements(10, 4, 0.5, 0), 5u);
  EXPECT_EQ(aggregator_elements(10, 4, 0.0, 64 << 10), 10u);
  EXPECT_EQ(aggregator_elements(10, 4, 1.0, 64 << 10), 0u);
  EXPECT_EQ(aggregator_elements(0, 4, 0.5, 64 << 10), 0u);
}

}  // namespace
}  // namespace conflux::collnet
