// SPDX-License-Identifier: Apache-2.0
#include "abi/net_entries.h"

#include "abi/adapter_util.h"
#include "core/net_api.h"

namespace conflux::abi::entries {

namespace core = conflux::plugin;

ncclResult_t devices(int* ndev) {
  return guard("devices", [&] { return core::netDevices(ndev); });
}
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm) {
  return guard("accept", [&] { return core::netAccept(listenComm, recvComm, recvDevComm); });
}
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] { return core::netRegMr(comm, data, size, type, mhandle); });
}
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  return guard("regMrDmaBuf",
               [&] { return core::netRegMrDmaBuf(comm, data, size, type, offset, fd, mhandle); });
}
ncclResult_t deregMr(void* comm, void* mhandle) {
  return guard("deregMr", [&] { return core::netDeregMr(comm, mhandle); });
}
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request) {
  return guard("iflush",
               [&] { return core::netIflush(recvComm, n, data, sizes, mhandles, request); });
}
ncclResult_t test(void* request, int* done, int* sizes) {
  return guard("test", [&] { return core::netTest(request, done, sizes); });
}
ncclResult_t closeSend(void* sendComm) {
  return guard("closeSend", [&] { return core::netCloseSend(sendComm); });
}
ncclResult_t closeRecv(void* recvComm) {
  return guard("closeRecv", [&] { return core::netCloseRecv(recvComm); });
}
ncclResult_t closeListen(void* listenComm) {
  return guard("closeListen", [&] { return core::netCloseListen(listenComm); });
}
ncclResult_t getDeviceMr(void* comm, void* mhandle, void** dptrMhandle) {
  return guard("getDeviceMr", [&] { return core::netGetDeviceMr(comm, mhandle, dptrMhandle); });
}
ncclResult_t irecvConsumed(void* recvComm, int n, void* request) {
  return guard("irecvConsumed", [&] { return core::netIrecvConsumed(recvComm, n, request); });
}

}  // namespace conflux::abi::entries
