// SPDX-License-Identifier: Apache-2.0
// Exports ncclNetPlugin_v10 (NCCL 2.26-2.27): init once per process, config at connect.
#include "nccl/net_v10.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "abi/net_entries.h"

namespace conflux::abi {
namespace {

namespace core = conflux::plugin;

ncclResult_t init(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  return guard("init", [&] { return core::netInitLegacy(log, prof); });
}
ncclResult_t getProperties(int dev, ncclNetProperties_v10_t* props) {
  return getPropsAs<ncclNetProperties_v10_t>(
      dev, props, [](const auto& in, auto* out) { copyV9Props(in, out); });
}
ncclResult_t listen(int dev, void* handle, void** listenComm) {
  return guard("listen", [&] { return core::netListen(nullptr, dev, handle, listenComm); });
}
ncclResult_t connect(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v10_t** devComm) {
  return guard("connect", [&] {
    const int tc = config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    return core::netConnect(nullptr, dev, handle, sendComm, devComm, tc);
  });
}
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
  return guard("isend", [&] {
    return core::netIsend(sendComm, data, size, tag, mhandle, phandle, request);
  });
}
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
  return guard("irecv", [&] {
    return core::netIrecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  });
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
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
