// SPDX-License-Identifier: Apache-2.0
// CollNet connect, phase 4 (agree): each rank's verdict after its join (can it use the
// aggregators, its link, their capacity, its settings), agreed over the setup pair so that every
// rank declines or none does, and the communicator's options taken from the agreed verdicts;
// then, once the communicator exists, the agreement on its probes (connect_measure.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/connect_measure.h"
#include "collnet/connect_ring.h"
#include "conflux/client/engine.h"
#include "conflux/common/status.h"
#include "core/params.h"

namespace conflux::plugin::connect {

// What each rank tells the others at the end of connect.
// The split inputs travel with it: every rank uses the same ring fraction, rank 0's setting,
// and with "auto" the slowest link and the smallest aggregator capacity any rank saw.
struct Verdict {
  uint8_t ok = 0;
  char reason[127] = {};
  double ring_fraction = 0;  // CONFLUX_RING_FRACTION here (kAutoFraction: auto)
  int64_t ring_min_us = 0;   // CONFLUX_RING_MIN_US here (rank 0's is used)
  double link_mbps = 0;
  double capacity_mbps = 0;
  double grant_mbps = 0;     // sum of its aggregators' grants (Capacity share_mbps) now
  double hop_us = 0;         // one hop of the worker ring, as this rank measured it at connect
  double measured_mbps = 0;  // what its link to rank+1 delivered at connect (0: not measured)
  // CONFLUX_AGGREGATOR_MBPS here (rank 0's is used): an operator's figure for the aggregators
  // wins over the connect's probe, as CONFLUX_LINK_MBPS wins over the link's.
  double aggregator_mbps = 0;
  int64_t staging_chunk = 0;  // CONFLUX_STAGING_CHUNK here (rank 0's is used)
};

// The smallest / largest figure over every rank, and the agreed derived settings.
double smallest(const std::vector<Verdict>& all, double Verdict::*field);
double agreed_ring_fraction(const std::vector<Verdict>& all, int nranks);
double largest_hop_us(const std::vector<Verdict>& all);
size_t ring_min_bytes(const std::vector<Verdict>& all);

// This rank's verdict after its join (engine: the joined aggregators, or null and `joined`
// says why).
Verdict local_verdict(const Config& cfg, int dev, int rank, int nranks,
                      const client::Engine* engine, const conflux::Status& joined,
                      double measured_mbps);
// Every rank's verdict into *all; kSystemError (after one line saying why) when any rank
// cannot use the aggregators.
Status agree_verdicts(const Config& cfg, net::SendComm* next, net::RecvComm* prev, int rank,
                      int nranks, const Verdict& mine, std::chrono::milliseconds timeout,
                      std::vector<Verdict>* all);
collnet::CollOptions comm_options(const Config& cfg, const std::vector<Verdict>& all, uint64_t key,
                                  int nranks, int rank, const collnet::TreeCounts& tree,
                                  const client::Engine& engine);
// Rank 0's INFO line on the connected communicator.
void log_connected(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                   const client::Engine& engine, int nranks);
// The probes through the new communicator (probe_collnet), then every rank learns every rank's
// outcome: all go on, or all decline.
Status agree_on_probes(const Config& cfg, collnet::CollComm& comm, const Rendezvous& rv, int rank,
                       int nranks, std::chrono::milliseconds timeout, ProbeBuffers& probe,
                       ProbeTimes* times);

}  // namespace conflux::plugin::connect
