// SPDX-License-Identifier: Apache-2.0
// Exports ncclNetPlugin_v11 (NCCL 2.28-2.29). Its entry points serve v12 too (abi/net_v12.cc).
#include "nccl/net_v11.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "abi/net_entries.h"
#include "abi/net_v11_entries.h"

namespace conflux::abi::v11 {

namespace core = conflux::plugin;

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  return guard("init", [&] {
    int tc = config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    return core::netInit(ctx, commId, tc, log, prof);
  });
}
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  return getPropsAs<ncclNetProperties_v11_t>(dev, props, [](const auto& in, auto* out) {
    copyV9Props(in, out);
    out->maxMultiRequestSize = in.maxMultiRequestSize;
  });
}
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  return guard("listen", [&] { return core::netListen(ctx, dev, handle, listenComm); });
}
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** devComm) {
  return guard("connect", [&] { return core::netConnect(ctx, dev, handle, sendComm, devComm); });
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
ncclResult_t finalize(void* ctx) {
  return guard("finalize", [&] { return core::netFinalize(ctx); });
}

}  // namespace conflux::abi::v11

using namespace conflux::abi;
using namespace conflux::abi::v11;

// makeVDevice and setNetAttr are optional (NULL): NCCL then uses the physical devices and
// sends no traffic hints.
extern "C" {
CONFLUX_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
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
    finalize,
    /*setNetAttr=*/nullptr,
};
}  // extern "C"
