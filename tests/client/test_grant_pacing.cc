// SPDX-License-Identifier: Apache-2.0
// GrantPacing (nccl_plugin/client/src/grant_pacing.h): what an aggregator that paces a job to
// its grant implies for the ranks, the first retransmission timer behind a window of results
// and the window worth keeping outstanding, and CongestionWindow::set_ceiling, which holds the
// window to it. Pure arithmetic: no clock, no socket.
#include <gtest/gtest.h>

#include <cstdint>

#include "congestion.h"
#include "grant_pacing.h"

namespace conflux::client {
namespace {

constexpr uint32_t kPayload = 8192;
constexpr double kRtoMinUs = 5000, kRtoMaxUs = 100'000;

ResultFanout unicast(uint32_t ranks, uint32_t trailer = 0) {
  ResultFanout f;
  f.ranks = ranks;
  f.trailer_bytes = trailer;
  return f;
}

TEST(GrantPacing, ResultBytesCountEveryDatagramTheAggregatorSends) {
  EXPECT_EQ(GrantPacing(unicast(2)).result_bytes(kPayload, false), 2u * (48 + kPayload));
  // OWNED: the owner gets the payload, every other rank a header-only ACK.
  EXPECT_EQ(GrantPacing(unicast(4)).result_bytes(kPayload, true), (48 + kPayload) + 3u * 48);
  EXPECT_EQ(GrantPacing(unicast(2, 28)).result_bytes(kPayload, false), 2u * (48 + kPayload + 28));
  ResultFanout group = unicast(8);
  group.multicast = true;
  EXPECT_EQ(GrantPacing(group).result_bytes(kPayload, false), 48u + kPayload);
}

TEST(GrantPacing, NoGrantNoBound) {
  const GrantPacing p(unicast(2));
  EXPECT_EQ(p.queue_us(64, kPayload, false), 0);
  EXPECT_EQ(p.window_limit(kPayload, kRtoMinUs, 0), UINT32_MAX);
}

TEST(GrantPacing, TheGrantSetsTheDrainTimeOfTheResultsAhead) {
  // Cap 100 Mbit/s = 12.5 bytes/us, 2 ranks: one packet's results are 16,480 bytes, 1,318.4 us.
  GrantPacing p(unicast(2), 100);
  EXPECT_DOUBLE_EQ(p.queue_us(1, kPayload, false), 1318.4);
  EXPECT_DOUBLE_EQ(p.queue_us(16, kPayload, false), 16 * 1318.4);
  p.set_grant(400);  // a Capacity update: four times the rate, a quarter of the wait
  EXPECT_DOUBLE_EQ(p.queue_us(16, kPayload, false), 4 * 1318.4);
  p.set_grant(0);
  EXPECT_EQ(p.queue_us(16, kPayload, false), 0);
}

TEST(GrantPacing, TheFirstTimerWaitsForTheGrantWhenTheMeasuredRateIsAPacerBurst) {
  // The pacer's burst made the measured rate twice the grant: behind 16 packets the measured
  // wait is half the real one. The timer takes the grant's: 1.25 x 21.1 ms + rto_min.
  const GrantPacing p(unicast(2), 100);
  const double grant_us = p.queue_us(16, kPayload, false);
  const double measured_us = grant_us / 2;
  const double rto_us = 9000;  // srtt + max(4 rttvar, rto_min) of a shorter queue
  EXPECT_DOUBLE_EQ(first_timeout_us(rto_us, measured_us, grant_us, kRtoMinUs, kRtoMaxUs),
                   1.25 * grant_us + kRtoMinUs);
  // Without a grant (an old daemon, no Capacity) the measured rate decides, as before.
  EXPECT_DOUBLE_EQ(first_timeout_us(rto_us, measured_us, 0, kRtoMinUs, kRtoMaxUs),
                   1.25 * measured_us + kRtoMinUs);
  // A measured rate below the grant (the job does not use all of it) waits longer still.
  EXPECT_DOUBLE_EQ(first_timeout_us(rto_us, 2 * grant_us, grant_us, kRtoMinUs, kRtoMaxUs),
                   2.5 * grant_us + kRtoMinUs);
  // The RTO is a floor, and the queue's part is capped by rto_max.
  EXPECT_DOUBLE_EQ(first_timeout_us(50'000, 1000, 2000, kRtoMinUs, kRtoMaxUs), 50'000);
  EXPECT_DOUBLE_EQ(first_timeout_us(rto_us, 0, p.queue_us(uint64_t{64} * 4, kPayload, false),
                                    kRtoMinUs, kRtoMaxUs),
                   kRtoMaxUs);
}

TEST(GrantPacing, TheWindowIsWhatTheGrantDrainsInTwiceTheRoundTripFloor) {
  const GrantPacing p(unicast(2), 100);
  // 2 x rto_min = 10 ms at 1,318.4 us a packet: 7.6, so 8 packets (W = 64 queued 84 ms).
  EXPECT_EQ(p.window_limit(kPayload, kRtoMinUs, 0), 8u);
  EXPECT_EQ(p.window_limit(kPayload, kRtoMinUs, 900), 8u);  // a short round trip: the floor
  // A long round trip needs a window that covers it: 2 x 20 ms = 30.3, so 31 packets.
  EXPECT_EQ(p.window_limit(kPayload, kRtoMinUs, 20'000), 31u);
  // Four times the grant, four times the window (30.3: 31).
  EXPECT_EQ(GrantPacing(unicast(2), 400).window_limit(kPayload, kRtoMinUs, 0), 31u);
  // A tiny grant still lets one packet out; a fast one bounds nothing a window of 64 reaches.
  EXPECT_EQ(GrantPacing(unicast(2), 1).window_limit(kPayload, kRtoMinUs, 0), 1u);
  EXPECT_GT(GrantPacing(unicast(2), 100'000).window_limit(kPayload, kRtoMinUs, 0), 64u);
}

CongestionConfig cc(bool enabled = true) {
  CongestionConfig p;
  p.enabled = enabled;
  p.initial_window = 16;
  p.min_window = 2;
  p.decrease = 0.5;
  return p;
}

void deliver(CongestionWindow& c, int results) {
  for (int i = 0; i < results; ++i) {
    c.on_delivered();
  }
}

TEST(GrantPacing, TheCeilingHoldsTheCongestionWindowAndLossStillHalvesIt) {
  CongestionWindow c(cc(), 64);
  c.set_ceiling(GrantPacing(unicast(2), 100).window_limit(kPayload, kRtoMinUs, 0));
  EXPECT_EQ(c.ceiling(), 8u);
  EXPECT_EQ(c.window(), 8u);  // the initial 16 shrinks to it at once
  deliver(c, 1000);
  EXPECT_EQ(c.window(), 8u);  // slow start and additive increase stop at the ceiling
  EXPECT_FALSE(c.allows(8));
  // A real loss still halves it, below the ceiling, and it grows back to the ceiling only.
  EXPECT_TRUE(c.on_loss(100, 110));
  EXPECT_EQ(c.window(), 4u);
  deliver(c, 1000);
  EXPECT_EQ(c.window(), 8u);
}

TEST(GrantPacing, AHigherCeilingIsGrownIntoAndNoneLiftsTheBound) {
  CongestionWindow c(cc(), 64);
  c.set_ceiling(8);
  deliver(c, 20);
  // The grant rose (another job left): slow start from 8, one packet per result.
  c.set_ceiling(31);
  EXPECT_EQ(c.window(), 8u);
  deliver(c, 10);
  EXPECT_EQ(c.window(), 18u);
  deliver(c, 100);
  EXPECT_EQ(c.window(), 31u);
  c.set_ceiling(UINT32_MAX);  // no grant: the granted W bounds it again
  EXPECT_EQ(c.ceiling(), 64u);
  deliver(c, 1000);
  EXPECT_EQ(c.window(), 64u);
}

TEST(GrantPacing, WithoutCongestionControlTheWindowStaysTheGrantedWindow) {
  CongestionWindow c(cc(false), 64);  // CONFLUX_CONGESTION_CONTROL=0: always W
  c.set_ceiling(8);
  EXPECT_EQ(c.window(), 64u);
  EXPECT_FALSE(c.on_loss(0, 10));
  EXPECT_EQ(c.window(), 64u);
}

}  // namespace
}  // namespace conflux::client
