// SPDX-License-Identifier: Apache-2.0
// NCCL tuner plugin ABI, version 6 (NCCL 2.30 and later): v5's table plus getChunkSize, which
// lets the tuner change the chunk size NCCL computed for a collective. The NVLink-domain and
// constants structs are v5's, passed through untouched.
#pragma once

#include "nccl/tuner_v5.h"

namespace conflux::nccl {

using ncclNvlDomainInfo_v6_t = ncclNvlDomainInfo_v5_t;
using ncclTunerConstants_v6_t = ncclTunerConstants_v5_t;

// The unit NCCL rounds a Simple-protocol chunk down to.
inline constexpr size_t kNcclProtoSimpleGrainBytes = 512;

struct ncclTuner_v6_t {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
  // Optional (may be null). *chunkSize holds NCCL's chunk size for (algo, proto) on entry; the
  // tuner may change it. NCCL then caps it at its staging buffer's step and rounds it down to
  // the protocol's grain (NCCL_PROTO_SIMPLE: 512 B).
  ncclResult_t (*getChunkSize)(void* ctx, int collType, size_t nBytes, int algo, int proto,
                               int nChannels, size_t* chunkSize);
};

#if defined(__LP64__)
static_assert(sizeof(ncclTuner_v6_t) == 40);
static_assert(offsetof(ncclTuner_v6_t, finalize) == 24);
#endif

}  // namespace conflux::nccl
