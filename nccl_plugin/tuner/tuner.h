// The Conflux tuner: steers AllReduce to CollNetChain (through the aggregators) for the
// sizes where aggregation wins, and to Ring elsewhere.
//
// Policy, per AllReduce of nBytes on a communicator spanning >= 2 nodes, when NCCL offers
// CollNetChain/Simple (cost != -1) and some Conflux CollNet communicator is live in this
// process (otherwise the table is left as NCCL filled it, harmless when CollNet is absent):
//   * no communicator has aggregator capacity left: CollNetChain is made unavailable (-1);
//   * a byte range is set (min_bytes or max_bytes not 0, CONFLUX_TUNER_COLLNET_*_BYTES): it
//     decides, CollNetChain/Simple gets cost 0 inside it so NCCL picks it, -1 outside;
//   * otherwise, with `measured` (CONFLUX_TUNER_MEASURED, the default) and a complete estimate
//     of both paths (collnet/path_estimate.h: a small AllReduce's time through CollNet and the
//     measured split's bandwidth; the worker ring's hop and link): CollNet where its estimated
//     time is at most the ring's, unavailable where the ring's is shorter;
//   * otherwise (nothing measured yet, or a fixed CONFLUX_RING_FRACTION): CollNet.
// Thread-safety: NCCL calls getCollInfo from the thread enqueuing collectives; the decision
// reads only the context and one atomic.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collnet/path_estimate.h"

namespace conflux::tuner {

struct TunerPolicy {
  size_t min_bytes = 0;
  size_t max_bytes = 0;  // 0 = unlimited
  size_t nnodes = 1;
  bool measured = true;  // with no byte range: choose by the measured estimate
};

enum class Choice { kLeave, kCollNetChain, kNotCollNet };

// Pure decision (tested directly): `collnet_offered` is whether NCCL's table has
// CollNetChain/Simple available, `collnet_live` whether a Conflux CollNet comm is connected,
// `aggregators_usable` whether one of them still has aggregator capacity (not failed over,
// ring fraction below 1). Connected CollNet without capacity would only run our worker ring,
// so AllReduce is steered away from it (NCCL's own Ring over the p2p net pipelines better).
// `estimate`: the latest of this process's CollNet communicators (null: none).
Choice decide(const TunerPolicy& p, int coll_type, size_t nbytes, bool collnet_offered,
              bool collnet_live, bool aggregators_usable,
              const collnet::PathEstimate* estimate = nullptr);

// Whether decide() chooses by `estimate` (no byte range set, measured, estimate complete).
bool by_estimate(const TunerPolicy& p, const collnet::PathEstimate* estimate);

// Applies the decision to NCCL's cost table (float[numAlgo][numProto]).
void apply(Choice c, float** cost_table, int num_algo, int num_proto);

}  // namespace conflux::tuner
