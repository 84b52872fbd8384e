// SPDX-License-Identifier: Apache-2.0
// How much of each AllReduce the aggregators take when CONFLUX_RING_FRACTION=auto.
//
// Every worker's link runs at L; the aggregators together can take R for this job (their
// line rate, scaled by the share of the requested window they granted). For a message of
// S bytes with a going through the aggregators and S - a over the ring at the same time:
//   the worker's link carries a + c(S - a), c = 2(n-1)/n (a ring's bytes per byte reduced);
//   the aggregators receive n·a.
// Both finish together when n·a/R = (a + c(S - a))/L, i.e. the aggregators' share is
//   a/S = c / (n·L/R - 1 + c),  capped at 1 (R >= n·L: the aggregators keep up alone).
// With one aggregator as fast as one worker and n = 4 that is 1/3: a ring fraction of 2/3.
//
// Inputs are values every rank agrees on (the grants are per job, the link rate is agreed at
// connect), so the split is the same on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conflux::collnet {

struct AggregatorShare {
  uint32_t granted_slots = 0;    // JoinAck
  uint32_t requested_slots = 0;  // CONFLUX_WINDOW_SLOTS
  double advertised_mbps = 0;    // its Capacity share_mbps (0: unknown, or an old daemon)
  uint32_t weight = 0;           // its stripe weight (CONFLUX_STRIPE_WEIGHTS); 0: unweighted
};

// R in Mbit/s. agg_mbps: each aggregator's line rate as the operator set it
// (CONFLUX_AGGREGATOR_MBPS), else the rate it advertised; where both are 0 (unknown) it is
// taken to keep up with all n workers, so only a cut grant moves work to the ring. Unweighted,
// R is the sum of the aggregators' rates; weighted, aggregator a carries w_a / sum(w) of the
// stripe, so R is the least over the aggregators of rate_a * sum(w) / w_a (the one that
// finishes its share last sets the pace).
double aggregator_capacity_mbps(int nranks, double link_mbps, double agg_mbps,
                                const std::vector<AggregatorShare>& aggs);

// The link rate L the split and the tuner start from, in Mbit/s: `configured`
// (CONFLUX_LINK_MBPS) when set (> 0); else the interface's `nominal` speed, unless the rate
// `measured` at connect (0: none) is under half of it. A NIC reports its own speed, not that of
// a slower bottleneck behind it; a measure near or above the nominal speed is no better
// evidence than the interface's own claim (a short probe, cores shared with other ranks).
// The same rule, in any unit, corrects the aggregators' advertised capacity by what they
// delivered in the connect's bulk probe, in the tuner's model and in the measured split's start
// (SplitController::take_connect_probe).
double link_prior_mbps(double configured, double nominal, double measured);

// c = 2(n-1)/n: the link bytes a ring AllReduce moves per byte reduced, over n ranks.
double ring_bytes_per_byte(int nranks);

// The ring fraction in [0, 1] for n workers with link L and aggregator capacity R.
double auto_ring_fraction(int nranks, double link_mbps, double capacity_mbps);

// Elements of a request of `count` elements of `esize` bytes that go through the
// aggregators: count * (1 - ring_fraction), rounded down, the ring taking the rest; but all
// of them when the ring's share would be under `min_ring_bytes` and ring_fraction < 1. A
// small ring share saves little bandwidth and costs the ring's 2(n-1) latency steps, which
// then decide the request's time (1 forces everything over the ring, for experiments).
size_t aggregator_elements(size_t count, size_t esize, double ring_fraction, size_t min_ring_bytes);

}  // namespace conflux::collnet
