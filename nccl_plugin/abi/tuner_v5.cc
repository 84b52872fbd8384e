// SPDX-License-Identifier: Apache-2.0
// Exports ncclTunerPlugin_v5 (NCCL 2.28-2.29): NCCL finds it in the net plugin library when
// NCCL_TUNER_PLUGIN is unset. Policy: tuner/tuner.h; entry points: abi/tuner_entries.cc.
#include "nccl/tuner_v5.h"

#include "abi/export.h"
#include "abi/tuner_entries.h"

namespace conflux::abi {
namespace {

ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                  ncclNvlDomainInfo_v5_t*, ncclTunerConstants_v5_t*) {
  return tuner_entries::init(5, ctx, commId, nRanks, nNodes, log);
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
    "Conflux",
    init,
    tuner_entries::getCollInfo,
    tuner_entries::finalize,
};
}  // extern "C"
