// SPDX-License-Identifier: Apache-2.0
// Exports ncclCollNetPlugin_v10 (NCCL 2.26-2.27).
#include "abi/adapter_util.h"
#include "abi/collnet_entries.h"
#include "abi/export.h"
#include "collnet/collnet_api.h"
#include "nccl/net_v10.h"

namespace conflux::abi {
namespace {

namespace core = conflux::plugin;
namespace e = collnet_entries;

ncclResult_t getProperties(int dev, ncclNetProperties_v10_t* props) {
  return getPropsAs<ncclNetProperties_v10_t>(
      dev, props, [](const auto& in, auto* out) { copyV9Props(in, out); });
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
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
    e::iallreduce,
    e::iallgather<ncclNetSGE_v10_t>,
    e::ireducescatter<ncclNetSGE_v10_t>,
    e::iflush,
    e::test,
    e::closeColl,
    e::closeListen,
    /*makeVDevice=*/nullptr,
};
}  // extern "C"
