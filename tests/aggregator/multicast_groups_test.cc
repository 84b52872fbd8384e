// SPDX-License-Identifier: Apache-2.0
// The multicast group range and allocator of confluxd (aggregator/control/multicast_groups.h).
#include "aggregator/control/multicast_groups.h"

#include <gtest/gtest.h>

#include <set>

namespace conflux::agg {
namespace {

TEST(MulticastGroups, RangeParsesToItsGroups) {
  MulticastRange r;
  ASSERT_TRUE(parse_multicast_range("239.77.0.0/16", &r).ok());
  EXPECT_EQ(r.base, 0xEF4D0000u);
  EXPECT_EQ(r.size, 65536u);
  ASSERT_TRUE(parse_multicast_range("239.77.1.9/30", &r).ok());  // host bits are cleared
  EXPECT_EQ(r.base, 0xEF4D0108u);
  EXPECT_EQ(r.size, 4u);
  ASSERT_TRUE(parse_multicast_range("239.0.0.0/8", &r).ok());
  EXPECT_EQ(r.size, 65536u);  // capped: far more groups than a daemon has jobs
  EXPECT_FALSE(parse_multicast_range("192.168.0.0/16", &r).ok());
  EXPECT_FALSE(parse_multicast_range("224.0.0.0/20", &r).ok());  // link-local control groups
  EXPECT_FALSE(parse_multicast_range("239.77.0.0/x", &r).ok());
  EXPECT_FALSE(parse_multicast_range("239.77.0/16", &r).ok());
}

TEST(MulticastGroups, EveryLiveJobHasItsOwnGroupAndReleasedOnesComeBackLast) {
  MulticastGroups g({0xEF4D0000u, 3});
  const auto a = g.acquire(), b = g.acquire(), c = g.acquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(std::set<uint32_t>({*a, *b, *c}).size(), 3u);
  EXPECT_FALSE(g.acquire());  // all held: the next job gets unicast
  EXPECT_EQ(g.in_use(), 3u);
  g.release(*b);
  EXPECT_EQ(g.in_use(), 2u);
  EXPECT_EQ(g.acquire(), b);  // the only free one
  g.release(*a);
  g.release(*c);
  g.release(*c);           // twice: ignored
  g.release(0x0A000001u);  // not from the range: ignored
  EXPECT_EQ(g.in_use(), 1u);
  // Next-fit: after b the search goes on at c, so c is reused before a.
  EXPECT_EQ(g.acquire(), c);
  EXPECT_EQ(g.acquire(), a);
}

}  // namespace
}  // namespace conflux::agg
