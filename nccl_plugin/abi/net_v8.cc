// SPDX-License-Identifier: Apache-2.0
// Exports ncclNetPlugin_v8 (NCCL 2.20-2.23): int sizes, no forceFlush/vProps/max*Bytes.
#include "nccl/net_v8.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "abi/net_entries.h"
#include "net/request.h"

namespace conflux::abi {
namespace {

namespace core = conflux::plugin;

ncclResult_t init(ncclDebugLogger_t log) {
  return guard("init", [&] { return core::netInitLegacy(log); });
}
ncclResult_t getProperties(int dev, ncclNetProperties_v8_t* props) {
  return getPropsAs<ncclNetProperties_v8_t>(
      dev, props, [](const auto& in, auto* out) { copyCommonProps(in, out); });
}
ncclResult_t listen(int dev, void* handle, void** listenComm) {
  return guard("listen", [&] { return core::netListen(nullptr, dev, handle, listenComm); });
}
ncclResult_t connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** devComm) {
  return guard("connect",
               [&] { return core::netConnect(nullptr, dev, handle, sendComm, devComm); });
}
ncclResult_t isend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] {
    if (size < 0) return net::Status::kInvalidArgument;
    return core::netIsend(sendComm, data, size_t(size), tag, mhandle, nullptr, request);
  });
}
ncclResult_t irecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                   void** request) {
  return guard("irecv", [&] {
    size_t wide[core::kMaxGroupedRecvs];
    if (sizes == nullptr || n < 1 || n > core::kMaxGroupedRecvs) {
      return net::Status::kInvalidArgument;
    }
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) return net::Status::kInvalidArgument;
      wide[i] = size_t(sizes[i]);
    }
    return core::netIrecv(recvComm, n, data, wide, tags, mhandles, nullptr, request);
  });
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
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
};
}  // extern "C"
