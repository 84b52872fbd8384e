// SPDX-License-Identifier: Apache-2.0
// The v11 entry points that v12 shares: v12 changed only the device properties (rail and
// plane ids, up to 8 NICs per virtual device), so abi/net_v12.cc and abi/collnet_v12.cc export
// these with a getProperties of their own (v12::getProperties, shared by both).
#pragma once

#include "abi/nccl_names.h"
#include "nccl/net_v12.h"

namespace conflux::abi::v11 {

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t log, ncclProfilerCallback_t prof);
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** devComm);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request);
ncclResult_t finalize(void* ctx);

}  // namespace conflux::abi::v11

namespace conflux::abi::collnet_v11 {

ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t log);
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t finalize(void* ctx);

}  // namespace conflux::abi::collnet_v11

namespace conflux::abi::v12 {

// Our properties with railId and planeId as NetProperties has them (-1, NCCL_NET_ID_UNDEF, for
// Conflux's TCP devices). The net and the CollNet report the same devices.
ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props);

}  // namespace conflux::abi::v12
