// SPDX-License-Identifier: Apache-2.0
// CollNet connect, phases 2 and 5 (measure): what the worker ring and CollNet itself deliver,
// timed over the setup pair and through the new communicator: one hop of the ring, the link to
// rank+1, a one-element AllReduce and a 1 MiB one. Figures for the split and the tuner's model.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collnet/coll_comm.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::plugin::connect {

using net::Status;

// The one-element AllReduces collConnect times for the tuner's model (step 6), and the one
// that agrees on the result: every communicator's first requests.
constexpr int kLatencyProbes = 9;
// The connect's bulk probe: one AllReduce of 1 MiB, timed for the tuner's model.
constexpr size_t kBulkProbeFloats = 256 * 1024;
// NCCL's smallest CollNetChain AllReduce request: one staging region, 32 KiB at least
// (path_model.h min_request_bytes).
constexpr size_t kNcclMinCollNetRequest = 32 * 1024;
constexpr uint32_t kConnectRequests = kLatencyProbes + 2;  // + the bulk probe and the max

// One hop of the worker ring, in microseconds (0 with one rank, or when the ring failed).
double measure_hop_us(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                      std::chrono::milliseconds timeout);
// What the link to rank+1 delivers, Mbit/s (0 with one rank, or when the ring failed).
double measure_link_mbps(net::SendComm* next, net::RecvComm* prev, int nranks,
                         std::chrono::milliseconds timeout);

// The probes' buffers: they outlive the CollComm (declared before it), since a probe that
// timed out stays in its queue until the CollComm is destroyed.
struct ProbeBuffers {
  std::vector<float> in = std::vector<float>(kBulkProbeFloats);
  std::vector<float> out = std::vector<float>(kBulkProbeFloats);
};

// What the connect probes measured, agreed by every rank (the slowest rank's figures).
struct ProbeTimes {
  double latency_s = 0;  // the median of the one-element sums
  double bulk_s = 0;     // one sum of kBulkProbeFloats
};

// Times kLatencyProbes one-element sums and one of kBulkProbeFloats through `c`, checks every
// result, and agrees through `c` on the slowest rank's figures (see connect_measure.cc).
Status probe_collnet(collnet::CollComm& c, int nranks, std::chrono::milliseconds timeout,
                     ProbeBuffers& b, ProbeTimes* times);

}  // namespace conflux::plugin::connect
