// SPDX-License-Identifier: Apache-2.0
// Exports ncclCollNetPlugin_v8 (NCCL 2.20-2.23).
#include "abi/adapter_util.h"
#include "abi/collnet_entries.h"
#include "abi/export.h"
#include "collnet/collnet_api.h"
#include "nccl/net_v8.h"

namespace conflux::abi {
namespace {

namespace core = conflux::plugin;
namespace e = collnet_entries;

ncclResult_t getProperties(int dev, ncclNetProperties_v8_t* props) {
  return getPropsAs<ncclNetProperties_v8_t>(
      dev, props, [](const auto& in, auto* out) { copyCommonProps(in, out); });
}
ncclResult_t iallreduce(void* collComm, void* sendData, void* recvData, int count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                        void* recvMhandle, void** request) {
  if (count < 0) return ncclInvalidArgument;
  return e::iallreduce(collComm, sendData, recvData, size_t(count), dataType, redOp, sendMhandle,
                       recvMhandle, request);
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    conflux::plugin::kNetName,
    e::initLegacy,
    e::devices,
    getProperties,
    e::listenLegacy,
    e::connect,
    e::reduceSupport,
    e::regMr,
    e::regMrDmaBuf,
    e::deregMr,
    iallreduce,
    e::iallgather<ncclNetSGE_v8_t>,
    e::ireducescatter<ncclNetSGE_v8_t>,
    e::iflush,
    e::test,
    e::closeColl,
    e::closeListen,
};
}  // extern "C"
