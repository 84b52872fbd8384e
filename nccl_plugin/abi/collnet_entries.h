// SPDX-License-Identifier: Apache-2.0
// ncclCollNet entry points whose C signature is the same in every ABI version v8..v11.
// Each is a tiny wrapper: call the CollNet core, convert exceptions (adapter_util.h).
#pragma once

#include <vector>

#include "abi/nccl_names.h"
#include "collnet/collnet_api.h"

namespace conflux::abi::collnet_entries {

ncclResult_t initLegacy(ncclDebugLogger_t log);
ncclResult_t devices(int* ndev);
ncclResult_t listenLegacy(int dev, void* handle, void** listenComm);
ncclResult_t connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
ncclResult_t reduceSupport(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
ncclResult_t regMr(void* collComm, void* data, size_t size, int type, void** mhandle);
ncclResult_t regMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle);
ncclResult_t deregMr(void* collComm, void* mhandle);
ncclResult_t iallreduce(void* collComm, void* sendData, void* recvData, size_t count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                        void* recvMhandle, void** request);
ncclResult_t iflush(void* collComm, void* data, int size, void* mhandle, void** request);
ncclResult_t test(void* request, int* done, int* size);
ncclResult_t closeColl(void* collComm);
ncclResult_t closeListen(void* listenComm);

// AllGather / ReduceScatter (used by NCCL with CollNetDirect). The SGE type differs between
// versions (uint32_t size in v8, size_t later); the parts are copied into the core's form.
ncclResult_t iallgatherParts(void* collComm, void* sendData, int nRecvParts,
                             const plugin::CollSge* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void** request);
ncclResult_t ireducescatterParts(void* collComm, int nSendParts, const plugin::CollSge* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void** request);

// Returns false (and logs) if the count is out of range; fills `out` otherwise.
bool copyParts(const char* entry, int n, const void* sges, size_t stride,
               plugin::CollSge (*read)(const void*), std::vector<plugin::CollSge>* out);

template <typename SGE>
plugin::CollSge readSge(const void* p) {
  const auto* s = static_cast<const SGE*>(p);
  return {s->address, static_cast<size_t>(s->size)};
}

template <typename SGE>
ncclResult_t iallgather(void* collComm, void* sendData, int nRecvParts, SGE* recvParts,
                        size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void*,
                        void** request) {
  if (request != nullptr) *request = nullptr;
  std::vector<plugin::CollSge> parts;
  if (!copyParts("iallgather", nRecvParts, recvParts, sizeof(SGE), &readSge<SGE>, &parts)) {
    return ncclInvalidArgument;
  }
  return iallgatherParts(collComm, sendData, nRecvParts, parts.data(), bytesPerRank, windowOffset,
                         windowBytes, request);
}
template <typename SGE>
ncclResult_t ireducescatter(void* collComm, int nSendParts, SGE* sendParts, void* recvData,
                            size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                            ncclDataType_t dataType, ncclRedOp_t redOp, void*, void** request) {
  if (request != nullptr) *request = nullptr;
  std::vector<plugin::CollSge> parts;
  if (!copyParts("ireducescatter", nSendParts, sendParts, sizeof(SGE), &readSge<SGE>, &parts)) {
    return ncclInvalidArgument;
  }
  return ireducescatterParts(collComm, nSendParts, parts.data(), recvData, bytesPerRank,
                             windowOffset, windowBytes, dataType, redOp, request);
}

}  // namespace conflux::abi::collnet_entries
