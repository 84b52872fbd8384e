// SPDX-License-Identifier: Apache-2.0
// --net-abi N: the plugin's ncclNetPlugin_vN (N = 8, 9, 10, 12) seen through the ncclNet_v11_t
// table the driver calls, as NCCL 2.28 presents an older plugin to its own code: NCCL 2.20-2.27
// load our v8-v10 exports, NCCL 2.30+ our v12, and this drives each of them end to end (ring and
// PXN modes).
//
// What the adapter does per version: init once per process (v8-v10 have no per-communicator
// context or finalize: a context token is returned, finalize does nothing); getProperties into
// the older struct, copied into v11's (v8 has no forceFlush, virtual devices nor size limits:
// 2 GiB - 1, NCCL's limit for int sizes, and one device of its own); v8's int sizes (a size over
// INT_MAX is refused with ncclInvalidArgument); v8 and v9 have no profiler handles; v10's
// connect takes the comm config, which v11 passes to init. The CollNet of the same version is
// adapted alike (init and listen without a context, no finalize, v8's int count and 32-bit SGE
// sizes); the tuner is left out. v12 has v11's calls: only getProperties is converted (railId
// and planeId checked, then dropped; up to 8 NICs per virtual device, of which v11 holds 4).
#pragma once

#include "driver/plugin.h"

namespace conflux::driver {

// Replaces p->net by the adapted ncclNetPlugin_v<version> of p->lib and p->collnet by the
// adapted ncclCollNetPlugin_v<version> (null if absent); clears p->tuner. version 11: nothing
// to do. One adapted plugin per process.
Status adapt_net(int version, LoadedPlugin* p);

}  // namespace conflux::driver
