// SPDX-License-Identifier: Apache-2.0
#include "collnet/connect_model.h"

#include "collnet/split.h"
#include "net/log.h"

namespace conflux::plugin::connect {
namespace {

using net::kLogColl;
using net::kLogInit;

// The agreed figures of the split.
collnet::PathModel path_model(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                              int nranks) {
  collnet::PathModel m;
  m.nranks = nranks;
  m.link_Bps = smallest(all, &Verdict::link_mbps) * 1e6 / 8;
  m.capacity_Bps = smallest(all, &Verdict::capacity_mbps) * 1e6 / 8;
  m.ring_fraction = opts.ring_fraction;
  m.min_ring_bytes =
      std::max(opts.ring_min_bytes, opts.controller ? opts.controller->min_ring_bytes() : 0);
  m.hop_s = largest_hop_us(all) * 1e-6;
  m.min_request_bytes = kNcclMinCollNetRequest;
  return m;
}

}  // namespace

collnet::PathModel tuner_model(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                               int nranks, int rank, const ProbeTimes& times, size_t naggregators,
                               collnet::CollComm& comm) {
  collnet::PathModel m = path_model(all, opts, nranks);
  m.collnet_s = times.latency_s;
  // What the aggregators delivered in the bulk probe corrects the advertised capacity in the
  // tuner's model and the measured split's start, by the link's rule (split.h): a daemon
  // reports its NIC's speed, not a bottleneck behind it; CONFLUX_AGGREGATOR_MBPS (rank 0's)
  // wins over both, as CONFLUX_LINK_MBPS does for the link. n ranks sent the aggregators'
  // share of the probe each.
  const double advertised = m.capacity_Bps;
  double delivered = 0;
  bool split_from_probe = false;
  if (nranks > 1) {
    const double agg_bytes =
        4.0 * static_cast<double>(collnet::aggregator_elements(
                  kBulkProbeFloats, 4, opts.ring_fraction, opts.ring_min_bytes));
    const double busy = times.bulk_s - m.collnet_s;
    if (agg_bytes > 0 && busy > 0) delivered = nranks * agg_bytes / busy;
    const double probed = all[0].aggregator_mbps > 0 ? 0 : delivered;  // 0: the operator's
    m.capacity_Bps = collnet::link_prior_mbps(0, advertised, probed);
    // The measured split takes the same figure by the same rule (identical on every rank:
    // the probe times were agreed above) and starts every later request from the split it
    // implies; the tuner, which cannot follow the split later, prices CollNet at that start.
    double start = m.ring_fraction;
    split_from_probe = opts.controller && comm.take_connect_probe(probed, &start);
    if (split_from_probe) m.ring_fraction = start;
  }
  if (rank == 0) {
    CFX_INFO(
        kLogColl | kLogInit,
        "CollNet path: a 4 B AllReduce takes %.0f us through %zu aggregator(s) (the "
        "slowest rank's median), against %.0f us for %d ring hops; 1 MiB took %.0f us, "
        "the aggregators delivered %.0f Mbit/s (advertised %.0f): the tuner's model takes %.0f "
        "and ring fraction %.3f%s",
        m.collnet_s * 1e6, naggregators, m.ring_latency_s() * 1e6, 2 * (nranks - 1),
        times.bulk_s * 1e6, delivered * 8e-6, advertised * 8e-6, m.capacity_Bps * 8e-6,
        m.ring_fraction, split_from_probe ? " (the measured split starts there too)" : "");
  }
  return m;
}

}  // namespace conflux::plugin::connect
