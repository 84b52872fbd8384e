// SPDX-License-Identifier: Apache-2.0
// Reduction tree at connect (protocol/SPEC.md §7): every rank names its own aggregators
// (CONFLUX_AGGREGATORS may differ per node: a rank lists the leaves nearest to it, and in a
// tree deeper than 2 each leaf's chain up, "leaf>mid"), and the ranks agree over the worker
// ring on how many of them sit under each one. A leaf is told these counts in the Join, so
// it knows when its part of the job is complete, and passes the counts above it on up.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

// The counts for this rank, by entry i of CONFLUX_AGGREGATORS. Both empty when every rank
// named the same list with no chains (a tree of depth 1: nothing to tell the aggregators).
struct TreeCounts {
  // Ranks whose entry i is the same endpoint as this rank's.
  std::vector<uint32_t> served;
  // Level j above that endpoint: ranks whose entry i names the same aggregator at level j
  // (empty lists where the entry has no chain, or when no rank has one).
  std::vector<std::vector<uint32_t>> served_up;
};

// The aggregators one rank named: entry i's chain, the contacted endpoint first.
using AggregatorChains = std::vector<std::vector<std::string>>;

// Allgathers hashes of every rank's chains over the ring and counts. Entries beyond 64, and
// chains of entries beyond 16, are not compared (they count as shared by every rank).
net::Status exchange_tree_counts(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                                 const AggregatorChains& chains, std::chrono::milliseconds timeout,
                                 TreeCounts* counts);

// The counting itself, on the gathered chains (all[r] = rank r's, the same shape as above).
TreeCounts count_tree(const std::vector<AggregatorChains>& all, int rank);

}  // namespace conflux::collnet
