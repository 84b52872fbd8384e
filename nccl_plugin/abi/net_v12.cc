// SPDX-License-Identifier: Apache-2.0
// Exports ncclNetPlugin_v12 (NCCL 2.30 and later, which look for it before v11): v11's entry
// points, properties with railId / planeId.
#include "nccl/net_v12.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "abi/net_entries.h"
#include "abi/net_v11_entries.h"

namespace conflux::abi::v12 {

ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
  return getPropsAs<ncclNetProperties_v12_t>(dev, props, [](const auto& in, auto* out) {
    copyV9Props(in, out);
    out->maxMultiRequestSize = in.maxMultiRequestSize;
    out->railId = in.railId;
    out->planeId = in.planeId;
  });
}

}  // namespace conflux::abi::v12

using namespace conflux::abi;

// makeVDevice and setNetAttr are optional (NULL), as in v11.
extern "C" {
CONFLUX_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
    conflux::plugin::kNetName,
    v11::init,
    entries::devices,
    v12::getProperties,
    v11::listen,
    v11::connect,
    entries::accept,
    entries::regMr,
    entries::regMrDmaBuf,
    entries::deregMr,
    v11::isend,
    v11::irecv,
    entries::iflush,
    entries::test,
    entries::closeSend,
    entries::closeRecv,
    entries::closeListen,
    entries::getDeviceMr,
    entries::irecvConsumed,
    /*makeVDevice=*/nullptr,
    v11::finalize,
    /*setNetAttr=*/nullptr,
};
}  // extern "C"
