// SPDX-License-Identifier: Apache-2.0
// The measured split of CONFLUX_RING_FRACTION=auto: every rank measures what each path
// delivers, the ranks exchange their measurements over the worker ring, and each applies the
// same rule to the same values, so the split of every request is identical on every rank.
//
// Model (split.h): a rank's link carries L bytes/s, shared by its aggregator share (one byte
// per byte) and its ring share (c = 2(n-1)/n bytes per byte); the aggregators take R bytes/s of
// input from all n ranks together. The split that makes both finish together is
//   a/S = c / (n·L/R - 1 + c),  capped at 1.
// The controller keeps estimates of L and R and applies that formula. Which estimate a period
// measures depends on which path was the bottleneck in it (the one busy longer):
//   L = (a_r + c·r) / T_r when the ring is the slower path: while a ring share runs, the ring
//       (TCP) takes whatever the aggregator share leaves of the link, so the link is full (a_r:
//       aggregator bytes sent meanwhile, T_r: time with a ring share running); when the ring
//       finished first, it may have waited on latency, and this only bounds L from below;
//   R = n·a_0 / T_0 when the aggregator share ran alone for a good part of its busy time
//       (a_0 bytes in T_0) below the link rate, with its contributions waiting for the window
//       for at least half of T_0 (some rank): then the aggregators limited it; otherwise
//       n·a / T_a only bounds R from below (the link limited it, or the caller's pace: NCCL
//       posts its chunks as the GPU side produces them, and a share that is not backlogged
//       says nothing about what the aggregators could take).
// A path's rate counts as its bandwidth only when it carried at least a quarter of the
// period's bytes (a small share waits on latency); otherwise it only bounds the rate from
// below. The period right after a change carries requests of both splits and is not used;
// the first period's aggregator rate is no measure of R (slow start, warm-up).
// Over the ranks the slowest counts (least bytes, longest busy time): the collective waits for
// it. Too much on the aggregators makes their share run alone, which measures R and moves the
// split back; too much on the ring measures L; at the optimum both bind. A change the model
// expects to gain less than the band is not made (no oscillation on noise), and each path keeps a
// small probe share so that its rate stays measured. A lower bound never raises L above the
// line rate the link prior came from: a link carries no more, and a ring probe of a few
// milliseconds beside a busy aggregator share can "see" more, counting aggregator bytes that
// were handed to the kernel but still queued (on the fabric: 1323 Mbit/s off a 1000 Mbit/s
// link, which moved 15 % of a job to the ring for good). Exact measurements are not bounded,
// and one well above the line rate (1.5x), or the ring's own rate that far above it, shows the
// prior too low (an operator's CONFLUX_LINK_MBPS below the real link): lower bounds are then
// not bounded either. A limit of R is believed when two periods in a row measure one: one
// period of loss recovery, slow start or a descheduled rank is no throttle (on the fabric, one
// period read 70 % of a 4000 Mbit/s aggregator and kept 14 % of a job on the ring, where the
// share of the link it ran beside held its rate down, for good). Priors: L
// from the interface's speed (or CONFLUX_LINK_MBPS), R from the capacity the aggregators
// advertise (or CONFLUX_AGGREGATOR_MBPS). A re-stripe scales R to the survivors; a grant update
// scales R by the new grant over the old (a new prior). What the aggregators delivered in
// connect's bulk probe replaces the advertised R before the first period when it is under half
// of it (take_connect_probe), as the link measured at connect replaces the interface's speed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace conflux::collnet {

// What one rank measured since the previous exchange. Exchanged bit for bit between ranks.
struct PathSample {
  double agg_bytes = 0;            // bytes this rank sent to the aggregators
  double agg_bytes_with_ring = 0;  // of which while a ring share ran
  double agg_busy_s = 0;           // time with at least one aggregator share outstanding
  double ring_bytes = 0;           // this rank's bytes of ring shares completed
  double ring_busy_s = 0;          // time with at least one ring share running
  uint32_t epoch = 0;              // re-stripes this rank's communicator has made
  uint32_t aggregators = 0;        // aggregators of its engine of that epoch
  double grant_mbps = 0;           // sum of its aggregators' current grants (Capacity), 0 unknown
  // Time with aggregator contributions waiting for a window slot: the aggregators (or the
  // path to them) held the share back, not the caller's pace.
  double agg_window_full_s = 0;
  // A rank with a ReturnProber: the aggregators the job lost that it asks about, and those that
  // answered; the ranks return to them together once every asking rank has its answer
  // (returns_agreed(); coll_comm.h, "Returning"). Not part of the split's model.
  uint64_t answered = 0;
  uint64_t asked = 0;
};
static_assert(sizeof(PathSample) == 80, "exchanged between ranks as raw bytes");

// The lost aggregators the job returns to, from every rank's sample: those that answered every
// rank that asks about them (0 when no rank asks).
uint64_t returns_agreed(const PathSample* all, size_t n);

struct SplitTuning {
  double band = 0.03;            // keep the split unless the model expects it this much faster
  double probe = 1.0 / 64;       // least share of either path
  double min_bytes = 256 << 10;  // a path that moved less in a period (on some rank) is unmeasured
  double smoothing = 1.0;        // weight of a new exact measurement in an estimate (1: take it)
};

struct SplitDecision {
  double ring_fraction = 0;
  // A request whose ring share would be smaller goes wholly through the aggregators
  // (SplitController::min_ring_bytes); it may move without the fraction moving.
  size_t min_ring_bytes = 0;
  bool changed = false;
  std::string reason;  // for the log line of a change
};

class SplitController {
 public:
  // n ranks; prior link rate L and aggregator capacity R in bytes/s (R <= 0: unknown, taken as
  // n·L), the aggregators of the first engine.
  SplitController(int nranks, double link_bps, double capacity_bps, uint32_t aggregators,
                  SplitTuning tuning = {});

  double ring_fraction() const { return 1.0 - agg_share_; }
  double link_bps() const { return link_; }
  double capacity_bps() const { return capacity_; }
  double grant_mbps() const { return grant_; }
  // The aggregators' grants (sum of share_mbps) the priors were taken from, agreed by every
  // rank at connect; 0 = unknown. A later grant update (SPEC §3, e.g. another job joined an
  // aggregator) that every rank reports in the same period scales R by new/old and restarts
  // R as a prior (the next measurement replaces it).
  void set_grant(double grant_mbps) { grant_ = grant_mbps; }
  // One hop of the worker ring in seconds, agreed at connect (the slowest any rank measured);
  // 0 = not used.
  void set_hop(double hop_s) { hop_s_ = hop_s; }
  // What the aggregators delivered in connect's bulk probe (bytes/s of input from all ranks,
  // agreed by every rank; 0: not measured), before any period. By the link prior's rule
  // (split.h link_prior_mbps), the one the tuner's model uses too: under half the capacity
  // prior it replaces it, as a measured limit, and the starting split moves to it; otherwise
  // nothing changes. Like any measured limit it is dropped for the advertised prior once the
  // aggregator share has gone kKeptUpPeriods periods without waiting for the window (a probe
  // in the congestion window's slow start, a fluke). True if it replaced the prior.
  bool take_connect_probe(double delivered_bps);
  // The smallest ring share worth its latency: one the link carries in the time the ring's
  // 2(n-1) hops take, i.e. n·hop·L bytes (c = 2(n-1)/n link bytes per byte). A smaller share
  // would be decided by the hops, not by bandwidth. 0 until a period has seen the ring as the
  // slower path: before, L is only the rate the NIC reports, which can be far above what a
  // shaped link carries, and a floor from it could keep the ring from ever carrying (and so
  // from being measured).
  size_t min_ring_bytes() const {
    return ring_was_slower_ ? static_cast<size_t>(n_ * hop_s_ * link_) : 0;
  }

  // One decision from every rank's sample of the same period (all[i] from rank i). Depends
  // only on the controller's state and `all`; every rank starts from the same priors and
  // gets the same samples, so all hold the same state and take the same decision.
  SplitDecision update(std::span<const PathSample> all);

 private:
  // One period as the slowest rank saw it: bytes of each share (the aggregator share's while the
  // ring also ran), the paths' busy seconds and the time the aggregator window was full.
  struct Period {
    double agg = 0, agg_with_ring = 0, ring = 0;
    double agg_s = 0, ring_s = 0, window_full_s = 0;
  };
  static Period slowest(std::span<const PathSample> all);

  SplitDecision decide(std::span<const PathSample> all);
  // A re-stripe or a grant update that every rank has seen: the decision it makes, else none.
  std::optional<SplitDecision> follow_restripe(std::span<const PathSample> all);
  std::optional<SplitDecision> follow_grants(std::span<const PathSample> all);
  // What a measured period says of L (and of the line rate above it), and then of R; each
  // may give the reason for a move.
  void learn_link(const Period& p, bool ring_measured, std::string* why);
  void learn_capacity(const Period& p, bool ring_measured, bool first, std::string* why);
  double target() const;                  // model split for the current estimates, probe..1-probe
  double model_time(double share) const;  // model seconds per byte at that aggregator share
  SplitDecision move_to(double share, std::string reason);
  // R and its prior both scale (a re-stripe, a grant update).
  void scale_capacity(double factor);
  // L after a measurement that only bounds it from below, at most the line rate.
  double raise_link(double lower_bound) const;
  // An exact measurement `seen` of an estimate (old); *known: measured before.
  double exact(double old, double seen, bool* known) const;

  int n_;
  double c_;
  double link_;
  double line_;  // the link prior, which lower bounds do not exceed (infinite: shown too low)
  double capacity_;
  uint32_t epoch_ = 0;
  uint32_t aggregators_;
  SplitTuning t_;
  double agg_share_;
  bool link_known_ = false, capacity_known_ = false;
  bool settling_ = false;  // the split just changed: the next period is mixed, not measured
  // No period measured yet: the first holds the congestion window's slow start and the job's
  // warm-up, so its aggregator rate is not taken as their capacity (its ring rate is used).
  bool first_period_ = true;
  double hop_s_ = 0;
  bool ring_was_slower_ = false;  // some period's ring share ended after the aggregators' share
  // The last period that measured the aggregators saw them limit their share: a limit is
  // believed when two periods in a row see one.
  bool limit_seen_ = false;
  // R before any measurement (advertised, scaled by re-stripes and grant updates), and the
  // periods in a row whose aggregator share did not wait for the window.
  double prior_capacity_ = 0;
  int kept_up_ = 0;
  double grant_ = 0;  // agreed grant sum, Mbit/s; 0 unknown, < 0 re-striped: adopt the next
};

}  // namespace conflux::collnet
