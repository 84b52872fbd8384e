// SPDX-License-Identifier: Apache-2.0
// ncclNet entry points whose C signature is the same in every ABI version v8..v11.
// Each is a tiny wrapper: call the core, convert exceptions (see adapter_util.h).
#pragma once

#include "abi/nccl_names.h"

namespace conflux::abi::entries {

ncclResult_t devices(int* ndev);
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);
ncclResult_t closeListen(void* listenComm);
ncclResult_t getDeviceMr(void* comm, void* mhandle, void** dptrMhandle);
ncclResult_t irecvConsumed(void* recvComm, int n, void* request);

}  // namespace conflux::abi::entries
