// Reduction tree at connect (protocol/SPEC.md §7): every rank names its own aggregators
// (CONFLUX_AGGREGATORS may differ per node: a rank lists the leaves nearest to it), and the
// ranks agree over the worker ring on how many of them joined each one. A leaf is told this
// count in the Join, so it knows when its part of the job is complete.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

// For each entry i of `aggregators` (CONFLUX_AGGREGATORS, as written), the number of ranks
// whose entry i is the same endpoint. Empty when every rank named the same list (a tree of
// depth 1: nothing to tell the aggregators). Entries beyond 64 are not compared.
net::Status served_ranks(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                         const std::vector<std::string>& aggregators,
                         std::chrono::milliseconds timeout, std::vector<uint32_t>* served);

}  // namespace conflux::collnet
