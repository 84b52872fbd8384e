// SPDX-License-Identifier: Apache-2.0
// Exports ncclNetPlugin_v9 (NCCL 2.24-2.25): no profiler, no phandles.
#include "nccl/net_v9.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "abi/net_entries.h"

namespace conflux::abi {
namespace {

namespace core = conflux::plugin;

ncclResult_t init(ncclDebugLogger_t log) {
  return guard("init", [&] { return core::netInitLegacy(log); });
}
ncclResult_t getProperties(int dev, ncclNetProperties_v9_t* props) {
  return getPropsAs<ncclNetProperties_v9_t>(
      dev, props, [](const auto& in, auto* out) { copyV9Props(in, out); });
}
ncclResult_t listen(int dev, void* handle, void** listenComm) {
  return guard("listen", [&] { return core::netListen(nullptr, dev, handle, listenComm); });
}
ncclResult_t connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** devComm) {
  return guard("connect",
               [&] { return core::netConnect(nullptr, dev, handle, sendComm, devComm); });
}
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                   void** request) {
  return guard("isend", [&] {
    return core::netIsend(sendComm, data, size, tag, mhandle, nullptr, request);
  });
}
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** request) {
  return guard("irecv", [&] {
    return core::netIrecv(recvComm, n, data, sizes, tags, mhandles, nullptr, request);
  });
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    conflux::plugin::kNetName,
    init,
    entries::devices,
    getProperties,
    listen,
    connect,
    entries::accept,
    entries::regMr,
    entries::regMrDmaBuf,
    entries::deregMr,
    isend,
    irecv,
    entries::iflush,
    entries::test,
    entries::closeSend,
    entries::closeRecv,
    entries::closeListen,
    entries::getDeviceMr,
    entries::irecvConsumed,
    /*makeVDevice=*/nullptr,
};
}  // extern "C"
