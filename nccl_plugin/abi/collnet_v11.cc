// SPDX-License-Identifier: Apache-2.0
// Exports ncclCollNetPlugin_v11 (NCCL 2.28-2.29). Its entry points serve v12 too
// (abi/collnet_v12.cc).
#include "abi/adapter_util.h"
#include "abi/collnet_entries.h"
#include "abi/export.h"
#include "abi/net_v11_entries.h"
#include "collnet/collnet_api.h"
#include "nccl/net_v11.h"

namespace conflux::abi::collnet_v11 {

namespace core = conflux::plugin;
namespace e = collnet_entries;

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  return getPropsAs<ncclNetProperties_v11_t>(dev, props, [](const auto& in, auto* out) {
    copyV9Props(in, out);
    out->maxMultiRequestSize = in.maxMultiRequestSize;
  });
}
ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t log) {
  return guard("collnet init", [&] { return core::collInit(ctx, commId, log); });
}
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  return guard("collnet listen", [&] { return core::collListen(ctx, dev, handle, listenComm); });
}
ncclResult_t finalize(void* ctx) {
  return guard("collnet finalize", [&] { return core::collFinalize(ctx); });
}

}  // namespace conflux::abi::collnet_v11

using namespace conflux::abi;
using namespace conflux::abi::collnet_v11;

extern "C" {
CONFLUX_EXPORT ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    conflux::plugin::kNetName,
    init,
    e::devices,
    getProperties,
    listen,
    e::connect,
    e::reduceSupport,
    e::regMr,
    e::regMrDmaBuf,
    e::deregMr,
    e::iallreduce,
    e::iallgather<ncclNetSGE_v11_t>,
    e::ireducescatter<ncclNetSGE_v11_t>,
    e::iflush,
    e::test,
    e::closeColl,
    e::closeListen,
    /*makeVDevice=*/nullptr,
    finalize,
};
}  // extern "C"
