// SPDX-License-Identifier: Apache-2.0
#include "collnet/connect_measure.h"

#include <algorithm>
#include <thread>

#include "collnet/path_model.h"
#include "collnet/ring_exchange.h"
#include "net/log.h"

namespace conflux::plugin::connect {

using net::kLogColl;

// One hop of the worker ring: kHopRounds allgathers of one word, each timed; a hop is the
// typical round (typical_round: the first, which brings the ranks together, and outliers left
// out) over the nranks-1 steps of an allgather (microseconds; 0 with one rank, or when the
// ring failed, which the agreement then reports).
double measure_hop_us(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                      std::chrono::milliseconds timeout) {
  constexpr int kHopRounds = 9;
  if (nranks < 2) return 0;
  const uint64_t mine = static_cast<uint64_t>(rank);
  std::vector<uint64_t> all(static_cast<size_t>(nranks));
  std::vector<double> rounds;
  for (int i = 0; i < kHopRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (collnet::ring_allgather(next, prev, rank, nranks, &mine, all.data(), sizeof mine,
                                timeout) != Status::kOk) {
      return 0;
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    rounds.push_back(took.count());
  }
  return collnet::typical_round(std::move(rounds)) / (nranks - 1);
}

// What the link to rank+1 delivers: kLinkRounds ring steps of kLinkProbeBytes, every rank
//     sending and receiving at once as a ring does; the fastest round, in Mbit/s (0 with one
//     rank, or when the ring failed). A NIC reports its own speed, not a slower bottleneck
//     behind it (a veth says 10 Gbit/s over a 1 Gbit/s fabric), so this corrects the prior.
double measure_link_mbps(net::SendComm* next, net::RecvComm* prev, int nranks,
                         std::chrono::milliseconds timeout) {
  constexpr size_t kLinkProbeBytes = size_t{2} << 20;
  constexpr int kLinkRounds = 2;
  if (nranks < 2) return 0;
  std::vector<char> out(kLinkProbeBytes, 1), in(kLinkProbeBytes);
  double best = 0;
  for (int i = 0; i < kLinkRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (collnet::ring_shift(next, prev, out.data(), in.data(), kLinkProbeBytes, timeout) !=
        Status::kOk) {
      return 0;
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    best = std::max(best, kLinkProbeBytes * 8.0 / took.count() / 1e6);
  }
  return best;
}

namespace {

// One AllReduce of `count` floats of b.in into b.out through `c`, to completion (NCCL's
// proxy thread, too, calls test() in a loop). Fails after `timeout`. *seconds (if given): from
// the request's acceptance to its completion (not the wait for the split's first decision).
Status allreduce_n(collnet::CollComm& c, ProbeBuffers& b, size_t count, Op op,
                   std::chrono::milliseconds timeout, double* seconds = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  collnet::CollRequest* r = nullptr;
  while (r == nullptr) {
    CFX_RETURN_IF_ERROR(c.iallreduce(b.in.data(), b.out.data(), count, DType::kFloat32, op, &r));
    if (r != nullptr) break;
    if (std::chrono::steady_clock::now() > deadline) return Status::kRemoteError;
    std::this_thread::yield();  // the split is not decided yet
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (bool done = false;;) {
    CFX_RETURN_IF_ERROR(collnet::CollComm::test(r, &done, nullptr));
    if (done) {
      if (seconds != nullptr) {
        *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      return Status::kOk;
    }
    if (std::chrono::steady_clock::now() > deadline) return Status::kRemoteError;
    std::this_thread::yield();
  }
}

// One timed AllReduce of `count` ones; every element of the result must be nranks.
Status timed_sum(collnet::CollComm& c, ProbeBuffers& b, size_t count, int nranks,
                 std::chrono::milliseconds timeout, double* seconds) {
  std::fill(b.in.begin(), b.in.begin() + static_cast<ptrdiff_t>(count), 1.0f);
  CFX_RETURN_IF_ERROR(allreduce_n(c, b, count, Op::kSum, timeout, seconds));
  for (size_t i = 0; i < count; ++i) {
    if (b.out[i] != static_cast<float>(nranks)) {
      CFX_WARN(kLogColl, "CollNet connect: a probe AllReduce of 1.0 on %d ranks gave %g", nranks,
               static_cast<double>(b.out[i]));
      return Status::kInternalError;
    }
  }
  return Status::kOk;
}

}  // namespace

// kLatencyProbes one-element sums, timed (typical_round: the median of all but the first,
// which waits for the last rank to arrive), then one of kBulkProbeFloats (what the path delivers,
// for the tuner's model; a request's size as NCCL issues them); then the largest figures any rank
// measured, by one more AllReduce (max) through the same path, so that every rank holds the
// same. Checks every sum, so a CollNet that gives wrong results fails here, before any data.
Status probe_collnet(collnet::CollComm& c, int nranks, std::chrono::milliseconds timeout,
                     ProbeBuffers& b, ProbeTimes* times) {
  std::vector<double> took;
  for (int i = 0; i < kLatencyProbes; ++i) {
    double d = 0;
    CFX_RETURN_IF_ERROR(timed_sum(c, b, 1, nranks, timeout, &d));
    took.push_back(d);
  }
  double bulk = 0;
  CFX_RETURN_IF_ERROR(timed_sum(c, b, kBulkProbeFloats, nranks, timeout, &bulk));
  b.in[0] = static_cast<float>(collnet::typical_round(std::move(took)));
  b.in[1] = static_cast<float>(bulk);
  CFX_RETURN_IF_ERROR(allreduce_n(c, b, 2, Op::kMax, timeout));
  times->latency_s = b.out[0];
  times->bulk_s = b.out[1];
  return Status::kOk;
}

}  // namespace conflux::plugin::connect
