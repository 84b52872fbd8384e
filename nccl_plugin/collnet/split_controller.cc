// SPDX-License-Identifier: Apache-2.0
#include "collnet/split_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "collnet/split.h"

namespace conflux::collnet {
namespace {

// The aggregator share ran alone for at least this part of its busy time: its rate then says
// what the aggregators take, if it stayed below this part of the link.
constexpr double kAloneShare = 0.1;
constexpr double kLinkFull = 0.9;
// ... and if its contributions waited for the window this part of that time: it was held
// back by the aggregators, not by the caller's pace.
constexpr double kBacklogged = 0.5;
// A path carrying at least this part of a period's bytes is measured for its bandwidth.
constexpr double kExactShare = 0.25;
// Periods in a row in which the aggregator share did not wait for the window, after which a
// limit measured earlier is dropped for the prior again.
constexpr int kKeptUpPeriods = 2;
// A path's own rate this far above the link prior shows the prior below the real link.
constexpr double kLineSlack = 1.5;

// Shares are kept on a grid of 1/1024, so that a decision is a small exact number.
double quantize(double share) { return std::round(share * 1024.0) / 1024.0; }

std::string mbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f Mbit/s", bytes_per_s * 8 / 1e6);
  return buf;
}

}  // namespace

SplitController::SplitController(int nranks, double link_bps, double capacity_bps,
                                 uint32_t aggregators, SplitTuning tuning)
    : n_(std::max(nranks, 1)),
      c_(ring_bytes_per_byte(n_)),
      link_(link_bps),
      line_(link_bps),
      capacity_(capacity_bps > 0 ? capacity_bps : n_ * link_bps),
      aggregators_(std::max<uint32_t>(aggregators, 1)),
      t_(tuning),
      agg_share_(target()),
      prior_capacity_(capacity_) {}

bool SplitController::take_connect_probe(double delivered_bps) {
  if (!first_period_) return false;  // connect's figure, before any period
  const double r = link_prior_mbps(0, capacity_, delivered_bps);
  if (r == capacity_) return false;
  capacity_ = r;
  capacity_known_ = true;  // measured: prior_capacity_ stays the advertised figure
  agg_share_ = target();
  return true;
}

void SplitController::scale_capacity(double factor) {
  capacity_ *= factor;
  prior_capacity_ *= factor;
}

double SplitController::target() const {
  const double share = 1.0 - auto_ring_fraction(n_, link_, capacity_);
  return quantize(std::clamp(share, t_.probe, 1.0 - t_.probe));
}

double SplitController::model_time(double share) const {
  // Seconds per byte of a request: the aggregators' part and the link's, whichever is longer.
  return std::max(n_ * share / capacity_, (share + c_ * (1 - share)) / link_);
}

double SplitController::raise_link(double lower_bound) const {
  return std::max(link_, std::min(lower_bound, line_));
}

double SplitController::exact(double old, double seen, bool* known) const {
  if (!*known) {  // the first measurement replaces the prior, a guess
    *known = true;
    return seen;
  }
  return old + t_.smoothing * (seen - old);
}

SplitDecision SplitController::move_to(double share, std::string reason) {
  SplitDecision d;
  d.changed = share != agg_share_;
  settling_ = d.changed;
  agg_share_ = share;
  d.ring_fraction = ring_fraction();
  d.reason = std::move(reason);
  return d;
}

SplitDecision SplitController::update(std::span<const PathSample> all) {
  SplitDecision d = decide(all);
  d.min_ring_bytes = min_ring_bytes();
  return d;
}

SplitController::Period SplitController::slowest(std::span<const PathSample> all) {
  Period p{all[0].agg_bytes, all[0].agg_bytes_with_ring, all[0].ring_bytes, 0, 0, 0};
  for (const PathSample& s : all) {  // the slowest rank counts
    p.agg = std::min(p.agg, s.agg_bytes);
    p.agg_with_ring = std::min(p.agg_with_ring, s.agg_bytes_with_ring);
    p.ring = std::min(p.ring, s.ring_bytes);
    p.agg_s = std::max(p.agg_s, s.agg_busy_s);
    p.ring_s = std::max(p.ring_s, s.ring_busy_s);
    p.window_full_s = std::max(p.window_full_s, s.agg_window_full_s);
  }
  return p;
}

std::optional<SplitDecision> SplitController::follow_restripe(std::span<const PathSample> all) {
  // A re-stripe on some rank: the survivors carry the aggregator share, R scales with them.
  const PathSample* newest = &all[0];
  for (const PathSample& s : all) {
    if (s.epoch > newest->epoch) newest = &s;
  }
  if (newest->epoch <= epoch_ || newest->aggregators == 0) return std::nullopt;
  scale_capacity(static_cast<double>(newest->aggregators) / aggregators_);
  epoch_ = newest->epoch;
  const uint32_t before = aggregators_;
  aggregators_ = newest->aggregators;
  if (grant_ != 0) grant_ = -1;  // the new engine's grants are adopted, not a change
  SplitDecision d = move_to(target(), "re-striped from " + std::to_string(before) + " to " +
                                          std::to_string(aggregators_) +
                                          " aggregator(s), capacity " + mbps(capacity_));
  // Said even when the fraction stays; the next period carries the old engine's requests.
  d.changed = true;
  settling_ = true;
  return d;
}

std::optional<SplitDecision> SplitController::follow_grants(std::span<const PathSample> all) {
  // A grant update that every rank has seen: a new prior for R, scaled like a re-stripe.
  bool agreed = all[0].grant_mbps > 0;
  for (const PathSample& s : all) agreed = agreed && s.grant_mbps == all[0].grant_mbps;
  if (!agreed || all[0].grant_mbps == grant_) return std::nullopt;
  const double before = grant_;
  grant_ = all[0].grant_mbps;
  if (before <= 0) return std::nullopt;
  scale_capacity(grant_ / before);
  capacity_known_ = false;
  char why[96];
  std::snprintf(why, sizeof why, "aggregator grants now %.0f Mbit/s (were %.0f)", grant_, before);
  return move_to(target(), std::string(why) + ", capacity " + mbps(capacity_));
}

void SplitController::learn_link(const Period& p, bool ring_measured, std::string* why) {
  const double a = p.agg, a_ov = p.agg_with_ring, r = p.ring, ta = p.agg_s, tr = p.ring_s;
  const bool big_ring = r >= kExactShare * (a + r);
  if (ring_measured) {
    // The ring (TCP) takes whatever the aggregator share leaves: when it is the slower path the
    // link is full while it runs.
    const double seen = (std::min(a_ov, a) + c_ * r) / tr;
    const bool ring_slower = tr >= ta;
    ring_was_slower_ = ring_was_slower_ || ring_slower;
    link_ = ring_slower && big_ring ? exact(link_, seen, &link_known_) : raise_link(seen);
    if (ring_slower && big_ring) *why = "the ring is the slower path";
  } else {
    link_ = raise_link(a / ta);
  }
  // A path's own rate well above the line rate (the ring's bytes, which its peers received; the
  // aggregator share's, over its whole busy time, when the ring carried too little to measure),
  // or an exact measurement well above it: the prior was below the real link (an operator's
  // CONFLUX_LINK_MBPS), and no longer bounds L. (Not the aggregator share's rate while the ring
  // was idle: with requests in flight, it was seen at 1.2x the link.)
  const double carried = ring_measured ? c_ * r / tr : a / ta;
  if (carried > kLineSlack * line_ || (link_known_ && link_ > kLineSlack * line_)) {
    line_ = std::numeric_limits<double>::infinity();
  }
}

void SplitController::learn_capacity(const Period& p, bool ring_measured, bool first,
                                     std::string* why) {
  const double a = p.agg, a_ov = p.agg_with_ring, r = p.ring, ta = p.agg_s, tr = p.ring_s;
  const double tfull = p.window_full_s;
  // A path's rate is taken as its bandwidth only when it carried a good part of the bytes:
  // a small share waits on latency (round trips, the slowest rank) more than on bandwidth,
  // and then only bounds the rate from below.
  const bool big_agg = a >= kExactShare * (a + r);
  const bool big_ring = r >= kExactShare * (a + r);
  // The aggregator share alone (the ring idle) shows what the aggregators take, unless it
  // still filled the link.
  // A small ring share (or one too small to measure) barely takes from the link: then the
  // aggregator share's whole rate shows it. (Its rate in the gaps between small ring shares
  // does not: it has handed its bytes over and waits for results there. On the fabric, ring
  // shares of 16 kB beside each 1 MiB request made a full-rate 4000 Mbit/s aggregator read
  // as 194 Mbit/s.)
  const bool alone = ring_measured && big_ring;
  const double t_alone = alone ? ta - std::min(tr, ta) : ta;
  const double a_alone = alone ? a - std::min(a_ov, a) : a;
  const double ra = t_alone > 0 ? a_alone / t_alone : 0;
  const bool limited = !first && big_agg && t_alone >= kAloneShare * ta &&
                       a_alone >= t_.min_bytes && ra < kLinkFull * link_ &&
                       tfull >= kBacklogged * t_alone;
  // Believed when the period before saw a limit too: one period of loss recovery, slow
  // start or a descheduled rank is no throttle.
  if (limited && limit_seen_) {
    capacity_ = exact(capacity_, n_ * ra, &capacity_known_);
    *why = "the aggregators limit their share";
    kept_up_ = 0;
  } else {
    capacity_ = std::max(capacity_, n_ * a / ta);
    // A limit measured earlier, under the prior: once the aggregator share has gone
    // kKeptUpPeriods periods without waiting for the window, the aggregators take what they
    // are offered, and what they advertise is the best estimate again. Otherwise the share's
    // own rate, which the ring's share of the link holds down, would keep R below it.
    const bool waited = tfull >= kBacklogged * ta;
    kept_up_ = waited ? 0 : kept_up_ + 1;
    if (capacity_known_ && capacity_ < prior_capacity_ && kept_up_ >= kKeptUpPeriods) {
      capacity_ = prior_capacity_;
      capacity_known_ = false;
      kept_up_ = 0;
      *why = "the aggregators keep up again";
    }
  }
  limit_seen_ = limited;
}

SplitDecision SplitController::decide(std::span<const PathSample> all) {
  SplitDecision keep;
  keep.ring_fraction = ring_fraction();
  if (all.empty() || n_ < 2) return keep;
  if (auto d = follow_restripe(all)) return *d;
  if (auto d = follow_grants(all)) return *d;
  const Period p = slowest(all);
  const bool agg_measured = p.agg >= t_.min_bytes && p.agg_s > 0;
  const bool ring_measured = p.ring >= t_.min_bytes && p.ring_s > 0;
  if (!agg_measured && !ring_measured) return keep;  // too little traffic to tell
  if (settling_) {  // this period still carried requests split the old way
    settling_ = false;
    return keep;
  }
  const bool first = first_period_;
  first_period_ = false;
  std::string why;
  learn_link(p, ring_measured, &why);
  if (agg_measured) learn_capacity(p, ring_measured, first, &why);
  if (why.empty()) why = "lower bounds of both paths";
  const double want = target();
  // Stability band: move only for a gain the model predicts to be worth it.
  if (model_time(agg_share_) <= (1 + t_.band) * model_time(want)) return keep;
  return move_to(want,
                 why + ": aggregators take " + mbps(capacity_) + ", link carries " + mbps(link_));
}

uint64_t returns_agreed(const PathSample* all, size_t n) {
  uint64_t asked = 0;
  uint64_t answered = ~uint64_t{0};
  for (size_t r = 0; r < n; ++r) {
    if (all[r].asked == 0) continue;  // no prober, or nothing missing there
    asked |= all[r].asked;
    answered &= all[r].answered | ~all[r].asked;  // what it does not ask about is no veto
  }
  return asked & answered;
}

}  // namespace conflux::collnet
