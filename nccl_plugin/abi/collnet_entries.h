// ncclCollNet entry points whose C signature is the same in every ABI version v8..v11.
// Each is a tiny wrapper: call the CollNet core, convert exceptions (adapter_util.h).
#pragma once

#include "abi/nccl_types.h"

namespace conflux::abi::collnet_entries {

ncclResult_t initLegacy(ncclDebugLogger_t log);
ncclResult_t devices(int* ndev);
ncclResult_t listenLegacy(int dev, void* handle, void** listenComm);
ncclResult_t connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
ncclResult_t reduceSupport(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
ncclResult_t regMr(void* collComm, void* data, size_t size, int type, void** mhandle);
ncclResult_t regMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset,
                         int fd, void** mhandle);
ncclResult_t deregMr(void* collComm, void* mhandle);
ncclResult_t iallreduce(void* collComm, void* sendData, void* recvData, size_t count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                        void* recvMhandle, void** request);
ncclResult_t iflush(void* collComm, void* data, int size, void* mhandle, void** request);
ncclResult_t test(void* request, int* done, int* size);
ncclResult_t closeColl(void* collComm);
ncclResult_t closeListen(void* listenComm);

// AllGather / ReduceScatter are used by NCCL only with CollNetDirect (NVSwitch systems);
// Conflux does not implement them yet and says so once per call with ncclInternalError.
template <typename SGE>
ncclResult_t iallgather(void*, void*, int, SGE*, size_t, size_t, size_t, void*, void** request);
template <typename SGE>
ncclResult_t ireducescatter(void*, int, SGE*, void*, size_t, size_t, size_t, ncclDataType_t,
                            ncclRedOp_t, void*, void** request);

ncclResult_t unsupportedCollective(const char* which, void** request);

template <typename SGE>
ncclResult_t iallgather(void*, void*, int, SGE*, size_t, size_t, size_t, void*, void** request) {
  return unsupportedCollective("iallgather", request);
}
template <typename SGE>
ncclResult_t ireducescatter(void*, int, SGE*, void*, size_t, size_t, size_t, ncclDataType_t,
                            ncclRedOp_t, void*, void** request) {
  return unsupportedCollective("ireducescatter", request);
}

}  // namespace conflux::abi::collnet_entries
