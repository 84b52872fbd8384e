// SPDX-License-Identifier: Apache-2.0
// The line rate confluxd advertises (aggregator/util/link_speed.h).
#include "aggregator/util/link_speed.h"

#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

TEST(LinkSpeed, ConfiguredRateWins) { EXPECT_EQ(advertised_line_mbps(25000, "127.0.0.1"), 25000); }

TEST(LinkSpeed, UnknownWhereNoInterfaceReportsASpeed) {
  EXPECT_EQ(interface_speed_mbps("0.0.0.0"), 0);      // every interface: no one rate
  EXPECT_EQ(interface_speed_mbps("127.0.0.1"), 0);    // loopback has no speed
  EXPECT_EQ(interface_speed_mbps("192.0.2.123"), 0);  // TEST-NET-1: held by no interface
  EXPECT_EQ(interface_speed_mbps("not-an-address"), 0);
  EXPECT_EQ(advertised_line_mbps(0, "127.0.0.1"), 0);
}

}  // namespace
}  // namespace conflux::agg
