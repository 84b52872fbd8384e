// SPDX-License-Identifier: Apache-2.0
// Exports ncclCollNetPlugin_v12 (NCCL 2.30 and later): v11's entry points, v12's properties
// (abi/net_v12.cc).
#include "abi/collnet_entries.h"
#include "abi/export.h"
#include "abi/net_v11_entries.h"
#include "nccl/net_v12.h"

using namespace conflux::abi;
namespace e = conflux::abi::collnet_entries;

extern "C" {
CONFLUX_EXPORT ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    conflux::plugin::kNetName,
    collnet_v11::init,
    e::devices,
    v12::getProperties,
    collnet_v11::listen,
    e::connect,
    e::reduceSupport,
    e::regMr,
    e::regMrDmaBuf,
    e::deregMr,
    e::iallreduce,
    e::iallgather<ncclNetSGE_v12_t>,
    e::ireducescatter<ncclNetSGE_v12_t>,
    e::iflush,
    e::test,
    e::closeColl,
    e::closeListen,
    /*makeVDevice=*/nullptr,
    collnet_v11::finalize,
};
}  // extern "C"
