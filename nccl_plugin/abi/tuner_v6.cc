// SPDX-License-Identifier: Apache-2.0
// Exports ncclTunerPlugin_v6 (NCCL 2.30 and later, which look for it before v5): v5's tuner
// plus getChunkSize, which trims the chunk of a small CollNet AllReduce (tuner::chunk_size).
#include "nccl/tuner_v6.h"

#include "abi/export.h"
#include "abi/tuner_entries.h"

namespace conflux::abi {
namespace {

ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                  ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) {
  return tuner_entries::init(6, ctx, commId, nRanks, nNodes, log);
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclTuner_v6_t ncclTunerPlugin_v6 = {
    "Conflux",
    init,
    tuner_entries::getCollInfo,
    tuner_entries::finalize,
    tuner_entries::getChunkSize,
};
}  // extern "C"
