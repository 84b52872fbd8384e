// SPDX-License-Identifier: Apache-2.0
// The ranks' agreement on a reduction tree's counts (tree_layout.h, SPEC.md §7): how many
// ranks sit under each rank's leaf and under each aggregator above it.
#include <gtest/gtest.h>

#include "collnet/tree_layout.h"

namespace conflux::collnet {
namespace {

using Counts = std::vector<std::vector<uint32_t>>;

TEST(TreeLayout, TheSameListEverywhereIsNoTree) {
  const AggregatorChains a = {{"10.0.0.1:7470"}, {"10.0.0.2:7470"}};
  const TreeCounts t = count_tree({a, a, a}, 1);
  EXPECT_TRUE(t.served.empty());
  EXPECT_TRUE(t.served_up.empty());
}

TEST(TreeLayout, LeavesAreCountedPerEntry) {
  // Ranks 0-1 under leaf A, ranks 2-4 under leaf B; every rank stripes over the root R too.
  const AggregatorChains r0 = {{"A:1"}, {"R:1"}}, r2 = {{"B:1"}, {"R:1"}};
  const TreeCounts t0 = count_tree({r0, r0, r2, r2, r2}, 0);
  EXPECT_EQ(t0.served, (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(t0.served_up, (Counts{{}, {}}));
  EXPECT_EQ(count_tree({r0, r0, r2, r2, r2}, 3).served, (std::vector<uint32_t>{3, 5}));
}

// Depth 3: leaves A and B under middle aggregator M, leaf C directly under the root. Each
// rank learns its leaf's count and its middle aggregator's; under C there is no level above.
TEST(TreeLayout, ChainsAreCountedLevelByLevel) {
  const AggregatorChains a = {{"A:1", "M:1"}}, b = {{"B:1", "M:1"}}, c = {{"C:1"}};
  const std::vector<AggregatorChains> all = {a, a, b, b, b, c};
  const TreeCounts t0 = count_tree(all, 0);
  EXPECT_EQ(t0.served, (std::vector<uint32_t>{2}));
  EXPECT_EQ(t0.served_up, (Counts{{5}}));
  EXPECT_EQ(count_tree(all, 3).served, (std::vector<uint32_t>{3}));
  EXPECT_EQ(count_tree(all, 3).served_up, (Counts{{5}}));
  const TreeCounts t5 = count_tree(all, 5);
  EXPECT_EQ(t5.served, (std::vector<uint32_t>{1}));
  EXPECT_EQ(t5.served_up, (Counts{{}}));
}

// A chain names a tree even when every rank has the same leaf (one leaf under a middle
// aggregator): the counts say "everyone" at each level, which the Join leaves out.
TEST(TreeLayout, AChainEverywhereStillCounts) {
  const AggregatorChains a = {{"A:1", "M:1", "N:1"}};
  const TreeCounts t = count_tree({a, a}, 1);
  EXPECT_EQ(t.served, (std::vector<uint32_t>{2}));
  EXPECT_EQ(t.served_up, (Counts{{2, 2}}));
}

}  // namespace
}  // namespace conflux::collnet
