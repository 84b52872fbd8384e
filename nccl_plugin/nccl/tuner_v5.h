// SPDX-License-Identifier: Apache-2.0
// NCCL tuner plugin ABI, version 5 (NCCL 2.28): our own declaration of the facts in
// shared/reference/nccl-plugin-abi.md. The NVLink-domain and constants structs are passed
// through untouched, so they stay opaque here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl/nccl_types.h"

namespace conflux::nccl {

struct ncclNvlDomainInfo_v5_t;   // opaque
struct ncclTunerConstants_v5_t;  // opaque

inline constexpr int kNcclFuncAllReduce = 4;
inline constexpr int kNcclAlgoRing = 1;
inline constexpr int kNcclAlgoCollNetDirect = 2;
inline constexpr int kNcclAlgoCollNetChain = 3;
inline constexpr int kNcclAlgoNvls = 4;  // across nodes it runs over CollNet
inline constexpr int kNcclProtoSimple = 2;
inline constexpr float kNcclAlgoProtoIgnore = -1.0f;

struct ncclTuner_v5_t {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
};

}  // namespace conflux::nccl
