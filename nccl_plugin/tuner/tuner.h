// SPDX-License-Identifier: Apache-2.0
// The Conflux tuner: steers AllReduce to CollNetChain (through the aggregators) for the
// sizes where aggregation wins, and to Ring elsewhere.
//
// Policy, per AllReduce of nBytes on a communicator spanning >= 2 nodes, when NCCL offers an
// algorithm that runs through the aggregators (cost != -1; otherwise the table is left as NCCL
// filled it). Those are CollNetChain, CollNetDirect (NVSwitch nodes, several ranks per node)
// and, across nodes, NVLS, whose inter-node step NCCL runs over CollNet (src/enqueue.cc):
//   * CONFLUX_TUNER_COLLNET_MIN_BYTES / _MAX_BYTES set (either non-zero): CollNetChain for
//     min_bytes <= nBytes <= max_bytes (max 0 = no limit), NCCL's others outside;
//   * else, with a measured model (collnet/path_model.h): CollNetChain where it is faster
//     than NCCL's ring, NCCL's others elsewhere;
//   * else, with CONFLUX_RING_FRACTION=1 (CollNet would run everything over our worker
//     ring), NCCL's others at every size;
//   * else CollNetChain at every size;
//   * settings that do not parse (TunerPolicy::leave_all): the table is left alone.
// "CollNet" gives the cheapest offered of those entries (by NCCL's own costs) cost 0, so NCCL
// picks it; "NCCL's others" makes every one of them unavailable (-1), so that steering away
// from CollNetChain cannot leave AllReduce going through the aggregators by CollNetDirect or
// NVLS instead.
//
// Every rank must choose the same algorithm for a collective, or NCCL hangs. So the choice
// depends only on what is the same on every rank: the size, NCCL's table, the environment
// (which NCCL too requires to be the same everywhere) and models agreed at connect, never on
// a rank's own state (a failover is seen at different moments on different ranks; a rank
// that is not a CollNet head holds no CollNet communicator at all).
// Thread-safety: NCCL calls getCollInfo from the thread launching a group; the decision
// reads only the context, which is fixed at init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace conflux::tuner {

struct TunerPolicy {
  size_t min_bytes = 0;
  size_t max_bytes = 0;  // 0 = unlimited
  size_t nnodes = 1;
  bool ring_only = false;  // CONFLUX_RING_FRACTION=1
  // The settings could not be read (a bad CONFLUX_* value): NCCL's table is left as NCCL
  // filled it for every collective. NCCL treats a tuner init error as fatal for the
  // communicator, so a bad setting costs the tuning, not the job.
  bool leave_all = false;
  bool fixed() const { return min_bytes != 0 || max_bytes != 0; }
};

enum class Choice { kLeave, kCollNet, kNotCollNet };

// Pure decision (tested directly): `collnet_offered` is whether NCCL's table has an entry
// through the aggregators available (collnet_offered() below); `measured` whether the
// communicator's agreed models prefer CollNet at nbytes (nullopt: it has none).
Choice decide(const TunerPolicy& p, int coll_type, size_t nbytes, bool collnet_offered,
              std::optional<bool> measured);

// Where `collnet(bytes)` changes, over the sizes 1 B, 2 B, 4 B ... 1 TiB, for the log: e.g.
// "NCCL's algorithms from 1 B, CollNet from 16384 B".
std::string describe(const std::function<bool(size_t)>& collnet);

// Whether (algo, any protocol) runs through the aggregators on `nnodes` nodes.
bool through_aggregators(int algo, size_t nnodes);
// Whether NCCL's cost table (float[numAlgo][numProto]) offers such an entry.
bool collnet_offered(float** cost_table, int num_algo, int num_proto, size_t nnodes);

// The chunk size for NCCL's getChunkSize (tuner v6), given the one NCCL computed.
// CollNetChain and CollNetDirect AllReduce (Simple, the only protocol NCCL runs them with): NCCL
// posts one CollNet request per step of the whole staging region, its channels x the chunk, so
// an AllReduce smaller than one loop (nchannels x nccl_chunk) would make the aggregators
// reduce up to nchannels x 32..512 KiB of padding. There the chunk becomes the AllReduce's
// share per channel, rounded up to NCCL's 512 B grain: still one loop, the same steps, the
// request no larger than the AllReduce plus that rounding. Everything else, and a setting that
// does not parse (leave_all), keeps NCCL's chunk. Depends only on the arguments, which are the
// same on every rank, as the chunk must be.
size_t chunk_size(const TunerPolicy& p, int coll_type, size_t nbytes, int algo, int proto,
                  int nchannels, size_t nccl_chunk);

// Applies the decision to NCCL's cost table. kNotCollNet leaves the aggregators' entries alone
// when nothing else is available (NCCL_ALGO forcing one of them), so NCCL never finds no
// algorithm; the table is the same on every rank, so is that exception.
void apply(Choice c, float** cost_table, int num_algo, int num_proto, size_t nnodes);

}  // namespace conflux::tuner
