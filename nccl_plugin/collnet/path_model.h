// SPDX-License-Identifier: Apache-2.0
// PathModel: how long an AllReduce of S bytes takes through CollNet (the aggregators plus the
// worker ring's share) and over NCCL's own ring on the same links, from figures every rank of
// the communicator agreed at connect. The tuner compares the two (tuner/tuner.h).
//
// Why only agreed figures: NCCL needs every rank to choose the same algorithm for a
// collective, and gives the tuner no way to talk to the other ranks nor a collective index at
// which to switch. Figures fixed at connect and identical on every rank give identical
// choices; anything a rank measures later, or alone, could not.
//
// The model (n ranks, link L, the aggregators' capacity R for this job, split fraction f,
// c = 2(n-1)/n a ring's link bytes per byte reduced):
//   CollNet: the aggregators take a = S(1-f) (all of S when the ring's share would be under
//            min_ring_bytes, split.h), starting after `collnet_s`, the measured time of a
//            one-element AllReduce; the ring's share starts after its 2(n-1) hops; both share
//            the link, and the aggregators receive n·a:
//              T = max(collnet_s, S-a > 0 ? 2(n-1)·hop : 0) + max(n·a/R, (a + c(S-a))/L)
//   Ring:      T = 2(n-1)·hop + c·S/L
// An AllReduce smaller than min_request_bytes costs CollNet a request of that size (S is
// raised to it in the CollNet time; NCCL's ring moves only S).
// CollNet wins only if strictly faster, so a job whose CollNet would run everything over our
// worker ring (f = 1) gets NCCL's ring, which pipelines better.
//
// The registry keeps the model of every connected CollNet communicator by NCCL's commId (the
// value both the v11 CollNet init and the v5 tuner init receive). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conflux::collnet {

struct PathModel {
  int nranks = 0;
  double link_Bps = 0;        // the slowest link any rank reported, bytes/s
  double capacity_Bps = 0;    // R: what the aggregators take for this job, bytes/s
  double ring_fraction = 0;   // the split at connect
  size_t min_ring_bytes = 0;  // a smaller ring share goes through the aggregators
  double hop_s = 0;           // one hop of the worker ring (the slowest rank's measure)
  double collnet_s = 0;       // a one-element AllReduce through CollNet (the slowest rank's)
  // The smallest request NCCL issues for an AllReduce: CollNetChain posts whole staging
  // regions, its subs x chunk size whatever the user's count (transport/coll_net.cc; chunks
  // of 32-256 KiB, enqueue.cc), so a 4 B AllReduce moves at least this much through CollNet.
  // 0: requests as large as the AllReduce (the driver without --nccl-regions). Tuner v6
  // lowers it to 512 B: its getChunkSize trims a small AllReduce's chunk (tuner/tuner.h).
  size_t min_request_bytes = 0;

  // Every figure the model needs is known (a 1-rank job or a failed measure has none).
  bool complete() const;
  double collnet_time(size_t bytes) const;
  double ring_time(size_t bytes) const;
  double ring_latency_s() const;  // the ring's 2(n-1) hops
  bool collnet_wins(size_t bytes) const { return collnet_time(bytes) < ring_time(bytes); }
};

// The figure the model takes from a connect probe repeated `rounds.size()` times: the median
// of the rounds after the first (the first waits for the last rank to arrive). A mean would
// carry one preempted round on a busy host into every later choice, and it moves the ring's
// latency and CollNet's alike; both connect probes use this. 0 with fewer than two rounds.
double typical_round(std::vector<double> rounds);

// Publishes `m` for NCCL communicator `comm_id`, owned by `owner` (a CollComm), until
// withdraw(owner).
void publish_model(uint64_t comm_id, const void* owner, const PathModel& m);
void withdraw_model(const void* owner);
// The models published for `comm_id` whose nranks is `nranks`, in publication order.
std::vector<PathModel> published_models(uint64_t comm_id, int nranks);

}  // namespace conflux::collnet
