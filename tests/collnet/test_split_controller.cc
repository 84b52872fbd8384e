// SPDX-License-Identifier: Apache-2.0
// The measured split (collnet/split_controller.h) on modelled rate traces: a fluid model of
// one period of traffic (each rank's link shared by its aggregator and ring shares, the
// aggregators' capacity shared by all ranks) produces the samples the ranks would measure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collnet/split.h"
#include "collnet/split_controller.h"

namespace conflux::collnet {
namespace {

constexpr double kMB = 1e6;
constexpr double kGbit = 1e9 / 8;  // bytes/s

struct Fabric {
  int n = 4;
  double link = 1 * kGbit;      // per worker, bytes/s
  double capacity = 1 * kGbit;  // aggregators together, bytes/s of input
  double bytes = 64 * kMB;      // per rank per period
};

// Finish times of both shares of one period with aggregator share `share`. The aggregator
// flow runs at min(R/n, its fair half of the link while the ring runs), the ring takes the
// rest of the link; alone, each takes what it can.
PathSample simulate(const Fabric& f, double share) {
  const double c = 2.0 * (f.n - 1) / f.n;
  double agg_left = f.bytes * share;             // link bytes of the aggregator share
  double ring_left = c * f.bytes * (1 - share);  // link bytes of the ring share
  double t = 0, ta = 0, tr = 0, with_ring = 0;
  const double cap = f.capacity / f.n;
  while (agg_left > 0 || ring_left > 0) {
    double ra = 0, rr = 0;
    if (agg_left > 0 && ring_left > 0) {
      ra = std::min(cap, f.link / 2);
      rr = f.link - ra;
    } else if (agg_left > 0) {
      ra = std::min(cap, f.link);
    } else {
      rr = f.link;
    }
    const double dt = std::min(ra > 0 ? agg_left / ra : 1e30, rr > 0 ? ring_left / rr : 1e30);
    if (rr > 0) with_ring += std::min(agg_left, ra * dt);
    agg_left = ra > 0 ? std::max(0.0, agg_left - ra * dt) : agg_left;
    ring_left = rr > 0 ? std::max(0.0, ring_left - rr * dt) : ring_left;
    t += dt;
    if (agg_left <= 1e-9 && ta == 0 && share > 0) ta = t;
    if (ring_left <= 1e-9 && tr == 0 && share < 1) tr = t;
    if (agg_left <= 1e-9) agg_left = 0;
    if (ring_left <= 1e-9) ring_left = 0;
  }
  PathSample s;
  s.agg_bytes = f.bytes * share;
  s.agg_bytes_with_ring = with_ring;
  s.agg_busy_s = ta;
  s.agg_window_full_s = ta;  // all of it is there from the start: always backlogged
  s.ring_bytes = f.bytes * (1 - share);
  s.ring_busy_s = tr;
  s.aggregators = 1;
  return s;
}

double period_time(const Fabric& f, double share) {
  const PathSample s = simulate(f, share);
  return std::max(s.agg_busy_s, s.ring_busy_s);
}

// The best share on a fine grid, and its time.
double best_time(const Fabric& f) {
  double best = 1e30;
  for (int i = 0; i <= 1000; ++i) best = std::min(best, period_time(f, i / 1000.0));
  return best;
}

// Every rank's sample of a period: the model's, with multiplicative noise per rank.
std::vector<PathSample> samples(const Fabric& f, double share, std::mt19937_64* rng, double noise) {
  std::uniform_real_distribution<double> u(1 - noise, 1 + noise);
  std::vector<PathSample> all(static_cast<size_t>(f.n), simulate(f, share));
  for (PathSample& s : all) {
    s.agg_busy_s *= u(*rng);
    s.ring_busy_s *= u(*rng);
  }
  return all;
}

SplitController prior(const Fabric& f, double link_prior, double capacity_prior) {
  return SplitController(f.n, link_prior, capacity_prior, 1);
}

// Runs `periods` periods; returns the shares taken.
std::vector<double> run(SplitController& ctl, const Fabric& f, int periods, double noise = 0,
                        uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<double> shares;
  for (int p = 0; p < periods; ++p) {
    const double share = 1 - ctl.ring_fraction();
    ctl.update(samples(f, share, &rng, noise));
    shares.push_back(1 - ctl.ring_fraction());
  }
  return shares;
}

TEST(SplitController, StartsFromTheAdvertisedCapacity) {
  const Fabric f;
  // One aggregator at the workers' rate, advertised: the model's third, before any traffic.
  SplitController ctl = prior(f, f.link, f.capacity);
  EXPECT_NEAR(ctl.ring_fraction(), 2.0 / 3.0, 1.0 / 1024);
  // Unknown capacity: taken to keep up with everyone, all aggregators but the ring's probe.
  EXPECT_EQ(prior(f, f.link, 0).ring_fraction(), 1.0 / 64);
}

TEST(SplitController, TheConnectProbeMovesTheStartOnlyWellBelowTheAdvertisedCapacity) {
  Fabric f;  // the aggregators really take 1 Gbit/s: the model's third of each request
  const double advertised = 4 * kGbit;
  const double start = prior(f, f.link, advertised).ring_fraction();
  ASSERT_EQ(start, 1.0 / 64) << "4 Gbit/s advertised keeps up with all four workers";
  // The probe saw a quarter of the advertised rate: the start moves to the model's split for
  // what was measured, the one a controller with the true capacity as its prior starts from.
  SplitController slow = prior(f, f.link, advertised);
  EXPECT_TRUE(slow.take_connect_probe(f.capacity));
  EXPECT_NEAR(slow.ring_fraction(), 2.0 / 3.0, 1.0 / 1024);
  EXPECT_EQ(slow.ring_fraction(), prior(f, f.link, f.capacity).ring_fraction());
  EXPECT_EQ(slow.capacity_bps(), f.capacity);
  // At or above half of it (a short probe, cores shared with other ranks), or not measured:
  // the advertised figure stands, and so does the start.
  for (const double seen : {0.0, 0.5 * advertised, 0.9 * advertised, 2 * advertised}) {
    SplitController ctl = prior(f, f.link, advertised);
    EXPECT_FALSE(ctl.take_connect_probe(seen)) << seen;
    EXPECT_EQ(ctl.ring_fraction(), start) << seen;
    EXPECT_EQ(ctl.capacity_bps(), advertised) << seen;
  }
  // Only before the first period: later, the periods' own measurements rule.
  SplitController late = prior(f, f.link, advertised);
  run(late, f, 3);
  const double after = late.ring_fraction();
  EXPECT_FALSE(late.take_connect_probe(0.01 * advertised));
  EXPECT_EQ(late.ring_fraction(), after);
  // From the probe's start the periods keep the split where both paths finish together.
  const auto shares = run(slow, f, 8);
  EXPECT_LE(period_time(f, shares.back()), best_time(f) * 1.08);
}

TEST(SplitController, AConnectProbeThatUndersoldTheAggregatorsIsDroppedOnceTheyKeepUp) {
  Fabric f;
  f.capacity = 4 * kGbit;  // as advertised; the probe (slow start, a fluke) saw 1 Gbit/s
  SplitController ctl = prior(f, f.link, f.capacity);
  ASSERT_TRUE(ctl.take_connect_probe(1 * kGbit));
  ASSERT_GT(ctl.ring_fraction(), 0.5);
  std::vector<std::string> why;
  for (int p = 0; p < 8; ++p) {
    std::vector<PathSample> all(static_cast<size_t>(f.n), simulate(f, 1 - ctl.ring_fraction()));
    for (PathSample& s : all) s.agg_window_full_s = 0;  // the aggregators take all they get
    const SplitDecision d = ctl.update(all);
    if (d.changed) why.push_back(d.reason);
  }
  EXPECT_GE(1 - ctl.ring_fraction(), 0.95);
  ASSERT_FALSE(why.empty());
  EXPECT_NE(why.back().find("keep up again"), std::string::npos) << why.back();
}

TEST(SplitController, ConvergesFromAnyPriorToWhereBothFinishTogether) {
  for (const double cap_gbit : {0.25, 1.0, 2.0, 4.0, 8.0}) {
    Fabric f;
    f.capacity = cap_gbit * kGbit;
    const double best = best_time(f);
    // Link priors wrong by 10x either way; capacity priors right or 10x too high (advertised
    // rates are upper bounds: a line rate or a cap).
    for (const double link_err : {0.1, 1.0, 10.0}) {
      for (const double cap_err : {1.0, 10.0}) {
        SplitController ctl = prior(f, f.link * link_err, f.capacity * cap_err);
        const auto shares = run(ctl, f, 12);
        const double share = shares.back();
        EXPECT_LE(period_time(f, share), best * 1.08)
            << "R " << cap_gbit << " Gbit/s, priors x" << link_err << " / x" << cap_err
            << ": share " << share;
        // Converged: the last few periods did not move.
        EXPECT_EQ(shares[shares.size() - 1], shares[shares.size() - 4]) << cap_gbit;
      }
    }
  }
}

TEST(SplitController, AShareTheCallerPacesIsNotTakenForTheAggregatorsLimit) {
  // NCCL posts its chunks as the GPU side produces them: the aggregator share may run slower
  // than link and aggregators allow with nothing waiting for the window. Only a backlogged
  // share that slow says the aggregators are slow. The same period, once with its
  // contributions never waiting for the window and once always waiting:
  Fabric f;
  f.capacity = 8 * kGbit;
  const auto decide = [&](double full_part, double* start) {
    SplitController ctl = prior(f, f.link, f.capacity);
    *start = ctl.ring_fraction();
    PathSample s = simulate(f, 1 - *start);
    s.agg_busy_s *= 4;  // the caller posted the period's bytes over 4x the time needed
    s.ring_busy_s *= 4;
    s.agg_window_full_s = full_part * s.agg_busy_s;
    const std::vector<PathSample> period(static_cast<size_t>(f.n), s);
    ctl.update(period);  // the first period does not measure the aggregators
    // The second sees a limit, believed when the third sees one too.
    const SplitDecision second = ctl.update(period);
    EXPECT_FALSE(second.changed) << second.reason;
    return ctl.update(period);
  };
  double start = 0;
  const SplitDecision paced = decide(0.0, &start);
  EXPECT_FALSE(paced.changed) << paced.reason;
  EXPECT_EQ(paced.ring_fraction, start);
  const SplitDecision held = decide(1.0, &start);
  EXPECT_TRUE(held.changed);
  EXPECT_GT(held.ring_fraction, start + 0.25) << held.reason;
  EXPECT_NE(held.reason.find("the aggregators limit their share"), std::string::npos);
}

TEST(SplitController, TheSmallestRingShareFollowsTheMeasuredLink) {
  // A veth that reports 10 Gbit/s for a 1 Gbit/s link; the ring's hop takes 100 us. At the
  // nominal rate a ring share would have to be 4 x 100 us x 10 Gbit/s = 500 kB to be worth its
  // 6 hops, which could keep the ring from ever carrying: no floor until a period has seen
  // the ring as the slower path, and from the link measured then, 4 x 100 us x 1 Gbit/s.
  Fabric f;
  f.capacity = 0.25 * f.link;  // the aggregators are slow: the ring carries most
  SplitController ctl = prior(f, 10 * f.link, f.capacity);
  ctl.set_hop(100e-6);
  EXPECT_EQ(ctl.min_ring_bytes(), 0u) << "the ring has not been the slower path yet";
  std::mt19937_64 rng(1);
  SplitDecision d;
  for (int p = 0; p < 8; ++p) d = ctl.update(samples(f, 1 - ctl.ring_fraction(), &rng, 0));
  EXPECT_NEAR(ctl.link_bps(), f.link, 0.05 * f.link);
  EXPECT_EQ(d.min_ring_bytes, ctl.min_ring_bytes()) << "every decision carries the floor";
  EXPECT_NEAR(double(d.min_ring_bytes), 4 * 100e-6 * f.link, 0.05 * 4 * 100e-6 * f.link);
}

TEST(SplitController, TheFirstPeriodMeasuresTheRingButNotTheAggregators) {
  // Slow aggregators, a link prior 10x too high: the first period's ring is the slower path
  // and moves the split at once. Aggregators slower than advertised: their first period (slow
  // start) says nothing, the second sees a limit (on the fabric, a second period still in slow
  // start read 1179 Mbit/s off a 4000 Mbit/s aggregator), the third confirms it and moves the
  // split.
  Fabric f;
  SplitController wrong_link = prior(f, 10 * f.link, f.capacity);
  std::mt19937_64 rng(1);
  const SplitDecision d = wrong_link.update(samples(f, 1 - wrong_link.ring_fraction(), &rng, 0));
  EXPECT_TRUE(d.changed);
  EXPECT_NE(d.reason.find("the ring is the slower path"), std::string::npos) << d.reason;
  f.capacity = 0.25 * kGbit;
  SplitController slow_aggs = prior(f, f.link, 4 * kGbit);
  const auto period = samples(f, 1 - slow_aggs.ring_fraction(), &rng, 0);
  EXPECT_FALSE(slow_aggs.update(period).changed);
  EXPECT_FALSE(slow_aggs.update(period).changed);
  EXPECT_TRUE(slow_aggs.update(period).changed);
}

TEST(SplitController, FastAggregatorsKeepEverythingFromAWrongLinkPrior) {
  // The "fat" fabric: one aggregator at 4x. A veth that reports 10 Gbit/s for a 1 Gbit/s link
  // must not push work to the ring for good: the aggregators alone are the fastest.
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = prior(f, 10 * kGbit, 4 * kGbit);
  const auto shares = run(ctl, f, 12);
  EXPECT_LE(period_time(f, shares.back()), best_time(f) * 1.03) << shares.back();
  EXPECT_GE(shares.back(), 0.95);
}

// The "fat" fabric with the split at its probe share of ring: the ring's small share ends in a
// few milliseconds while the aggregator share runs on, and the aggregator bytes handed to the
// kernel meanwhile (queued, not yet on the wire) add up to more than the link carries. That is
// no measure of the link: the split stays where it is. (On the fabric, such a period after a
// lifted throttle read a 1323 Mbit/s link off a 1000 Mbit/s one and moved 15 % to the ring.)
TEST(SplitController, AShortRingProbeDoesNotSeeQueuedAggregatorBytesAsLink) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = prior(f, f.link, f.capacity);
  run(ctl, f, 4);
  const double share = 1 - ctl.ring_fraction();
  ASSERT_GE(share, 0.95);
  const double link = ctl.link_bps();
  PathSample s = simulate(f, share);
  ASSERT_LT(s.ring_busy_s, s.agg_busy_s);
  s.agg_bytes_with_ring = std::min(s.agg_bytes, 2 * f.link * s.ring_busy_s);  // queued
  const std::vector<PathSample> all(static_cast<size_t>(f.n), s);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(ctl.update(all).changed);
    EXPECT_EQ(1 - ctl.ring_fraction(), share);
    EXPECT_LE(ctl.link_bps(), std::max(link, f.link));
  }
}

// Small ring shares beside every request (before any period has seen the ring slower, the
// split sends each request's 1/64 to the ring): the ring runs for most of the aggregator
// share's busy time, and in the gaps the aggregator share has handed its bytes over and only
// waits for results. Its rate in the gaps says nothing of the aggregators; its whole rate,
// the link's, says they keep up. (On the fabric such periods read a 4000 Mbit/s aggregator as
// 194 Mbit/s and moved 93 % of the job to the ring.)
TEST(SplitController, SmallRingSharesDoNotMakeAFastAggregatorLookSlow) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = prior(f, f.link, f.capacity);
  const double share = 1 - ctl.ring_fraction();
  ASSERT_GE(share, 0.95);
  PathSample s = simulate(f, share);
  s.ring_busy_s = 0.85 * s.agg_busy_s;
  s.agg_bytes_with_ring = 0.98 * s.agg_bytes;
  s.agg_window_full_s = s.agg_busy_s;
  // The ring's bytes measured (1/64 of 64 MB), and too few to measure (the fabric's case:
  // 0.25 MB of 1/64 of 16 MiB, under SplitTuning::min_bytes).
  for (const double ring_bytes : {s.ring_bytes, 0.2 * kMB}) {
    s.ring_bytes = ring_bytes;
    const std::vector<PathSample> all(static_cast<size_t>(f.n), s);
    for (int i = 0; i < 4; ++i) {
      const SplitDecision d = ctl.update(all);
      EXPECT_FALSE(d.changed) << ring_bytes << ": " << d.reason;
    }
    EXPECT_EQ(1 - ctl.ring_fraction(), share);
  }
}

TEST(SplitController, NoOscillationWithinTheBandUnderNoise) {
  Fabric f;  // one aggregator at 1x: the optimum has both paths binding
  SplitController ctl = prior(f, f.link, f.capacity);
  run(ctl, f, 10);
  const double settled = 1 - ctl.ring_fraction();
  // 200 more periods with +-3 % noise on every rank's times: at most a move or two, never a
  // swing of more than 0.05 around where it settled.
  const auto shares = run(ctl, f, 200, 0.03, 7);
  int changes = 0;
  for (size_t i = 1; i < shares.size(); ++i) changes += shares[i] != shares[i - 1];
  EXPECT_LE(changes, 2);
  for (double s : shares) EXPECT_NEAR(s, settled, 0.05);
}

// A controller settled on `f` (started from its true rates, five periods run).
SplitController settled(const Fabric& f) {
  SplitController ctl = prior(f, f.link, f.capacity);
  run(ctl, f, 5);
  return ctl;
}

TEST(SplitController, FollowsAThrottleWithinTwoPeriods) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = settled(f);
  EXPECT_GE(1 - ctl.ring_fraction(), 0.95);
  f.capacity = 1 * kGbit;  // max_mbps lowered to a quarter
  run(ctl, f, 2);
  EXPECT_LE(period_time(f, 1 - ctl.ring_fraction()), best_time(f) * 1.08)
      << 1 - ctl.ring_fraction();
}

// One period in which the aggregators seem to take a tenth of their rate (a rank descheduled,
// a burst of loss), or 70 % of it, changes nothing; the same limit seen twice is a throttle,
// and is followed.
TEST(SplitController, ALimitMustBeSeenTwice) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = settled(f);
  const double before = 1 - ctl.ring_fraction();
  ASSERT_GE(before, 0.95);
  Fabric hiccup = f;
  hiccup.capacity = 0.4 * kGbit;
  run(ctl, hiccup, 1);
  EXPECT_EQ(1 - ctl.ring_fraction(), before) << "one slow period moved the split";
  run(ctl, f, 3);  // back to normal: still nothing to change
  EXPECT_EQ(1 - ctl.ring_fraction(), before);
  Fabric mild = f;
  mild.capacity = 2.8 * kGbit;
  run(ctl, mild, 1);
  EXPECT_EQ(1 - ctl.ring_fraction(), before) << "one period at 70 % moved the split";
  run(ctl, f, 3);
  EXPECT_EQ(1 - ctl.ring_fraction(), before);
  run(ctl, hiccup, 2);  // twice in a row: the aggregators really are slower now
  EXPECT_LE(period_time(hiccup, 1 - ctl.ring_fraction()), best_time(hiccup) * 1.08)
      << 1 - ctl.ring_fraction();
}

// A limit measured twice (the aggregators seemed to take 60 % of their rate) moves work to
// the ring; the aggregator share then runs beside the ring, never waiting for the window, and
// its own rate (held down by the ring's part of the link) would keep R below what the
// aggregators advertise. Two such periods drop the old limit for the prior, and the split
// goes back to the aggregators.
TEST(SplitController, AnOldLimitIsDroppedOnceTheAggregatorsKeepUp) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl = settled(f);
  ASSERT_GE(1 - ctl.ring_fraction(), 0.95);
  Fabric mild = f;
  mild.capacity = 2.4 * kGbit;
  run(ctl, mild, 2);
  ASSERT_LT(1 - ctl.ring_fraction(), 0.95) << "the limit was not taken";
  std::vector<std::string> why;
  for (int p = 0; p < 6; ++p) {
    std::vector<PathSample> all(static_cast<size_t>(f.n), simulate(f, 1 - ctl.ring_fraction()));
    for (PathSample& s : all) s.agg_window_full_s = 0;  // the aggregators kept up
    const SplitDecision d = ctl.update(all);
    if (d.changed) why.push_back(d.reason);
  }
  EXPECT_GE(1 - ctl.ring_fraction(), 0.95);
  ASSERT_FALSE(why.empty());
  EXPECT_NE(why.back().find("keep up again"), std::string::npos) << why.back();
  // While they do wait for the window (a real limit), nothing is dropped.
  run(ctl, mild, 2);
  const double limited = 1 - ctl.ring_fraction();
  EXPECT_LT(limited, 0.95);
  run(ctl, mild, 4);  // the model's samples always wait for the window
  EXPECT_EQ(1 - ctl.ring_fraction(), limited);
}

TEST(SplitController, EveryRankTakesTheSameDecisions) {
  // Four ranks, each its own controller, fed the same exchanged samples: identical state.
  Fabric f;
  f.capacity = 0.5 * kGbit;
  std::vector<SplitController> ranks(4, prior(f, 3 * kGbit, 2 * kGbit));
  std::mt19937_64 rng(3);
  for (int p = 0; p < 30; ++p) {
    const auto all = samples(f, 1 - ranks[0].ring_fraction(), &rng, 0.05);
    std::vector<SplitDecision> d;
    for (auto& r : ranks) d.push_back(r.update(all));
    for (size_t i = 1; i < ranks.size(); ++i) {
      EXPECT_EQ(std::memcmp(&d[i].ring_fraction, &d[0].ring_fraction, sizeof(double)), 0);
      EXPECT_EQ(d[i].changed, d[0].changed);
      EXPECT_EQ(d[i].reason, d[0].reason);
    }
  }
}

TEST(SplitController, ChangesSayWhy) {
  Fabric f;
  f.capacity = 0.25 * kGbit;
  SplitController ctl = prior(f, f.link, 4 * kGbit);  // advertised 4x, really 1/4
  std::mt19937_64 rng(1);
  const auto period = samples(f, 1 - ctl.ring_fraction(), &rng, 0);
  const SplitDecision first = ctl.update(period);
  EXPECT_FALSE(first.changed) << "the first period (slow start, warm-up) does not measure R";
  EXPECT_FALSE(ctl.update(period).changed) << "a limit is seen twice before it is believed";
  const SplitDecision d = ctl.update(period);
  EXPECT_TRUE(d.changed);
  EXPECT_NE(d.reason.find("the aggregators limit their share"), std::string::npos) << d.reason;
  EXPECT_GT(d.ring_fraction, 0.5);
}

TEST(SplitController, TooLittleTrafficChangesNothing) {
  Fabric f;
  f.bytes = 0.1 * kMB;  // under min_bytes
  SplitController ctl = prior(f, f.link, 0.1 * f.capacity);
  const double before = ctl.ring_fraction();
  std::mt19937_64 rng(1);
  const SplitDecision d = ctl.update(samples(f, 1 - before, &rng, 0));
  EXPECT_FALSE(d.changed);
  EXPECT_EQ(ctl.ring_fraction(), before);
}

TEST(SplitController, ARestripeScalesTheCapacityToTheSurvivors) {
  Fabric f;
  f.capacity = 4 * kGbit;  // two aggregators at 2x each
  SplitController ctl(f.n, f.link, f.capacity, 2);
  run(ctl, f, 4);
  EXPECT_GE(1 - ctl.ring_fraction(), 0.95);
  std::vector<PathSample> all(4);
  all[2].epoch = 1;  // one rank has re-striped over one survivor
  all[2].aggregators = 1;
  const SplitDecision d = ctl.update(all);
  EXPECT_TRUE(d.changed);
  EXPECT_NE(d.reason.find("re-striped from 2 to 1"), std::string::npos) << d.reason;
  EXPECT_NEAR(ctl.capacity_bps(), 2 * kGbit, 0.3 * kGbit);
  f.capacity = 2 * kGbit;
  EXPECT_LE(period_time(f, 1 - ctl.ring_fraction()), best_time(f) * 1.08);
}

TEST(SplitController, ARestripeIsSaidEvenWhenTheSplitStays) {
  Fabric f;
  f.capacity = 64 * kGbit;  // two aggregators that keep up alone even after one is lost
  SplitController ctl(f.n, f.link, f.capacity, 2);
  const double before = ctl.ring_fraction();
  std::vector<PathSample> all(4);
  all[0].epoch = 1;
  all[0].aggregators = 1;
  const SplitDecision d = ctl.update(all);
  EXPECT_TRUE(d.changed) << "an operator reads the re-split in the log";
  EXPECT_EQ(d.ring_fraction, before);
  EXPECT_NE(d.reason.find("re-striped from 2 to 1"), std::string::npos) << d.reason;
}

// A grant update (SPEC §3: another job joined the aggregator) is a new prior for R once every
// rank reports it: R scales by new/old and the split moves to the ring; the whole grant back
// scales R back. One rank that has not heard it yet holds the change (same decision on every
// rank).
TEST(SplitController, AGrantUpdateIsANewPrior) {
  Fabric f;
  f.capacity = 4 * kGbit;
  SplitController ctl(f.n, f.link, f.capacity, 1);
  ctl.set_grant(1000);
  run(ctl, f, 4);
  const double capacity = ctl.capacity_bps();
  const double ring = ctl.ring_fraction();
  std::vector<PathSample> all(4);
  for (PathSample& s : all) s.grant_mbps = 500;
  all[3].grant_mbps = 1000;  // not yet on rank 3
  EXPECT_FALSE(ctl.update(all).changed);
  EXPECT_EQ(ctl.capacity_bps(), capacity);
  EXPECT_EQ(ctl.grant_mbps(), 1000);
  all[3].grant_mbps = 500;
  SplitDecision d = ctl.update(all);
  EXPECT_TRUE(d.changed);
  EXPECT_NE(d.reason.find("aggregator grants now 500 Mbit/s (were 1000)"), std::string::npos)
      << d.reason;
  EXPECT_EQ(ctl.capacity_bps(), capacity / 2);
  EXPECT_EQ(ctl.grant_mbps(), 500);
  EXPECT_GT(ctl.ring_fraction(), ring);
  EXPECT_FALSE(ctl.update(all).changed);  // the same grant again: nothing new
  for (PathSample& s : all) s.grant_mbps = 1000;
  d = ctl.update(all);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(ctl.capacity_bps(), capacity);
  EXPECT_EQ(ctl.ring_fraction(), ring);
}

// After a re-stripe the new engine's grants are adopted as they are, not taken as an update.
TEST(SplitController, ARestripeAdoptsTheNewGrants) {
  Fabric f;
  SplitController ctl(f.n, f.link, f.capacity, 2);
  ctl.set_grant(2000);
  std::vector<PathSample> all(4);
  for (PathSample& s : all) {
    s.epoch = 1;
    s.aggregators = 1;
    s.grant_mbps = 1000;
  }
  EXPECT_NE(ctl.update(all).reason.find("re-striped"), std::string::npos);
  const double capacity = ctl.capacity_bps();
  ctl.update(all);
  EXPECT_EQ(ctl.capacity_bps(), capacity);
  EXPECT_EQ(ctl.grant_mbps(), 1000);
}

// Returning (coll_comm.h): the job returns to what every asking rank heard answer. Rank 0
// alone asks on a job whose ranks share one list; under a tree's leaves every rank asks its own.
TEST(ReturnsAgreed, RankZeroAloneDecides) {
  std::vector<PathSample> all(4);
  all[0].asked = 0b11;
  all[0].answered = 0b01;
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0b01u);
}

TEST(ReturnsAgreed, EveryAskingRankMustHaveItsAnswer) {
  std::vector<PathSample> all(4);
  for (PathSample& p : all) p.asked = 0b1;  // every rank lost its leaf (entry 0)
  all[0].answered = all[1].answered = 0b1;  // ranks 0 and 1's leaf answers; 2 and 3's not yet
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0u);
  all[2].answered = 0b1;
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0u);
  all[3].answered = 0b1;
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0b1u);
}

TEST(ReturnsAgreed, AnEntryARankDoesNotAskAboutIsNoVeto) {
  std::vector<PathSample> all(3);
  all[0].asked = 0b110;
  all[0].answered = 0b110;
  all[1].asked = 0b010;  // rank 1 still has entry 2
  all[1].answered = 0b010;
  all[2].asked = 0;  // nothing missing there (or no prober): says nothing
  all[2].answered = 0;
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0b110u);
  all[1].answered = 0;
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0b100u);
}

TEST(ReturnsAgreed, NobodyAskingMeansNoReturn) {
  std::vector<PathSample> all(2);
  all[1].answered = 0b1;  // an answer without a question is ignored
  EXPECT_EQ(returns_agreed(all.data(), all.size()), 0u);
}

}  // namespace
}  // namespace conflux::collnet
