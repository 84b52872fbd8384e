// SPDX-License-Identifier: Apache-2.0
#include "abi/collnet_entries.h"

#include "abi/adapter_util.h"
#include "collnet/collnet_api.h"

namespace conflux::abi::collnet_entries {

namespace core = conflux::plugin;

ncclResult_t initLegacy(ncclDebugLogger_t log) {
  return guard("collnet init", [&] { return core::collInitLegacy(log); });
}
ncclResult_t devices(int* ndev) {
  return guard("collnet devices", [&] { return core::collDevices(ndev); });
}
ncclResult_t listenLegacy(int dev, void* handle, void** listenComm) {
  return guard("collnet listen",
               [&] { return core::collListen(nullptr, dev, handle, listenComm); });
}
ncclResult_t connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  return guard("collnet connect",
               [&] { return core::collConnect(handles, nranks, rank, listenComm, collComm); });
}
ncclResult_t reduceSupport(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported) {
  return guard("collnet reduceSupport",
               [&] { return core::collReduceSupport(int(dataType), int(redOp), supported); });
}
ncclResult_t regMr(void* collComm, void* data, size_t size, int type, void** mhandle) {
  return guard("collnet regMr",
               [&] { return core::collRegMr(collComm, data, size, type, mhandle); });
}
ncclResult_t regMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  return guard("collnet regMrDmaBuf", [&] {
    return core::collRegMrDmaBuf(collComm, data, size, type, offset, fd, mhandle);
  });
}
ncclResult_t deregMr(void* collComm, void* mhandle) {
  return guard("collnet deregMr", [&] { return core::collDeregMr(collComm, mhandle); });
}
ncclResult_t iallreduce(void* collComm, void* sendData, void* recvData, size_t count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                        void* recvMhandle, void** request) {
  return guard("collnet iallreduce", [&] {
    return core::collIallreduce(collComm, sendData, recvData, count, int(dataType), int(redOp),
                                sendMhandle, recvMhandle, request);
  });
}
ncclResult_t iflush(void* collComm, void* data, int size, void* mhandle, void** request) {
  return guard("collnet iflush",
               [&] { return core::collIflush(collComm, data, size, mhandle, request); });
}
ncclResult_t test(void* request, int* done, int* size) {
  return guard("collnet test", [&] { return core::collTest(request, done, size); });
}
ncclResult_t closeColl(void* collComm) {
  return guard("collnet closeColl", [&] { return core::collCloseColl(collComm); });
}
ncclResult_t closeListen(void* listenComm) {
  return guard("collnet closeListen", [&] { return core::collCloseListen(listenComm); });
}
bool copyParts(const char* entry, int n, const void* sges, size_t stride,
               plugin::CollSge (*read)(const void*), std::vector<plugin::CollSge>* out) {
  if (n < 1 || n > plugin::kMaxCollParts || sges == nullptr) {
    CFX_WARN(net::kLogColl, "CollNet %s: %d scatter/gather parts (1..%d supported)", entry, n,
             plugin::kMaxCollParts);
    return false;
  }
  out->reserve(static_cast<size_t>(n));
  const auto* p = static_cast<const unsigned char*>(sges);
  for (int i = 0; i < n; ++i) out->push_back(read(p + static_cast<size_t>(i) * stride));
  return true;
}

ncclResult_t iallgatherParts(void* collComm, void* sendData, int nRecvParts,
                             const plugin::CollSge* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void** request) {
  return guard("collnet iallgather", [&] {
    return core::collIallgather(collComm, sendData, nRecvParts, recvParts, bytesPerRank,
                                windowOffset, windowBytes, request);
  });
}

ncclResult_t ireducescatterParts(void* collComm, int nSendParts, const plugin::CollSge* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void** request) {
  return guard("collnet ireducescatter", [&] {
    return core::collIreducescatter(collComm, nSendParts, sendParts, recvData, bytesPerRank,
                                    windowOffset, windowBytes, int(dataType), int(redOp), request);
  });
}

}  // namespace conflux::abi::collnet_entries
