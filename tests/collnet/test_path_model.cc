// SPDX-License-Identifier: Apache-2.0
// The tuner's model of CollNet against NCCL's ring (collnet/path_model.h), and its registry.
#include <gtest/gtest.h>

#include <vector>

#include "collnet/path_model.h"
#include "collnet/split.h"

namespace conflux::collnet {
namespace {

constexpr double kLink = 125e6;  // 1000 Mbit/s in bytes/s
constexpr size_t kMiB = size_t{1} << 20;

// Four ranks, 30 us ring hops (180 us for the ring's 6 steps), aggregators that keep up.
PathModel four_ranks(double collnet_us) {
  PathModel m;
  m.nranks = 4;
  m.link_Bps = kLink;
  m.capacity_Bps = 4 * kLink;
  m.hop_s = 30e-6;
  m.collnet_s = collnet_us * 1e-6;
  return m;
}

TEST(PathModel, SmallMessagesGoWhereTheLatencyIsLower) {
  EXPECT_TRUE(four_ranks(70).collnet_wins(4));    // 70 us against 180 us
  EXPECT_FALSE(four_ranks(400).collnet_wins(4));  // a far aggregator: 400 us
  // Its bandwidth still wins once the message is large enough: the ring moves 1.5 bytes per
  // byte, so CollNet gains 0.5 S / L, which pays for the 220 us at S = 55 kB.
  const PathModel far = four_ranks(400);
  EXPECT_FALSE(far.collnet_wins(32 * 1024));
  EXPECT_TRUE(far.collnet_wins(64 * 1024));
  EXPECT_NEAR(far.collnet_time(kMiB), 400e-6 + kMiB / kLink, 1e-12);
  EXPECT_NEAR(far.ring_time(kMiB), 180e-6 + 1.5 * kMiB / kLink, 1e-12);
}

TEST(PathModel, AggregatorsThatCannotKeepUpLoseLargeMessagesUnlessTheSplitHelps) {
  // One aggregator at the workers' rate and everything through it: it receives 4 S.
  PathModel all_aggregators = four_ranks(70);
  all_aggregators.capacity_Bps = kLink;
  EXPECT_TRUE(all_aggregators.collnet_wins(4));
  EXPECT_FALSE(all_aggregators.collnet_wins(64 * kMiB));
  EXPECT_NEAR(all_aggregators.collnet_time(64 * kMiB), 70e-6 + 4.0 * 64 * kMiB / kLink, 1e-9);
  // The auto split for the same aggregator gives a third to it, two thirds to the ring: both
  // finish together at 4/3 S / L, ahead of the ring's 1.5 S / L.
  PathModel hybrid = all_aggregators;
  hybrid.ring_fraction = auto_ring_fraction(4, 1000, 1000);
  EXPECT_TRUE(hybrid.collnet_wins(64 * kMiB));
  EXPECT_NEAR(hybrid.collnet_time(64 * kMiB), 180e-6 + 4.0 / 3 * 64 * kMiB / kLink, 1e-6);
  // A share of the ring costs its hops: a small message then goes all to the aggregators
  // when its ring share is under min_ring_bytes.
  hybrid.min_ring_bytes = 64 * 1024;
  EXPECT_NEAR(hybrid.collnet_time(3000), 70e-6 + 4.0 * 3000 / kLink, 1e-12);
}

// NCCL issues a 4 B AllReduce through CollNetChain as a whole staging region: the model
// prices CollNet at that request's size, NCCL's ring at the user's.
TEST(PathModel, SmallAllReducesCostCollNetAWholeRegion) {
  PathModel m = four_ranks(70);
  m.capacity_Bps = 100e6;  // 4 ranks x 32 KiB through 100 MB/s: 1.3 ms, far above the ring
  EXPECT_TRUE(m.collnet_wins(4)) << "as if the request were 4 B";
  m.min_request_bytes = 32 * 1024;
  EXPECT_DOUBLE_EQ(m.collnet_time(4), m.collnet_time(32 * 1024));
  EXPECT_NEAR(m.collnet_time(4), 70e-6 + 4.0 * 32 * 1024 / 100e6, 1e-12);
  EXPECT_FALSE(m.collnet_wins(4));
  EXPECT_DOUBLE_EQ(m.ring_time(4), four_ranks(70).ring_time(4)) << "the ring moves 4 B";
  PathModel whole = m;
  whole.min_request_bytes = 0;
  EXPECT_DOUBLE_EQ(m.collnet_time(kMiB), whole.collnet_time(kMiB)) << "larger: unchanged";
}

TEST(PathModel, EverythingOverTheWorkerRingNeverWins) {
  PathModel ring_only = four_ranks(150);
  ring_only.ring_fraction = 1.0;
  for (size_t bytes : {size_t{4}, size_t{65536}, 256 * kMiB}) {
    EXPECT_FALSE(ring_only.collnet_wins(bytes)) << bytes;
  }
}

TEST(PathModel, CompleteOnlyWithEveryFigure) {
  EXPECT_TRUE(four_ranks(70).complete());
  PathModel m = four_ranks(70);
  m.nranks = 1;
  EXPECT_FALSE(m.complete());
  m = four_ranks(0);
  EXPECT_FALSE(m.complete());
  m = four_ranks(70);
  m.hop_s = 0;
  EXPECT_FALSE(m.complete());
  m = four_ranks(70);
  m.link_Bps = 0;
  EXPECT_FALSE(m.complete());
}

TEST(PathModel, TypicalRoundLeavesOutTheFirstRoundAndAPreemptedOne) {
  // Round 1 waited for the last rank; round 8 was preempted on a busy host. The mean of all
  // nine would put a hop at 2.8 ms, the mean of the last eight at 2.6 ms.
  const std::vector<double> us = {5000, 100, 110, 90, 105, 95, 100, 20000, 102};
  EXPECT_DOUBLE_EQ(typical_round(us), 102);
  // The order does not matter, only which round came first.
  EXPECT_DOUBLE_EQ(typical_round({5000, 20000, 102, 100, 95, 105, 90, 110, 100}), 102);
  // A slow first round is left out even when every other round is alike.
  EXPECT_DOUBLE_EQ(typical_round({900, 80, 80, 80}), 80);
  EXPECT_DOUBLE_EQ(typical_round({7, 40}), 40);
  EXPECT_DOUBLE_EQ(typical_round({7}), 0);
  EXPECT_DOUBLE_EQ(typical_round({}), 0);
}

TEST(PathModelRegistry, ByCommIdAndRanksUntilWithdrawn) {
  const int a = 0, b = 0, c = 0, d = 0;  // owners
  PathModel two = four_ranks(10);
  two.nranks = 2;
  publish_model(7, &a, four_ranks(70));
  publish_model(7, &b, four_ranks(90));
  publish_model(7, &c, two);             // another communicator's comm (a split child)
  publish_model(8, &d, four_ranks(50));  // another communicator
  std::vector<PathModel> got = published_models(7, 4);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_DOUBLE_EQ(got[0].collnet_s, 70e-6);
  EXPECT_DOUBLE_EQ(got[1].collnet_s, 90e-6);
  EXPECT_EQ(published_models(7, 2).size(), 1u);
  withdraw_model(&a);
  got = published_models(7, 4);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].collnet_s, 90e-6);
  for (const void* owner : {&b, &c, &d}) withdraw_model(owner);
  EXPECT_TRUE(published_models(7, 4).empty());
  EXPECT_TRUE(published_models(8, 4).empty());
}

}  // namespace
}  // namespace conflux::collnet
