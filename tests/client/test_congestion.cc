// SPDX-License-Identifier: Apache-2.0
// The per-aggregator congestion window (nccl_plugin/client/src/congestion.h): slow start,
// additive increase, multiplicative decrease at most once per window. Pure logic driven
// by sequence numbers and simulated round trips; nothing sleeps, nothing touches a socket.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "congestion.h"

namespace conflux::client {
namespace {

CongestionConfig params(bool enabled = true, uint32_t initial = 16, uint32_t min = 2,
                        double decrease = 0.5) {
  CongestionConfig p;
  p.enabled = enabled;
  p.initial_window = initial;
  p.min_window = min;
  p.decrease = decrease;
  return p;
}

// Deterministic uniform [0, 1) draws (64-bit LCG, high bits).
struct Lcg {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

TEST(CongestionWindow, DisabledIsAlwaysTheGrantedWindow) {
  CongestionWindow c(params(false), 64);
  EXPECT_EQ(c.window(), 64u);
  EXPECT_FALSE(c.on_loss(0, 10));
  EXPECT_EQ(c.window(), 64u);
  EXPECT_TRUE(c.allows(63));
  EXPECT_FALSE(c.allows(64));
  EXPECT_EQ(c.decreases(), 0u);
}

TEST(CongestionWindow, InitialAndMinimumAreCappedByTheGrant) {
  EXPECT_EQ(CongestionWindow(params(true, 16), 4).window(), 4u);
  EXPECT_EQ(CongestionWindow(params(true, 16), 0).window(), 1u);
  CongestionWindow c(params(true, 1, 8), 4);  // min 8 > W 4: floor is W
  EXPECT_EQ(c.window(), 4u);
  EXPECT_TRUE(c.on_loss(0, 4));
  EXPECT_EQ(c.window(), 4u);
}

TEST(CongestionWindow, SlowStartDoublesPerWindowUpToTheGrant) {
  CongestionWindow c(params(true, 16), 64);
  EXPECT_EQ(c.window(), 16u);
  for (int i = 0; i < 16; ++i) c.on_delivered();  // one window of results
  EXPECT_EQ(c.window(), 32u);
  for (int i = 0; i < 32; ++i) c.on_delivered();
  EXPECT_EQ(c.window(), 64u);
  for (int i = 0; i < 100; ++i) c.on_delivered();
  EXPECT_EQ(c.window(), 64u);  // never above W
}

TEST(CongestionWindow, HalvesOncePerWindowOfPackets) {
  CongestionWindow c(params(true, 64), 64);
  ASSERT_EQ(c.window(), 64u);
  EXPECT_TRUE(c.on_loss(/*seq=*/10, /*next_seq=*/74));
  EXPECT_EQ(c.window(), 32u);
  // More losses among the packets that were out at the decrease: same episode.
  EXPECT_FALSE(c.on_loss(11, 74));
  EXPECT_FALSE(c.on_loss(73, 80));
  EXPECT_EQ(c.window(), 32u);
  // A packet sent after the decrease is lost: a new episode.
  EXPECT_TRUE(c.on_loss(74, 110));
  EXPECT_EQ(c.window(), 16u);
  EXPECT_EQ(c.decreases(), 2u);
}

TEST(CongestionWindow, AdditiveIncreaseAfterADecrease) {
  CongestionWindow c(params(true, 64), 64);
  ASSERT_TRUE(c.on_loss(0, 64));
  ASSERT_EQ(c.window(), 32u);
  EXPECT_DOUBLE_EQ(c.ssthresh(), 32.0);
  for (int i = 0; i < 32; ++i) c.on_delivered();  // one round trip of results
  EXPECT_EQ(c.window(), 32u);                     // 32 + 32 * (1/~32) < 33 exactly
  c.on_delivered();
  EXPECT_EQ(c.window(), 33u);
  EXPECT_NEAR(c.cwnd(), 33.0, 0.05);
}

TEST(CongestionWindow, NeverBelowTheMinimum) {
  CongestionWindow c(params(true, 64, 2), 64);
  for (uint64_t seq = 0; seq < 20; ++seq) {
    c.on_loss(seq * 100, seq * 100 + 1);
  }
  EXPECT_EQ(c.window(), 2u);
  EXPECT_TRUE(c.allows(1));
  EXPECT_FALSE(c.allows(2));
}

// Round-trip simulation: every round the sender has window() packets out; each is lost
// independently with probability p; losses are reported in sequence order.
struct RoundStats {
  double mean_window = 0;
  uint32_t min_window_after_start = UINT32_MAX;
  uint64_t decreases = 0;
};

RoundStats simulate_random_loss(CongestionWindow& c, double p, int rounds, uint64_t seed) {
  Lcg rng{seed};
  uint64_t next_seq = 0;
  double sum = 0;
  RoundStats st;
  for (int r = 0; r < rounds; ++r) {
    const uint32_t w = c.window();
    const uint64_t first = next_seq;
    next_seq += w;
    for (uint32_t i = 0; i < w; ++i) {
      if (rng.next() < p) {
        c.on_loss(first + i, next_seq);
      }
      c.on_delivered();  // a lost packet is resent and answered within the round
    }
    sum += w;
    if (r >= 10) st.min_window_after_start = std::min(st.min_window_after_start, w);
  }
  st.mean_window = sum / rounds;
  st.decreases = c.decreases();
  return st;
}

TEST(CongestionWindow, LosslessPathReachesTheGrantInAFewRoundTrips) {
  CongestionWindow c(params(true, 16), 256);
  int rounds = 0;
  uint64_t next_seq = 0;
  while (c.window() < 256 && rounds < 100) {
    const uint32_t w = c.window();
    next_seq += w;
    for (uint32_t i = 0; i < w; ++i) c.on_delivered();
    ++rounds;
  }
  EXPECT_EQ(c.window(), 256u);
  EXPECT_EQ(rounds, 4);  // 16 -> 32 -> 64 -> 128 -> 256
  EXPECT_EQ(c.decreases(), 0u);
}

TEST(CongestionWindow, OnePercentRandomLossDoesNotCollapseTheWindow) {
  CongestionWindow c(params(true, 16), 64);
  const RoundStats st = simulate_random_loss(c, 0.01, 2000, 42);
  // AIMD(1, 0.5) at p = 1%: about sqrt(1.5 / p) = 12 packets on average when unbounded;
  // and at most one decrease per round trip.
  EXPECT_GE(st.mean_window, 10.0);
  EXPECT_GE(st.min_window_after_start, 3u);  // two decreases in a row, rarely
  EXPECT_LE(st.decreases, 2000u);
  EXPECT_GT(st.decreases, 50u);  // loss is really seen
  // A gentler decrease keeps more of the window under the same loss.
  CongestionWindow g(params(true, 16, 2, 0.7), 64);
  EXPECT_GT(simulate_random_loss(g, 0.01, 2000, 42).mean_window, st.mean_window);
}

TEST(CongestionWindow, LossBurstsOfOneRoundTripCostOneDecrease) {
  CongestionWindow c(params(true, 64), 64);
  // The whole window of 64 packets is lost at once (a queue overflow).
  for (uint64_t seq = 0; seq < 64; ++seq) c.on_loss(seq, 64);
  EXPECT_EQ(c.decreases(), 1u);
  EXPECT_EQ(c.window(), 32u);
}

// Incast: four senders share a bottleneck that carries `capacity` packets per round trip
// plus a drop-tail queue of `buffer` packets; what is offered beyond that is dropped (the
// packets sent last). With congestion control the total settles around the bottleneck:
// the link stays busy and loss is a small fraction; with the fixed window (disabled) most
// of the traffic beyond the bottleneck is lost every round.
struct IncastResult {
  double loss_fraction = 0;
  double busy_fraction = 0;  // rounds in which the offered load filled the link
};

IncastResult simulate_incast(bool enabled, int rounds) {
  constexpr uint32_t kSenders = 4, kGrant = 64, kCapacity = 40, kBuffer = 40;
  std::vector<CongestionWindow> cw(kSenders, CongestionWindow(params(enabled, 16), kGrant));
  std::vector<uint64_t> next_seq(kSenders, 0);
  uint64_t sent = 0, lost = 0;
  int busy = 0;
  for (int r = 0; r < rounds; ++r) {
    uint32_t offered = 0;
    std::vector<uint32_t> w(kSenders);
    for (uint32_t i = 0; i < kSenders; ++i) {
      w[i] = cw[i].window();
      offered += w[i];
    }
    busy += offered >= kCapacity ? 1 : 0;
    // Interleaved arrival; the queue overflows for the last (offered - cap - buffer).
    uint32_t admitted = 0;
    for (uint32_t k = 0; k < kGrant; ++k) {
      for (uint32_t i = 0; i < kSenders; ++i) {
        if (k >= w[i]) continue;
        const uint64_t seq = next_seq[i] + k;
        ++sent;
        if (admitted < kCapacity + kBuffer) {
          ++admitted;
          cw[i].on_delivered();
        } else {
          ++lost;
          cw[i].on_loss(seq, next_seq[i] + w[i]);
        }
      }
    }
    for (uint32_t i = 0; i < kSenders; ++i) next_seq[i] += w[i];
  }
  return {static_cast<double>(lost) / static_cast<double>(sent),
          static_cast<double>(busy) / rounds};
}

TEST(CongestionWindow, IncastSettlesAtTheBottleneckWithLittleLoss) {
  const IncastResult on = simulate_incast(true, 2000);
  const IncastResult off = simulate_incast(false, 2000);
  EXPECT_LT(on.loss_fraction, 0.02);
  EXPECT_GT(on.busy_fraction, 0.95);  // congestion control does not starve the link
  EXPECT_GT(off.loss_fraction, 0.6);  // 256 offered, 80 carried
  EXPECT_EQ(off.busy_fraction, 1.0);
}

TEST(CongestionWindow, ConfigValidationRejectsOutOfRangeKnobs) {
  ClientConfig c;
  c.aggregators.push_back({"127.0.0.1", 7470});
  c.n_workers = 1;
  ASSERT_TRUE(validate(c).ok()) << validate(c).message();
  auto bad = [&](void (*f)(ClientConfig&)) {
    ClientConfig d = c;
    f(d);
    return !validate(d).ok();
  };
  EXPECT_TRUE(bad([](ClientConfig& d) { d.congestion.decrease = 1.0; }));
  EXPECT_TRUE(bad([](ClientConfig& d) { d.congestion.decrease = 0.0; }));
  EXPECT_TRUE(bad([](ClientConfig& d) { d.congestion.initial_window = 0; }));
  EXPECT_TRUE(bad([](ClientConfig& d) { d.congestion.min_window = 0; }));
  EXPECT_TRUE(bad([](ClientConfig& d) { d.rto_min = std::chrono::microseconds(0); }));
  EXPECT_FALSE(bad([](ClientConfig& d) { d.congestion.enabled = false; }));
  // rto_min above rto_max is allowed: the floor is capped by rto_max.
  EXPECT_FALSE(bad([](ClientConfig& d) { d.rto_min = std::chrono::seconds(1); }));
}

}  // namespace
}  // namespace conflux::client
