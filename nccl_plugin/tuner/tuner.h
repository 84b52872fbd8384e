// The Conflux tuner: steers AllReduce to CollNetChain (through the aggregators) for the
// sizes where aggregation wins, and to Ring elsewhere.
//
// Policy, per AllReduce of nBytes on a communicator spanning >= 2 nodes:
//   * if NCCL offers CollNetChain/Simple (cost != -1), some Conflux CollNet communicator is
//     live in this process, and min_bytes <= nBytes <= max_bytes (max 0 = no limit):
//     CollNetChain/Simple gets cost 0 so NCCL picks it;
//   * if nBytes is outside [min_bytes, max_bytes]: CollNetChain is made unavailable (-1) so
//     NCCL picks among the others (Ring);
//   * otherwise the table is left as NCCL filled it (harmless when CollNet is absent).
// Thread-safety: NCCL calls getCollInfo from the thread enqueuing collectives; the decision
// reads only the context and one atomic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux::tuner {

struct TunerPolicy {
  size_t min_bytes = 0;
  size_t max_bytes = 0;  // 0 = unlimited
  size_t nnodes = 1;
};

enum class Choice { kLeave, kCollNetChain, kNotCollNet };

// Pure decision (tested directly): `collnet_offered` is whether NCCL's table has
// CollNetChain/Simple available, `collnet_live` whether a Conflux CollNet comm is connected,
// `aggregators_usable` whether one of them still has aggregator capacity (not failed over,
// ring fraction below 1). Connected CollNet without capacity would only run our worker ring,
// so AllReduce is steered away from it (NCCL's own Ring over the p2p net pipelines better).
Choice decide(const TunerPolicy& p, int coll_type, size_t nbytes, bool collnet_offered,
              bool collnet_live, bool aggregators_usable);

// Applies the decision to NCCL's cost table (float[numAlgo][numProto]).
void apply(Choice c, float** cost_table, int num_algo, int num_proto);

}  // namespace conflux::tuner
