// SPDX-License-Identifier: Apache-2.0
// ncclTuner entry points whose C signature is the same in tuner ABI v5 and v6, and v6's
// getChunkSize. init takes the ABI version the table was exported as: with v6 NCCL asks
// getChunkSize, which changes the smallest CollNet request the tuner's model assumes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/nccl_names.h"

namespace conflux::abi::tuner_entries {

ncclResult_t init(int version, void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                  ncclDebugLogger_t log);
ncclResult_t getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps,
                         float** collCostTable, int numAlgo, int numProto, int regBuff,
                         int* nChannels);
ncclResult_t finalize(void* ctx);
ncclResult_t getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto,
                          int nChannels, size_t* chunkSize);

}  // namespace conflux::abi::tuner_entries
