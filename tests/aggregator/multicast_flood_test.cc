// SPDX-License-Identifier: Apache-2.0
// MulticastFlood (aggregator/control/multicast_flood.h): when what reached the host beyond
// what the daemon asked for says the network floods multicast, and when a multicast job may
// go unicast; and the /proc/net/netstat parser it reads InOctets with.
#include "aggregator/control/multicast_flood.h"

#include <string>

#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

constexpr double kLine = 1000;      // Mbit/s
constexpr uint64_t kMbit = 125000;  // bytes in one Mbit

TEST(MulticastFlood, TwoPeriodsInARowAtFivePercentOfTheLineRate) {
  MulticastFlood f;
  uint64_t octets = 1'000'000;
  EXPECT_FALSE(f.sample(octets, 0, 1.0, kLine));  // the first reading: nothing to compare
  // 900 Mbit arrived, 800 asked for: 100 Mbit/s unasked, over 5 % of 1000.
  octets += 900 * kMbit;
  EXPECT_FALSE(f.sample(octets, 800 * kMbit, 1.0, kLine));
  EXPECT_DOUBLE_EQ(f.unasked_mbps(), 100);
  octets += 900 * kMbit;
  EXPECT_TRUE(f.sample(octets, 800 * kMbit, 1.0, kLine));
  EXPECT_TRUE(f.flooding());
  // Under the threshold once: no longer flooding, and two more periods are needed.
  octets += 840 * kMbit;
  EXPECT_FALSE(f.sample(octets, 800 * kMbit, 1.0, kLine));
  EXPECT_DOUBLE_EQ(f.unasked_mbps(), 40);
  octets += 900 * kMbit;
  EXPECT_FALSE(f.sample(octets, 800 * kMbit, 1.0, kLine));
  octets += 900 * kMbit;
  EXPECT_TRUE(f.sample(octets, 800 * kMbit, 1.0, kLine));
}

TEST(MulticastFlood, RatesAreOverThePeriodAndAskedBytesNeverCountAsUnasked) {
  MulticastFlood f;
  f.sample(0, 0, 2.0, kLine);
  f.sample(200 * kMbit, 0, 2.0, kLine);  // 200 Mbit over 2 s
  EXPECT_DOUBLE_EQ(f.unasked_mbps(), 100);
  f.sample(300 * kMbit, 500 * kMbit, 2.0, kLine);  // asked more than arrived (DPDK): none
  EXPECT_DOUBLE_EQ(f.unasked_mbps(), 0);
  EXPECT_FALSE(f.flooding());
}

TEST(MulticastFlood, AnUnreadableOrResetCounterStartsOver) {
  MulticastFlood f;
  f.sample(0, 0, 1.0, kLine);
  f.sample(100 * kMbit, 0, 1.0, kLine);
  EXPECT_TRUE(f.sample(200 * kMbit, 0, 1.0, kLine));
  EXPECT_FALSE(f.sample(std::nullopt, 0, 1.0, kLine));  // not watched this period
  EXPECT_FALSE(f.flooding());
  EXPECT_FALSE(f.sample(300 * kMbit, 0, 1.0, kLine));  // first reading again
  EXPECT_FALSE(f.sample(1 * kMbit, 0, 1.0, kLine));    // went backwards (new namespace)
  EXPECT_FALSE(f.sample(101 * kMbit, 0, 1.0, kLine));
  EXPECT_TRUE(f.sample(201 * kMbit, 0, 1.0, kLine));
}

TEST(MulticastFlood, WithoutALineRateAnyMegabitCounts) {
  MulticastFlood f;
  f.sample(0, 0, 1.0, 0);
  f.sample(2 * kMbit, 0, 1.0, 0);
  EXPECT_TRUE(f.sample(4 * kMbit, 0, 1.0, 0));
  MulticastFlood quiet;
  quiet.sample(0, 0, 1.0, 0);
  quiet.sample(kMbit / 2, 0, 1.0, 0);
  EXPECT_FALSE(quiet.sample(kMbit, 0, 1.0, 0));
}

TEST(MulticastFlood, UnicastFitsWhenTheFanOutStaysUnder95PercentOfTheLine) {
  // A striped aggregator at 1x: 4 ranks, 140 Mbit/s of results (one copy), nothing else.
  EXPECT_TRUE(MulticastFlood::unicast_fits(140, 4, 140, kLine));   // 560
  EXPECT_TRUE(MulticastFlood::unicast_fits(230, 4, 230, kLine));   // 920
  EXPECT_FALSE(MulticastFlood::unicast_fits(250, 4, 250, kLine));  // 1000
  // Another job's egress counts too: 160 Mbit/s of it leaves room, 560 does not.
  EXPECT_TRUE(MulticastFlood::unicast_fits(140 + 160, 4, 140, kLine));   // 720
  EXPECT_FALSE(MulticastFlood::unicast_fits(140 + 560, 4, 140, kLine));  // 1120
  EXPECT_FALSE(MulticastFlood::unicast_fits(10, 4, 10, 0));              // line rate unknown
}

TEST(MulticastFlood, ParsesInOctetsFromProcNetNetstat) {
  const std::string netstat =
      "TcpExt: SyncookiesSent SyncookiesRecv\n"
      "TcpExt: 0 0\n"
      "IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts "
      "InOctets OutOctets InMcastOctets\n"
      "IpExt: 0 0 12 7 0 0 123456789012 98765 4321\n"
      "MPTcpExt: MPCapableSYNRX\n"
      "MPTcpExt: 0\n";
  EXPECT_EQ(ip_in_octets(netstat), 123456789012u);
  EXPECT_EQ(ip_in_octets("IpExt: InOctets OutOctets\nIpExt: 5 6"), 5u);  // no final newline
  EXPECT_EQ(ip_in_octets(""), std::nullopt);
  EXPECT_EQ(ip_in_octets("IpExt: InOctets\n"), std::nullopt);                      // no values
  EXPECT_EQ(ip_in_octets("IpExt: InOctets OutOctets\nIpExt: 5\n"), std::nullopt);  // short
  EXPECT_EQ(ip_in_octets("IpExt: InOctets\nIpExt: -5\n"), std::nullopt);
  EXPECT_EQ(ip_in_octets("IpExt: InOctets\nIpExt: 5x\n"), std::nullopt);
  EXPECT_EQ(ip_in_octets("IpExt: OutOctets\nIpExt: 5\n"), std::nullopt);
  // This machine's own file has it (Linux since 2.6.24).
  EXPECT_TRUE(read_ip_in_octets().has_value());
}

}  // namespace
}  // namespace conflux::agg
